"""ContextUpdate: the Nous cases on dicts and on every backend, atomicity, concurrency."""

from __future__ import annotations

import asyncio
import copy
import itertools
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from rdfmem import InvalidKey, InvalidValue, RdfStore, SchemaError, TypedStore
from rdfmem.context import AppendOp, ContextUpdate, DeleteOp, MergeOp, SetOp, deep_merge

StoreFactory = Callable[..., RdfStore]


def contents(store: RdfStore) -> dict[str, Any]:
    return {entry["key"]: entry["value"] for entry in store.snapshot()["entries"]}


def on_both(update: ContextUpdate, store: RdfStore, initial: dict[str, Any] | None = None) -> Any:
    """Apply ``update`` to a dict and to ``store`` (both holding ``initial``); they must agree."""
    initial = initial or {}
    for key, value in initial.items():
        store.set(key, value)
    expected = update.apply(initial)
    update.apply(store)
    assert contents(store) == expected
    return expected


# -- the Nous cases ------------------------------------------------------------------------


def test_set_then_append_extends_the_set_list(store: RdfStore) -> None:
    update = ContextUpdate().set("xs", [9, 8]).append("xs", 1)
    assert on_both(update, store) == {"xs": [9, 8, 1]}


def test_append_then_set_the_set_wins(store: RdfStore) -> None:
    update = ContextUpdate().append("xs", 1).set("xs", "final")
    assert on_both(update, store, {"xs": [0]}) == {"xs": "final"}


def test_append_append_delete_append_leaves_the_last_item(store: RdfStore) -> None:
    update = ContextUpdate().append("xs", 1).append("xs", 2).delete("xs").append("xs", 3)
    assert on_both(update, store, {"xs": [0]}) == {"xs": [3]}


def test_two_thousand_appends_keep_their_order(store: RdfStore) -> None:
    update = ContextUpdate()
    for i in range(2000):
        update = update.append("log", i)
    assert on_both(update, store, {"log": ["start"]}) == {"log": ["start", *range(2000)]}


def test_interleaved_keys_stay_independent(store: RdfStore) -> None:
    update = (
        ContextUpdate()
        .append("a", 1)
        .append("b", "x")
        .set("c", {"n": 1})
        .append("a", 2)
        .merge("c", {"m": 2})
        .append("b", "y")
        .delete("d")
    )
    result = on_both(update, store, {"d": True, "e": "kept"})
    assert result == {"a": [1, 2], "b": ["x", "y"], "c": {"n": 1, "m": 2}, "e": "kept"}


# -- semantics -----------------------------------------------------------------------------


def test_append_onto_missing_or_none_starts_a_list() -> None:
    update = ContextUpdate().append("missing", "a").append("none", "b")
    assert update.apply({"none": None}) == {"missing": ["a"], "none": ["b"]}


def test_append_onto_a_value_that_is_not_a_list_raises() -> None:
    with pytest.raises(InvalidValue, match="cannot append to 'n': it holds a int"):
        ContextUpdate().append("n", 1).apply({"n": 5})


def test_merge_is_deep_and_replaces_values_that_are_not_mappings() -> None:
    context = {"ui": {"theme": "light", "font": {"size": 12, "face": "mono"}}, "tags": ["x"]}
    update = (
        ContextUpdate()
        .merge("ui", {"font": {"size": 14}, "lang": "en"})
        .merge("tags", {"replaced": True})
        .merge("new", {"a": {"b": 1}})
    )
    assert update.apply(context) == {
        "ui": {"theme": "light", "font": {"size": 14, "face": "mono"}, "lang": "en"},
        "tags": {"replaced": True},
        "new": {"a": {"b": 1}},
    }


def test_deep_merge_replaces_a_nested_value_that_is_not_a_mapping() -> None:
    assert deep_merge({"a": {"b": [1]}}, {"a": {"b": {"c": 1}}}) == {"a": {"b": {"c": 1}}}
    assert deep_merge({"a": {"b": {"c": 1}}}, {"a": {"b": None}}) == {"a": {"b": None}}


def test_apply_to_a_dict_leaves_the_input_and_its_contents_untouched() -> None:
    context = {"xs": [1], "cfg": {"a": {"b": 1}}, "gone": 1}
    before = copy.deepcopy(context)
    result = (
        ContextUpdate().append("xs", 2).merge("cfg", {"a": {"c": 2}}).delete("gone").apply(context)
    )
    assert context == before
    assert result == {"xs": [1, 2], "cfg": {"a": {"b": 1, "c": 2}}}


def test_applying_twice_gives_the_same_result_and_shares_no_lists() -> None:
    update = ContextUpdate().append("xs", 1).merge("cfg", {"a": {"b": 1}})
    first, second = update.apply({}), update.apply({})
    first["xs"].append("mutated")
    first["cfg"]["a"]["b"] = "mutated"
    assert second == {"xs": [1], "cfg": {"a": {"b": 1}}}
    assert update.apply({}) == second


def test_builders_return_new_updates_and_leave_the_original_alone() -> None:
    base = ContextUpdate().set("user", "ada")
    longer = base.append("log", "x")
    assert base.operations == (SetOp("set", "user", "ada"),)
    assert longer.operations == (("set", "user", "ada"), ("append", "log", "x"))
    assert len(longer) == 2


def test_operations_and_empty() -> None:
    update = ContextUpdate().set("a", 1).merge("b", {"c": 2}).append("d", 3).delete("a")
    assert [type(op) for op in update.operations] == [SetOp, MergeOp, AppendOp, DeleteOp]
    assert [op.key for op in update.operations] == ["a", "b", "d", "a"]
    assert update.operations[1] == MergeOp("merge", "b", {"c": 2})
    assert ContextUpdate().empty and not update.empty
    assert not ContextUpdate() and update


def test_operations_rebuild_an_equal_update_even_through_plain_lists() -> None:
    import json

    update = ContextUpdate().set("a", [1]).merge("b", {"c": 2}).append("a", 3).delete("z")
    rebuilt = ContextUpdate(json.loads(json.dumps(update.operations)))
    assert rebuilt == update
    assert rebuilt.apply({}) == {"a": [1, 3], "b": {"c": 2}}


@pytest.mark.parametrize(
    "ops",
    [[("sett", "a", 1)], [("set", "a")], [("delete", "a", 1)], [()], ["set"], [("merge", "a", 1)]],
)
def test_malformed_operations_are_refused(ops: list[Any]) -> None:
    with pytest.raises(InvalidValue):
        ContextUpdate(ops)


@pytest.mark.parametrize("key", [1, None, b"k", ("k",), ""])
def test_keys_must_be_non_empty_strings(key: Any) -> None:
    for build in (
        lambda u: u.set(key, 1),
        lambda u: u.merge(key, {}),
        lambda u: u.append(key, 1),
        lambda u: u.delete(key),
        lambda u: ContextUpdate([("set", key, 1)]),
    ):
        with pytest.raises(InvalidKey):
            build(ContextUpdate())


def test_merge_needs_a_mapping() -> None:
    with pytest.raises(InvalidValue, match="merge into 'cfg' needs a mapping"):
        ContextUpdate().merge("cfg", [("a", 1)])  # type: ignore[arg-type]


def test_apply_to_something_else_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="needs a mapping or a store"):
        ContextUpdate().set("a", 1).apply([("a", 1)])  # type: ignore[arg-type]


# -- on a store ----------------------------------------------------------------------------


def test_apply_to_a_store_returns_the_touched_keys_that_remain(store: RdfStore) -> None:
    store.set("keep", 1)
    store.set("gone", 2)
    result = ContextUpdate().append("log", "a").delete("gone").set("n", 3).apply(store)
    assert result == {"log": ["a"], "n": 3}
    assert contents(store) == {"keep": 1, "log": ["a"], "n": 3}


def test_an_empty_update_writes_nothing(store: RdfStore) -> None:
    store.set("a", 1)
    assert ContextUpdate().apply(store) == {}
    assert contents(store) == {"a": 1}


def test_a_value_that_is_not_json_half_way_leaves_the_store_as_it_was(store: RdfStore) -> None:
    store.set("a", 1)
    store.set("log", ["x"])
    update = ContextUpdate().set("a", 2).append("log", "y").set("bad", {1, 2}).set("z", 1)
    with pytest.raises(InvalidValue, match=r"operation 3 \(set 'bad'\)"):
        update.apply(store)
    assert contents(store) == {"a": 1, "log": ["x"]}


def test_a_nested_non_json_value_in_a_merge_is_refused_whole(store: RdfStore) -> None:
    store.set("cfg", {"a": 1})
    with pytest.raises(InvalidValue, match="operation 2"):
        ContextUpdate().set("n", 1).merge("cfg", {"b": {"c": float("nan")}}).apply(store)
    assert contents(store) == {"cfg": {"a": 1}}


def test_a_failing_append_half_way_leaves_the_store_as_it_was(store: RdfStore) -> None:
    store.set("a", 1)
    store.set("name", "ada")
    update = ContextUpdate().set("a", 2).delete("name").append("a", 3)
    with pytest.raises(InvalidValue, match="cannot append to 'a'"):
        update.apply(store)
    assert contents(store) == {"a": 1, "name": "ada"}


def test_concurrent_applies_never_lose_writes(make_store: StoreFactory) -> None:
    stores = [make_store(namespace="agent"), make_store(namespace="agent")]
    threads, rounds = 6, 20

    def work(t: int) -> None:
        for i in range(rounds):
            update = ContextUpdate().append("log", [t, i]).merge("last", {str(t): i})
            update.apply(stores[t % 2])

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    log = stores[0].get("log")
    assert len(log) == threads * rounds
    for t in range(threads):  # each thread's appends land in its own order
        assert [i for (who, i) in log if who == t] == list(range(rounds))
    assert stores[1].get("last") == {str(t): rounds - 1 for t in range(threads)}


def test_concurrent_async_applies_never_lose_writes(store: RdfStore) -> None:
    async def main() -> None:
        await asyncio.gather(*(ContextUpdate().append("log", i).aapply(store) for i in range(40)))

    asyncio.run(main())
    assert sorted(store.get("log")) == list(range(40))


def test_updates_stay_inside_their_namespace(make_store: StoreFactory) -> None:
    mine, theirs = make_store(namespace="mine"), make_store(namespace="theirs")
    theirs.set("log", ["theirs"])
    ContextUpdate().append("log", "mine").delete("other").apply(mine)
    assert mine.get("log") == ["mine"]
    assert theirs.get("log") == ["theirs"]


# -- on a TypedStore -----------------------------------------------------------------------


class Pipeline(BaseModel):
    budget: int
    messages: list[str] = []
    settings: dict[str, Any] = {}


def test_apply_to_a_typed_store_validates_every_result(store: RdfStore) -> None:
    typed = TypedStore(store, Pipeline)
    typed.set("budget", 100)
    update = ContextUpdate().append("messages", "hi").merge("settings", {"t": 1}).set("budget", 9)
    assert update.apply(typed) == {"messages": ["hi"], "settings": {"t": 1}, "budget": 9}
    assert typed.get("messages") == ["hi"]

    with pytest.raises(SchemaError, match="messages"):
        ContextUpdate().set("budget", 1).append("messages", 5).apply(typed)
    with pytest.raises(SchemaError, match="not in Pipeline"):
        ContextUpdate().set("budget", 2).set("nope", 1).apply(typed)
    assert typed.get("budget") == 9
    assert typed.get("messages") == ["hi"]


# -- dict and store never disagree ---------------------------------------------------------

KEYS = ["a", "b", "k ey<>\"{}'\n", "é"]
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec="utf-8"), max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["x", "y", "z"]), inner, max_size=3)
    ),
    max_leaves=6,
)
mappings = st.dictionaries(st.sampled_from(["x", "y", "z"]), json_values, max_size=3)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("set"), st.sampled_from(KEYS), json_values),
        st.tuples(st.just("merge"), st.sampled_from(KEYS), mappings),
        st.tuples(st.just("append"), st.sampled_from(KEYS), json_values),
        st.tuples(st.just("delete"), st.sampled_from(KEYS)),
    ),
    max_size=8,
)
_namespaces = itertools.count()


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(initial=st.dictionaries(st.sampled_from(KEYS), json_values), ops=operations)
def test_dict_and_store_application_agree(
    make_store: StoreFactory, initial: dict[str, Any], ops: list[tuple[Any, ...]]
) -> None:
    store = make_store(namespace=f"ex{next(_namespaces)}")
    for key, value in initial.items():
        store.set(key, value)
    update = ContextUpdate(ops)
    try:
        expected = update.apply(initial)
    except InvalidValue:
        with pytest.raises(InvalidValue):
            update.apply(store)
        expected = initial
    else:
        update.apply(store)
    assert contents(store) == expected
