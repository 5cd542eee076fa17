"""Memory search over 10,000 memories, side by side with brute-force numpy in one run.

Compared, for the same queries over the same vectors:

* the floor: numpy cosine over the vectors held in memory (a float32 matrix, query embedded,
  ``matrix @ query``, top k), with and without embedding the query text;
* ``Memories.search`` on rdfmem's Oxigraph (memory and disk) and rdflib backends: warm (the
  decoded matrix is cached while nothing is written) and cold (the first search after a write:
  every vector read with one SPARQL query and decoded).

Run: ``python benchmarks/bench_memories.py [--quick]``; writes ``benchmarks/results/memories.md``.
"""

from __future__ import annotations

import argparse
import os

# One BLAS thread: on a loaded 2-core machine OpenBLAS's threads spin against other processes
# and a 10,000 x 512 product swings from 2 ms to 30 ms. Floor and rdfmem share the setting.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
from results_io import write_results

from rdfmem import OxigraphBackend, RdflibBackend, RdfStore
from rdfmem.embeddings import HashingEmbedder, top_k
from rdfmem.memories import Memories, Memory

SUBJECTS = [
    "deploy", "release", "pytest", "database", "backup", "oauth", "token", "invoice", "billing",
    "cache", "redis", "kubernetes", "docker", "logging", "metrics", "alerting", "frontend",
    "react", "typescript", "python", "rust", "latency", "migration", "schema", "index", "query",
    "budget", "roadmap", "meeting", "customer", "support", "onboarding", "security", "audit",
]  # fmt: skip
VERBS = ["prefers", "needs", "avoids", "reviews", "tracks", "schedules", "documents", "tests"]
PEOPLE = ["Eli", "Maya", "the team", "ops", "the agent", "Priya", "Sam", "the client"]
QUERIES = [
    "how do we deploy a release?",
    "database backup schedule",
    "oauth token expiry",
    "who reviews the billing invoices",
    "redis cache latency",
    "kubernetes logging and metrics",
    "react typescript frontend migration",
    "security audit for onboarding",
]
LIMIT = 10
FLOOR = "numpy cosine + embedding the query (the floor)"


def corpus(n: int) -> list[tuple[str, str, list[str]]]:
    """n (title, content, topics): short notes on a few subjects each, deterministic."""
    rng = random.Random(7)
    out = []
    for i in range(n):
        words = rng.sample(SUBJECTS, 3)
        sentences = [
            f"{rng.choice(PEOPLE)} {rng.choice(VERBS)} the {w} work before the {rng.choice(SUBJECTS)}."
            for w in words
        ]
        out.append((f"Note {i} {words[0]}", " ".join(sentences), words[:2]))
    return out


def timed_ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def fill(memories: Memories, notes: list[tuple[str, str, list[str]]]) -> float:
    """Save every note; returns milliseconds per save."""
    start = time.perf_counter()
    for title, content, topics in notes:
        memories.save(Memory("global" if len(title) % 2 else "project", title, content, topics))
    return (time.perf_counter() - start) * 1e3 / len(notes)


def run(n: int, repeats: int, rdflib_n: int, tmp: Path) -> list[dict[str, object]]:
    notes = corpus(n)
    embedder = HashingEmbedder()
    # The floor: the same vectors, embedded the same way, held in a numpy matrix.
    matrix = embedder.embed([f"{t}\n{' '.join(tp)}\n{c}" for t, c, tp in notes])
    vectors = {q: embedder.embed([q])[0] for q in QUERIES}
    contenders: dict[str, tuple[int, Callable[[str], object]]] = {
        "numpy cosine, query vector given": (n, lambda q: top_k(matrix, vectors[q], LIMIT)),
        FLOOR: (n, lambda q: top_k(matrix, embedder.embed([q])[0], LIMIT)),
    }
    stores: list[tuple[str, RdfStore, Memories, int, float]] = []
    for name, store, size in [
        ("rdfmem, Oxigraph in memory", RdfStore(), n),
        ("rdfmem, Oxigraph on disk", RdfStore(OxigraphBackend(tmp / "db")), n),
        ("rdfmem, rdflib", RdfStore(RdflibBackend()), rdflib_n),
    ]:
        memories = Memories(store, project="bench", embedder=embedder)
        save_ms = fill(memories, notes[:size])
        stores.append((name, store, memories, size, save_ms))
        contenders[f"{name}, search warm"] = (size, partial(memories.search, limit=LIMIT))
        if size == n:  # the same hits as the floor, in the same order
            got = [m.title for m, _ in memories.search(QUERIES[0], LIMIT)]
            assert got == [notes[i][0] for i, _ in top_k(matrix, vectors[QUERIES[0]], LIMIT)]

    # Side by side: each query runs on every contender before the next query.
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for q in QUERIES:
            for name, (_, fn) in contenders.items():
                times[name].append(timed_ms(partial(fn, q)))
    cold: dict[str, list[float]] = {name: [] for name, *_ in stores}
    for _ in range(max(1, repeats // 4)):
        for q in QUERIES:
            for name, store, memories, _, _ in stores:
                # a raw update (unknown scope): every vector is read again from SPARQL
                # (a save through Memories keeps the matrix up to date instead)
                store.sparql_update("INSERT DATA { <urn:bench:s> <urn:bench:p> <urn:bench:o> }")
                cold[name].append(timed_ms(partial(memories.search, q, LIMIT)))
    floor = statistics.median(times[FLOOR])
    rows: list[dict[str, object]] = []
    for name, (size, _) in contenders.items():
        rows.append({"what": name, "n": size, "ms": statistics.median(times[name])})
    for name, store, _, size, save_ms in stores:
        for row in rows:
            if row["what"] == f"{name}, search warm":
                row["save_ms"] = save_ms
        rows.append(
            {"what": f"{name}, search cold", "n": size, "ms": statistics.median(cold[name])}
        )
        store.close()
    for row in rows:
        row["ratio"] = float(row["ms"]) / floor if row["n"] == n else None  # type: ignore[arg-type]
    return rows


def table(rows: list[dict[str, object]], n: int, repeats: int) -> str:
    lines = [
        "# Memory search benchmark",
        "",
        f"`python benchmarks/bench_memories.py{'' if n == 10_000 else ' --quick'}`: {n:,} "
        f"memories (global and project scopes), {len(QUERIES)} queries, top {LIMIT}, median "
        f"of {repeats} passes; default `HashingEmbedder` (512 dimensions). Python "
        f"{platform.python_version()}, numpy {np.__version__}, {platform.machine()}, "
        f"{os.cpu_count()} cores (load average {os.getloadavg()[0]:.1f}); absolute numbers "
        "move between runs, the ratios are measured side by side in one run. BLAS runs on one "
        f"thread (OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}): with two, "
        "a loaded machine made the floor itself swing tenfold.",
        "",
        "Each query runs on every contender before the next one (side by side). "
        "Warm: the matrix kept in memory (saves and forgets change it row by row). Cold: the "
        "first search after a write that bypassed it (raw SPARQL), which reads every vector "
        "with one SPARQL query and decodes it. Each search then reads its hits (whole "
        "memories) with one more query.",
        "",
        "| what | memories | ms / search | x floor | ms / save |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        ratio = f"{row['ratio']:.2f}" if row.get("ratio") is not None else "—"
        save = f"{row['save_ms']:.2f}" if "save_ms" in row else ""
        lines.append(f"| {row['what']} | {row['n']:,} | {row['ms']:.2f} | {ratio} | {save} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 memories, fewer passes")
    args = parser.parse_args()
    n, repeats, rdflib_n = (1_000, 3, 300) if args.quick else (10_000, 12, 1_000)
    with tempfile.TemporaryDirectory() as tmp:
        rows = run(n, repeats, rdflib_n, Path(tmp))
    text = table(rows, n, repeats)
    print(text)
    write_results(Path(__file__).parent / "results" / "memories.md", text, quick=args.quick)


if __name__ == "__main__":
    main()
