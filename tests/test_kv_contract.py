"""The key/value contract (Dagonizer Store), on every backend."""

from __future__ import annotations

import asyncio
import json
import math

import pytest
from pyoxigraph import Literal, NamedNode, Quad

from rdfmem import (
    IncompatibleSnapshot,
    InvalidKey,
    InvalidValue,
    RdfStore,
    StoreError,
)
from rdfmem.core.terms import RDF_JSON

VALUES = [
    None,
    True,
    False,
    0,
    -7,
    2**70,
    1.5,
    -0.0,
    "",
    "text",
    [],
    [1, "a", None],
    {},
    {"a": {"b": [1, 2.5]}},
]


def identical(a: object, b: object) -> bool:
    """Equal and of the same types all the way down: ``True`` is not ``1``, ``-0.0`` is not ``0.0``."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return repr(a) == repr(b)
    if isinstance(a, list):
        return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
    if isinstance(a, dict):
        return list(a) == list(b) and all(identical(a[k], b[k]) for k in a)  # type: ignore[call-overload,index]
    return a == b


def test_identical_tells_apart_what_equality_does_not() -> None:
    assert not identical(True, 1) and not identical(-0.0, 0.0) and not identical([1], [1.0])
    assert identical({"a": [1, -0.0, None]}, {"a": [1, -0.0, None]})


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_set_then_get_returns_the_value(store: RdfStore, value: object) -> None:
    store.set("k", value)
    assert identical(store.get("k", "default"), value)
    assert store.has("k")


def test_get_of_a_missing_key_returns_the_default(store: RdfStore) -> None:
    assert store.get("nope") is None
    assert store.get("nope", 42) == 42
    assert not store.has("nope")


def test_last_write_wins_and_leaves_one_triple(store: RdfStore) -> None:
    for i in range(5):
        store.set("counter", i)
    assert store.get("counter") == 4
    assert store.count(predicate=store.value_predicate) == 1


def test_an_entry_is_one_rdf_json_triple_under_a_urn_subject(store: RdfStore) -> None:
    store.set("tokenBudget", {"left": 4096})
    [quad] = list(store.triples(store.graph))
    assert quad.subject == NamedNode("urn:rdfmem:store:tokenBudget")
    assert quad.predicate == NamedNode("urn:rdfmem:store:value")
    assert isinstance(quad.object, Literal) and quad.object.datatype == RDF_JSON
    assert json.loads(quad.object.value) == {"left": 4096}
    assert quad.graph_name == NamedNode("urn:rdfmem:graph:store")


def test_none_is_stored_and_is_not_absence(store: RdfStore) -> None:
    store.set("k", None)
    assert store.has("k")
    assert store.get("k", "default") is None


def test_delete_reports_whether_something_was_removed(store: RdfStore) -> None:
    store.set("k", 1)
    assert store.delete("k") is True
    assert store.delete("k") is False
    assert not store.has("k")
    assert store.get("k") is None


def test_update_passes_none_for_a_missing_key_and_returns_the_new_value(store: RdfStore) -> None:
    seen = []

    def bump(n: int | None) -> int:
        seen.append(n)
        return (n or 0) + 1

    assert store.update("hits", bump) == 1
    assert store.update("hits", bump) == 2
    assert seen == [None, 1]
    assert store.get("hits") == 2


def test_update_that_raises_writes_nothing(store: RdfStore) -> None:
    store.set("k", 1)

    def boom(_: object) -> object:
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        store.update("k", boom)
    assert store.get("k") == 1


def test_update_returning_a_non_json_value_writes_nothing(store: RdfStore) -> None:
    store.set("k", 1)
    with pytest.raises(InvalidValue):
        store.update("k", lambda _: {1, 2})
    assert store.get("k") == 1


@pytest.mark.parametrize(
    "bad", [float("nan"), math.inf, {1: "int key"}, {1, 2}, object(), b"bytes", [float("-inf")]]
)
def test_non_json_values_are_refused_and_nothing_is_written(store: RdfStore, bad: object) -> None:
    store.set("k", "before")
    with pytest.raises(InvalidValue):
        store.set("k", bad)
    assert store.get("k") == "before"


@pytest.mark.parametrize("bad", ["", 1, None, b"key", ("t",)])
def test_bad_keys_are_refused(store: RdfStore, bad: object) -> None:
    with pytest.raises(InvalidKey):
        store.set(bad, 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidKey):
        store.get(bad)  # type: ignore[arg-type]
    assert store.keys() == []


def test_lone_surrogate_key_is_refused_but_lone_surrogate_value_round_trips(
    store: RdfStore,
) -> None:
    with pytest.raises(InvalidKey):
        store.set("bad\udc80", 1)
    store.set("k", "half a pair: \ud83d")
    assert store.get("k") == "half a pair: \ud83d"


HOSTILE_KEYS = [
    "a b",
    'say "hi"',
    "it's",
    "<>{}|\\^`",
    "line\nbreak\r\ttab",
    "#frag?query=1&x",
    "100%",
    "%41",
    "naïve café 東京 🎉",
    "ns:inner:colons",
    "} } INSERT DATA { <urn:x> <urn:y> <urn:z> } #",
    "> . <urn:evil> <urn:p> <urn:o",
    "\u0000nul",
]


@pytest.mark.parametrize("key", HOSTILE_KEYS, ids=repr)
def test_hostile_keys_round_trip_and_touch_nothing_else(store: RdfStore, key: str) -> None:
    store.set("other", "untouched")
    store.set(key, {"key": key})
    assert store.get(key) == {"key": key}
    assert sorted(store.keys()) == sorted(["other", key])
    assert store.get("other") == "untouched"
    assert store.count() == 2  # no injected triple anywhere
    assert store.update(key, lambda v: [v]) == [{"key": key}]
    assert store.delete(key)
    assert store.keys() == ["other"]


def test_keys_lists_unqualified_keys_with_prefix_sorted(make_store) -> None:
    a = make_store(namespace="agent")
    a.set("todo:2", 1)
    a.set("todo:1", 1)
    a.set("note", 1)
    assert a.keys() == ["note", "todo:1", "todo:2"]
    assert a.keys("todo:") == ["todo:1", "todo:2"]
    assert a.keys("zzz") == []


def test_namespaces_on_one_backend_never_see_each_other(make_store) -> None:
    plain = make_store()
    a = make_store(namespace="a")
    b = make_store(namespace="b")
    tricky = make_store(namespace="a:b")
    plain.set("a:k", "plain")  # looks like namespace a's key k, but is not
    a.set("k", "a")
    b.set("k", "b")
    tricky.set("k", "a:b")
    assert (plain.get("k"), a.get("k"), b.get("k"), tricky.get("k")) == (None, "a", "b", "a:b")
    assert plain.get("a:k") == "plain"
    assert plain.keys() == ["a:k"]
    assert a.keys() == ["k"] and b.keys() == ["k"] and tricky.keys() == ["k"]
    assert a.delete("k")
    assert b.get("k") == "b" and tricky.get("k") == "a:b" and plain.get("a:k") == "plain"


def test_namespace_is_the_qualified_key_in_the_subject(make_store) -> None:
    store = make_store(namespace="team")
    store.set("plan", 1)
    [quad] = list(store.triples(store.graph))
    assert quad.subject.value == "urn:rdfmem:store:team:plan"


def test_custom_prefix_predicate_and_graph(make_store) -> None:
    store = make_store(
        subject_prefix="urn:agent:kv:", value_predicate="urn:agent:val", graph="urn:agent:g"
    )
    store.set("x", [1])
    assert store.ask(("urn:agent:kv:x", "urn:agent:val", None, "urn:agent:g"))
    assert store.get("x") == [1]


def test_snapshot_shape_and_round_trip(make_store) -> None:
    store = make_store(namespace="n")
    store.set("b", [1, {"c": None}])
    store.set("a", "x")
    snap = store.snapshot()
    assert snap == {
        "version": 1,
        "type": "rdfmem-store-v1",
        "entries": [{"key": "a", "value": "x"}, {"key": "b", "value": [1, {"c": None}]}],
    }
    assert json.loads(json.dumps(snap)) == snap  # plain JSON
    store.set("a", "changed")
    store.set("extra", 1)
    store.restore(snap)
    assert store.snapshot() == snap


def test_restore_replaces_only_this_namespace_and_keeps_asserted_triples(make_store) -> None:
    mine = make_store(namespace="mine")
    theirs = make_store(namespace="theirs")
    mine.set("old", 1)
    theirs.set("keep", 2)
    mine.assert_("urn:doc", "urn:title", "kept", graph="urn:docs")
    mine.assert_("urn:doc", "urn:rank", 1)
    mine.restore({"version": 1, "type": "rdfmem-store-v1", "entries": [{"key": "new", "value": 3}]})
    assert mine.keys() == ["new"]
    assert theirs.get("keep") == 2
    assert mine.ask(("urn:doc", "urn:title", "kept", "urn:docs"))
    assert mine.ask(("urn:doc", "urn:rank", 1))


@pytest.mark.parametrize(
    "snapshot",
    [
        {"version": 2, "type": "rdfmem-store-v1", "entries": []},
        {"version": 1, "type": "redis-store-v1", "entries": []},
        {"type": "rdfmem-store-v1", "entries": []},
        {"version": 1, "type": "rdfmem-store-v1"},
        {"version": 1, "type": "rdfmem-store-v1", "entries": [{"key": "a"}]},
        {"version": 1, "type": "rdfmem-store-v1", "entries": [{"key": "", "value": 1}]},
        {"version": 1, "type": "rdfmem-store-v1", "entries": [{"key": "a", "value": math.nan}]},
        {"version": 1, "type": "rdfmem-store-v1", "entries": "nope"},
    ],
)
def test_incompatible_snapshots_raise_and_change_nothing(store: RdfStore, snapshot: dict) -> None:
    store.set("k", "v")
    with pytest.raises(IncompatibleSnapshot) as info:
        store.restore(snapshot)
    err = info.value
    assert isinstance(err, StoreError) and err.reason == "INCOMPATIBLE_SNAPSHOT"
    assert (err.expected_type, err.expected_version) == ("rdfmem-store-v1", 1)  # type: ignore[attr-defined]
    assert store.snapshot()["entries"] == [{"key": "k", "value": "v"}]


def test_update_many_is_all_or_nothing(store: RdfStore) -> None:
    store.set("a", 1)
    store.set("b", 2)
    out = store.update_many(["a", "b", "c"], lambda cur: {"a": cur["a"] + 10, "c": 3})
    assert out == {"a": 11, "c": 3}
    assert (store.get("a"), store.has("b"), store.get("c")) == (11, False, 3)
    with pytest.raises(InvalidValue):
        store.update_many(["a", "c"], lambda cur: {"a": 0, "c": math.nan})
    assert (store.get("a"), store.get("c")) == (11, 3)


def test_a_write_behind_the_cache_is_seen(store: RdfStore) -> None:
    store.set("k", 1)
    assert store.get("k") == 1
    subject = NamedNode("urn:rdfmem:store:k")
    graph = NamedNode(store.graph)
    store.sparql_update(
        f"DELETE WHERE {{ GRAPH {graph} {{ {subject} ?p ?o }} }} ; "
        f"INSERT DATA {{ GRAPH {graph} {{ {subject} <{store.value_predicate}> "
        f'"2"^^<{RDF_JSON.value}> }} }}'
    )
    assert store.get("k") == 2
    store.retract(subject, store.value_predicate, Literal("2", datatype=RDF_JSON), graph)
    assert store.get("k") is None


def test_a_value_written_behind_rdfmems_back_that_is_not_json_is_a_clear_error(
    store: RdfStore,
) -> None:
    store.backend.apply(
        [],
        [
            Quad(
                NamedNode("urn:rdfmem:store:k"),
                NamedNode(store.value_predicate),
                Literal("{not json", datatype=RDF_JSON),
                NamedNode(store.graph),
            )
        ],
    )
    with pytest.raises(StoreError, match="not JSON") as info:
        store.get("k")
    assert info.value.reason == "BACKING_ERROR"


def test_async_twins(make_store) -> None:
    store = make_store(namespace="async")

    async def main() -> None:
        await store.aset("k", 1)
        assert await store.aget("k") == 1
        assert await store.ahas("k")
        await asyncio.gather(*(store.aupdate("n", lambda v: (v or 0) + 1) for _ in range(20)))
        assert await store.aget("n") == 20
        assert await store.akeys() == ["k", "n"]
        snap = await store.asnapshot()
        assert await store.adelete("k")
        await store.arestore(snap)
        assert await store.aget("k") == 1

    asyncio.run(main())


def test_with_namespace_shares_the_backend(store: RdfStore) -> None:
    other = store.with_namespace("other")
    other.set("k", "o")
    store.set("k", "s")
    assert (store.get("k"), other.get("k")) == ("s", "o")
    assert other.backend is store.backend


def test_snapshot_during_concurrent_sets_never_lists_a_key_twice(store: RdfStore) -> None:
    import threading

    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set():
            store.set("hot", i)
            i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(300):
            keys = [e["key"] for e in store.snapshot()["entries"]]
            assert len(keys) == len(set(keys))
    finally:
        stop.set()
        thread.join()


def test_restore_refuses_a_version_that_only_equals_one(store: RdfStore) -> None:
    for version in (True, 1.0):
        with pytest.raises(IncompatibleSnapshot):
            store.restore({"version": version, "type": "rdfmem-store-v1", "entries": []})


def test_update_many_refuses_a_single_str(store: RdfStore) -> None:
    with pytest.raises(InvalidKey):
        store.update_many("abc", lambda cur: cur)


def test_close_is_idempotent_also_through_views(make_store) -> None:
    store = make_store()
    view = store.with_namespace("x")
    store.close()
    view.close()
    store.close()
    with pytest.raises(StoreError):
        store.set("k", 1)
    with pytest.raises(StoreError):
        view.get("k")
