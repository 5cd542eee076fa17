"""An attached process knows which subjects are absent, and never wrongly.

Once it has listed a graph's subjects (``GET /subjects``, once), an attached process
answers the existence check of a new node, edge or memory without a request, as long as
the owner's mark says nobody wrote since it last looked; a subject another process
created, removed or rewrote is asked again. Real owner and attached stores (the owner's
socket; a second real process where another process writes).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rdfmem import DecisionGraph, Memories, Memory, Node, RdfStore
from rdfmem.backends.attached import AttachedBackend
from rdfmem.core.errors import DecisionGraphError, QueryError

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[RdfStore, RdfStore, AttachedBackend]]:
    owner = RdfStore.open(tmp_path / "store")
    attached = RdfStore.open(tmp_path / "store")
    assert isinstance(attached.backend, AttachedBackend)
    try:
        yield owner, attached, attached.backend
    finally:
        attached.close()
        owner.close()


def _sent(backend: AttachedBackend, action: object) -> int:
    before = backend.requests_sent
    assert callable(action)
    action()
    return backend.requests_sent - before


def test_new_nodes_edges_and_memories_cost_only_their_write(
    pair: tuple[RdfStore, RdfStore, AttachedBackend],
) -> None:
    _, attached, backend = pair
    graph, memories = DecisionGraph(attached), Memories(attached, project="p")
    graph.add_node(Node(id="root", type="goal", label="root"))
    # A first round learns the journal's notes and lists the two graphs, once.
    memories.save(Memory("project", "First", "zebra one"))
    graph.add_node(Node(id="first", type="goal", label="x"))
    graph.add_edge({"id": "e-first", "from_id": "root", "to_id": "first", "type": "leads_to"})
    for i in range(3):
        node = Node(id=f"n{i}", type="goal", label="x")
        assert _sent(backend, lambda n=node: graph.add_node(n)) == 1
        edge = {"id": f"e{i}", "from_id": "root", "to_id": f"n{i}", "type": "leads_to"}
        assert _sent(backend, lambda e=edge: graph.add_edge(e)) == 1
        note = Memory("project", f"Note {i}", f"zebra {i}")
        assert _sent(backend, lambda m=note: memories.save(m)) == 1
    assert {n.id for n in graph.query("active_goals")} >= {"root", "n0", "n1", "n2"}
    assert [e.id for e in graph.get_edges("root")] == ["e-first", "e0", "e1", "e2"]
    with pytest.raises(DecisionGraphError, match="already exists"):
        graph.add_node(Node(id="n1", type="goal", label="x"))
    with pytest.raises(DecisionGraphError, match="no node 'missing'"):
        graph.add_edge({"id": "e9", "from_id": "root", "to_id": "missing", "type": "leads_to"})


def test_a_node_the_owner_adds_is_never_taken_for_absent(
    pair: tuple[RdfStore, RdfStore, AttachedBackend],
) -> None:
    owner, attached, _ = pair
    mine, theirs = DecisionGraph(attached), DecisionGraph(owner)
    mine.add_node(Node(id="a", type="goal", label="x"))  # the graph is listed
    theirs.add_node(Node(id="b", type="goal", label="the owner's"))
    with pytest.raises(DecisionGraphError, match="already exists"):
        mine.add_node(Node(id="b", type="goal", label="x"))
    mine.add_edge({"id": "ab", "from_id": "a", "to_id": "b", "type": "leads_to"})
    theirs.delete_node("a")
    with pytest.raises(DecisionGraphError, match="no node 'a'"):
        mine.add_edge({"id": "ab2", "from_id": "a", "to_id": "b", "type": "leads_to"})
    mine.add_node(Node(id="a", type="action", label="again"))  # gone: may be added again
    assert theirs.get_node("a").label == "again"


def test_a_raw_update_by_the_owner_is_seen(
    pair: tuple[RdfStore, RdfStore, AttachedBackend],
) -> None:
    owner, attached, _ = pair
    mine = DecisionGraph(attached)
    mine.add_node(Node(id="a", type="goal", label="x"))  # the graph is listed
    mine.add_node(Node(id="model", type="goal", label="x"))
    # The owner copies the node under a new id with raw SPARQL: a write of unknown scope.
    owner.sparql_update(
        "INSERT { GRAPH ?g { ?new ?p ?o } } WHERE { GRAPH ?g { ?old ?p ?o } "
        'FILTER(STRENDS(STR(?old), "/node/model")) '
        'BIND(IRI(REPLACE(STR(?old), "/node/model$", "/node/raw")) AS ?new) }'
    )
    with pytest.raises(DecisionGraphError, match="already exists"):
        mine.add_node(Node(id="raw", type="goal", label="x"))


CHILD = """
import sys
from rdfmem import DecisionGraph, Node, RdfStore
store = RdfStore.open(sys.argv[1])
assert type(store.backend).__name__ == "AttachedBackend", store.backend
DecisionGraph(store).add_node(Node(id=sys.argv[2], type="goal", label="from the child"))
store.close()
"""


def test_a_node_another_process_adds_is_never_taken_for_absent(tmp_path: Path) -> None:
    owner = RdfStore.open(tmp_path / "store")
    attached = RdfStore.open(tmp_path / "store")
    try:
        mine = DecisionGraph(attached)
        for i in range(3):
            mine.add_node(Node(id=f"mine{i}", type="goal", label="x"))  # listed, then known absent
            subprocess.run(
                [sys.executable, "-c", CHILD, str(tmp_path / "store"), f"child{i}"],
                check=True,
                cwd=ROOT,
                timeout=120,
            )
            with pytest.raises(DecisionGraphError, match="already exists"):
                mine.add_node(Node(id=f"child{i}", type="goal", label="x"))
        labels = {n.label for n in mine.query("active_goals")}
        assert "from the child" in labels
    finally:
        attached.close()
        owner.close()


def test_an_update_the_owner_refuses_is_an_error_that_says_why(
    pair: tuple[RdfStore, RdfStore, AttachedBackend],
) -> None:
    _, attached, _ = pair
    with pytest.raises(QueryError, match="update"):
        attached.sparql_update("INSERT DATA { GRAPH <urn:g> { <urn:a> <urn:b> } }")
    attached.set("still", "works")
    assert attached.get("still") == "works"
