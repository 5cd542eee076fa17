"""One fresh process of ``bench_cold_start.py``: open a store, answer, print what it took.

``python benchmarks/cold_child.py KIND STORE FIRST_ID [QUERY_FILE]`` prints one JSON line.
Only the standard library is imported before the clock starts, so the import of rdfmem (or
of pyoxigraph, for the floor) is measured whole. ``KIND``:

* ``steps``: import, ``RdfStore.open``, the first ``search``, the first ``active_goals``, the
  first ``recent_decisions``, then a full turn and ``WARM`` more turns;
* ``turn``: import, ``RdfStore.open``, a full turn straight away, then ``WARM`` more turns
  (the first turn after opening against a warm turn in the same process);
* ``floor``: ``import pyoxigraph``, ``Store(path)`` on the same folder, one SPARQL query (the
  text of rdfmem's ``active_goals``, read from ``QUERY_FILE``) with its rows read.

Times are ``time.time()`` stamps (the parent compares them with its own spawn stamp) and
``perf_counter`` durations in seconds.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

WARM = 20


def resident() -> int:
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def resident_parts() -> dict[str, int]:
    """Resident bytes by kind (``/proc/self/status``): anonymous (the heap: Python objects,
    arrays copied or written) and file-backed (mapped files read: the index file's pages,
    which the OS can drop and read again, and the libraries)."""
    parts = {"RssAnon": 0, "RssFile": 0}
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                name, _, value = line.partition(":")
                if name in parts:
                    parts[name] = int(value.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return {"rss_anon_bytes": parts["RssAnon"], "rss_file_bytes": parts["RssFile"]}


def floor(store_path: str, query_file: str) -> dict[str, float]:
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    import pyoxigraph

    out["import_s"] = time.perf_counter() - t0
    query = Path(query_file).read_text(encoding="utf-8")
    t0 = time.perf_counter()
    store = pyoxigraph.Store(store_path)
    out["open_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    rows = list(store.query(query))  # type: ignore[arg-type]
    out["query_s"] = time.perf_counter() - t0
    out["answered_at"] = time.time()
    out["rows"] = len(rows)
    return out


def rdfmem(kind: str, store_path: str, first_id: int) -> dict[str, object]:
    out: dict[str, object] = {}
    t0 = time.perf_counter()
    from rdfmem import DecisionGraph, Memories, RdfStore

    out["import_s"] = time.perf_counter() - t0
    import random  # the benchmark's own workload, after rdfmem: not counted

    from workload import rdfmem_turn, text

    t0 = time.perf_counter()
    store = RdfStore.open(store_path)
    out["open_s"] = time.perf_counter() - t0
    rng = random.Random(first_id)
    if kind == "steps":
        t0 = time.perf_counter()
        Memories(store, project="bench").search(text(rng, 4), limit=5)
        out["search_s"] = time.perf_counter() - t0
        out["answered_at"] = time.time()
        graph = DecisionGraph(store)
        for name, params in (("active_goals", {}), ("recent_decisions", {"limit": 5})):
            t0 = time.perf_counter()
            graph.query(name, **params)
            out[f"{name}_s"] = time.perf_counter() - t0
    turn = rdfmem_turn(store, rng)
    seconds = []
    for i in range(first_id, first_id + WARM + 1):
        t0 = time.perf_counter()
        turn(i)
        seconds.append(time.perf_counter() - t0)
        if i == first_id and kind == "turn":
            out["answered_at"] = time.time()
    out["first_turn_s"] = seconds[0]
    out["warm_turns_s"] = seconds[1:]
    out["rss_bytes"] = resident()
    out.update(resident_parts())
    store.close()
    return out


def main() -> None:
    kind, store_path, first_id = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if kind == "floor":
        result: dict[str, object] = dict(floor(store_path, sys.argv[4]))
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        result = rdfmem(kind, store_path, first_id)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
