"""Each step of an attached process's turn against the owner's (issue 21).

This process opens an on-disk store (it owns it), loads ``--size`` memories and decision
nodes (``workload.preload_rdfmem``), and runs ``--turns`` turns (``workload.rdfmem_turn``).
Then a child process opens the same folder (it attaches to this one) and runs as many
turns, while this one idles. Each side times every step of every turn, the first ones
included: the table gives the median, p99 and slowest of each step, side by side, with
the attached ÷ owner ratio of the medians, and the requests each step of the attached
process sent to the owner (median).

Run: ``python benchmarks/bench_attached_steps.py [--quick] [--size 5000 --turns 60]``;
prints the table (nothing is written). A shared machine: compare runs side by side
(``PYTHONPATH`` at two trees, alternating), ratios only.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workload import PARTS, preload_rdfmem, rdfmem_turn

from rdfmem import RdfStore

Figures = dict[str, list[float]]


class _Counted(dict[str, list[float]]):
    """Step timings (``workload.rdfmem_turn`` appends each step's seconds through
    ``setdefault`` right after the step) that also note the requests each step sent to
    the owner, in ``requests``."""

    def __init__(self, backend: object) -> None:
        super().__init__()
        self.backend = backend
        self.seen = self.sent()
        self.requests: dict[str, list[float]] = {}

    def sent(self) -> int:
        return int(getattr(self.backend, "requests_sent", 0))

    def setdefault(self, name: str, default: list[float] | None = None) -> list[float]:
        now = self.sent()
        self.requests.setdefault(name, []).append(float(now - self.seen))
        self.seen = now
        return super().setdefault(name, [] if default is None else default)


def run_turns(store: RdfStore, turns: int, seed: int, first: int) -> Figures:
    """Seconds of each step (and of the whole turn) of ``turns`` turns, and the requests
    each step sent to the owner (``requests:<step>``; none for the owner itself)."""
    parts = _Counted(store.backend)
    turn = rdfmem_turn(store, random.Random(seed), parts)
    totals: list[float] = []
    for i in range(first, first + turns):
        parts.seen = parts.sent()
        start = time.perf_counter()
        turn(i)
        totals.append(time.perf_counter() - start)
    requests = {f"requests:{k}": v for k, v in parts.requests.items()}
    requests["requests:turn"] = [float(sum(r)) for r in zip(*parts.requests.values(), strict=True)]
    return {**parts, "turn": totals, **requests}


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def table(owner: Figures, attached: Figures) -> str:
    lines = [
        "| step | owner p50 | attached p50 | attached ÷ owner | owner p99 | attached p99 "
        "| owner slowest | attached slowest | attached requests (median) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in (*PARTS, "turn"):
        own, att = owner[name], attached[name]
        ratio = statistics.median(att) / statistics.median(own)
        cells = [statistics.median(own), statistics.median(att)]
        tail = [_p99(own), _p99(att), max(own), max(att)]
        ms = [f"{v * 1000:.2f}" for v in cells]
        rest = [f"{v * 1000:.2f}" for v in tail]
        sent = statistics.median(attached.get(f"requests:{name}", [0.0]))
        lines.append(
            f"| {name} | {ms[0]} | {ms[1]} | {ratio:.2f}x | " + " | ".join(rest) + f" | {sent:g} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="500 stored, 10 turns")
    parser.add_argument("--size", type=int, default=5000, help="memories and nodes stored")
    parser.add_argument("--turns", type=int, default=60, help="turns per process")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # the attached process
        store = RdfStore.open(args.child)
        try:
            print(json.dumps(run_turns(store, args.turns, 2, 1_000_000)))
        finally:
            store.close()
        return
    size, turns = (500, 10) if args.quick else (args.size, args.turns)
    path = Path(tempfile.mkdtemp(prefix="rdfmem-steps-")) / "store"
    store = RdfStore.open(path)
    try:
        preload_rdfmem(store, size, random.Random(0))
        owner = run_turns(store, turns, 1, 0)
        child = subprocess.run(
            [sys.executable, __file__, "--child", str(path), "--turns", str(turns)],
            capture_output=True,
            text=True,
            check=False,
        )
        if child.returncode != 0:
            raise SystemExit(f"the attached process failed:\n{child.stderr[-4000:]}")
        attached = json.loads(child.stdout.strip().splitlines()[-1])
    finally:
        store.close()
    print(f"{size:,} memories and nodes, {turns} turns per process, every turn counted (ms):\n")
    print(table(owner, attached))


if __name__ == "__main__":
    main()
