"""The decision graph's existence checks answered by the write's own lease read (issue 21,
remote turns): ``add_node`` and ``add_edge`` check their ids and ends with the triples the
claim's read brought, so a warm write is two requests (the claim's read, the write), and
the checks stay exact when another client wrote the same ids just before.
"""

from __future__ import annotations

import pytest
from servers import requests_of

from rdfmem import DecisionGraph, DecisionGraphError, Edge, Node, RdfStore


def test_a_warm_add_node_and_add_edge_send_two_requests_each(
    two: tuple[RdfStore, RdfStore],
) -> None:
    store, _ = two
    graph = DecisionGraph(store)
    for i in range(3):  # warm: the client keeps its claim on the graph between writes
        graph.add_node(Node(id=f"w{i}", type="decision", label="warm"))
    counts = [
        requests_of(store, lambda: graph.add_node(Node(id="a", type="goal", label="A")))[0],
        requests_of(store, lambda: graph.add_node(Node(id="b", type="action", label="B")))[0],
        requests_of(store, lambda: graph.add_edge(Edge(from_id="a", to_id="b", type="leads_to")))[
            0
        ],
    ]
    # Without the prefetch each was three: the claim's read, the check, the write.
    assert counts == [2, 2, 2]
    assert [n.id for n in graph.query("active_goals")] == ["a"]
    assert [e.to_id for e in graph.get_edges("a")] == ["b"]


def test_the_checks_see_what_another_client_wrote_just_before(
    two: tuple[RdfStore, RdfStore],
) -> None:
    mine, other = two
    graph, theirs = DecisionGraph(mine), DecisionGraph(other)
    for i in range(3):
        graph.add_node(Node(id=f"w{i}", type="decision", label="warm"))
    theirs.add_node(Node(id="taken", type="goal", label="Theirs"))  # the other client's
    with pytest.raises(DecisionGraphError, match="already exists"):
        graph.add_node(Node(id="taken", type="goal", label="Mine"))
    assert graph.get_node("taken").label == "Theirs"  # nothing written
    theirs.add_edge(Edge(id="e1", from_id="taken", to_id="w0", type="leads_to"))
    with pytest.raises(DecisionGraphError, match="already exists"):
        graph.add_edge(Edge(id="e1", from_id="w1", to_id="w2", type="leads_to"))
    with pytest.raises(DecisionGraphError, match="no node 'missing'"):
        graph.add_edge(Edge(from_id="w1", to_id="missing", type="leads_to"))
    theirs.delete_node("w2")
    with pytest.raises(DecisionGraphError, match="no node 'w2'"):
        graph.add_edge(Edge(from_id="w1", to_id="w2", type="leads_to"))
    assert graph.delete_node("taken") is True  # its check, from the prefetch too
    assert graph.delete_node("taken") is False
    graph.add_edge(Edge(from_id="w0", to_id="w1", type="leads_to"))
    assert [e.to_id for e in theirs.get_edges("w0")] == ["w1"]
