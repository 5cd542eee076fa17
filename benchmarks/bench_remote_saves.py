"""What one write costs on a SPARQL server: requests (each a round trip, sent one after
another) and milliseconds, with kept claims (``lease_linger_ms``, the default 250) beside
the protocol without them (``lease_linger_ms=0``: every write takes a new claim), in one run.

One client: ``Memories.save`` of new titles and of one title again and again, ``set`` of
new keys, ``update`` of one key. Two client processes: each saving new memories, in their
own session scopes and then in one shared project scope (where claiming the whole scope
would make them wait for each other, so each client soon stops doing it).

Run: ``python benchmarks/bench_remote_saves.py [--quick]``; writes
``benchmarks/results/remote_saves.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rdfmem import RdfStore
from rdfmem.memories import Memories, Memory

# The very server processes the test fixtures start (needs the test extra: pytest).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_remote import spawn
from results_io import write_results
from servers import each_server

HERE = Path(__file__).resolve().parent
LINGERS = (0, 250)


def one_client(
    urls: tuple[str, str], linger: int, n: int, tag: str
) -> dict[str, tuple[float, float]]:
    """Requests and ms per call of each operation, from one client."""
    store = RdfStore.connect(*urls, lease_linger_ms=linger)
    caller = threading.get_ident()
    sent = [0]

    def count(_: Any) -> None:
        if threading.get_ident() == caller:  # not the deletions of lingered-out claims
            sent[0] += 1

    store.backend.client.event_hooks["request"].append(count)  # type: ignore[attr-defined]
    memories = Memories(store, session=f"one-{tag}")
    ops: dict[str, Callable[[int], Any]] = {
        "`Memories.save`, a new title each time": lambda i: memories.save(
            Memory("session", f"note {i}", f"content {i}")
        ),
        "`Memories.save`, one title again and again": lambda i: memories.save(
            Memory("session", "working notes", f"content {i}")
        ),
        "`set`, a new key each time": lambda i: store.set(f"{tag}-key-{i}", {"n": i}),
        "`update`, one key": lambda i: store.update(f"{tag}-hits", lambda v: (v or 0) + 1),
    }
    out: dict[str, tuple[float, float]] = {}
    for name, op in ops.items():
        for i in range(3):  # its first claims: of its own, then (new titles, keys) the range
            op(10_000 + i)
        sent[0] = 0
        started = time.perf_counter()
        for i in range(n):
            op(i)
        out[name] = (sent[0] / n, (time.perf_counter() - started) / n * 1000)
    store.close()
    return out


def saver(spec: dict[str, Any]) -> dict[str, float]:
    """One client process of the two-client rows."""
    store = RdfStore.connect(spec["query"], spec["update"], lease_linger_ms=spec["linger"])
    caller, sent = threading.get_ident(), [0]
    store.backend.client.event_hooks["request"].append(  # type: ignore[attr-defined]
        lambda _: sent.__setitem__(0, sent[0] + (threading.get_ident() == caller))
    )
    memories = Memories(store, project="shared", session=spec["session"])
    while time.time() < spec["start_at"]:
        time.sleep(0.001)
    started = time.perf_counter()
    for i in range(spec["n"]):
        memories.save(Memory(spec["scope"], f"{spec['me']} note {i}", f"content {i}"))
    seconds = time.perf_counter() - started
    store.close()
    return {"seconds": seconds, "requests": sent[0] / spec["n"]}


def two_clients(
    urls: tuple[str, str], linger: int, n: int, scope: str, tag: str
) -> tuple[float, float]:
    """Saves per second in total and requests per save, two client processes."""
    specs = [
        {
            "query": urls[0],
            "update": urls[1],
            "linger": linger,
            "n": n,
            "me": f"{tag}{me}",
            "scope": scope,
            "session": f"{tag}-{me}",
            "start_at": time.time() + 2.5,
        }
        for me in range(2)
    ]
    results = spawn(__file__, "--saver", specs)
    wall = max(r["seconds"] for r in results)
    return 2 * n / wall, sum(r["requests"] for r in results) / 2


def bench(name: str, urls: tuple[str, str], n: int) -> list[str]:
    lines = [
        f"## {name}",
        "",
        "One client, uncontended. *Requests* are per call, each a round trip after the last.",
        "",
        "| operation | requests, claims kept | ms, claims kept | requests, no kept claims "
        "| ms, no kept claims |",
        "|---|---:|---:|---:|---:|",
    ]
    runs = {linger: one_client(urls, linger, n, f"{name[:4]}{linger}") for linger in LINGERS}
    for op, (requests, ms) in runs[250].items():
        old_requests, old_ms = runs[0][op]
        lines.append(f"| {op} | {requests:.2f} | {ms:.2f} | {old_requests:.2f} | {old_ms:.2f} |")
    lines += [
        "",
        "Two client processes saving new memories at once (saves per second in total, "
        "requests per save):",
        "",
        "| scope | claims kept | no kept claims |",
        "|---|---:|---:|",
    ]
    for scope in ("session", "project"):
        cells = []
        for linger in (250, 0):
            rate, requests = two_clients(urls, linger, n, scope, f"{scope[0]}{linger}-")
            cells.append(f"{rate:.0f}/s, {requests:.2f}")
        label = "own session scopes" if scope == "session" else "one shared project scope"
        lines.append(f"| {label} | {cells[0]} | {cells[1]} |")
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--saver", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.saver:
        print(json.dumps(saver(json.loads(args.saver))))
        return
    n = 40 if args.quick else 200
    tmp = Path(tempfile.mkdtemp(prefix="rdfmem-bench-saves-"))
    sections: list[str] = []
    try:
        for name, server in each_server(tmp):
            sections += bench(name, (server.query_url, server.update_url), n)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = "\n".join(
        [
            "# Remote writes: requests and time per call",
            "",
            f"`python benchmarks/bench_remote_saves.py{' --quick' if args.quick else ''}` on "
            f"CPython {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores, "
            f"load average {os.getloadavg()[0]:.1f} at the end; {n} calls per row after 3 "
            "warm-up calls, server and clients on one machine (loopback). *Claims kept* is the "
            "default (`lease_linger_ms=250`); *no kept claims* is `lease_linger_ms=0`, the "
            "protocol as it was: every write takes a new claim (insert, confirming read, "
            "then the write with the release). Why three is the least for a new claim on a "
            "server that does not isolate conditional updates, and why a kept claim is as "
            "safe: `rdfmem/leases.py`.",
            "",
            *sections,
        ]
    )
    write_results(HERE / "results" / "remote_saves.md", text + "\n", quick=args.quick)
    print(text)


if __name__ == "__main__":
    main()
