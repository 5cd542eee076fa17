"""Property-based: any key, any JSON value, on every backend, through every path."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rdfmem import RdfStore

NASTY = st.sampled_from([*list("\"'<>{}\\\n\r\t#%?:/ @`^|"), "é", "東", "🎉", "%2F", "}}"])
KEYS = st.lists(
    st.one_of(NASTY, st.characters(blacklist_categories=("Cs",))), min_size=1, max_size=12
).map("".join)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def _equal(a: Any, b: Any) -> bool:
    # -0.0 == 0.0 in Python; JSON keeps the sign, and so does rdfmem.
    return a == b and repr(a) == repr(b)


@SETTINGS
@given(entries=st.dictionaries(KEYS, JSON, min_size=1, max_size=6))
def test_any_key_and_json_value_round_trips_everywhere(make_store, entries: dict[str, Any]) -> None:
    store = make_store(namespace="prop")
    bystander = make_store(namespace="other")
    bystander.set("keep", "me")
    store.assert_("urn:fact", "urn:is", "asserted")
    store.restore({"version": 1, "type": "rdfmem-store-v1", "entries": []})
    for key, value in entries.items():
        store.set(key, value)
    # set / get
    for key, value in entries.items():
        assert _equal(store.get(key), value)
    assert store.keys() == sorted(entries)
    # snapshot / restore
    snap = store.snapshot()
    for key in entries:
        store.delete(key)
    assert store.keys() == []
    store.restore(snap)
    for key, value in entries.items():
        assert _equal(store.get(key), value)
    # TriG export / load into a fresh store
    fresh = RdfStore(namespace="prop")
    fresh.load(store.export("trig"), "trig")
    assert fresh.snapshot() == snap
    # nothing else touched, nothing injected
    assert bystander.get("keep") == "me"
    assert store.ask(("urn:fact", "urn:is", "asserted"))
    assert store.count() == len(entries) + 2


ESCAPES = st.sampled_from(
    ["\\u0022", "\\u005C", "\\U0001F600", "\\uD800", "\\", '"', "'", "\x00", "\x1f", "\x7f"]
)
TEXT = st.lists(st.one_of(ESCAPES, st.characters(blacklist_categories=("Cs",))), max_size=16).map(
    "".join
)


@SETTINGS
@given(texts=st.lists(TEXT, min_size=1, max_size=4, unique=True))
def test_any_text_round_trips_byte_for_byte_through_sparql(make_store, texts: list[str]) -> None:
    # Issue 10 item 12: rdflib expanded \u escapes inside rdfmem's escaped literals.
    from pyoxigraph import Literal, NamedNode

    store = make_store()
    store.sparql_update("CLEAR ALL")  # examples share the backend
    for i, text in enumerate(texts):
        store.assert_(f"urn:n{i}", "urn:label", text)
    for i, text in enumerate(texts):
        # A join (SPARQL text), a binding and an update all carry the text unchanged.
        rows = store.select([("?n", "urn:label", Literal(text)), ("?n", "urn:label", "?l")])
        assert [(r["n"], r["l"].value) for r in rows] == [(NamedNode(f"urn:n{i}"), text)]
        rows = store.query("SELECT * WHERE { ?n <urn:label> ?l }", bindings={"l": text})
        assert [r["n"] for r in rows] == [NamedNode(f"urn:n{i}")]
        store.sparql_update(f"INSERT DATA {{ <urn:copy{i}> <urn:label> {Literal(text)} }}")
        [row] = store.select(subject=f"urn:copy{i}", predicate="urn:label", object="?l")
        assert row["l"].value == text
