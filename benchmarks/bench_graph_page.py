# ruff: noqa: RUF001  (the table prints multiplication signs)

"""``/graph`` of ``rdfmem serve`` drawing a knowledge graph of N nodes, in headless Chromium.

Measured, each run on its own (warm-up included, nothing excluded):

* ``server``: ``GET /graph?graph=…`` answered (read the graph, lay it out, write the SVG);
* ``load event``: in Chromium, from navigation start to the page's load event, the server's
  work included (the page records ``performance.now()`` at its load event);
* ``chromium --dump-dom``: the whole command's wall time, Chromium's own start included;
* the floor: the same command on a page with nothing drawn (``/graph`` without a graph).

Target (issue 26): 1,000 nodes render in Chromium in at most 2 s.

    python benchmarks/bench_graph_page.py            # 1,000 nodes, 10 runs each
    python benchmarks/bench_graph_page.py --quick    # 200 nodes, 3 runs (temp folder)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import httpx
from results_io import write_results

from rdfmem import RdfStore
from rdfmem.server import BackgroundServer

GRAPH = "urn:rdfmem:graph:knowledge"
RESULTS = Path(__file__).resolve().parent / "results" / "graph_page.md"


def _fill(store: RdfStore, n: int) -> None:
    lines = ["@prefix rm: <https://w3id.org/rdfmem#> ."]
    for i in range(n):
        lines.append(
            f'<{GRAPH}/entity/e{i}> a rm:KnowledgeEntity ; rm:entityName "e{i}" ; '
            f'rm:entityType "type{i % 7}" .'
        )
    for i in range(n * 3 // 2):
        a, b = i % n, (i * 7919 + 13) % n
        lines.append(
            f"<{GRAPH}/relation/{i}> a rm:KnowledgeRelation ; rm:relationFrom "
            f"<{GRAPH}/entity/e{a}> ; rm:relationTo <{GRAPH}/entity/e{b}> ; "
            f'rm:relationType "r{i % 5}" .'
        )
    store.load("\n".join(lines), format="turtle", graph=GRAPH)


def _chromium(binary: str, url: str, profile: str) -> tuple[float, str]:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}"]
    env = {**os.environ, "DBUS_SESSION_BUS_ADDRESS": "disabled:"}
    started = time.perf_counter()
    done = subprocess.run(
        [binary, *flags, "--dump-dom", url],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    return time.perf_counter() - started, done.stdout


def _row(name: str, values: list[float], floor: float | None = None) -> str:
    ordered = sorted(values)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    ratio = f"{p50 / floor:.2f}×" if floor else "—"
    return f"| {name} | {p50 * 1000:.0f} | {p99 * 1000:.0f} | {ordered[-1] * 1000:.0f} | {ratio} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 nodes, 3 runs")
    parser.add_argument("--nodes", type=int, default=None)
    parser.add_argument("--runs", type=int, default=None)
    args = parser.parse_args()
    nodes = args.nodes or (200 if args.quick else 1000)
    runs = args.runs or (3 if args.quick else 10)
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        sys.exit("needs Chromium: apt-get install chromium")
    server_s: list[float] = []
    load_s: list[float] = []
    wall_s: list[float] = []
    floor_s: list[float] = []
    with RdfStore() as store, tempfile.TemporaryDirectory() as profile:
        _fill(store, nodes)
        with BackgroundServer(store) as server:
            url = f"{server.url}/graph?{urlencode({'graph': GRAPH})}"
            for _ in range(runs):
                started = time.perf_counter()
                answer = httpx.get(url, timeout=120)
                server_s.append(time.perf_counter() - started)
                assert answer.status_code == 200 and answer.text.count('class="node"') == nodes
                wall, dom = _chromium(binary, url, profile)
                wall_s.append(wall)
                found = re.search(r'data-loaded-ms="(\d+)"', dom)
                assert found is not None, "the page recorded no load event"
                load_s.append(int(found.group(1)) / 1000)
                floor_s.append(_chromium(binary, f"{server.url}/graph", profile)[0])
    floor = statistics.median(floor_s)
    table = "\n".join(
        [
            f"# /graph in headless Chromium: {nodes} nodes, {nodes * 3 // 2} edges, {runs} runs",
            "",
            "Milliseconds; the ratio is the p50 over the floor's p50 (Chromium on a page with",
            "nothing drawn). No peer: no other offline drawing of a named graph ships here.",
            "",
            "| measured | p50 | p99 | slowest | × floor |",
            "|---|---|---|---|---|",
            _row("server: GET /graph (read, lay out, write SVG)", server_s),
            _row("Chromium: navigation start to load event", load_s),
            _row("Chromium: --dump-dom wall time", wall_s, floor),
            _row("floor: --dump-dom of a page with nothing drawn", floor_s, floor),
            "",
        ]
    )
    print(table)
    write_results(RESULTS, table, quick=args.quick)


if __name__ == "__main__":
    main()
