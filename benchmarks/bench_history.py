"""History (issue 24): what keeping it costs a write, and what reading the past costs.

Side by side in one run, every call timed (none left out, the first included):

1. ``set`` on an on-disk store: raw pyoxigraph quad edit (the floor), the same request with
   the history quads added one group at a time (the activity, the version, the
   predecessor's end; then all of them, the head's move included: what each group costs
   Oxigraph), rdfmem without history, rdfmem with history (the target: <= 1.5x without),
   and a table of what each part costs; then ``Memories.save`` on an on-disk store
   without and with history (the same target), beside raw pyoxigraph sending the very
   requests of those saves without and with their versioning operations (the floor).
2. ``get(key, as_of=t)`` at ``--versions`` versions (100 per key) against a current
   ``get`` answered by SPARQL (the target: <= 2x) and the cached ``get``.
3. ``changes_since`` of a one-hour window at ``--big`` versions (the target: <= 10 ms).

The stores of 2 and 3 are filled with versions made by rdfmem's own ``Recorder`` (the
quads a write records), with synthetic times spread over past hours, written into the
on-disk store by pyoxigraph's bulk loader (then ``Store.optimize``, as pyoxigraph advises
after a bulk load) before rdfmem opens it, as a store an earlier process wrote: writing a
million versions one ``set`` at a time would take the run hours, and reads see the same
quads either way. Only the reads are timed.

Run: ``python benchmarks/bench_history.py`` (full: 100,000 and 1,000,000 versions; writes
``benchmarks/results/history.md``) or ``--quick`` (small sizes; the table goes to a temp
file). ``--big N`` sets the history size of the ``changes_since`` sections.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from history_share import python_share
from latency import Latencies, machine, ms, ratio, time_calls
from pyoxigraph import Literal, NamedNode, Quad, Store
from results_io import write_results

from rdfmem import RdfStore
from rdfmem.domain.memories import Memories, Memory
from rdfmem.store.history import (
    ASSOCIATED,
    ENDED,
    GENERATED_AT,
    GENERATED_BY,
    HOUR,
    INVALIDATED_AT,
    LATEST,
    REVISION_OF,
    SPECIALIZES,
    VALUE,
    HistoryClock,
    Recorder,
    history_graph,
)
from rdfmem.store.history_changelog import settle
from rdfmem.store.history_reads import changes
from rdfmem.store.indexes.versions import version_index

RDF_JSON = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#JSON")
PRED = NamedNode("urn:rdfmem:store:value")
GRAPH = NamedNode("urn:rdfmem:graph:store")
UTC = dt.timezone.utc
#: The history quads a versioned ``set`` cannot do without, for the reads issue 24 names:
#: the activity's time and agent; the version's resource, time, predecessor and value; the
#: predecessor's end (``rm:hour``, ``prov:wasGeneratedBy`` and the head are for speed).
LEAST = frozenset(
    {ENDED, ASSOCIATED, SPECIALIZES, GENERATED_AT, REVISION_OF, VALUE, INVALIDATED_AT}
)
#: The history quads of a versioned ``set``, in groups, added one group at a time to raw
#: pyoxigraph's request (the rows "+ ..."), so each group's cost is the step it adds.
GROUPS: list[tuple[str, frozenset[NamedNode]]] = [
    ("the activity (time, agent, hour: 3 quads)", frozenset({ENDED, ASSOCIATED, HOUR})),
    (
        "the version (resource, time, activity, predecessor, value: 5 quads)",
        frozenset({SPECIALIZES, GENERATED_AT, GENERATED_BY, REVISION_OF, VALUE}),
    ),
    ("the predecessor's end (1 quad)", frozenset({INVALIDATED_AT})),
    ("the head moved (1 quad removed, 1 added)", frozenset({LATEST})),
]
GET_SPARQL = "SELECT ?o WHERE { GRAPH <urn:rdfmem:graph:store> { ?s <urn:rdfmem:store:value> ?o } }"


class _SyntheticClock(HistoryClock):
    """Hands out the times it is told to (bulk-filling a history with past writes)."""

    def __init__(self) -> None:
        super().__init__()
        self.next = dt.datetime(2026, 1, 1, tzinfo=UTC)

    def now(self, after: dt.datetime | None = None) -> dt.datetime:
        return self.next


def row(name: str, lat: Latencies, floor: float) -> str:
    return (
        f"| {name} | {lat.n:,} | {ms(lat.p50)} | {ms(lat.p99)} | {ms(lat.slowest)} "
        f"| {ratio(lat.p50 / floor)} |"
    )


def bench_writes(n: int, keys: int, folder: Path) -> list[str]:
    raw = Store(str(folder / "raw"))
    subjects = [NamedNode(f"urn:rdfmem:store:k{i}") for i in range(keys)]

    def raw_set(i: int) -> None:
        s = subjects[i % keys]
        old = list(raw.quads_for_pattern(s, PRED, None, GRAPH))
        new = Quad(s, PRED, Literal(json.dumps({"n": i}), datatype=RDF_JSON), GRAPH)
        if old:
            raw.update(
                f"DELETE DATA {{ GRAPH {GRAPH} {{ {s} {PRED} {old[0].object} }} }} ; "
                f"INSERT DATA {{ GRAPH {GRAPH} {{ {s} {PRED} {new.object} }} }}"
            )
        else:
            raw.add(new)

    # The same writes with their history, as the SPARQL Update text rdfmem sends, made
    # before the clock starts: what Oxigraph alone spends on this layout.
    versioned = Store(str(folder / "raw-versioned"))
    texts = versioned_texts(n, subjects)

    def raw_versioned_set(i: int) -> None:
        versioned.update(texts[i])

    # Only the 7 quads a version needs for what issue 24 names: the activity's time and
    # agent, the version's resource, time, predecessor and value, the predecessor's end.
    least = Store(str(folder / "raw-least"))
    least_texts = versioned_texts(n, subjects, only=LEAST)

    def raw_least_set(i: int) -> None:
        least.update(least_texts[i])

    # The ladder: the entry's edit and the history's groups added one at a time (the last
    # step is the row above with all of them).
    ladder: dict[str, Callable[[int], object]] = {}
    taken: frozenset[NamedNode] = frozenset()
    for step, (name, group) in enumerate(GROUPS[:-1]):
        taken |= group
        stepped = Store(str(folder / f"raw-step-{step}"))
        ladder[f"raw pyoxigraph, entry + {'... + ' if step else ''}{name}"] = _runner(
            stepped, versioned_texts(n, subjects, only=taken)
        )

    plain = RdfStore.open(folder / "plain")
    kept = RdfStore.open(folder / "history", history=True, agent="urn:agent:bench")
    results = alternate(
        {
            "raw pyoxigraph (floor)": raw_set,
            **ladder,
            "raw pyoxigraph, the same quads as history=True": raw_versioned_set,
            "raw pyoxigraph, the 7 quads the issue names": raw_least_set,
            "rdfmem, no history": lambda i: plain.set(f"k{i % keys}", {"n": i}),
            "rdfmem, history=True": lambda i: kept.set(f"k{i % keys}", {"n": i}),
        },
        n,
    )
    extra = kept.count(graph="urn:rdfmem:history:urn:rdfmem:graph:store") / n
    # rdfmem's own time in a call, measured in the call: its time less that of the
    # engine's ``Store.update`` it makes (the same writes again, in turns of 100).
    own: dict[str, list[float]] = {"no history": [], "history=True": []}
    for start in range(n, 2 * n, 100):
        for name, store in (("no history", plain), ("history=True", kept)):
            own[name] += python_share(
                store, lambda i, s=store: s.set(f"k{i % keys}", {"n": i}), 100, start
            )
    plain.close()
    kept.close()
    floor = results["rdfmem, no history"].p50
    mine = {name: Latencies.of(seconds).p50 for name, seconds in own.items()}
    lines = [
        f"### `set` on disk: {n:,} writes over {keys} keys",
        "",
        "| store | calls | p50 ms | p99 ms | slowest ms | p50 vs no history |",
        "|---|---:|---:|---:|---:|---:|",
        *(row(name, lat, floor) for name, lat in results.items()),
        "",
        f"History quads kept per write: {extra:.1f} (activity 3; version 4, and 5 with "
        "`prov:wasRevisionOf`; the previous version's end 1; the head: 1, moved).",
        "",
        *costs(results, floor),
        "rdfmem's own time in a `set`, measured in the call (the call less the engine's "
        f"`Store.update` in it; p50 of {n:,} more calls each): "
        f"{mine['no history'] * 1e6:.0f} µs without history, "
        f"{mine['history=True'] * 1e6:.0f} µs with it: "
        f"{(mine['history=True'] - mine['no history']) * 1e6:.0f} µs for history "
        f"({(mine['history=True'] - mine['no history']) / floor:.2f} of a no-history `set`).",
        "",
    ]
    return lines


def costs(results: dict[str, Latencies], floor: float) -> list[str]:
    """What each part of a versioned ``set`` costs, from the rows of one run: each group
    of history quads (the step it adds to raw pyoxigraph's request, p50), and rdfmem's
    own work (rdfmem's p50 less raw pyoxigraph's, with and without history)."""
    names = list(results)
    raw = [n for n in names if n.startswith("raw pyoxigraph, entry")]
    steps = ["raw pyoxigraph (floor)", *raw, "raw pyoxigraph, the same quads as history=True"]
    out = [
        "What each part costs (p50 differences between the rows above; µs, and as a share "
        "of the p50 of a `set` without history):",
        "",
        "| part | µs | share of a no-history `set` |",
        "|---|---:|---:|",
    ]
    for (name, _), before, after in zip(GROUPS, steps[:-1], steps[1:], strict=True):
        step = results[after].p50 - results[before].p50
        out.append(f"| {name} | {step * 1e6:.0f} | {step / floor:.2f} |")
    engine = results[steps[-1]].p50 - results[steps[0]].p50
    ours = (results["rdfmem, history=True"].p50 - results[steps[-1]].p50) - (
        results["rdfmem, no history"].p50 - results[steps[0]].p50
    )
    out += [
        f"| all history quads, in Oxigraph | {engine * 1e6:.0f} | {engine / floor:.2f} |",
        f"| rdfmem's own work for history (Python) | {ours * 1e6:.0f} | {ours / floor:.2f} |",
        "",
    ]
    return out


def _runner(store: Store, texts: list[str]) -> Callable[[int], object]:
    return lambda i: store.update(texts[i])


def alternate(calls: dict[str, Callable[[int], object]], n: int) -> dict[str, Latencies]:
    """Each of ``calls`` ``n`` times, in turns of 100 calls, so that all of them see the
    same load on the machine; every call timed."""
    out = {name: Latencies(()) for name in calls}
    for start in range(0, n, 100):
        for name, call in calls.items():
            out[name] = out[name] + time_calls(call, min(100, n - start), start)
    return out


def bench_saves(n: int, titles: int, folder: Path) -> list[str]:
    """``Memories.save`` on disk (one of ``titles`` titles: most saves replace a memory),
    without and with history, alternating blocks of 100 so both see the same load."""
    plain = Memories(RdfStore.open(folder / "memories-plain"))
    kept = Memories(
        RdfStore.open(folder / "memories-history", history=True, agent="urn:agent:bench")
    )

    def save(memories: Memories) -> Callable[[int], object]:
        return lambda i: memories.save(
            Memory("global", f"Note {i % titles}", f"note {i} on search latency")
        )

    # The floor: the very requests of these saves (made before the clock starts, by a
    # store in memory), sent by raw pyoxigraph to on-disk stores, without and with the
    # operations that version them.
    plain_texts, versioned = save_requests(n, titles)
    raw_plain, raw_kept = Store(str(folder / "saves-raw")), Store(str(folder / "saves-raw-h"))
    results = alternate(
        {
            "raw pyoxigraph, the save's request (floor)": _runner(raw_plain, plain_texts),
            "raw pyoxigraph, the save's request with history": _runner(raw_kept, versioned),
            "`Memories.save`, no history": save(plain),
            "`Memories.save`, history=True": save(kept),
        },
        n,
    )
    plain.store.close()
    kept.store.close()
    floor = results["`Memories.save`, no history"].p50
    return [
        f"### `Memories.save` on disk: {n:,} saves over {titles} titles",
        "",
        "| store | calls | p50 ms | p99 ms | slowest ms | p50 vs no history |",
        "|---|---:|---:|---:|---:|---:|",
        *(row(name, lat, floor) for name, lat in results.items()),
        "",
    ]


def save_requests(n: int, titles: int) -> tuple[list[str], list[str]]:
    """The SPARQL update of each of ``n`` saves (as ``bench_saves`` makes them) by a
    store in memory keeping history: without its versioning operations, and whole."""
    store = RdfStore(history=True, agent="urn:agent:bench")
    memories = Memories(store)
    sent: list[str] = []
    update = store.sparql_update

    def keep(sparql: str, **options: Any) -> None:
        sent.append(sparql)
        update(sparql, **options)

    vars(store)["sparql_update"] = keep  # this store's requests, kept as they are sent
    for i in range(n):
        memories.save(Memory("global", f"Note {i % titles}", f"note {i} on search latency"))
    # The save's own operations come first: a delete and one INSERT DATA of the memory.
    plain = [" ;\n".join(text.split(" ;\n")[:2]) for text in sent]
    return plain, sent


def versioned_texts(
    n: int, subjects: list[NamedNode], only: frozenset[NamedNode] | None = None
) -> list[str]:
    """The update of each of ``n`` versioned ``set``s of ``subjects`` in turn (the entry
    replaced, the history quads ``Recorder.record`` makes, or those of them whose predicate
    is in ``only``), as one request each."""
    recorder = Recorder("urn:agent:bench")
    heads: dict[NamedNode, NamedNode] = {}
    current: dict[NamedNode, Quad] = {}
    texts = []
    for i in range(n):
        s = subjects[i % len(subjects)]
        entry = Quad(s, PRED, Literal(json.dumps({"n": i}), datatype=RDF_JSON), GRAPH)
        head = heads.get(s)
        gone, added = recorder.record(
            GRAPH, [(s, [entry])], {s: head} if head else {}, rename={PRED: VALUE}
        )
        made = next(q.object for q in added if q.predicate == LATEST)
        assert isinstance(made, NamedNode)
        heads[s] = made
        old = current.get(s)
        current[s] = entry
        if only is not None:
            gone = [q for q in gone if q.predicate in only]
            added = [q for q in added if q.predicate in only]
        remove = ([old] if old else []) + gone
        texts.append(
            (f"DELETE DATA {{ {_block(remove)} }} ; " if remove else "")
            + f"INSERT DATA {{ {_block([entry, *added])} }}"
        )
    return texts


def _block(quads: list[Quad]) -> str:
    return " ".join(
        f"GRAPH {q.graph_name} {{ {q.subject} {q.predicate} {q.object} }}" for q in quads
    )


def fill(path: Path, versions: int, keys: int, per_hour: int) -> dt.datetime:
    """An on-disk store at ``path`` holding ``versions`` versions over ``keys`` keys,
    ``per_hour`` per hour from 2026-01-01 (the quads ``Recorder.record`` makes for each
    ``set``, each key's head, and the current entries), loaded with pyoxigraph's bulk
    loader (then ``Store.optimize``) before rdfmem opens it, as a store written by an
    earlier process; returns the time of the last version. Only the reads are timed."""
    clock = _SyntheticClock()
    last: list[dt.datetime] = []

    def quads() -> Iterator[Quad]:
        recorder = Recorder("urn:agent:bench", clock=clock)
        heads: dict[NamedNode, NamedNode] = {}
        current: dict[NamedNode, Quad] = {}
        step = dt.timedelta(seconds=3600 / per_hour)
        begin = dt.datetime(2026, 1, 1, tzinfo=UTC)
        for i in range(versions):
            s = NamedNode(f"urn:rdfmem:store:k{i % keys}")
            clock.next = begin + step * i
            entry = Quad(s, PRED, Literal(json.dumps({"n": i}), datatype=RDF_JSON), GRAPH)
            head = heads.get(s)
            _, added = recorder.record(
                GRAPH, [(s, [entry])], {s: head} if head else {}, rename={PRED: VALUE}
            )
            for q in added:
                if q.predicate == LATEST:
                    assert isinstance(q.object, NamedNode)
                    heads[s] = q.object
                else:
                    yield q
            current[s] = entry
        history = NamedNode("urn:rdfmem:history:" + GRAPH.value)
        yield from (Quad(s, LATEST, v, history) for s, v in heads.items())
        yield from current.values()
        last.append(clock.next)

    raw = Store(str(path))
    raw.bulk_extend(quads())
    # As pyoxigraph advises after a bulk load: without it the bulk loader's files make
    # every lookup of a cold read probe many of them (a store written one transaction at
    # a time is compacted by RocksDB as it goes).
    raw.optimize()
    del raw
    gc.collect()  # pyoxigraph lets the directory go when the Store object goes
    return last[0]


def bench_as_of(versions: int, calls: int, folder: Path) -> list[str]:
    keys = max(1, versions // 100)
    last = fill(folder / "as_of", versions, keys, per_hour=1000)
    store = RdfStore.open(folder / "as_of", history=True)
    first = dt.datetime(2026, 1, 1, tzinfo=UTC)
    rng = random.Random(7)
    moments = [first + (last - first) * rng.random() for _ in range(calls)]
    later = [first + (last - first) * rng.random() for _ in range(calls)]
    names = [f"k{rng.randrange(keys)}" for _ in range(calls)]
    nodes = [NamedNode(f"urn:rdfmem:store:{k}") for k in names]
    results = {
        "current get from SPARQL (floor)": time_calls(
            lambda i: store.query(GET_SPARQL.replace("?s", str(nodes[i]))), calls
        ),
        "current get (cached)": time_calls(lambda i: store.get(names[i]), calls),
        # The fill wrote around the store, so its version index starts empty: the first
        # read of a key reads that key's versions. The second pass (the same keys, other
        # moments) is what a store that made its versions, or read them once, answers.
        "get(key, as_of=t), first read of each key": time_calls(
            lambda i: store.get(names[i], as_of=moments[i]), calls
        ),
        "get(key, as_of=t), index kept": time_calls(
            lambda i: store.get(names[i], as_of=later[i]), calls
        ),
        "keys(as_of=t), whole store": time_calls(
            lambda i: store.keys(as_of=moments[i]), max(3, calls // 100)
        ),
    }
    floor = results["current get from SPARQL (floor)"].p50
    store.close()
    # Closed and opened again: the version index that those reads completed was saved
    # beside the store at close and is taken back at open (``rdfmem.indexes``), as it is
    # for a store that made its versions through rdfmem.
    store = RdfStore.open(folder / "as_of", history=True)
    again = [first + (last - first) * rng.random() for _ in range(calls)]
    results["get(key, as_of=t), first reads after closing and opening again"] = time_calls(
        lambda i: store.get(names[i], as_of=again[i]), calls
    )
    store.close()
    return [
        f"### reads at {versions:,} versions ({keys:,} keys, 100 versions each)",
        "",
        "| read | calls | p50 ms | p99 ms | slowest ms | p50 vs SPARQL get |",
        "|---|---:|---:|---:|---:|---:|",
        *(row(name, lat, floor) for name, lat in results.items()),
        "",
    ]


def bench_changes(versions: int, calls: int, folder: Path, per_hour: int) -> list[str]:
    started = time.perf_counter()
    path = folder / f"changes-{per_hour}"
    last = fill(path, versions, max(1, versions // 100), per_hour)
    built = time.perf_counter() - started
    rng = random.Random(11)
    starts = [
        last - dt.timedelta(hours=1 + rng.random() * (versions / per_hour - 2))
        for _ in range(calls + 2)
    ]
    hour = dt.timedelta(hours=1)
    # What a user pays: the open, then the first call, which starts reading the change log
    # whole on a thread of its own (the store was written around rdfmem: no log saved),
    # the calls made while it is read (the buckets answer them), then every call after it.
    t0 = time.perf_counter()
    store = RdfStore.open(path, history=True)
    opened = time.perf_counter() - t0
    first = time_calls(lambda i: store.changes_since(starts[i], starts[i] + hour), 1)
    during: list[float] = []
    while not settle(store.indexes, timeout=0):
        t1 = time.perf_counter()
        store.changes_since(starts[len(during) % calls], starts[len(during) % calls] + hour)
        during.append(time.perf_counter() - t1)
    in_place = time.perf_counter() - t0 - opened
    while_read = Latencies.of(during or [0.0])
    keys = (store._kv_graph.value, store._codec.key_of)
    found: list[int] = []

    def window(i: int) -> None:
        at = starts[i % calls]
        found.append(len(store.changes_since(at, at + hour)))

    def buckets(i: int) -> None:
        changes(store.backend, starts[i], starts[i] + hour, None, keys, None)

    results = alternate(
        {
            "changes_since(t, t + 1 h), change log": window,
            "same, SPARQL buckets (servers, rdflib, a log not known whole)": buckets,
        },
        calls,
    )
    # The same reads back to back, ten times as many: what one process calling
    # ``changes_since`` in a loop sees, the interpreter's own collections included (each
    # call makes a ``Change`` a version; now and then that starts a full collection).
    pauses: list[float] = []
    began = [0.0]

    def collected(phase: str, info: dict[str, int]) -> None:
        if info["generation"] == 2:
            if phase == "start":
                began[0] = time.perf_counter()
            else:
                pauses.append(time.perf_counter() - began[0])

    gc.callbacks.append(collected)
    try:
        looped = time_calls(window, 10 * calls)
    finally:
        gc.callbacks.remove(collected)
    log = version_index(store.indexes, history_graph(GRAPH).value).log
    assert log is not None and len(log) == versions, "the change log was not used"
    names = sum(sys.getsizeof(n) + 8 for n in log.names)
    per_version = (log.nbytes(), (log.nbytes() + names) / versions)
    store.close()
    saved = sum(f.stat().st_size for f in path.glob("rdfmem.index*"))
    # Closed and opened again: the log was saved beside the store at close.
    t0 = time.perf_counter()
    store = RdfStore.open(path, history=True)
    reopened = time.perf_counter() - t0
    again = time_calls(lambda i: store.changes_since(starts[i], starts[i] + hour), 2, calls)
    store.close()
    floor = results["same, SPARQL buckets (servers, rdflib, a log not known whole)"].p50
    mean = sum(found) / max(len(found), 1)
    return [
        f"### `changes_since` of a one-hour window at {versions:,} versions ({per_hour:,} an hour)",
        "",
        "| read | calls | p50 ms | p99 ms | slowest ms | p50 vs SPARQL buckets |",
        "|---|---:|---:|---:|---:|---:|",
        row("first call after opening (starts reading the log on its thread)", first, floor),
        row("calls while the log is read (the buckets answer)", while_read, floor),
        *(row(name, lat, floor) for name, lat in results.items()),
        row("same, change log, back to back", looped, floor),
        row("first calls after closing and opening again (log saved)", again, floor),
        "",
        f"Back to back, {len(pauses)} full collections of the interpreter's objects "
        f"(generation 2) fell inside the {looped.n:,} calls"
        + (
            f", {max(pauses) * 1e3:,.1f} ms the longest: the slowest calls are those."
            if pauses
            else "."
        ),
        "",
        f"The log was in place {in_place:,.1f} s after the first call, read whole while "
        f"{len(during):,} calls were answered (calls made back to back: the reading thread "
        "shares the interpreter with them). "
        f"Opening the store: {opened * 1e3:,.0f} ms; again after closing (the log saved): "
        f"{reopened * 1e3:,.0f} ms. Versions found a window: {mean:,.0f} "
        f"({results['changes_since(t, t + 1 h), change log'].p50 * 1e6 / max(mean, 1):,.1f} "
        "µs a version from the log). The log's columns: "
        f"{per_version[0] / versions:,.1f} bytes a version ({per_version[1]:,.1f} with its "
        f"table of resources and agents); the index file at close: {saved / versions:,.0f} "
        "bytes a version (with any version chains read before closing).",
        "",
        f"The store was bulk-loaded and optimized in {built:,.0f} s (not timed: `fill`).",
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, table to a temp file")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--only", choices=("writes", "reads", "changes"), default=None, help="one section"
    )
    parser.add_argument("--big", type=int, default=None, help="versions for changes_since")
    args = parser.parse_args()
    quick = args.quick
    writes, versions, big, calls = (
        (500, 5_000, 20_000, 50) if quick else (5_000, 100_000, 1_000_000, 500)
    )
    big = args.big or big
    with tempfile.TemporaryDirectory(prefix="rdfmem-bench-history-") as tmp:
        folder = Path(tmp)
        sections: list[tuple[str, Callable[[], list[str]]]] = [
            ("writes", lambda: bench_writes(writes, 100, folder)),
            ("writes", lambda: bench_saves(writes // 5, 50, folder)),
            ("reads", lambda: bench_as_of(versions, calls, folder)),
            ("changes", lambda: bench_changes(big, max(5, calls // 10), folder, per_hour=100)),
            ("changes", lambda: bench_changes(big, max(5, calls // 10), folder, per_hour=1000)),
        ]
        parts = [part for name, part in sections if args.only in (None, name)]
        lines = [
            "# History: write cost and reads of the past",
            "",
            f"{machine()}; {'--quick' if quick else 'full'} run, "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; `changes_since` at "
            f"{big:,} versions{' (`--big`; the issue asks 1,000,000)' if big != 1_000_000 else ''}.",
            "Every call timed, the first included. Targets (issue 24): `set` and "
            "`Memories.save` with history <= 1.5x without; `get(as_of)` <= 2x a SPARQL get; "
            "one-hour `changes_since` <= 10 ms at 1,000,000 versions.",
            "",
        ]
        for part in parts:
            section = part()
            print("\n".join(section), flush=True)
            lines.extend(section)
    target = args.out or Path(__file__).parent / "results" / "history.md"
    write_results(target, "\n".join(lines), quick=quick and args.out is None)


if __name__ == "__main__":
    main()
