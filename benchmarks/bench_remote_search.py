"""Memory search on a shared Oxigraph server, following the change log (issue 14).

With N memories on the server, side by side in one run:

* the embedded store's same call (Oxigraph in memory, vectors kept by its index);
* a remote client with the change log, when nothing changed since its last search;
* the same client right after *another* client saved one memory (a separate connection);
* a remote client without the change log (every search reads every vector).

Bytes are the bodies of the HTTP responses the searching client received (its requests are
small). Run: ``python benchmarks/bench_remote_search.py [--memories 20000] [--runs 15]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import httpx

from rdfmem import Memories, Memory, RdfStore
from rdfmem.embeddings import EMBEDDING

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from results_io import write_results
from servers import OxigraphServer

RESULTS = Path(__file__).resolve().parent / "results" / "remote_search.md"
WORDS = [
    *("tea", "coffee", "cat", "dog", "python", "rust", "release", "invoice", "token"),
    *("latency", "meeting", "deploy", "billing", "oauth", "cache", "docker", "schema"),
    *("budget", "audit", "garden", "piano", "train", "river", "cloud", "lamp"),
]
QUERIES = ["how do we deploy a release", "what does the cat drink", "budget for the audit"]


def text(i: int) -> str:
    return " ".join(WORDS[(i * k + k) % len(WORDS)] for k in (1, 3, 7, 11, 13)) + f" n{i}"


def build(count: int) -> bytes:
    """``count`` project memories, saved through an embedded store, as N-Quads."""
    store = RdfStore()
    memories = Memories(store, project="bench")
    for i in range(count):
        memories.save(Memory("project", f"Memory {i}", text(i)))
    data = store.export("nquads").encode("utf-8")
    store.close()
    return data


class Counted:
    """A remote client whose received bytes are counted."""

    def __init__(self, server: OxigraphServer, change_log: bool) -> None:
        self.store = server.connect(change_log=change_log)
        self.memories = Memories(self.store, project="bench")
        self.received = 0
        client: httpx.Client = self.store.backend.client  # type: ignore[attr-defined]
        client.event_hooks["response"] = [self._count]

    def _count(self, response: httpx.Response) -> None:
        self.received += len(response.read())


def timed(call: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="1,000 memories, 5 runs")
    args = parser.parse_args()
    count, runs = (1_000, 5) if args.quick else (args.memories, args.runs)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    data = build(count)
    print(f"built {count} memories in {time.perf_counter() - started:.1f} s", file=sys.stderr)

    embedded = RdfStore()
    embedded.load(data=data, format="nquads")
    local = Memories(embedded, project="bench")
    local.search(QUERIES[0])  # the index built once

    with tempfile.TemporaryDirectory() as folder:
        server = OxigraphServer(Path(folder))
        server.start()
        try:
            response = httpx.post(
                server.query_url.rsplit("/", 1)[0] + "/store",
                content=data,
                headers={"Content-Type": "application/n-quads"},
                timeout=600,
            )
            response.raise_for_status()
            rows = measure(server, local, runs, count)
        finally:
            server.stop()
    write(rows, count, runs, load_before, quick=args.quick)


def measure(
    server: OxigraphServer, local: Memories, runs: int, count: int
) -> list[tuple[str, float, int]]:
    follower = Counted(server, change_log=True)
    plain = Counted(server, change_log=False)
    other = Memories(server.connect(change_log=True), project="bench")
    follower.memories.search(QUERIES[0])  # the first look reads every vector once
    out: list[tuple[str, float, int]] = []
    queries = iter(QUERIES * 1000)

    out.append(("embedded Oxigraph in memory", timed(lambda: local.search(next(queries)), runs), 0))

    follower.received = 0
    quiet = timed(lambda: follower.memories.search(next(queries)), runs)
    out.append(("remote, change log, nothing changed", quiet, follower.received // runs))

    times, received = [], 0
    for i in range(runs):
        fresh = f"fresh note {i} {text(10 * count + i)}"  # unlike every other memory
        other.save(Memory("project", f"Fresh {i}", fresh))
        follower.received = 0
        started = time.perf_counter()
        found = follower.memories.search(fresh, limit=5)
        times.append(time.perf_counter() - started)
        received += follower.received
        assert found and found[0][0].title == f"Fresh {i}", "another client's save was missed"
    after = statistics.median(times) * 1000
    out.append(("remote, change log, after another client saved one", after, received // runs))

    kept = follower.store.follower(EMBEDDING)
    assert kept is not None
    held = sum(v.nbytes() for v in kept.sets.values())
    out.append(("(memory the follower holds, bytes per memory)", 0.0, held // count))

    plain.received = 0
    slow_runs = max(3, runs // 5)
    full = timed(lambda: plain.memories.search(next(queries)), slow_runs)
    out.append(("remote, no change log (reads every vector)", full, plain.received // slow_runs))
    return out


def write(
    rows: list[tuple[str, float, int]], count: int, runs: int, load_before: float, *, quick: bool
) -> None:
    embedded = rows[0][1]
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Memory search on a shared Oxigraph server (issue 14)",
        "",
        f"Run {stamp}, Python {platform.python_version()}, {os.cpu_count()} cores, load "
        f"average {load_before:.1f} before / {os.getloadavg()[0]:.1f} after (a shared "
        "machine: absolute numbers are noisy, the rows are measured side by side). "
        f"`python benchmarks/bench_remote_search.py`: {count:,} project memories "
        "(512-dimension default embedder) on an Oxigraph server on loopback, median of "
        f"{runs} searches (top 10; top 5 after a save).",
        "",
        "| search | ms | x embedded | bytes received per search |",
        "|---|---:|---:|---:|",
    ]
    for name, ms, received in rows:
        if name.startswith("("):
            held = received
            continue
        lines.append(f"| {name} | {ms:.2f} | {ms / embedded:.1f}x | {received:,} |")
    lines += ["", f"The following client holds {held:,} bytes per memory (float32 rows and keys)."]
    quiet, after = rows[1][1], rows[2][1]
    verdict = [
        ("nothing changed ≤ 20 ms", quiet <= 20),
        ("after another client's save ≤ 30 ms", after <= 30),
        ("both within 3x of the embedded store", max(quiet, after) <= 3 * embedded),
    ]
    lines += ["", "Targets: " + "; ".join(f"{t}: {'met' if ok else 'missed'}" for t, ok in verdict)]
    lines += [
        "",
        "A search after a save reads the change log (the records of the last minute) and the "
        "saved memory's vector, then the hits' memories: its bytes grow with the changes, not "
        "with the memory. Without the change log every search downloads every vector.",
    ]
    write_results(RESULTS, "\n".join(lines) + "\n", quick=quick)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
