"""The agent-loop benchmark's scale sections: traversals and vector search.

* Traversals (``descendants``, ``ancestors``, ``path_between``) over N decision nodes,
  against a breadth-first search over Python dicts that builds the same ``Node`` objects.
  Each is called ``repeat + 1`` times and every call counts: the table gives the first call
  and the median of all of them.
* Exact (numpy) against approximate (usearch HNSW) vector search over N clustered vectors:
  the HNSW build (at the first search) and the first 63 queries are reported on their own
  rows, and the latencies of the queries after them with p50, p99 and the slowest.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
from bench_decisions import generate
from latency import Latencies

from rdfmem import DecisionGraph, RdfStore
from rdfmem.decisions import Node
from rdfmem.store.indexes import VectorSet


def every_call(fn: Callable[[], object], repeat: int) -> Latencies:
    """``fn()`` ``repeat + 1`` times, each timed, the first included."""
    seconds = []
    for _ in range(repeat + 1):
        start = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - start)
    return Latencies.of(seconds)


def ten_hops(n: int, out: dict[str, list[str]]) -> tuple[str, str]:
    """A pair of nodes 10 hops apart (shortest): breadth-first from successive nodes until
    one has a node at distance 10."""
    for i in range(1, n):
        start = f"n{i}"
        dist = {start: 0}
        queue = deque([start])
        while queue:
            cur = queue.popleft()
            for nxt in out.get(cur, ()):
                if nxt not in dist:
                    dist[nxt] = dist[cur] + 1
                    queue.append(nxt)
                    if dist[nxt] == 10:
                        return start, nxt
    return "n1", "n1"


def traversals(n: int, repeat: int) -> dict[str, Any]:
    nodes, edges = generate(n)
    store = RdfStore()
    graph = DecisionGraph(store)
    graph.add_nodes(nodes)
    graph.add_edges(edges)
    t0 = time.perf_counter()
    graph.query("active_goals")
    first_read = time.perf_counter() - t0
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

    start, end = ten_hops(n, out)
    mid = f"n{n // 3}"
    result = {
        "n": n,
        "edges": len(edges),
        "first_read_s": first_read,
        "desc_size": len(graph.query("descendants", node_id="n0")),
        "desc": every_call(lambda: graph.query("descendants", node_id="n0"), repeat),
        "desc_dict": every_call(lambda: dict_bfs("n0", out), repeat),
        "anc_size": len(graph.query("ancestors", node_id=mid)),
        "anc": every_call(lambda: graph.query("ancestors", node_id=mid), repeat),
        "anc_dict": every_call(lambda: dict_bfs(mid, into), repeat),
        "hops": len(graph.query("path_between", from_id=start, to_id=end)) - 1,
        "path": every_call(lambda: graph.query("path_between", from_id=start, to_id=end), repeat),
    }
    store.close()
    print({k: v.summary() if isinstance(v, Latencies) else v for k, v in result.items()})
    return result


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
    first_beam = block.ann.expansion_search if block.ann is not None else 0
    t0 = time.perf_counter()
    for q in qs[1:64]:  # the workload's first queries: the beam is chosen on them
        ann.search(q, 10)
    warm = time.perf_counter() - t0
    hits, exact_s, ann_s = 0, [], []
    for q in qs[64:]:
        t = time.perf_counter()
        want = {s for _, s, _ in exact.search(q, 10)}
        exact_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        got = {s for _, s, _ in ann.search(q, 10)}
        ann_s.append(time.perf_counter() - t)
        hits += len(want & got)
    result = {
        "n": n,
        "dimension": dimension,
        "build_s": build,
        "warm_s": warm,
        "first_beam": first_beam,
        "beam": block.ann.expansion_search if block.ann is not None else 0,
        "exact": Latencies.of(exact_s),
        "ann": Latencies.of(ann_s),
        "recall": hits / (10 * queries),
        "bytes_exact": bytes_exact / n,
        "bytes_ann": (ann.nbytes() - bytes_exact) / n,
    }
    print({k: v.summary() if isinstance(v, Latencies) else v for k, v in result.items()})
    return result


def report(t: dict[str, Any], vec: dict[str, Any]) -> list[str]:
    def cell(lat: Latencies) -> str:
        return f"{lat.first * 1e3:,.2f} / {lat.p50 * 1e3:,.2f}"

    def times(a: Latencies, b: Latencies) -> str:
        return f"{a.p50 / b.p50:.2f}×"  # noqa: RUF001

    ex, an = vec["exact"], vec["ann"]
    return [
        f"## Traversals, {t['n']:,} nodes and {t['edges']:,} edges (in memory)",
        "",
        f"Each query called {t['desc'].n} times, every call counted: first / median (ms). The "
        f"first read after the nodes were added took {t['first_read_s']:.2f} s.",
        "",
        "| query | rdfmem first / median | dict BFS building the same Node objects, first / "
        "median | median ratio |",
        "|---|---:|---:|---:|",
        f"| descendants of n0 ({t['desc_size']:,} nodes) | {cell(t['desc'])} | "
        f"{cell(t['desc_dict'])} | {times(t['desc'], t['desc_dict'])} |",
        f"| ancestors ({t['anc_size']:,} nodes) | {cell(t['anc'])} | {cell(t['anc_dict'])} | "
        f"{times(t['anc'], t['anc_dict'])} |",
        f"| path_between, {t['hops']} hops | {cell(t['path'])} | | |",
        "",
        f"## Vector search, {vec['n']:,} vectors of {vec['dimension']} dimensions",
        "",
        f"Latencies over the {ex.n} queries after the first 64 (those 64 are the two rows "
        "below the table's first three: nothing is left out).",
        "",
        "| | exact (numpy) | approximate (usearch HNSW) |",
        "|---|---:|---:|",
        f"| p50 / p99 / slowest (ms) | {ex.p50 * 1e3:.2f} / {ex.p99 * 1e3:.2f} / "
        f"{ex.slowest * 1e3:.2f} | {an.p50 * 1e3:.2f} / {an.p99 * 1e3:.2f} / "
        f"{an.slowest * 1e3:.2f} |",
        f"| recall@10 against exact | 1.00 | {vec['recall']:.3f} |",
        f"| bytes per vector | {vec['bytes_exact']:,.0f} | +{vec['bytes_ann']:,.0f} |",
        f"| first query (s): the HNSW build, the beam chosen on 64 of the set's rows | — | "
        f"{vec['build_s']:.1f} |",
        f"| the next 63 queries (s), the beam chosen again on them at the 16th and 64th | — | "
        f"{vec['warm_s']:.1f} |",
        f"| beam (usearch expansion_search): after the build → on the queries | — | "
        f"{vec['first_beam']:,} → {vec['beam']:,} |",
        "",
    ]
