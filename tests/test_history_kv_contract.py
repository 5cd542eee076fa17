"""History of key/value writes (issue 24), on every backend: who wrote what, when and why,
the store as of any moment, and the current state left exactly as it was.

The module name holds ``kv`` so that the contract also runs on Virtuoso (tests/servers.py).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import threading
from typing import Any

import pytest
from conftest import StoreFactory
from pyoxigraph import NamedNode

from rdfmem import InvalidTerm, RdfStore
from rdfmem.core.errors import HistoryUnavailable
from rdfmem.store.history import history_graph

pytestmark = pytest.mark.kv_contract

UTC = dt.timezone.utc


def now() -> dt.datetime:
    return dt.datetime.now(UTC)


@pytest.fixture
def hstore(make_store: StoreFactory) -> RdfStore:
    return make_store(history=True, agent="urn:agent:x")


def chain_is_whole(store: RdfStore, key: str) -> None:
    """Each version revises the one before it, which ended when it began: no gaps."""
    versions = store.history(key)
    for before, after in itertools.pairwise(versions):
        assert after.revision_of == before.iri
        assert before.invalidated_at == after.at
        assert before.at < after.at
    assert versions[-1].invalidated_at is None


def test_every_write_is_a_version_with_its_value_time_and_agent(hstore: RdfStore) -> None:
    hstore.set("plan", "draft")
    hstore.update("plan", lambda v: v + " v2")
    with hstore.attributed(by="urn:agent:planner", why="user asked to reschedule"):
        hstore.set("plan", {"day": "Tuesday"})
    assert hstore.delete("plan")
    versions = hstore.history("plan")
    assert [v.value for v in versions] == ["draft", "draft v2", {"day": "Tuesday"}, None]
    assert [v.deleted for v in versions] == [False, False, False, True]
    assert [v.by for v in versions] == [
        "urn:agent:x",
        "urn:agent:x",
        "urn:agent:planner",
        "urn:agent:x",
    ]
    assert [v.why for v in versions] == [None, None, "user asked to reschedule", None]
    assert all(v.at.tzinfo is not None and v.at.utcoffset() == dt.timedelta(0) for v in versions)
    assert [v.at for v in versions] == sorted({v.at for v in versions})  # strictly increasing
    chain_is_whole(hstore, "plan")


def test_the_current_state_stays_exactly_as_it_is(hstore: RdfStore) -> None:
    for i in range(4):
        hstore.set("counter", i)
    hstore.set("other", True)
    # One triple per entry, anywhere in the dataset, and the data graph holds nothing else.
    assert hstore.count(predicate=hstore.value_predicate) == 2
    assert sorted(q.object.value for q in hstore.triples(hstore.graph)) == ["3", "true"]
    assert hstore.keys() == ["counter", "other"]
    assert hstore.snapshot()["entries"] == [
        {"key": "counter", "value": 3},
        {"key": "other", "value": True},
    ]
    assert hstore.count(graph=history_graph(hstore.graph)) > 0


def test_get_and_keys_as_of_any_moment(hstore: RdfStore) -> None:
    before = now()
    hstore.set("task:1", "open")
    hstore.set("task:2", "open")
    middle = now()
    hstore.set("task:1", "done")
    hstore.delete("task:2")
    hstore.set("note", 1)
    assert hstore.get("task:1", as_of=before) is None
    assert hstore.get("task:1", "gone", as_of=before) == "gone"
    assert hstore.get("task:1", as_of=middle) == "open"
    assert hstore.get("task:2", as_of=middle) == "open"
    assert hstore.get("task:2", "deleted", as_of=now()) == "deleted"
    assert hstore.get("task:1", as_of=now()) == "done" == hstore.get("task:1")
    assert hstore.keys(as_of=before) == []
    assert hstore.keys(as_of=middle) == ["task:1", "task:2"]
    assert hstore.keys("task:", as_of=now()) == ["task:1"]
    assert hstore.keys(as_of=now()) == hstore.keys() == ["note", "task:1"]
    naive = middle.replace(tzinfo=None)  # a naive datetime means UTC
    assert hstore.get("task:2", as_of=naive) == "open"


def test_update_many_and_restore_are_recorded_as_one_write_each(hstore: RdfStore) -> None:
    hstore.set("a", 1)
    hstore.set("b", 2)
    hstore.update_many(["a", "b", "c"], lambda cur: {"a": cur["a"] + 10, "c": 3})
    assert [v.value for v in hstore.history("a")] == [1, 11]
    assert [v.value for v in hstore.history("b")] == [2, None]
    assert [v.value for v in hstore.history("c")] == [3]
    made = {hstore.history(k)[-1].activity for k in "abc"}
    assert len(made) == 1  # one activity for the one write
    snap = hstore.snapshot()
    hstore.set("a", 99)
    hstore.restore(snap)
    assert [v.value for v in hstore.history("a")] == [1, 11, 99, 11]
    assert [v.value for v in hstore.history("c")] == [3]  # unchanged by the restore: no version


def test_a_write_that_fails_records_nothing(hstore: RdfStore) -> None:
    hstore.set("k", 1)

    def boom(_: Any) -> Any:
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        hstore.update("k", boom)
    assert not hstore.delete("missing")  # nothing to delete: no write, no version
    assert [v.value for v in hstore.history("k")] == [1]
    assert hstore.history("missing") == []


def test_attribution_nests_and_belongs_to_its_thread(hstore: RdfStore) -> None:
    with hstore.attributed(by="urn:agent:outer", why="outer"):
        with hstore.attributed(why="inner"):
            hstore.set("n", 1)
        with hstore.attributed(by="urn:agent:inner"):
            hstore.set("n", 2)
        hstore.set("n", 3)
    hstore.set("n", 4)
    versions = hstore.history("n")
    assert [(v.by, v.why) for v in versions] == [
        ("urn:agent:outer", "inner"),
        ("urn:agent:inner", "outer"),
        ("urn:agent:outer", "outer"),
        ("urn:agent:x", None),
    ]
    seen: list[Exception] = []

    def worker(i: int) -> None:
        try:
            with hstore.attributed(by=f"urn:agent:t{i}"):
                for _ in range(3):
                    hstore.set(f"t{i}", i)
        except Exception as exc:  # pragma: no cover - reported below
            seen.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == []
    for i in range(3):
        assert {v.by for v in hstore.history(f"t{i}")} == {f"urn:agent:t{i}"}
    with pytest.raises(InvalidTerm), hstore.attributed(by="not an iri"):
        pass


def test_async_twins_are_recorded_with_their_attribution(hstore: RdfStore) -> None:
    async def main() -> None:
        with hstore.attributed(by="urn:agent:async", why="tool call"):
            await hstore.aset("x", 1)
            await hstore.aupdate("x", lambda v: v + 1)
            assert await hstore.adelete("x")
        assert await hstore.aget("x", as_of=hstore.history("x")[1].at) == 2

    asyncio.run(main())
    versions = hstore.history("x")
    assert [v.value for v in versions] == [1, 2, None]
    assert {(v.by, v.why) for v in versions} == {("urn:agent:async", "tool call")}
    chain_is_whole(hstore, "x")


def test_a_store_without_history_says_so(make_store: StoreFactory) -> None:
    store = make_store()
    store.set("k", 1)
    for read in (
        lambda: store.history("k"),
        lambda: store.get("k", as_of=now()),
        lambda: store.keys(as_of=now()),
        lambda: store.changes_since(now()),
        lambda: store.compact_history(now()),
    ):
        with pytest.raises(HistoryUnavailable, match="history=True"):
            read()
    assert store.count() == 1  # and no history was written


def test_changes_since_reads_the_window(hstore: RdfStore) -> None:
    hstore.set("early", 1)
    since = now()
    with hstore.attributed(by="urn:agent:w", why="window"):
        hstore.set("late", 1)
        hstore.delete("early")
    changes = hstore.changes_since(since)
    assert [(c.key, c.deleted, c.by, c.why) for c in changes] == [
        ("late", False, "urn:agent:w", "window"),
        ("early", True, "urn:agent:w", "window"),
    ]
    assert hstore.changes_since(since, since - dt.timedelta(seconds=1)) == []
    old = since - dt.timedelta(hours=3)
    assert [c.key for c in hstore.changes_since(old)] == ["early", "late", "early"]


def test_compaction_keeps_the_present_and_is_recorded(hstore: RdfStore) -> None:
    for i in range(3):
        hstore.set("k", i)
    cut = now()
    hstore.set("k", 3)
    hstore.set("gone", 1)
    hstore.delete("gone")
    assert hstore.compact_history(before=cut) == 2
    assert [v.value for v in hstore.history("k")] == [2, 3]
    assert hstore.get("k", as_of=cut) == 2 and hstore.get("k") == 3
    assert hstore.keys() == ["k"] and hstore.get("gone", as_of=now()) is None
    history = history_graph(hstore.graph)
    compactions = hstore.match(None, None, NamedNode("https://w3id.org/rdfmem#Compaction"), history)
    assert len(compactions) == 1
    assert hstore.compact_history(keep=1) == 2  # k's 2 and gone's set
    assert [v.value for v in hstore.history("k")] == [3]


def test_retention_by_count_trims_in_the_write(make_store: StoreFactory) -> None:
    store = make_store(history=True, history_retention=2)
    for i in range(5):
        store.set("k", i)
    assert [v.value for v in store.history("k")] == [3, 4]
    assert store.get("k") == 4


def test_concurrent_writers_keep_one_version_per_acknowledged_write(hstore: RdfStore) -> None:
    n, per = 4, 10
    errors: list[Exception] = []

    def worker() -> None:
        try:
            for _ in range(per):
                hstore.update("hits", lambda v: (v or 0) + 1)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    versions = hstore.history("hits")
    assert [v.value for v in versions] == list(range(1, n * per + 1))
    chain_is_whole(hstore, "hits")


def test_trig_export_and_load_round_trip_the_history(hstore: RdfStore, tmp_path: Any) -> None:
    hstore.set("a", [1, 2])
    with hstore.attributed(by="urn:agent:p", why="because"):
        hstore.update("a", lambda v: [*v, 3])
    hstore.delete("a")
    hstore.set("b", {"x": None})
    exported = hstore.export("trig")
    copy = RdfStore(history=True)
    copy.load(exported, "trig")
    for key in ("a", "b"):
        assert copy.history(key) == hstore.history(key)
    assert copy.export("trig") == RdfStore(copy.backend).export("trig")
    again = RdfStore(history=True)
    again.load(copy.export("trig"), "trig")
    assert sorted(map(str, again.match())) == sorted(map(str, copy.match()))


def test_a_versioned_remote_write_names_its_graphs_in_the_change_log(
    oxigraph_server: Any,
) -> None:
    oxigraph_server.wipe()
    a = oxigraph_server.connect(change_log=True, history=True)
    b = oxigraph_server.connect(change_log=True)
    cursor = b.backend.changes_since().cursor

    async def write() -> None:
        await a.aset("async", 1)

    a.set("k", 1)
    asyncio.run(write())
    changes = b.backend.changes_since(cursor)
    kv, history = NamedNode(a.graph), history_graph(a.graph)
    assert changes.graphs == {kv, history} and not changes.everything
    assert (kv, NamedNode("urn:rdfmem:store:k")) in changes.subjects
    assert (kv, NamedNode("urn:rdfmem:store:async")) in changes.subjects
    assert [v.value for v in a.history("k")] == [1] == [v.value for v in a.history("async")]
    a.close()
    b.close()
