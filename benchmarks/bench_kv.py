"""Key/value set and get, side by side in one run.

Compared: raw pyoxigraph quad edits (the floor: the same triples, no rdfmem), rdfmem on
Oxigraph in memory and on disk, rdfmem on rdflib, and LangGraph's InMemoryStore and
SqliteStore (on disk). Run: ``python benchmarks/bench_kv.py [--quick]``; writes
``benchmarks/results/kv.md``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pyoxigraph import Literal, NamedNode, Quad, Store
from results_io import write_results

from rdfmem import RdflibBackend, RdfStore

RDF_JSON = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#JSON")
PRED = NamedNode("urn:rdfmem:store:value")
GRAPH = NamedNode("urn:rdfmem:graph:store")


def per_op(fn: Callable[[int], object], n: int, repeats: int) -> float:
    """Median microseconds per call of fn(i) over `repeats` runs of n calls."""
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for i in range(n):
            fn(i)
        runs.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(runs)


def raw_oxigraph(
    store: Store, keys: int
) -> tuple[Callable[[int], object], Callable[[int], object]]:
    subjects = [NamedNode(f"urn:rdfmem:store:k{i}") for i in range(keys)]

    def set_(i: int) -> None:
        s = subjects[i % keys]
        for q in list(store.quads_for_pattern(s, PRED, None, GRAPH)):
            store.remove(q)
        store.add(Quad(s, PRED, Literal(json.dumps({"n": i}), datatype=RDF_JSON), GRAPH))

    def get(i: int) -> object:
        s = subjects[i % keys]
        for q in store.quads_for_pattern(s, PRED, None, GRAPH):
            return json.loads(q.object.value)
        return None

    return set_, get


def rdfmem_ops(
    store: RdfStore, keys: int
) -> tuple[Callable[[int], object], Callable[[int], object]]:
    names = [f"k{i}" for i in range(keys)]
    return (lambda i: store.set(names[i % keys], {"n": i})), (lambda i: store.get(names[i % keys]))


def langgraph_ops(store, keys: int):  # type: ignore[no-untyped-def]
    names = [f"k{i}" for i in range(keys)]
    ns = ("agent",)
    return (lambda i: store.put(ns, names[i % keys], {"n": i})), (
        lambda i: store.get(ns, names[i % keys])
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    args = parser.parse_args()
    n, disk_n, repeats, keys = (2000, 300, 2, 200) if args.quick else (30000, 3000, 5, 1000)
    tmp = Path(tempfile.mkdtemp(prefix="rdfmem-bench-"))
    rows: list[tuple[str, float, float, int]] = []

    def measure(name: str, ops, count: int) -> None:  # type: ignore[no-untyped-def]
        set_, get = ops
        for i in range(keys):  # warm: every key exists
            set_(i)
        s = per_op(set_, count, repeats)
        g = per_op(get, count, repeats)
        rows.append((name, s, g, count))
        print(f"{name:40s} set {s:9.2f} us   get {g:8.2f} us", flush=True)

    measure("raw pyoxigraph, memory (floor)", raw_oxigraph(Store(), keys), n)
    measure("rdfmem, Oxigraph memory", rdfmem_ops(RdfStore(), keys), n)
    measure("rdfmem, rdflib", rdfmem_ops(RdfStore(RdflibBackend()), keys), n // 5)
    try:
        from langgraph.store.memory import InMemoryStore

        measure("LangGraph InMemoryStore", langgraph_ops(InMemoryStore(), keys), n)
    except ImportError:
        print("langgraph not installed: pip install -e '.[bench]'")
    measure("raw pyoxigraph, disk (floor)", raw_oxigraph(Store(str(tmp / "raw")), keys), disk_n)
    disk = RdfStore.open(tmp / "rdfmem")
    measure("rdfmem, Oxigraph disk", rdfmem_ops(disk, keys), disk_n)
    try:
        import sqlite3

        from langgraph.store.sqlite import SqliteStore

        conn = sqlite3.connect(tmp / "lg.sqlite", check_same_thread=False, isolation_level=None)
        lg = SqliteStore(conn)
        lg.setup()
        measure("LangGraph SqliteStore (disk)", langgraph_ops(lg, keys), max(disk_n // 10, 50))
    except ImportError:
        print("langgraph-checkpoint-sqlite not installed")

    by = {name: (s, g) for name, s, g, _ in rows}

    def ratio(a: str, b: str, col: int) -> str:
        if a in by and b in by:
            return f"{by[a][col] / by[b][col]:.2f}x"
        return "n/a"

    mem, raw, lgm = (
        "rdfmem, Oxigraph memory",
        "raw pyoxigraph, memory (floor)",
        "LangGraph InMemoryStore",
    )
    dsk, rawd, lgs = (
        "rdfmem, Oxigraph disk",
        "raw pyoxigraph, disk (floor)",
        "LangGraph SqliteStore (disk)",
    )
    lines = [
        "# Key/value benchmark",
        "",
        f"`python benchmarks/bench_kv.py{' --quick' if args.quick else ''}` on {platform.python_implementation()} "
        f'{platform.python_version()}, {platform.machine()}; {keys} keys, JSON values `{{"n": i}}`, '
        "median of runs, microseconds per call (lower is better).",
        "",
        "| store | set (us) | get (us) |",
        "|---|---:|---:|",
        *[f"| {name} | {s:.2f} | {g:.2f} |" for name, s, g, _ in rows],
        "",
        "| ratio | set | get | target |",
        "|---|---:|---:|---|",
        f"| rdfmem memory / raw pyoxigraph memory | {ratio(mem, raw, 0)} | {ratio(mem, raw, 1)} | both <= 2x |",
        f"| rdfmem memory / LangGraph InMemoryStore | {ratio(mem, lgm, 0)} | {ratio(mem, lgm, 1)} | set <= 2x, get <= 1x |",
        f"| rdfmem disk / raw pyoxigraph disk | {ratio(dsk, rawd, 0)} | {ratio(dsk, rawd, 1)} | both <= 2x |",
        f"| LangGraph SqliteStore / rdfmem disk | {ratio(lgs, dsk, 0)} | {ratio(lgs, dsk, 1)} | set >= 50x |",
        f"| rdfmem rdflib / rdfmem Oxigraph memory | {ratio('rdfmem, rdflib', mem, 0)} | {ratio('rdfmem, rdflib', mem, 1)} | (context) |",
        "",
        "The raw floor on disk is two RocksDB transactions per set (remove, add); rdfmem makes it one "
        "atomic `DELETE DATA`/`INSERT DATA` transaction so a crash never leaves a key without a value.",
    ]
    out = Path(__file__).parent / "results" / "kv.md"
    write_results(out, "\n".join(lines) + "\n", quick=args.quick)
    print("\n".join(lines[-9:]))


if __name__ == "__main__":
    main()
