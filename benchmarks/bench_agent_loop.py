"""An agent's turn, every turn counted: rdfmem against LangGraph's stores.

One *turn* (``workload.py``) = ``Memories.save`` + ``Memories.search(limit=5)`` +
``add_node`` + ``add_edge`` + ``query("active_goals")`` + ``query("recent_decisions",
limit=5)`` + ``store.update(counter)``, with N memories and N decision nodes already stored.
Side by side, same machine, same run, same embedder:

* rdfmem on embedded Oxigraph, in memory and on disk (on disk also after closing and
  opening the store again in the same process);
* LangGraph ``InMemoryStore`` with an index (the same embedder);
* LangGraph ``SqliteStore`` (langgraph-checkpoint-sqlite), in memory and on a file (its
  search without sqlite-vec is a filter, not a semantic ranking: cheaper than a real vector
  search, so the ratio flatters it).

**No warm-up is left out.** Each store runs the 40 turns right after its N memories were
loaded (the issue-21 measure: whatever the load left to build is paid by those turns, and
is in the figure; the load's own time, which keeps the memory indexes, is reported), then keeps turning for ``--budget`` seconds; every table gives
p50, p99 and the slowest turn over all of them. Also measured: the memory each store holds
(resident-set growth), the turns after 9,800 memories saved one by one through
``Memories.save`` (the stall issue 21 found), traversals and vector search at scale
(``agent_scale.py``) and the same turn on a remote store (an Oxigraph server on loopback).

Run: ``python benchmarks/bench_agent_loop.py [--quick]``; writes
``benchmarks/results/agent_loop.md`` (``--quick``: small sizes, the table to a temp file).
"""

# ruff: noqa: RUF001  (the markdown tables print multiplication signs)
from __future__ import annotations

import argparse
import datetime as dt
import gc
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import agent_scale
from latency import (
    NO_WARM_UP,
    Latencies,
    load_average,
    machine,
    ms,
    ratio,
    rss_bytes,
    time_calls,
    time_for,
)
from results_io import write_results
from servers import OxigraphServer
from workload import (  # noqa: F401  (bench_remote imports text and preload_rdfmem from here)
    EMBEDDER,
    PARTS,
    Steps,
    add_decisions,
    embed,
    langgraph_turn,
    preload_langgraph,
    preload_rdfmem,
    rdfmem_turn,
    save_memories,
    text,
)

from rdfmem import RdfStore

RESULTS = Path(__file__).parent / "results" / "agent_loop.md"
LABELS = {
    "memory": "rdfmem in memory",
    "disk": "rdfmem on disk",
    "reopened": "rdfmem on disk, closed and opened again",
    "inmemory": "LangGraph InMemoryStore (index)",
    "sqlite": "LangGraph SqliteStore, in memory",
    "sqlite_file": "LangGraph SqliteStore, on a file",
}


def resident() -> int:
    gc.collect()
    return rss_bytes() or 0


def index_bytes(store: RdfStore) -> tuple[float, float] | None:
    """Bytes the read-side indexes hold (vector sets, decision-graph indexes), when the
    index hub says; None when it cannot."""
    hub: Any = store.indexes  # private parts: the hub has no public byte count yet
    try:
        vec = sum(v.nbytes() for v in hub._vectors.values())
        nodes = sum(g.nbytes() for g in hub._graphs.values())
    except AttributeError:
        return None
    return float(vec), float(nodes)


def rdfmem_cells(n: int, window: int, budget: float, folder: str) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for name in ("memory", "disk"):
        rng = random.Random(n)
        before = resident()
        path = f"{folder}/db{n}"
        store = RdfStore() if name == "memory" else RdfStore.open(path)
        t0 = time.perf_counter()
        preload_rdfmem(store, n, rng)
        row[f"load_{name}"] = time.perf_counter() - t0
        parts: Steps = {}
        first = time_calls(rdfmem_turn(store, rng, parts), window)
        rest = time_for(rdfmem_turn(store, rng), budget, 2_000, start=window)
        row[name] = {"window": first, "all": first + rest, "parts": parts}
        row[f"rss_{name}"] = resident() - before
        if name == "memory":
            row["index_bytes"] = index_bytes(store)
        store.close()
        if name == "disk":
            t0 = time.perf_counter()
            store = RdfStore.open(path)
            row["open_s"] = time.perf_counter() - t0
            parts = {}
            again = time_calls(rdfmem_turn(store, rng, parts), window, start=100_000)
            more = time_for(rdfmem_turn(store, rng), budget, 2_000, start=100_000 + window)
            row["reopened"] = {"window": again, "all": again + more, "parts": parts}
            store.close()
        del store
    return row


def peer_cells(n: int, window: int, budget: float, folder: str) -> dict[str, Any]:
    from langgraph.store.memory import InMemoryStore
    from langgraph.store.sqlite import SqliteStore

    row: dict[str, Any] = {}
    for name in ("inmemory", "sqlite", "sqlite_file"):
        rng = random.Random(n)
        before = resident()
        conn = None
        if name == "inmemory":
            index: Any = {"dims": EMBEDDER.dimension, "embed": embed, "fields": ["text"]}
            store: Any = InMemoryStore(index=index)
        else:
            where = ":memory:" if name == "sqlite" else f"{folder}/lg{n}.sqlite"
            conn = sqlite3.connect(where, check_same_thread=False, isolation_level=None)
            store = SqliteStore(conn)
            store.setup()
        preload_langgraph(store, n, rng)
        turn = langgraph_turn(store, rng, n)
        first = time_calls(turn, window)
        rest = time_for(turn, budget, 500, start=window)
        row[name] = {"window": first, "all": first + rest}
        row[f"rss_{name}"] = resident() - before
        if conn is not None:
            conn.close()
        del store, turn
    return row


def agent_loop(sizes: list[int], window: int, budget: float, folder: str) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        row = {"n": n, **rdfmem_cells(n, window, budget, folder)}
        row.update(peer_cells(n, window, budget, folder))
        rows.append(row)
        print(n, {k: row[k]["window"].summary() for k in LABELS}, flush=True)
    return rows


def stall(saved: int, turns: int, folder: str) -> dict[str, Any]:
    """``turns`` turns right after ``saved`` memories went in through ``Memories.save`` one
    by one and ``saved`` nodes through ``add_nodes`` (every write through rdfmem)."""
    out: dict[str, Any] = {"saved": saved, "turns": turns}
    for name in ("memory", "disk"):
        rng = random.Random(saved)
        store = RdfStore() if name == "memory" else RdfStore.open(f"{folder}/stall")
        t0 = time.perf_counter()
        save_memories(store, saved, rng)
        add_decisions(store, saved)
        out[f"load_{name}"] = time.perf_counter() - t0
        parts: Steps = {}
        out[name] = time_calls(rdfmem_turn(store, rng, parts), turns)
        out[f"parts_{name}"] = parts
        store.close()
        print("stall", name, out[name].summary(), flush=True)
    return out


def remote_loop(sizes: list[int], budget: float, folder: str) -> list[dict[str, Any]]:
    """The same turn on an Oxigraph server on loopback (``RdfStore.connect``), and in memory
    at the same size, every turn counted, with the milliseconds of each step."""
    server = OxigraphServer(Path(folder))
    server.start()
    rows = []
    try:
        for n in sizes:
            row: dict[str, Any] = {"n": n}
            for name in ("remote", "log", "memory"):
                if name != "memory":
                    server.wipe()
                store = (
                    RdfStore()
                    if name == "memory"
                    else server.connect(change_log=name == "log")  # log: issue 14's follower
                )
                rng = random.Random(n)
                # 1,000 nodes per call: with the change log on, one add_nodes of 10,000
                # outlives its lease (LeaseExpired after 12 s; 2.4 s without the log)
                preload_rdfmem(store, n, rng, chunk=1_000)
                parts: Steps = {}
                row[name] = time_for(rdfmem_turn(store, rng, parts), budget, 2_000)
                row[f"parts_{name}"] = parts
                store.close()
            rows.append(row)
            print(n, {k: row[k].summary() for k in ("remote", "log", "memory")}, flush=True)
    finally:
        server.stop()
    return rows


# -- report ---------------------------------------------------------------------------------


def lat_cells(lat: Latencies) -> str:
    return f"{ms(lat.first)} | {ms(lat.p50)} | {ms(lat.p99)} | {ms(lat.slowest)}"


def steps_line(parts: Steps) -> str:
    """Mean / slowest milliseconds of each step."""
    return " · ".join(
        f"{p} {sum(parts[p]) * 1e3 / len(parts[p]):.1f}/{max(parts[p]) * 1e3:,.0f}"
        for p in PARTS
        if parts.get(p)
    )


def window_table(loop: list[dict[str, Any]], window: int) -> list[str]:
    lines = [
        f"## The {window} turns right after loading N memories and N nodes",
        "",
        f"Each store's first {window} turns after its bulk load (for `reopened`: the first "
        f"{window} after `RdfStore.open` of the same folder, in the same process). Turns/s "
        f"is {window} ÷ their total time; ÷ InMemoryStore is the same ratio against "
        "LangGraph's `InMemoryStore` (higher is faster). Milliseconds:",
        "",
        "| stored | store | turns/s | ÷ InMemoryStore | first turn | p50 | p99 | slowest | "
        "slowest ÷ p50 |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in loop:
        peer = r["inmemory"]["window"].per_second
        for key, label in LABELS.items():
            lat = r[key]["window"]
            lines.append(
                f"| {r['n']:,} | {label} | {lat.per_second:,.1f} | "
                f"{ratio(lat.per_second / peer)} | {lat_cells(lat)} | "
                f"{ratio(lat.slowest / lat.p50)} |"
            )
    if len(loop) >= 2:
        a, b = loop[0], loop[1]
        lines += [
            "",
            f"Cost growth from {a['n']:,} to {b['n']:,} stored (time of the {window} turns "
            f"after loading at {b['n']:,} ÷ at {a['n']:,}; target ≤ 2× for rdfmem): "
            + ", ".join(
                f"{label} {ratio(a[key]['window'].per_second / b[key]['window'].per_second)}"
                for key, label in LABELS.items()
            )
            + ".",
        ]
    lines += ["", "Steps of those turns, mean / slowest ms:", ""]
    for r in loop:
        for key in ("memory", "disk", "reopened"):
            lines.append(f"* {r['n']:,}, {LABELS[key]}: {steps_line(r[key]['parts'])}")
    return [*lines, ""]


def all_turns_table(loop: list[dict[str, Any]], budget: float) -> list[str]:
    lines = [
        "## Every turn of the run",
        "",
        f"The turns above, then more for {budget:g} s (at most 2,000 for rdfmem, 500 for "
        "LangGraph's stores): all of them counted. Milliseconds:",
        "",
        "| stored | store | turns | turns/s | ÷ InMemoryStore | first turn | p50 | p99 | slowest |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in loop:
        peer = r["inmemory"]["all"].per_second
        for key, label in LABELS.items():
            lat = r[key]["all"]
            lines.append(
                f"| {r['n']:,} | {label} | {lat.n:,} | {lat.per_second:,.1f} | "
                f"{ratio(lat.per_second / peer)} | {lat_cells(lat)} |"
            )
    return [*lines, ""]


def memory_table(loop: list[dict[str, Any]]) -> list[str]:
    lines = [
        "## Load, open and memory held",
        "",
        "Resident-set growth of the benchmark process from before the store was made to "
        "after its turns (the store's data, its indexes, caches; on disk, RocksDB's caches), "
        "per memory stored; the index hub's own count where it gives one.",
        "",
        "| stored | bulk load in memory / on disk (s) | open again (s) | RSS growth per "
        "memory: rdfmem in memory / on disk / InMemoryStore / SqliteStore (bytes) | index "
        "bytes per memory / per node |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in loop:
        n = r["n"]
        rss = " / ".join(
            f"{r[f'rss_{k}'] / n:,.0f}" for k in ("memory", "disk", "inmemory", "sqlite")
        )
        idx = r.get("index_bytes")
        index = "n/a" if idx is None else f"{idx[0] / n:,.0f} / {idx[1] / n:,.0f}"
        lines.append(
            f"| {n:,} | {r['load_memory']:.2f} / {r['load_disk']:.2f} | {r['open_s']:.3f} | "
            f"{rss} | {index} |"
        )
    return [*lines, ""]


def stall_table(s: dict[str, Any]) -> list[str]:
    lines = [
        f"## {s['turns']} turns right after {s['saved']:,} memories saved one by one",
        "",
        f"{s['saved']:,} `Memories.save` calls and {s['saved']:,} nodes through `add_nodes` "
        "(every write through rdfmem), then the turns, each saving one more memory"
        + (
            " (so the run crosses 10,000 memories, where the approximate index takes over "
            "when the `ann` extra is installed)"
            if s["saved"] < 10_000 <= s["saved"] + s["turns"]
            else ""
        )
        + ". Target (at 9,800 saved, 400 turns): slowest ≤ 20× p50. Milliseconds:",
        "",
        "| store | save + add (s) | first turn | p50 | p99 | slowest | slowest at turn | "
        "slowest ÷ p50 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key in ("memory", "disk"):
        lat = s[key]
        lines.append(
            f"| {LABELS[key]} | {s[f'load_{key}']:.1f} | {lat_cells(lat)} | "
            f"{lat.slowest_at + 1} | {ratio(lat.slowest / lat.p50)} |"
        )
    lines += ["", "Steps, mean / slowest ms:", ""]
    lines += [f"* {LABELS[k]}: {steps_line(s[f'parts_{k}'])}" for k in ("memory", "disk")]
    return [*lines, ""]


def remote_table(remote: list[dict[str, Any]]) -> list[str]:
    if not remote:
        return []
    lines = [
        "## Remote store: the same turn on an Oxigraph server (loopback)",
        "",
        "`RdfStore.connect` to `oxigraph serve` on 127.0.0.1 (started as `tests/servers.py` "
        "does) right after the bulk load, against rdfmem in memory at the same size, every "
        "turn counted. Milliseconds; steps mean / slowest:",
        "",
        "| stored | store | turns | turns/s | ÷ in memory | first | p50 | p99 | slowest | steps |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    kinds = {"remote": "remote", "log": "remote, `change_log=True`", "memory": "in memory"}
    for r in remote:
        for kind, label in kinds.items():
            lat = r[kind]
            lines.append(
                f"| {r['n']:,} | {label} | {lat.n} | {lat.per_second:,.1f} | "
                f"{lat.per_second / r['memory'].per_second:.3f}× | {lat_cells(lat)} | "
                f"{steps_line(r[f'parts_{kind}'])} |"
            )
    return [*lines, ""]


def report(args: argparse.Namespace, results: dict[str, Any], load: tuple[str, float]) -> str:
    command = "python benchmarks/bench_agent_loop.py" + (" --quick" if args.quick else "")
    lines = [
        "# Agent loop: every turn counted (issues 11 and 21)",
        "",
        f"Run {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, `{command}`, "
        f"{load[0]} at the start and {load[1]:.1f} at the end. Ratios are taken within one "
        "run.",
        "",
        f"**{NO_WARM_UP}** Earlier versions of this file left the first 64 searches after "
        "the load out of the turns per second; this one does not.",
        "",
        *window_table(results["loop"], args.window),
        *all_turns_table(results["loop"], args.budget),
        *memory_table(results["loop"]),
    ]
    if results.get("stall"):
        lines += stall_table(results["stall"])
    lines += remote_table(results["remote"])
    if results.get("trav") and results.get("vec"):
        lines += agent_scale.report(results["trav"], results["vec"])
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: about a minute")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000, 20_000, 100_000])
    parser.add_argument("--window", type=int, default=40, help="turns right after loading")
    parser.add_argument("--stall", type=int, default=9_800, help="memories saved one by one")
    parser.add_argument("--stall-turns", type=int, default=400)
    parser.add_argument("--nodes", type=int, default=100_000, help="traversals (0: skip)")
    parser.add_argument("--vectors", type=int, default=1_000_000, help="vector search (0: skip)")
    parser.add_argument("--dimension", type=int, default=128)
    parser.add_argument("--remote-sizes", type=int, nargs="*", default=[1_000, 10_000])
    parser.add_argument("--budget", type=float, default=3.0, help="seconds of turns per cell")
    parser.add_argument("--out", type=Path, help=f"default {RESULTS} (full runs only)")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.budget = [500, 5_000], 0.5
        args.stall, args.stall_turns, args.nodes, args.vectors = 1_000, 100, 5_000, 20_000
        args.remote_sizes = [500]
    started = machine()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        results["loop"] = agent_loop(args.sizes, args.window, args.budget, folder)
    if args.stall:
        with tempfile.TemporaryDirectory() as folder:
            results["stall"] = stall(args.stall, args.stall_turns, folder)
    with tempfile.TemporaryDirectory() as folder:
        results["remote"] = remote_loop(args.remote_sizes, args.budget, folder)
    if args.nodes and args.vectors:
        results["trav"] = agent_scale.traversals(args.nodes, 3)
        results["vec"] = agent_scale.vectors(args.vectors, args.dimension, 50)
    text_out = report(args, results, (started, load_average()))
    write_results(args.out or RESULTS, text_out, quick=args.quick and args.out is None)
    print(text_out)


if __name__ == "__main__":
    main()
