"""LangGraph store operations per second: rdfmem's ``RdfBaseStore`` side by side with
LangGraph's own ``InMemoryStore`` and ``SqliteStore`` (langgraph-checkpoint-sqlite, with
sqlite-vec for semantic search), at 1,000 and 20,000 items.

Every store gets the same items (spread over 10 user namespaces) and the same index: one
vector per item from the ``text`` field, made by one deterministic embedding function (a
seeded random unit vector per text, cached, so embedding costs the same everywhere and
almost nothing). Measured one contender after another in one process:

* put: items written one ``put`` at a time (filling the store), per second;
* get: ``get`` of random existing keys, per second;
* search (semantic): ``search(("users",), query=..., limit=10)`` over every item, per second;
* search (filter): ``search(("users", "u3"), filter={"topic": ...}, limit=10)``, per second;
* turn: one ``put`` then one semantic search in that user's namespace (an agent's turn), per
  second.

Run: ``python benchmarks/bench_langgraph.py [--quick]``; writes
``benchmarks/results/langgraph.md``. SqliteStore's semantic search needs sqlite-vec loaded into
an sqlite3 that can load extensions: ``pip install pysqlite3-binary`` where Python's cannot.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # see bench_memories.py

import contextlib
import platform
import random
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from rdfmem import RdfStore
from rdfmem.langgraph import RdfBaseStore

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from results_io import write_results
from servers import OxigraphServer

try:  # sqlite-vec needs an sqlite3 that loads extensions; pyenv's often cannot
    import pysqlite3.dbapi2 as sqlite3  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover
    import sqlite3

RESULTS = Path(__file__).parent / "results" / "langgraph.md"
DIMS = 256
USERS = 10
TOPICS = ["deploy", "billing", "oauth", "cache", "docker", "schema", "budget", "audit"]
WORDS = [
    "tea",
    "coffee",
    "cat",
    "dog",
    "python",
    "rust",
    "release",
    "invoice",
    "token",
    "latency",
    "meeting",
    "roadmap",
]
_VECTORS: dict[str, list[float]] = {}


def embed(texts: Sequence[str]) -> list[list[float]]:
    """A seeded random unit vector per text, cached: cheap and the same for every store."""
    out = []
    for text in texts:
        vector = _VECTORS.get(text)
        if vector is None:
            rng = np.random.default_rng(zlib.crc32(text.encode("utf-8")))
            v = rng.standard_normal(DIMS)
            vector = _VECTORS[text] = (v / np.linalg.norm(v)).tolist()
        out.append(vector)
    return out


def items(n: int) -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    rng = random.Random(11)
    return [
        (
            ("users", f"u{i % USERS}", "memories"),
            f"m{i}",
            {
                "text": " ".join(rng.sample(WORDS, 4)) + f" note {i}",
                "topic": rng.choice(TOPICS),
                "n": i,
            },
        )
        for i in range(n)
    ]


@contextlib.contextmanager
def contender(name: str, folder: Path) -> Iterator[BaseStore]:
    index: Any = {"dims": DIMS, "embed": embed, "fields": ["text"]}
    if name == "InMemoryStore":
        yield InMemoryStore(index=index)
    elif name == "SqliteStore (file)":
        conn = sqlite3.connect(
            str(folder / "store.sqlite"), check_same_thread=False, isolation_level=None
        )
        store = SqliteStore(conn, index={**index, "text_fields": ["text"]})
        store.setup()
        yield store
        conn.close()
    elif name == "RdfBaseStore, Oxigraph in memory":
        yield RdfBaseStore(RdfStore(), index=index)
    elif name == "RdfBaseStore, Oxigraph on disk":
        with RdfStore.open(folder / "oxigraph") as rdf:
            yield RdfBaseStore(rdf, index=index)
    elif name == REMOTE:
        server = OxigraphServer(folder)
        server.start()
        try:
            with server.connect() as rdf:
                yield RdfBaseStore(rdf, index=index)
        finally:
            server.stop()
    else:  # pragma: no cover
        raise ValueError(name)


REMOTE = "RdfBaseStore, Oxigraph server"
CONTENDERS = [
    "InMemoryStore",
    "SqliteStore (file)",
    "RdfBaseStore, Oxigraph in memory",
    "RdfBaseStore, Oxigraph on disk",
    REMOTE,
]
#: A remote store reads every item under the prefix at each search: measured at 1,000 only.
REMOTE_UP_TO = 1000


def rate(count: int, fn: Callable[[], None]) -> float:
    start = time.perf_counter()
    fn()
    return count / (time.perf_counter() - start)


def measure(name: str, n: int, searches: int) -> dict[str, float]:
    data = items(n)
    embed([value["text"] for _, _, value in data])  # fill the cache outside the timings
    rng = random.Random(5)
    gets = [rng.choice(data)[:2] for _ in range(min(2000, 2 * n))]
    queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(searches)]
    embed(queries)
    turns = items(n + searches)[n:]
    embed([value["text"] for _, _, value in turns])
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, contender(name, Path(tmp)) as store:

        def fill() -> None:
            for ns, key, value in data:
                store.put(ns, key, value)

        def get() -> None:
            for ns, key in gets:
                assert store.get(ns, key) is not None

        def semantic() -> None:
            for q in queries:
                assert len(store.search(("users",), query=q, limit=10)) == 10

        def filtered() -> None:
            for i in range(searches):
                topic = TOPICS[i % len(TOPICS)]
                store.search(("users", "u3"), filter={"topic": topic}, limit=10)

        def turn() -> None:
            for (ns, key, value), q in zip(turns, queries, strict=True):
                store.put(ns, key, value)
                assert store.search(ns, query=q, limit=5)

        out["put"] = rate(n, fill)
        out["get"] = rate(len(gets), get)
        out["search (semantic)"] = rate(searches, semantic)
        out["search (filter)"] = rate(searches, filtered)
        out["turn: put + search"] = rate(searches, turn)
    return out


OPS = ["put", "get", "search (semantic)", "search (filter)", "turn: put + search"]


def _cell(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--out", type=Path, help=f"default {RESULTS} (full runs only)")
    args = parser.parse_args()
    sizes = [200, 1000] if args.quick else [1000, 20000]
    searches = 10 if args.quick else 40
    table: dict[tuple[str, int], dict[str, float]] = {}
    for name in CONTENDERS:  # warm up: imports, first-call caches, the server's start
        measure(name, 100, 5)
    for n in sizes:
        for name in CONTENDERS:
            if name == REMOTE and n > REMOTE_UP_TO:
                continue
            table[(name, n)] = measure(name, n, searches)
            print(n, name, {k: round(v, 1) for k, v in table[(name, n)].items()}, flush=True)
    load = os.getloadavg()[0]
    lines = [
        "# LangGraph store benchmark",
        "",
        "`python benchmarks/bench_langgraph.py`"
        + (" --quick" if args.quick else "")
        + f": operations per second (higher is better), {DIMS}-dimension vectors, items in "
        f"{USERS} user namespaces; semantic search over every item, top 10. Python "
        f"{platform.python_version()}, {platform.machine()}, a 2-core machine shared with "
        "other engineers' work at the time, so absolute numbers are noisy; each row ran in "
        "the same process, one contender after the other. Ratios are rdfmem / LangGraph. "
        "The Oxigraph server runs on the same machine (loopback); a remote store reads "
        "afresh at every call (other clients write), so it is measured at 1,000 items only. "
        f"Load average at the end of the run: {load:.1f} on 2 cores.",
        "",
    ]
    for n in sizes:
        lines += [f"## {n:,} items", "", "| operation | " + " | ".join(CONTENDERS) + " |"]
        lines.append("|---|" + "---:|" * len(CONTENDERS))
        for op in OPS:
            cells = [_cell(table.get((c, n), {}).get(op)) for c in CONTENDERS]
            lines.append(f"| {op} / s | " + " | ".join(cells) + " |")
        lines += [
            "",
            "| operation | ratio | vs InMemoryStore | vs SqliteStore |",
            "|---|---|---:|---:|",
        ]
        for op in OPS:
            for rdf in CONTENDERS[2:]:
                if (rdf, n) not in table:
                    continue
                mine = table[(rdf, n)][op]
                lines.append(
                    f"| {op} | {rdf.split(', ')[1]} | "
                    f"{mine / table[('InMemoryStore', n)][op]:.2f}x | "
                    f"{mine / table[('SqliteStore (file)', n)][op]:.2f}x |"
                )
        lines.append("")
    write_results(args.out or RESULTS, "\n".join(lines), quick=args.quick and args.out is None)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
