"""Remote agent turns with the change log: the decision graph followed client-side or not.

One client on an Oxigraph server that already holds ``--stored`` memories and as many
decision nodes; one turn = ``Memories.save`` + ``Memories.search(limit=5)`` +
``DecisionGraph.add_node`` x2 + ``add_edge`` + ``query("active_goals")`` +
``query("recent_decisions", limit=5)`` + ``store.update("turns")``. Two clients are measured
in alternating rounds on the same server: *followed* (the default: the client keeps the
graph's node and link index and reads only what the change log names) and *read each time*
(the same client with the graph follower turned off, so both queries go to the server, as
before). Every turn is counted, the first included: p50, p99, slowest and turns/s, the
requests a turn sends (counted with an httpx event hook on the client), the p50 time
and requests of each step, and how many change-log looks were bounded by what is new (one
request) or fell back to a look at the whole window. Then the same turns on a server whose
change log holds an hour of other writers' records (20,000): looks that read the seconds
since the last look against looks that read the date of every record.

Run: ``python benchmarks/bench_remote_turns.py [--quick] [--stored N] [--turns N]``; a full
run writes ``benchmarks/results/remote_turns.md`` (a quick run writes to a temp file).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_io import write_results
from servers import OxigraphServer, filed_records

import rdfmem.domain.decision_reader as reader_module
from rdfmem import DecisionGraph, Edge, Memories, Memory, Node, RdfStore

HERE = Path(__file__).resolve().parent
WORDS = [
    "latency",
    "cache",
    "index",
    "search",
    "query",
    "rank",
    "vector",
    "graph",
    "memory",
    "agent",
    "goal",
    "plan",
]


def text(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def preload(remote: RdfStore, stored: int) -> None:
    """``stored`` memories and decision nodes (a chain of leads_to edges), written in an
    embedded store and loaded into the server in one request."""
    rng = random.Random(stored)
    local = RdfStore()
    memories = Memories(local, project="bench")
    for i in range(stored):
        memories.save(Memory("project", f"Stored {i}", text(rng)))
    graph = DecisionGraph(local)
    kinds = ("goal", "decision", "option", "action", "outcome")
    graph.add_nodes(
        Node(id=f"n{i}", type=kinds[i % 5], label=f"node {i}")  # type: ignore[arg-type]
        for i in range(stored)
    )
    graph.add_edges(
        Edge(from_id=f"n{i - 1}", to_id=f"n{i}", type="leads_to") for i in range(1, stored)
    )
    remote.load(local.export("nquads"), format="nquads")
    local.close()


#: The steps of a turn, in order.
STEPS = (
    "save",
    "search",
    "add_node a",
    "add_node b",
    "add_edge",
    "active_goals",
    "recent",
    "counter",
)
#: Per client: seconds and requests of each step, turn after turn.
Steps = dict[str, list[tuple[float, int]]]


def make_turn(store: RdfStore, me: str, steps: Steps) -> Callable[[int], None]:
    memories, graph, rng = Memories(store, project="bench"), DecisionGraph(store), random.Random(1)
    sent = [0]
    client = store.backend.client  # type: ignore[attr-defined]
    client.event_hooks["request"].append(lambda request: sent.__setitem__(0, sent[0] + 1))
    do: list[Callable[[int], object]] = [
        lambda i: memories.save(Memory("project", f"{me} note {i}", text(rng))),
        lambda i: memories.search(text(rng, 4), limit=5),
        lambda i: graph.add_node(Node(id=f"{me}a{i}", type="decision", label=f"{me} {i}")),
        lambda i: graph.add_node(Node(id=f"{me}b{i}", type="action", label=f"{me} act {i}")),
        lambda i: graph.add_edge(Edge(from_id=f"{me}a{i}", to_id=f"{me}b{i}", type="leads_to")),
        lambda i: graph.query("active_goals"),
        lambda i: graph.query("recent_decisions", limit=5),
        lambda i: store.update("turns", lambda c: (c or 0) + 1),
    ]

    def turn(i: int) -> None:
        for name, step in zip(STEPS, do, strict=True):
            before, t0 = sent[0], time.perf_counter()
            step(i)
            steps.setdefault(name, []).append((time.perf_counter() - t0, sent[0] - before))

    return turn


def timed(turn: Callable[[int], None], start: int, count: int, follow: bool) -> list[float]:
    original = reader_module.graph_follower
    if not follow:
        reader_module.graph_follower = lambda store: None  # type: ignore[assignment]
    try:
        times = []
        for i in range(start, start + count):
            t0 = time.perf_counter()
            turn(i)
            times.append(time.perf_counter() - t0)
        return times
    finally:
        reader_module.graph_follower = original  # type: ignore[assignment]


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "p50": statistics.median(ordered) * 1e3,
        "p99": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1e3,
        "max": ordered[-1] * 1e3,
        "per_s": len(times) / sum(times),
    }


def step_rows(steps: Steps, skip: int) -> list[str]:
    """One row per step: p50 and mean ms and mean requests over the turns after the first
    ``skip`` (the first turn reads every graph whole: it is in the tables above, not
    here), and the seconds it took over every turn, the first included."""
    rows = []
    for name in STEPS:
        kept = steps[name][skip:] or steps[name]
        ms = statistics.median(t for t, _ in kept) * 1e3
        mean = statistics.mean(t for t, _ in kept) * 1e3
        total = sum(t for t, _ in steps[name])
        rows.append(
            f"| {name} | {ms:.1f} | {mean:.1f} | {statistics.mean(n for _, n in kept):.1f} "
            f"| {total:.2f} |"
        )
    return rows


def slowest_rows(times: list[float], steps: Steps, count: int = 5) -> list[str]:
    """The ``count`` slowest turns: which turn, its ms, and its steps that took 10 ms or
    more (ms / requests): where the tail comes from."""
    rows = []
    for i in sorted(range(len(times)), key=lambda i: -times[i])[:count]:
        slow = [
            f"{name} {steps[name][i][0] * 1e3:.0f} / {steps[name][i][1]}"
            for name in STEPS
            if steps[name][i][0] >= 0.01
        ]
        rows.append(f"| {i + 1} | {times[i] * 1e3:.0f} | {', '.join(slow)} |")
    return rows


def _looks(store: RdfStore) -> tuple[int, int, int]:
    """Bounded looks that were enough, those that fell back to a full look, and the
    read-backs answered from the client's own writes (``own_writes``, no request)."""
    log = getattr(store.backend, "_log", None)
    own = getattr(log, "own", None)
    return getattr(log, "bounded", 0), getattr(log, "missed", 0), getattr(own, "answered", 0)


def long_log(server: OxigraphServer, records: int, turns: int) -> list[str]:
    """Turns on a server whose change log holds an hour of other writers' records: looks
    that read the seconds since the last look (now) against looks that read the date of
    every record (the same client with the buckets turned off), in alternating rounds."""
    filed_records(server.update_url, records, start=time.time() - 3_600.0, span=3_500.0)
    stores = {name: server.connect(change_log=True) for name in ("seconds", "every date")}
    stores["every date"].backend._log._buckets = lambda low, fresh: None  # type: ignore[attr-defined]
    steps: dict[str, Steps] = {name: {} for name in stores}
    turns_of = {name: make_turn(s, "l" + name[0], steps[name]) for name, s in stores.items()}
    times: dict[str, list[float]] = {name: [] for name in stores}
    for r in range(2):
        for name in stores:
            times[name] += timed(turns_of[name], r * turns, turns, True)
    for s in stores.values():
        s.close()
    rows = []
    for name, label in (
        ("seconds", "looks read the seconds since the last (now)"),
        ("every date", "looks read every record's date (before)"),
    ):
        got = summary(times[name])
        look = statistics.median(t for t, _ in steps[name]["recent"][1:]) * 1e3
        rows.append(
            f"| {label} | {got['per_s']:.1f} | {got['p50']:.1f} | {got['p99']:.1f} "
            f"| {got['max']:.1f} | {look:.1f} |"
        )
    return [
        f"## The same turns with an hour of change log ({records:,} records of other writers)",
        "",
        f"2 rounds of {turns} turns per client, clients alternating, on the server above; "
        "every turn counted. `recent_decisions` is one request: the change-log look.",
        "",
        "| client | turns/s | p50 ms | p99 ms | slowest ms | `recent_decisions` p50 ms |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def run(stored: int, turns: int, rounds: int, records: int) -> list[str]:
    tmp = Path(tempfile.mkdtemp(prefix="rdfmem-bench-turns-"))
    server = OxigraphServer(tmp)
    server.start()
    try:
        setup = server.connect(change_log=True, timeout=900)  # one large load request
        t0 = time.perf_counter()
        preload(setup, stored)
        load_s = time.perf_counter() - t0
        setup.close()
        stores = {name: server.connect(change_log=True) for name in ("followed", "each time")}
        steps: dict[str, Steps] = {name: {} for name in stores}
        turns_of = {name: make_turn(s, name[0], steps[name]) for name, s in stores.items()}
        times: dict[str, list[float]] = {name: [] for name in stores}
        for r in range(rounds):
            for name in stores:
                times[name] += timed(turns_of[name], r * turns, turns, name == "followed")
        looks = {name: _looks(s) for name, s in stores.items()}
        for s in stores.values():
            s.close()
        hour = long_log(server, records, turns)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    mine, before = summary(times["followed"]), summary(times["each time"])
    for name, s in (("followed", mine), ("each time", before)):
        sent = [n for step in steps[name].values() for _, n in step]
        s["requests"] = sum(sent) / len(times[name])
    rows = [
        f"| {name} | {s['per_s']:.1f} | {s['p50']:.1f} | {s['p99']:.1f} | {s['max']:.1f} "
        f"| {s['requests']:.1f} |"
        for name, s in (("graph followed (now)", mine), ("graph read each time", before))
    ]
    return [
        f"## Remote turns at {stored:,} memories + {stored:,} nodes stored (Oxigraph server)",
        "",
        f"{rounds} rounds of {turns} turns per client, clients alternating; preload "
        f"{load_s:.1f} s. Every turn counted, the first included.",
        "",
        "| client | turns/s | p50 ms | p99 ms | slowest ms | requests a turn |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        f"followed / read each time: {mine['per_s'] / before['per_s']:.1f}x turns/s, "
        f"p50 {before['p50'] / mine['p50']:.1f}x lower. Target (issue 21): >= 30 turns/s "
        "at 10,000 stored.",
        "",
        "Change-log looks bounded by what is new (one request: the new records and a count "
        "of the rest of the window) / fallen back to a full look: "
        + ", ".join(f"{name} {b} / {m}" for name, (b, m, _) in looks.items())
        + ". Read-backs answered from the client's own writes (no request): "
        + ", ".join(f"{name} {o}" for name, (_, _, o) in looks.items())
        + ".",
        "",
        "Steps of the graph-followed client, every turn but its first (p50 and mean ms, "
        "mean requests), and each step's seconds over every turn:",
        "",
        "| step | p50 ms | mean ms | requests | s, all turns |",
        "|---|---|---|---|---|",
        *step_rows(steps["followed"], 1),
        "",
        f"Slowest turns of the graph-followed client (turn n of {len(times['followed'])}, "
        "its ms, its steps of 10 ms or more: ms / requests). A round's first turn catches up "
        "with the other client's round (the change log) and meets its kept lease claims:",
        "",
        "| turn | ms | slow steps |",
        "|---|---|---|",
        *slowest_rows(times["followed"], steps["followed"]),
        "",
        *hour,
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--stored", type=int, help="memories and nodes stored (10,000)")
    parser.add_argument("--turns", type=int, help="turns per round per client (50)")
    args = parser.parse_args()
    stored = args.stored or (300 if args.quick else 10_000)
    turns, rounds = args.turns or (10 if args.quick else 50), 2 if args.quick else 4
    start_load = os.getloadavg()[0]
    lines = run(stored, turns, rounds, 2_000 if args.quick else 20_000)
    load = os.getloadavg()[0]
    text_out = "\n".join(
        [
            "# Remote agent turns",
            "",
            f"`python benchmarks/bench_remote_turns.py{' --quick' if args.quick else ''}` on "
            f"CPython {platform.python_version()}, {os.cpu_count()} cores, load average "
            f"{start_load:.1f} at the start and {load:.1f} at the end (a shared machine: the "
            "ratio is the result).",
            "",
            *lines,
        ]
    )
    write_results(HERE / "results" / "remote_turns.md", text_out + "\n", quick=args.quick)
    print(text_out)


if __name__ == "__main__":
    main()
