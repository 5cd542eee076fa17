"""``changes_since`` of an embedded store answers from its change log (a bisect and a
slice, issue 24: <= 10 ms an hour at 1,000 changes an hour) and never other than the
SPARQL buckets do: after key/value writes, attributed writes, memories, compactions,
retention, raw updates, writes around a closed store, and when the log is saved and
taken back at open."""

from __future__ import annotations

import datetime as dt
import gc
import random
import threading
from pathlib import Path

from pyoxigraph import Literal, NamedNode, Quad, RdfFormat, Store

from rdfmem import RdfStore
from rdfmem.domain.decisions import DecisionGraph, Edge, Node
from rdfmem.domain.memories import Memories, Memory
from rdfmem.store.history import history_graph
from rdfmem.store.history_changelog import build, install, log_for, settle
from rdfmem.store.history_reads import Change, changes
from rdfmem.store.indexes.versions import fresh_index, version_index

UTC = dt.timezone.utc
KV = "urn:rdfmem:graph:store"


def now() -> dt.datetime:
    return dt.datetime.now(UTC)


def from_buckets(
    store: RdfStore, since: dt.datetime, until: dt.datetime | None, graph: str | None
) -> list[Change]:
    """What the SPARQL buckets answer (the path servers and rdflib take)."""
    keys = (store._kv_graph.value, store._codec.key_of)
    g = None if graph is None else NamedNode(graph)
    return changes(store.backend, since, until, g, keys, None)


def log_of(store: RdfStore, graph: str = KV) -> object:
    assert store._hub is not None
    return version_index(store._hub, history_graph(graph).value).log


def assert_same(store: RdfStore, since: dt.datetime, graphs: list[str | None]) -> int:
    """Windows from ``since`` to now (and pieces of it, bounds on versions' own times),
    for each graph filter: the log's answers equal the buckets'. Returns the changes."""
    whole = from_buckets(store, since, None, None)
    assert store.changes_since(since) == whole
    moments = sorted({c.at for c in whole})
    rng = random.Random(3)
    for graph in graphs:
        windows = [(since, None), (since, since)]
        for _ in range(6):
            if moments:
                a, b = sorted(rng.sample(moments, 2) if len(moments) > 1 else moments * 2)
                windows += [(a, b), (a + dt.timedelta(microseconds=1), b)]
        for low, high in windows:
            expected = from_buckets(store, low, high, graph)
            assert store.changes_since(low, high, graph=graph) == expected, (low, high, graph)
    return len(whole)


def test_key_value_writes_answer_from_the_log_as_the_buckets_do() -> None:
    store = RdfStore(history=True, agent="urn:agent:x")
    since = now()
    for i in range(60):
        store.set(f"k{i % 9}", {"n": i})
    with store.attributed(by="urn:agent:planner", why="user asked"):
        store.delete("k3")
        store.update("k4", lambda v: [v, "again"])
    store.delete("never there")
    log = log_of(store)
    assert log is not None and len(log) == 62  # type: ignore[arg-type]
    found = store.changes_since(since)
    assert [(c.key, c.by, c.why, c.deleted) for c in found[-2:]] == [
        ("k3", "urn:agent:planner", "user asked", True),
        ("k4", "urn:agent:planner", "user asked", False),
    ]
    assert assert_same(store, since, [None, KV, "urn:nothing"]) == 62


def test_memories_raw_updates_and_compaction_keep_the_answers_right() -> None:
    store = RdfStore(history=True)
    since = now()
    memories = Memories(store, project="web")
    for i in range(5):
        store.set("a", i)
        memories.save(Memory("project", f"Note {i % 2}", f"text {i}", ["t"]))
    memories.forget("project", "Note 1")
    written = {c.graph for c in store.changes_since(since)}
    assert written == {KV, "urn:rdfmem:memories:project:web"}
    graphs: list[str | None] = [None, *sorted(written)]
    assert_same(store, since, graphs)
    # Two memory graphs written around their logs: both read by buckets in one query (or
    # their logs read again whole once those reads took as long as a build).
    other = Memories(store, project="api")
    for i in range(4):
        memories.save(Memory("project", "Note 0", f"again {i}"))
        other.save(Memory("project", f"Api {i % 2}", f"api {i}"))
    assert_same(store, since, [None, *graphs[1:], "urn:rdfmem:memories:project:api"])
    # A domain-style write of 12 resources in one activity (versions -0 ... -11 share a
    # time), sent as a raw update: the log goes, is read again whole, and orders them.
    subjects = [f"urn:x:{n}" for n in range(12)]
    ops = store.versioning_update("urn:g:raw", subjects)
    data = " ".join(f"<{s}> <urn:p> {n} ." for n, s in enumerate(subjects))
    store.sparql_update(f"INSERT DATA {{ GRAPH <urn:g:raw> {{ {data} }} }} ;\n{ops}")
    assert_same(store, since, [None, "urn:g:raw", KV])
    raw_log = log_of(store, "urn:g:raw")
    assert raw_log is not None and len(raw_log) == 12  # type: ignore[arg-type]
    store.sparql_update(
        "DELETE WHERE { GRAPH <urn:rdfmem:history:urn:rdfmem:graph:store> "
        "{ ?v <http://www.w3.org/ns/prov#wasAssociatedWith> ?by } }"
    )
    assert_same(store, since, [None, KV])
    store.set("a", "after")
    assert store.compact_history(keep=1) > 0
    assert_same(store, since, [None, KV])
    store.set("b", 1)
    assert_same(store, since, [None, KV])


def test_memories_and_decisions_keep_their_logs_through_their_own_writes() -> None:
    store = RdfStore(history=True, agent="urn:agent:notes")
    since = now()
    memories = Memories(store, project="web")
    graph = DecisionGraph(store)
    graph.add_nodes([Node(id=n, type="goal", label=n.upper()) for n in ("a", "b", "c")])
    for i in range(6):
        with store.attributed(by="urn:agent:editor", why=f"edit {i}"):
            memories.save(Memory("project", f"Note {i % 3}", f"text {i}", ["t"]))
        graph.add_edge(Edge(from_id="a", to_id="bc"[i % 2], type="leads_to"))
    memories.forget("project", "Note 2")
    graph.update_node("a", status="completed")
    graph.delete_node("b")
    written = sorted({c.graph for c in store.changes_since(since)})
    assert "urn:rdfmem:memories:project:web" in written and len(written) >= 2
    assert store._hub is not None
    for data in written:  # kept by the writes themselves: never read whole
        index = version_index(store._hub, history_graph(data).value)
        assert index.log is not None and index.built == 0.0, data
    deleted = [c for c in store.changes_since(since) if c.deleted]
    assert len(deleted) >= 2
    assert_same(store, since, [None, *written])


def test_retention_removes_versions_from_the_log_too() -> None:
    store = RdfStore(history=True, history_retention=2)
    since = now()
    for i in range(20):
        store.set(f"k{i % 3}", i)
    log = log_of(store)
    assert log is not None and len(log) == 20  # type: ignore[arg-type]
    assert assert_same(store, since, [None, KV]) == 6


def test_an_on_disk_store_saves_its_log_and_notices_writes_around_it(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = RdfStore.open(path, history=True)
    since = now()
    for i in range(30):
        with store.attributed(why=f"step {i}"):
            store.set(f"k{i % 4}", i)
    store.delete("k0")
    expected = store.changes_since(since)
    store.close()

    store = RdfStore.open(path, history=True)
    assert store._hub is not None
    index = version_index(store._hub, history_graph(KV).value)
    assert index.log is not None and len(index.log) == 31  # taken back, not read again
    assert store.changes_since(since) == expected
    assert index.built == 0.0
    store.set("k1", "more")
    assert_same(store, since, [None, KV])
    store.close()

    # Written around rdfmem while closed: the saved log is not trusted at the next open.
    raw = Store(str(path))
    h = NamedNode(history_graph(KV).value)
    version = NamedNode("urn:rdfmem:version:20990101T000000.000000Z-0badf00d-0-d1")
    activity = NamedNode("urn:rdfmem:activity:20990101T000000.000000Z-0badf00d")
    prov = "http://www.w3.org/ns/prov#"
    raw.extend(
        [
            Quad(version, NamedNode(prov + "specializationOf"), NamedNode("urn:x"), h),
            Quad(version, NamedNode(prov + "wasGeneratedBy"), activity, h),
            Quad(activity, NamedNode("https://w3id.org/rdfmem#hour"), Literal("2099-01-01T00"), h),
        ]
    )
    raw.flush()
    del raw
    gc.collect()
    store = RdfStore.open(path, history=True)
    found = store.changes_since(dt.datetime(2099, 1, 1, tzinfo=UTC), dt.datetime(2099, 1, 2))
    assert [c.version for c in found] == [version.value]
    assert_same(store, since, [None, KV])
    store.close()


def test_a_store_loaded_around_rdfmem_reads_its_log_once_off_the_call(tmp_path: Path) -> None:
    path = tmp_path / "store"
    first = RdfStore.open(path, history=True)
    since = now()
    for i in range(40):
        first.set(f"k{i % 5}", i)
    expected = first.changes_since(since)
    exported = first.backend.store.dump(format=RdfFormat.N_QUADS)
    first.close()
    other = tmp_path / "other"
    raw = Store(str(other))
    raw.bulk_load(exported, format=RdfFormat.N_QUADS)
    del raw
    gc.collect()
    store = RdfStore.open(other, history=True)
    assert store._hub is not None
    index = version_index(store._hub, history_graph(KV).value)
    assert index.log is None
    assert store.changes_since(since) == expected  # the buckets: no call waits for the log
    assert settle(store._hub, timeout=30)
    assert index.log is not None and index.built > 0.0 and len(index.log) == 40
    assert_same(store, since, [None, KV])
    store.close()


def _written_around(store: RdfStore) -> str:
    store.sparql_update(  # a version written around rdfmem: the log is read whole
        "INSERT DATA { GRAPH <urn:rdfmem:history:urn:rdfmem:graph:store> { "
        "<urn:rdfmem:version:20260101T000000.000000Z-0badf00d-0-d1> "
        "<http://www.w3.org/ns/prov#specializationOf> <urn:x> } }"
    )
    return history_graph(KV).value


def _many_written_around(store: RdfStore, n: int) -> None:
    """``_written_around``, then ``n`` more versions (with no activity: not in the log), so
    that reading the log whole takes a while."""
    _written_around(store)
    lines = "".join(
        f"<urn:rdfmem:version:20260102T000000.{i:06d}Z-0badf00d-0-d1> "
        f"<http://www.w3.org/ns/prov#specializationOf> <urn:y{i}> .\n"
        for i in range(n)
    )
    store.sparql_update(
        f"INSERT DATA {{ GRAPH <urn:rdfmem:history:urn:rdfmem:graph:store> {{ {lines} }} }}"
    )


def test_the_stores_own_writes_made_while_its_log_is_read_are_laid_over_it() -> None:
    store = RdfStore(history=True)
    since = now()
    store.set("a", 0)
    h = _written_around(store)
    hub = store._hub
    assert hub is not None
    with hub.reading():  # as read_later starts a read
        fresh_index(hub, KV, h).pending = []
    whole = build(store.backend, h)
    store.set("k", 1)  # land while the log is read: noted, then laid over it
    with store.attributed(by="urn:agent:x", why="because"):
        store.delete("a")
    with hub.reading():
        install(hub, KV, h, whole, 0.5)
        assert log_for(hub, KV, h) is not None
    assert [c.key for c in store.changes_since(since)] == ["a", "k", "a"]
    assert store.changes_since(since)[-1].by == "urn:agent:x"
    assert_same(store, since, [None, KV])


def test_a_log_read_while_a_write_around_rdfmem_lands_is_let_go() -> None:
    store = RdfStore(history=True)
    since = now()
    h = _written_around(store)
    hub = store._hub
    assert hub is not None
    with hub.reading():
        fresh_index(hub, KV, h).pending = []
    whole = build(store.backend, h)
    store.set("k", 1)
    gone = "<urn:rdfmem:version:20260101T000000.000000Z-0badf00d-0-d1>"
    store.sparql_update(
        f"DELETE DATA {{ GRAPH <{h}> {{ {gone} <http://www.w3.org/ns/prov#specializationOf> "
        "<urn:x> } }"
    )
    with hub.reading():
        install(hub, KV, h, whole, 0.5)
        assert log_for(hub, KV, h) is None  # let go: what that write did is unknown
    assert [c.key for c in store.changes_since(since)] == ["k"]
    assert_same(store, since, [None, KV])


def test_writes_while_the_log_is_read_on_its_thread_keep_every_answer_right() -> None:
    store = RdfStore(history=True)
    since = now()
    _many_written_around(store, 30_000)
    assert store._hub is not None
    store.changes_since(since)  # starts the read
    for i in range(30):
        store.set(f"k{i % 4}", i)
    assert settle(store._hub, timeout=60)
    assert log_of(store) is not None  # read while 30 writes landed: kept, with them
    assert_same(store, since, [None, KV])


def test_closing_stops_a_log_being_read_and_frees_the_files(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = RdfStore.open(path, history=True)
    _many_written_around(store, 100_000)
    store.changes_since(now())  # starts the read on its thread
    reading = [t for t in threading.enumerate() if t.name == "rdfmem-change-log"]
    assert reading  # still reading 100,000 versions
    store.close()  # stops it: nothing holds the files past close
    assert not any(t.is_alive() for t in reading)
    again = RdfStore.open(path, history=True)
    assert again.changes_since(now()) == []
    again.close()
