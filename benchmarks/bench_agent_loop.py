"""An agent's turn at constant cost: rdfmem's incremental indexes against LangGraph's stores.

One *turn* = ``Memories.save`` + ``Memories.search(limit=5)`` + ``add_node`` + ``add_edge`` +
``query("active_goals")`` + ``query("recent_decisions", limit=5)`` + ``store.update(counter)``,
with N memories and N decision nodes already stored. Side by side, same machine, same run,
same embedder (rdfmem's ``HashingEmbedder``, 512 dimensions):

* rdfmem on embedded Oxigraph, in memory and on disk;
* LangGraph ``InMemoryStore`` with an index (the same embedder): put, semantic search, puts,
  filtered searches, get + put of the counter;
* LangGraph ``SqliteStore`` (langgraph-checkpoint-sqlite), in memory, the same operations
  (its search without sqlite-vec is a filter, not a semantic ranking: it is cheaper than a
  real vector search, so the ratio flatters it).

Also measured: the first read after a bulk load (the indexes rebuilt from SPARQL), the memory
the indexes hold (bytes per memory and per node), traversals at scale (``descendants`` and
``ancestors`` against a breadth-first search over Python dicts that builds the same ``Node``
objects; ``path_between`` over a 10-hop shortest path) and exact against approximate vector
search (usearch HNSW): latency and recall@10; and the same turn on a remote store (an
Oxigraph server on loopback, ``RdfStore.connect``) at 1,000 and 10,000 stored, step by step,
against the turn in memory at the same size.

Run: ``python benchmarks/bench_agent_loop.py [--quick]``; writes
``benchmarks/results/agent_loop.md``. ``--quick`` takes a minute or two.
"""

# ruff: noqa: RUF001  (the markdown tables print multiplication signs)
from __future__ import annotations

import argparse
import datetime as dt
import gc
import os
import platform
import random
import sqlite3
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rdfmem import DecisionGraph, Memories, Memory, RdfStore
from rdfmem.decisions import Node
from rdfmem.domain.memories import _triples
from rdfmem.embeddings import HashingEmbedder, vector_literal
from rdfmem.store.indexes import VectorSet

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from bench_decisions import generate
from results_io import write_results
from servers import OxigraphServer

RESULTS = Path(__file__).parent / "results" / "agent_loop.md"
WORDS = [
    "deploy",
    "release",
    "api",
    "server",
    "database",
    "cache",
    "queue",
    "worker",
    "schedule",
    "budget",
    "invoice",
    "tea",
    "coffee",
    "garden",
    "python",
    "rust",
    "review",
    "test",
    "build",
    "wheel",
    "publish",
    "docs",
    "memory",
    "graph",
    "agent",
    "plan",
    "goal",
    "decision",
    "option",
    "action",
    "outcome",
    "latency",
    "throughput",
    "index",
    "vector",
    "search",
    "token",
]
EMBEDDER = HashingEmbedder()


def text(rng: random.Random, n: int = 8) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def embed(texts: list[str]) -> list[list[float]]:
    return EMBEDDER.embed(texts).tolist()  # type: ignore[no-any-return]


# -- rdfmem ---------------------------------------------------------------------------------


def preload_rdfmem(store: RdfStore, n: int, rng: random.Random, chunk: int | None = None) -> None:
    """n memories and n decision nodes (with n edges), bulk-loaded (a bypass of the indexes,
    which then rebuild once); nodes and edges ``chunk`` per call when given."""
    memories = Memories(store, project="bench")
    graph = memories.graph("project")
    lines: list[str] = []
    batch = 5_000
    for start in range(0, n, batch):
        titles = [f"Memory {i}" for i in range(start, min(n, start + batch))]
        contents = [text(rng) for _ in titles]
        vectors = EMBEDDER.embed([f"{t}\n\n{c}" for t, c in zip(titles, contents, strict=True)])
        for title, content, vector in zip(titles, contents, vectors, strict=True):
            m = Memory("project", title, content)
            lines.extend(_triples(memories._subject("project", m.slug), m, vector_literal(vector)))
        store.load("\n".join(lines), "ntriples", graph=graph)
        lines = []
    nodes, edges = generate(n)
    for i, node in enumerate(nodes):
        if node.type == "goal" and i > 70:
            node.status = "completed"  # about ten active goals, as an agent has
    dg = DecisionGraph(store)
    step = chunk or n
    for start in range(0, n, step):
        dg.add_nodes(nodes[start : start + step])
    for start in range(0, n, step):
        dg.add_edges(edges[start : min(n, start + step)])


PARTS = ("save", "search", "add_node", "add_edge", "active_goals", "recent", "counter")


def rdfmem_turn(
    store: RdfStore, rng: random.Random, parts: dict[str, float] | None = None
) -> Callable[[int], None]:
    """One turn; with ``parts``, the seconds of each step are added to it."""
    memories = Memories(store, project="bench")
    graph = DecisionGraph(store)
    steps: list[Callable[[int], object]] = [
        lambda i: memories.save(Memory("project", f"Turn {i} note", text(rng))),
        lambda i: memories.search(text(rng, 4), limit=5),
        lambda i: graph.add_node(Node(id=f"t{i}", type="decision", label=f"turn {i}")),
        lambda i: graph.add_edge({"from_id": "n0", "to_id": f"t{i}", "type": "leads_to"}),
        lambda i: graph.query("active_goals"),
        lambda i: graph.query("recent_decisions", limit=5),
        lambda i: store.update("turns", lambda c: (c or 0) + 1),
    ]

    def turn(i: int) -> None:
        if parts is None:
            for step in steps:
                step(i)
            return
        for name, step in zip(PARTS, steps, strict=True):
            start = time.perf_counter()
            step(i)
            parts[name] = parts.get(name, 0.0) + time.perf_counter() - start

    return turn


# -- LangGraph ------------------------------------------------------------------------------


def preload_langgraph(store: Any, n: int, rng: random.Random) -> None:
    from langgraph.store.base import PutOp

    batch = 2_000
    for start in range(0, n, batch):
        ops = [
            PutOp(("memories",), f"m{i}", {"title": f"Memory {i}", "text": text(rng)})
            for i in range(start, min(n, start + batch))
        ]
        store.batch(ops)
    nodes, _ = generate(n)
    ops = []
    for i, node in enumerate(nodes):
        status = "completed" if node.type == "goal" and i > 70 else "active"
        value = {"type": node.type, "label": node.label, "status": status, "at": i}
        ops.append(PutOp(("decisions",), node.id, value, index=False))
    for start in range(0, len(ops), batch):
        store.batch(ops[start : start + batch])


def langgraph_turn(store: Any, rng: random.Random, n: int) -> Callable[[int], None]:
    def turn(i: int) -> None:
        store.put(("memories",), f"turn{i}", {"title": f"Turn {i} note", "text": text(rng)})
        store.search(("memories",), query=text(rng, 4), limit=5)
        node = {"type": "decision", "label": f"turn {i}", "status": "active", "at": n + i}
        store.put(("decisions",), f"t{i}", node, index=False)
        store.put(("edges",), f"e{i}", {"from": "n0", "to": f"t{i}"}, index=False)
        store.search(("decisions",), filter={"type": "goal", "status": "active"}, limit=100)
        store.search(("decisions",), filter={"type": "decision"}, limit=5)
        item = store.get(("counters",), "turns")
        store.put(("counters",), "turns", {"n": (item.value["n"] if item else 0) + 1})

    return turn


# -- measuring ------------------------------------------------------------------------------


def first_reads(store: RdfStore, rng: random.Random) -> None:
    """The first 64 searches after a bulk load (the indexes rebuilt from SPARQL; a large set
    builds its HNSW graph at the ninth and chooses its beam at the 16th and the 64th)."""
    for _ in range(64):
        Memories(store, project="bench").search(text(rng, 4), limit=5)
    DecisionGraph(store).query("recent_decisions", limit=5)


def turns_per_second(
    turn: Callable[[int], None],
    budget: float,
    most: int,
    counted: list[int] | None = None,
    *,
    warm: bool = True,
) -> float:
    if warm:
        turn(1_000_000)  # first reads, rebuilt indexes
    count, start = 0, time.perf_counter()
    while count < most and (count < 3 or time.perf_counter() - start < budget):
        turn(count)
        count += 1
    if counted is not None:
        counted.append(count)
    return count / (time.perf_counter() - start)


def remote_loop(sizes: list[int], budget: float, folder: str) -> list[dict[str, Any]]:
    """The same turn on an Oxigraph server on loopback (``RdfStore.connect``), and in memory
    at the same size, with the milliseconds of each step (after the first reads)."""
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
                first_reads(store, rng)
                parts: dict[str, float] = {}
                counted: list[int] = []
                turn = rdfmem_turn(store, rng, parts)
                turn(1_000_000)  # first reads, rebuilt indexes: not counted
                parts.clear()
                row[name] = turns_per_second(turn, budget, 2_000, counted, warm=False)
                row[f"parts_{name}"] = {k: v * 1e3 / counted[0] for k, v in parts.items()}
                store.close()
            rows.append(row)
            print(row, flush=True)
    finally:
        server.stop()
    return rows


def agent_loop(sizes: list[int], budget: float, folder: str) -> list[dict[str, Any]]:
    from langgraph.store.memory import InMemoryStore
    from langgraph.store.sqlite import SqliteStore

    rows = []
    for n in sizes:
        row: dict[str, Any] = {"n": n}
        for name in ("memory", "disk"):
            rng = random.Random(n)
            store = RdfStore() if name == "memory" else RdfStore.open(f"{folder}/db{n}")
            t0 = time.perf_counter()
            preload_rdfmem(store, n, rng)
            row[f"load_{name}"] = time.perf_counter() - t0
            turn = rdfmem_turn(store, rng)
            t0 = time.perf_counter()
            first_reads(store, rng)
            row[f"rebuild_{name}"] = time.perf_counter() - t0
            row[name] = turns_per_second(turn, budget, 2_000)
            if name == "memory":
                hub = store.indexes
                assert hub is not None
                vec = sum(v.nbytes() for v in hub._vectors.values())
                nodes = sum(g.nbytes() for g in hub._graphs.values())
                row["bytes_memory"] = vec / (n + 2_000)
                row["bytes_node"] = nodes / (n + 2_000)
                blocks = [b for v in hub._vectors.values() for b in v._blocks.values()]
                graphs = [b for b in blocks if b.ann is not None]
                row["beam"] = graphs[0].ann.expansion_search if graphs else None
                if graphs:  # what choosing the beam again costs (every 1,024+ searches)
                    t0 = time.perf_counter()
                    graphs[0].calibrate()
                    row["calibrate_s"] = time.perf_counter() - t0
            store.close()
            del store, turn
            gc.collect()
        rng = random.Random(n)
        lg = InMemoryStore(index={"dims": EMBEDDER.dimension, "embed": embed, "fields": ["text"]})
        preload_langgraph(lg, n, rng)
        row["inmemory"] = turns_per_second(langgraph_turn(lg, rng, n), budget, 500)
        del lg
        gc.collect()
        conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        sq = SqliteStore(conn)
        sq.setup()
        preload_langgraph(sq, n, rng)
        row["sqlite"] = turns_per_second(langgraph_turn(sq, rng, n), budget, 500)
        conn.close()
        rows.append(row)
        print(row, flush=True)
    return rows


# -- traversals -----------------------------------------------------------------------------


def best_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return min(times)


def traversals(n: int, repeat: int) -> dict[str, Any]:
    nodes, edges = generate(n)
    store = RdfStore()
    graph = DecisionGraph(store)
    graph.add_nodes(nodes)
    graph.add_edges(edges)
    t0 = time.perf_counter()
    graph.query("active_goals")
    rebuild = time.perf_counter() - t0
    records = {node.id: node.model_dump() for node in nodes}
    out: dict[str, list[str]] = {}
    into: dict[str, list[str]] = {}
    for e in edges:
        out.setdefault(e.from_id, []).append(e.to_id)
        into.setdefault(e.to_id, []).append(e.from_id)

    def dict_bfs(start: str, adjacency: dict[str, list[str]]) -> list[Node]:
        seen, order, queue = {start}, [], deque([start])
        while queue:
            for nxt in adjacency.get(queue.popleft(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    order.append(Node.model_construct(**records[nxt]))
                    queue.append(nxt)
        return order

    # a pair 10 hops apart (shortest): breadth-first from successive nodes until one has a
    # node at distance 10
    start = end = "n1"
    for i in range(1, n):
        start = f"n{i}"
        dist = {start: 0}
        queue = deque([start])
        while queue and end == "n1":
            cur = queue.popleft()
            for nxt in out.get(cur, ()):
                if nxt not in dist:
                    dist[nxt] = dist[cur] + 1
                    queue.append(nxt)
                    if dist[nxt] == 10:
                        end = nxt
        if end != "n1":
            break
    mid = f"n{n // 3}"
    result = {
        "n": n,
        "edges": len(edges),
        "rebuild_s": rebuild,
        "desc_size": len(graph.query("descendants", node_id="n0")),
        "desc": best_ms(lambda: graph.query("descendants", node_id="n0"), repeat),
        "desc_dict": best_ms(lambda: dict_bfs("n0", out), repeat),
        "anc_size": len(graph.query("ancestors", node_id=mid)),
        "anc": best_ms(lambda: graph.query("ancestors", node_id=mid), repeat),
        "anc_dict": best_ms(lambda: dict_bfs(mid, into), repeat),
        "hops": len(graph.query("path_between", from_id=start, to_id=end)) - 1,
        "path": best_ms(lambda: graph.query("path_between", from_id=start, to_id=end), repeat),
    }
    store.close()
    print(result, flush=True)
    return result


# -- vectors --------------------------------------------------------------------------------


def vectors(n: int, dimension: int, queries: int) -> dict[str, Any]:
    """n clustered unit vectors (as text embeddings are: topics, then variation)."""
    rng = np.random.default_rng(3)
    centres = rng.standard_normal((max(16, n // 500), dimension)).astype(np.float32)
    data = centres[rng.integers(0, len(centres), n)]
    data += 0.6 * rng.standard_normal((n, dimension)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    del centres
    exact = VectorSet(("urn:g",), "urn:p", approximate=False)
    keys = [f"urn:v{i}" for i in range(n)]
    exact.rebuild(("urn:g", k, v) for k, v in zip(keys, data, strict=True))
    bytes_exact = exact.nbytes()
    ann = VectorSet(("urn:g",), "urn:p", approximate=True)
    ann._blocks = exact._blocks  # the same rows; its HNSW graph is built on first search
    # Queries far from the rows: a unit row plus noise of norm 0.3 * sqrt(dimension).
    qs = data[rng.integers(0, n, 64 + queries)]
    qs += 0.3 * rng.standard_normal((64 + queries, dimension)).astype(np.float32)
    t0 = time.perf_counter()
    ann.search(qs[0], 10)
    build = time.perf_counter() - t0
    (block,) = ann._blocks.values()
    first_beam = block.ann.expansion_search
    t0 = time.perf_counter()
    for q in qs[1:64]:  # the workload's first queries: the beam is chosen on them
        ann.search(q, 10)
    warm = time.perf_counter() - t0
    hits, exact_ms, ann_ms = 0, [], []
    for q in qs[64:]:
        t = time.perf_counter()
        want = {s for _, s, _ in exact.search(q, 10)}
        exact_ms.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        got = {s for _, s, _ in ann.search(q, 10)}
        ann_ms.append((time.perf_counter() - t) * 1e3)
        hits += len(want & got)
    result = {
        "n": n,
        "dimension": dimension,
        "build_s": build,
        "warm_s": warm,
        "first_beam": first_beam,
        "beam": block.ann.expansion_search,
        "exact_ms": float(np.median(exact_ms)),
        "ann_ms": float(np.median(ann_ms)),
        "recall": hits / (10 * queries),
        "bytes_exact": bytes_exact / n,
        "bytes_ann": (ann.nbytes() - bytes_exact) / n,
    }
    print(result, flush=True)
    return result


# -- report ---------------------------------------------------------------------------------


def report(
    args: argparse.Namespace,
    loop: list[dict[str, Any]],
    trav: dict[str, Any],
    vec: dict[str, Any],
    load: tuple[float, float],
    remote: list[dict[str, Any]],
) -> str:
    def f(x: float) -> str:
        return f"{x:,.1f}" if x < 100 else f"{x:,.0f}"

    lines = [
        "# Agent loop: a turn at constant cost (issue 11)",
        "",
        f"Run {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, Python "
        f"{platform.python_version()}, {os.cpu_count()} cores, load average "
        f"{load[0]:.1f} before / {load[1]:.1f} after (the machine was shared with other "
        f"engineers' builds and tests, so absolute numbers are noisy; the ratios are taken "
        f"within one run). `python benchmarks/bench_agent_loop.py"
        f"{' --quick' if args.quick else ''}`.",
        "",
        "## Turns per second (save + search + add_node + add_edge + active_goals + "
        "recent_decisions + counter update)",
        "",
        "| stored (memories and nodes each) | rdfmem in memory | rdfmem on disk | "
        "LangGraph InMemoryStore (index) | LangGraph SqliteStore | in memory ÷ InMemoryStore "
        "| on disk ÷ InMemoryStore |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in loop:
        lines.append(
            f"| {r['n']:,} | {f(r['memory'])} | {f(r['disk'])} | {f(r['inmemory'])} | "
            f"{f(r['sqlite'])} | {r['memory'] / r['inmemory']:,.0f}× | "
            f"{r['disk'] / r['inmemory']:,.0f}× |"
        )
    if len(loop) >= 2:
        a, b = loop[0], loop[1]
        lines += [
            "",
            f"Cost of a turn from {a['n']:,} to {b['n']:,} stored: in memory "
            f"{a['memory'] / b['memory']:.2f}×, on disk {a['disk'] / b['disk']:.2f}× "
            f"(InMemoryStore {a['inmemory'] / b['inmemory']:.1f}×).",
        ]
    lines += [
        "",
        "First read after a bulk load (every index rebuilt from SPARQL once), and memory held:",
        "",
        "| stored | rebuild in memory (s) | rebuild on disk (s) | bytes per memory "
        "(vector index) | bytes per node (node + adjacency index) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in loop:
        lines.append(
            f"| {r['n']:,} | {r['rebuild_memory']:.2f} | {r['rebuild_disk']:.2f} | "
            f"{r['bytes_memory']:,.0f} | {r['bytes_node']:,.0f} |"
        )
    for r in loop:
        if r.get("beam") is not None:
            lines += [
                "",
                f"At {r['n']:,} stored the HNSW beam chosen on the turns' queries is "
                f"{r['beam']:,}; choosing it again (every max(1,024, rows / 64) searches) "
                f"took {r['calibrate_s']:.2f} s.",
            ]
    t = trav
    lines += [
        "",
        f"## Traversals, {t['n']:,} nodes and {t['edges']:,} edges (in memory)",
        "",
        "| query | rdfmem (ms) | dict BFS building the same Node objects (ms) | ratio |",
        "|---|---:|---:|---:|",
        f"| descendants of n0 ({t['desc_size']:,} nodes) | {f(t['desc'])} | "
        f"{f(t['desc_dict'])} | {t['desc'] / t['desc_dict']:.2f}× |",
        f"| ancestors ({t['anc_size']:,} nodes) | {f(t['anc'])} | {f(t['anc_dict'])} | "
        f"{t['anc'] / t['anc_dict']:.2f}× |",
        f"| path_between, {t['hops']} hops | {t['path']:.2f} | | |",
        "",
        f"(Index rebuilt from SPARQL after the bulk load: {t['rebuild_s']:.1f} s, once.)",
        "",
        f"## Vector search, {vec['n']:,} vectors of {vec['dimension']} dimensions",
        "",
        "| | exact (numpy) | approximate (usearch HNSW) |",
        "|---|---:|---:|",
        f"| search latency, median (ms) | {vec['exact_ms']:.2f} | {vec['ann_ms']:.2f} |",
        f"| recall@10 against exact | 1.00 | {vec['recall']:.3f} |",
        f"| bytes per vector | {vec['bytes_exact']:,.0f} | +{vec['bytes_ann']:,.0f} |",
        f"| build (s), with the beam chosen on 64 of the set's rows | — | {vec['build_s']:.1f} |",
        f"| first 63 queries (s), the beam chosen again on them at the 16th and 64th | — | "
        f"{vec['warm_s']:.1f} |",
        f"| beam (usearch expansion_search): after the build → on the queries | — | "
        f"{vec['first_beam']:,} → {vec['beam']:,} |",
        "",
    ]
    if remote:
        names = ", ".join(PARTS)
        lines += [
            "## Remote store: the same turn on an Oxigraph server (loopback)",
            "",
            "`RdfStore.connect` to `oxigraph serve` on 127.0.0.1 (the server started as "
            "`tests/servers.py` does), against rdfmem in memory at the same size, in the "
            f"same run. Milliseconds per step ({names}):",
            "",
            "| stored | store | turns/s | ÷ in memory | ms per step |",
            "|---:|---|---:|---:|---|",
        ]
        kinds = {"remote": "remote", "log": "remote, `change_log=True`", "memory": "in memory"}
        for r in remote:
            for kind, label in kinds.items():
                steps = " / ".join(f"{r[f'parts_{kind}'][p]:.1f}" for p in PARTS)
                lines.append(
                    f"| {r['n']:,} | {label} | {f(r[kind])} | "
                    f"{r[kind] / r['memory']:.3f}× | {steps} |"
                )
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a minute or two")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000, 20_000, 100_000])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--vectors", type=int, default=1_000_000)
    parser.add_argument("--dimension", type=int, default=128)
    parser.add_argument("--remote-sizes", type=int, nargs="*", default=[1_000, 10_000])
    parser.add_argument("--budget", type=float, default=3.0, help="seconds of turns per cell")
    parser.add_argument("--out", type=Path, help=f"default {RESULTS} (full runs only)")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.nodes, args.vectors, args.budget = [1_000, 10_000], 20_000, 50_000, 1.5
        args.remote_sizes = [1_000]
    before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        loop = agent_loop(args.sizes, args.budget, folder)
    with tempfile.TemporaryDirectory() as folder:
        remote = remote_loop(args.remote_sizes, args.budget, folder)
    trav = traversals(args.nodes, 3)
    vec = vectors(args.vectors, args.dimension, 50)
    text_out = report(args, loop, trav, vec, (before, os.getloadavg()[0]), remote)
    write_results(args.out or RESULTS, text_out, quick=args.quick and args.out is None)
    print(text_out)


if __name__ == "__main__":
    main()
