"""History of triple-level writes (issue 24: every write through rdfmem records history), on
every backend: ``assert_``, ``assert_many``, ``retract`` and ``clear_graph`` version each
resource they change, in the same write, and leave the current state as it was.

Marked ``kv_contract`` so that it also runs on Virtuoso (tests/servers.py).
"""

from __future__ import annotations

import datetime as dt
import itertools

import pytest
from conftest import StoreFactory
from pyoxigraph import NamedNode

from rdfmem import RdfStore
from rdfmem.generalisations import Generalisation, Generalisations

pytestmark = pytest.mark.kv_contract

UTC = dt.timezone.utc
G = "urn:ex:graph:notes"
A = "urn:ex:alice"
B = "urn:ex:bob"
NAME = "urn:ex:name"
KNOWS = "urn:ex:knows"
BOB = NamedNode(B)  # an IRI as object (a str is a literal)


def now() -> dt.datetime:
    return dt.datetime.now(UTC)


def states(store: RdfStore, subject: str) -> list[set[tuple[str, str]]]:
    """Each version's state of ``subject`` in ``G``, oldest first, as (predicate, object)."""
    return [
        {(q.predicate.value, str(q.object)) for q in v.state} for v in store.history_of(G, subject)
    ]


def test_assert_and_retract_version_the_resource_they_change(make_store: StoreFactory) -> None:
    store = make_store(history=True, agent="urn:agent:x")
    store.assert_(A, NAME, "Alice", G)
    between = now()
    with store.attributed(by="urn:agent:editor", why="she knows Bob"):
        store.assert_(A, KNOWS, BOB, G)
    assert store.retract(A, NAME, "Alice", G)
    assert not store.retract(A, NAME, "Alice", G)  # nothing changed: no version
    versions = store.history_of(G, A)
    assert [v.by for v in versions] == ["urn:agent:x", "urn:agent:editor", "urn:agent:x"]
    assert [v.why for v in versions] == [None, "she knows Bob", None]
    assert states(store, A) == [
        {(NAME, '"Alice"')},
        {(NAME, '"Alice"'), (KNOWS, f"<{B}>")},
        {(KNOWS, f"<{B}>")},
    ]
    for before, after in itertools.pairwise(versions):
        assert after.revision_of == before.iri
        assert before.invalidated_at == after.at
    past = store.as_of_quads(G, A, between)
    assert past is not None
    assert {(q.predicate.value, str(q.object)) for q in past} == {(NAME, '"Alice"')}
    # The current state is exactly the data.
    assert {(q.predicate.value, str(q.object)) for q in store.triples(G)} == {(KNOWS, f"<{B}>")}


def test_assert_many_versions_each_resource_once_and_clear_graph_leaves_tombstones(
    make_store: StoreFactory,
) -> None:
    store = make_store(history=True)
    store.assert_many([(A, NAME, "Alice"), (A, KNOWS, BOB), (B, NAME, "Bob")], graph=G)
    store.assert_many([(A, NAME, "Alice")], graph=G)  # already there: no new version
    assert [len(store.history_of(G, s)) for s in (A, B)] == [1, 1]
    store.clear_graph(G)
    for subject in (A, B):
        versions = store.history_of(G, subject)
        assert [v.deleted for v in versions] == [False, True]
    assert list(store.triples(G)) == []
    changed = {c.subject for c in store.changes_since(now() - dt.timedelta(minutes=5))}
    assert {A, B} <= changed


def test_default_graph_writes_and_stores_without_history_write_as_before(
    make_store: StoreFactory,
) -> None:
    kept = make_store(history=True)
    kept.assert_(A, NAME, "Alice")  # the default graph: no IRI to name a history after
    assert kept.history_of(G, A) == []
    assert [q.object.value for q in kept.triples()] == ["Alice"]
    plain = make_store()
    plain.assert_(A, NAME, "Alice", G)
    assert plain.retract(A, NAME, "Alice", G)
    assert plain.count(graph="urn:rdfmem:history:" + G) == 0


def test_generalisation_writes_are_versioned(make_store: StoreFactory) -> None:
    store = make_store(history=True, agent="urn:agent:x")
    group = Generalisations(store, "team")
    group.add(Generalisation(id="g1", content="Meetings run late.", level=1, confidence=0.6))
    with store.attributed(by="urn:agent:reviewer", why="seen again"):
        group.update(Generalisation(id="g1", content="Meetings run late.", level=1, confidence=0.9))
    assert group.delete("g1")
    versions = store.history_of(group.graph, group.subject("g1"))
    assert [v.deleted for v in versions] == [False, False, True]
    assert [v.by for v in versions] == ["urn:agent:x", "urn:agent:reviewer", "urn:agent:x"]
    confidence = [
        {q.object.value for q in v.state if q.predicate.value.endswith("confidence")}
        for v in versions
    ]
    assert confidence[:2] == [{"0.6"}, {"0.9"}]
    assert versions[1].revision_of == versions[0].iri
