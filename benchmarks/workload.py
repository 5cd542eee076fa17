"""The agent's workload the latency benchmarks share: what is stored, and what one turn does.

One *turn* = ``Memories.save`` + ``Memories.search(limit=5)`` + ``add_node`` + ``add_edge`` +
``query("active_goals")`` + ``query("recent_decisions", limit=5)`` + ``store.update(counter)``;
LangGraph's stores run the same operations (put, semantic search, puts, filtered searches,
get + put of the counter). Every store uses the same embedder (rdfmem's ``HashingEmbedder``,
512 dimensions). ``bench_agent_loop``, ``bench_cold_start`` and ``bench_processes`` import
this module (``python benchmarks/bench_x.py`` puts ``benchmarks/`` on ``sys.path``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from rdfmem import DecisionGraph, Memories, Memory, RdfStore
from rdfmem.decisions import Node
from rdfmem.domain.memories import _triples
from rdfmem.embeddings import HashingEmbedder, vector_literal

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
#: The steps of a turn, in order (the keys of the per-step timings).
PARTS = ("save", "search", "add_node", "add_edge", "active_goals", "recent", "counter")


def text(rng: random.Random, n: int = 8) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def embed(texts: list[str]) -> list[list[float]]:
    return EMBEDDER.embed(texts).tolist()  # type: ignore[no-any-return]


# -- rdfmem ---------------------------------------------------------------------------------


def preload_rdfmem(store: RdfStore, n: int, rng: random.Random, chunk: int | None = None) -> None:
    """n memories (bulk-loaded as N-Triples through ``RdfStore.load``, as a Turtle file or a
    backup is: the load keeps the memory indexes of the ``Memories`` made before it, and
    its time counts that) and n decision nodes with n edges through
    ``DecisionGraph.add_nodes`` / ``add_edges``, ``chunk`` per call when given."""
    memories = Memories(store, project="bench")
    graph = memories.graph("project")
    batch = 5_000
    for start in range(0, n, batch):
        titles = [f"Memory {i}" for i in range(start, min(n, start + batch))]
        contents = [text(rng) for _ in titles]
        vectors = EMBEDDER.embed([f"{t}\n\n{c}" for t, c in zip(titles, contents, strict=True)])
        lines: list[str] = []
        for title, content, vector in zip(titles, contents, vectors, strict=True):
            m = Memory("project", title, content)
            lines.extend(_triples(memories._subject("project", m.slug), m, vector_literal(vector)))
        store.load("\n".join(lines), "ntriples", graph=graph)
    add_decisions(store, n, chunk)


def add_decisions(store: RdfStore, n: int, chunk: int | None = None) -> None:
    """n decision nodes (about ten active goals, as an agent has) and n edges."""
    from bench_decisions import generate  # here: a cold start imports this module too

    nodes, edges = generate(n)
    for i, node in enumerate(nodes):
        if node.type == "goal" and i > 70:
            node.status = "completed"
    dg = DecisionGraph(store)
    step = chunk or max(n, 1)
    for start in range(0, n, step):
        dg.add_nodes(nodes[start : start + step])
    for start in range(0, n, step):
        dg.add_edges(edges[start : min(n, start + step)])


def save_memories(store: RdfStore, n: int, rng: random.Random) -> None:
    """n memories saved one by one through ``Memories.save`` (every write through rdfmem)."""
    memories = Memories(store, project="bench")
    for i in range(n):
        memories.save(Memory("project", f"Saved {i}", text(rng)))


Steps = dict[str, list[float]]


def rdfmem_turn(
    store: RdfStore, rng: random.Random, parts: Steps | None = None
) -> Callable[[int], None]:
    """One turn; with ``parts``, each step's seconds are appended to ``parts[step]``."""
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
            parts.setdefault(name, []).append(time.perf_counter() - start)

    return turn


# -- LangGraph ------------------------------------------------------------------------------


def preload_langgraph(store: Any, n: int, rng: random.Random) -> None:
    from bench_decisions import generate
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
