"""History in the domain layers (issue 24): what it costs a memory save and an MCP write,
and what reading the past costs next to reading the present.

Side by side in one run, on on-disk stores, every call timed (none left out, the first
included):

1. ``Memories.save`` (one of ``--titles`` titles, so most saves replace a memory) and the
   MCP ``add_observations`` (one observation added to one of 100 entities): without
   history (the floor) and with it (the target: <= 1.5x without).
2. Reads of ``--memories`` memories (each saved twice: twice as many versions) and of
   ``--entities`` knowledge-graph entities: now, and ``as_of`` a moment between the two
   saves (``read``, ``list``, ``search``, ``read_graph``, and ``history``).

Run: ``python benchmarks/bench_history_domain.py`` (full; writes
``benchmarks/results/history_domain.md``) or ``--quick`` (small sizes; the table goes to a
temp file).
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from latency import Latencies, machine, ms, ratio, time_calls
from results_io import write_results

from rdfmem import RdfStore
from rdfmem.domain.memories import Memories, Memory
from rdfmem.mcp.client import Client
from rdfmem.mcp.graph import KnowledgeGraph

UTC = dt.timezone.utc
CLIENT = Client("bench", "1")


def row(name: str, lat: Latencies, floor: Latencies | None, *, alone: bool = False) -> str:
    """A table row; ``floor``: what it is compared with (None: it is the floor, or
    ``alone``: nothing to compare with)."""
    versus = "—" if alone else ratio(lat.p50 / floor.p50 if floor is not None else 1.0)
    return f"| {name} | {lat.n:,} | {ms(lat.p50)} | {ms(lat.p99)} | {ms(lat.slowest)} | {versus} |"


HEADER = [
    "| call | calls | p50 ms | p99 ms | slowest ms | p50 vs floor |",
    "|---|---:|---:|---:|---:|---:|",
]


def _writes(store: RdfStore, saves: int, titles: int) -> tuple[Latencies, Latencies]:
    memories = Memories(store)
    save = time_calls(
        lambda i: memories.save(
            Memory("global", f"Note {i % titles}", f"note {i} on search latency")
        ),
        saves,
    )
    kg = KnowledgeGraph(store)
    names = [f"E{i}" for i in range(100)]
    kg.create_entities(
        [{"name": n, "entityType": "thing", "observations": []} for n in names], CLIENT
    )
    observe = time_calls(
        lambda i: kg.add_observations(
            [{"entityName": names[i % 100], "contents": [f"fact {i}"]}], CLIENT
        ),
        saves,
    )
    return save, observe


def bench_writes(saves: int, titles: int, folder: Path) -> list[str]:
    with RdfStore.open(folder / "plain") as store:
        save, observe = _writes(store, saves, titles)
    with RdfStore.open(folder / "history", history=True) as store:
        save_h, observe_h = _writes(store, saves, titles)
    return [
        "## Writes",
        "",
        *HEADER,
        row("Memories.save, no history (floor)", save, None),
        row("Memories.save, history", save_h, save),
        row("KnowledgeGraph.add_observations, no history (floor)", observe, None),
        row("KnowledgeGraph.add_observations, history", observe_h, observe),
        "",
    ]


def bench_reads(memories_n: int, entities: int, calls: int, folder: Path) -> list[str]:
    with RdfStore.open(folder / "reads", history=True) as store:
        memories = Memories(store)
        for i in range(memories_n):
            memories.save(Memory("global", f"Note {i}", f"note {i} on search latency"))
        middle = dt.datetime.now(UTC)
        for i in range(memories_n):
            memories.save(Memory("global", f"Note {i}", f"revised note {i}"))
        kg = KnowledgeGraph(store)
        kg.create_entities(
            [
                {"name": f"E{i}", "entityType": "thing", "observations": [f"fact {i}"]}
                for i in range(entities)
            ],
            CLIENT,
        )
        later = dt.datetime.now(UTC)
        kg.add_observations([{"entityName": "E1", "contents": ["one more"]}], CLIENT)
        pairs: list[tuple[str, Callable[[int], object], Callable[[int], object]]] = [
            (
                "Memories.read",
                lambda i: memories.read("global", f"Note {i % memories_n}"),
                lambda i: memories.read("global", f"Note {i % memories_n}", as_of=middle),
            ),
            ("Memories.list", lambda i: memories.list(), lambda i: memories.list(as_of=middle)),
            (
                "Memories.search",
                lambda i: memories.search("search latency"),
                lambda i: memories.search("search latency", as_of=middle),
            ),
            (
                "KnowledgeGraph.read_graph",
                lambda i: kg.read_graph(),
                lambda i: kg.read_graph(as_of=later),
            ),
        ]
        lines = [
            f"## Reads: {memories_n:,} memories saved twice, {entities:,} entities",
            "",
            *HEADER,
        ]
        for name, now, past in pairs:
            floor = time_calls(now, calls)
            lines.append(row(f"{name}, now (floor)", floor, None))
            lines.append(row(f"{name}, as_of", time_calls(past, calls), floor))
        told = time_calls(lambda i: kg.history(f"E{i % entities}"), calls)
        lines.append(row("KnowledgeGraph.history(name)", told, None, alone=True))
        kept = time_calls(lambda i: memories.history("global", f"Note {i % memories_n}"), calls)
        lines.append(row("Memories.history(scope, title)", kept, None, alone=True))
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, table to a temp file")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    quick = args.quick
    saves, titles, memories_n, entities, calls = (
        (200, 50, 200, 300, 10) if quick else (2_000, 500, 2_000, 5_000, 50)
    )
    with tempfile.TemporaryDirectory(prefix="rdfmem-bench-history-domain-") as tmp:
        folder = Path(tmp)
        lines = [
            "# History in the domain layers: write cost and reads of the past",
            "",
            f"{machine()}; {'--quick' if quick else 'full'} run, "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
            "Every call timed, the first included; on-disk stores. Target (issue 24): a "
            "write with history <= 1.5x without.",
            "",
        ]
        for part in (
            lambda: bench_writes(saves, titles, folder),
            lambda: bench_reads(memories_n, entities, calls, folder),
        ):
            section = part()
            print("\n".join(section), flush=True)
            lines.extend(section)
    target = args.out or Path(__file__).parent / "results" / "history_domain.md"
    write_results(target, "\n".join(lines), quick=quick and args.out is None)


if __name__ == "__main__":
    main()
