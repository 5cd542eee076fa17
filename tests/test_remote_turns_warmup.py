"""A cold client reads its decision graph whole beside its first search (issue 21, remote
turns): the first ``Memories.search`` starts the graph's whole read on a thread, so the
first decision query sends no whole read of its own, and its answer still holds every write
another client made after that read began (read again on top of it), or read whole again
when the graph changed as a whole.
"""

from __future__ import annotations

from servers import Server, requests_of

from rdfmem import DecisionGraph, Edge, Memories, Memory, Node, RdfStore


def _cold(store: RdfStore) -> DecisionGraph:
    graph = DecisionGraph(store)  # made before any read: its whole read waits for one
    Memories(store, project="t").search("anything at all", limit=3)
    return graph


def test_the_first_query_after_a_search_sends_no_whole_read_and_misses_no_write(
    two: tuple[RdfStore, RdfStore],
) -> None:
    mine, other = two
    theirs = DecisionGraph(other)
    theirs.add_nodes(Node(id=f"g{i}", type="goal", label=f"goal {i}") for i in range(200))
    Memories(other, project="t").save(Memory("project", "A note", "anything at all"))
    graph = _cold(mine)
    # Acknowledged after the early read began: each must show in the first answer.
    theirs.add_node(Node(id="late", type="goal", label="Late"))
    theirs.update_node("g1", {"status": "completed"})
    theirs.add_edge(Edge(from_id="late", to_id="g2", type="leads_to"))
    sent, goals = requests_of(mine, lambda: graph.query("active_goals"))
    ids = [n.id for n in goals]
    assert "late" in ids and "g1" not in ids and len(ids) == 200
    assert ids == [n.id for n in theirs.query("active_goals")]
    assert [n.id for n in graph.query("descendants", node_id="late")] == ["g2"]
    # The look and the changed subjects' read: no read of every node and link.
    assert sent <= 2


def test_a_graph_changed_whole_after_the_read_began_is_read_again(
    two: tuple[RdfStore, RdfStore], server: Server
) -> None:
    mine, other = two
    theirs = DecisionGraph(other)
    theirs.add_nodes(Node(id=f"g{i}", type="goal", label=f"goal {i}") for i in range(50))
    graph = _cold(mine)
    theirs.delete_node("g0")  # logged as a change of the whole graph
    assert [n.id for n in graph.query("active_goals")] == [f"g{i}" for i in range(1, 50)]
    third = server.connect(change_log=True)
    try:
        later = _cold(third)
        other.clear_graph(theirs.graph)
        theirs.add_node(Node(id="after", type="goal", label="After"))
        assert [n.id for n in later.query("active_goals")] == ["after"]
    finally:
        third.close()


def test_a_client_that_never_searches_reads_its_graph_when_asked(
    two: tuple[RdfStore, RdfStore],
) -> None:
    mine, other = two
    DecisionGraph(other).add_node(Node(id="g", type="goal", label="G"))
    graph = DecisionGraph(mine)
    assert [n.id for n in graph.query("active_goals")] == ["g"]
    DecisionGraph(other).add_node(Node(id="h", type="goal", label="H"))
    Memories(mine, project="t").search("anything", limit=1)  # nothing left to start
    assert [n.id for n in graph.query("active_goals")] == ["g", "h"]
