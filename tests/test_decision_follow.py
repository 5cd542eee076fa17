"""A remote decision graph followed by the change log: a client keeps the node and link
index in its process, as it keeps memory vectors, and reads only what changed; another
client's writes are seen on the next call, a raw update through rdfmem too, and a write by
a plain SPARQL client once the index is older than ``max_age_s`` (or forgotten)."""

from __future__ import annotations

import httpx
from servers import Server

from rdfmem import DecisionGraph, Edge, Node, RdfStore
from rdfmem.store.indexes.graph_follow import GraphFollower, graph_follower


def ids(nodes: list[Node]) -> list[str]:
    return [n.id for n in nodes]


def follower_of(store: RdfStore) -> GraphFollower:
    found = graph_follower(store)
    assert found is not None
    return found


def test_another_clients_writes_are_seen_on_the_next_call(
    two: tuple[RdfStore, RdfStore],
) -> None:
    mine, theirs = two
    reader, writer = DecisionGraph(mine), DecisionGraph(theirs)
    writer.add_node(Node(id="g", type="goal", label="Ship"))
    assert ids(reader.query("active_goals")) == ["g"]
    index = follower_of(mine).sets[reader.graph]
    writer.add_node(Node(id="d1", type="decision", label="Use RDF"))
    writer.add_edge(Edge(from_id="g", to_id="d1", type="leads_to"))
    assert ids(reader.query("recent_decisions")) == ["d1"]
    assert ids(reader.query("descendants", node_id="g")) == ["d1"]
    # only the changed subjects were read: the same index object, not a rebuild
    assert follower_of(mine).sets[reader.graph] is index
    writer.add_node(Node(id="d2", type="decision", label="Use SPARQL"))
    writer.supersede("d1", "d2", rationale="better")
    writer.update_node("g", status="completed")
    assert reader.query("active_goals") == []
    assert reader.get_node("d1").status == "superseded"
    assert ids(reader.query("recent_decisions", limit=5)) == ["d2", "d1"]
    assert ids(reader.query("path_between", from_id="d2", to_id="d1")) == ["d2", "d1"]
    assert follower_of(mine).sets[reader.graph] is index
    writer.delete_node("d1")
    assert ids(reader.query("descendants", node_id="g")) == []
    assert ids(reader.query("recent_decisions")) == ["d2"]
    # and the reader's own writes
    reader.add_node(Node(id="g2", type="goal", label="Again"))
    assert ids(reader.query("active_goals")) == ["g2"]
    assert ids(writer.query("active_goals")) == ["g2"]


def test_a_raw_update_through_rdfmem_is_seen_on_the_next_call(
    two: tuple[RdfStore, RdfStore],
) -> None:
    mine, theirs = two
    reader, writer = DecisionGraph(mine), DecisionGraph(theirs)
    writer.add_node(Node(id="g", type="goal", label="Ship"))
    assert ids(reader.query("active_goals")) == ["g"]
    theirs.sparql_update(
        f"DELETE WHERE {{ GRAPH <{writer.graph}> {{ ?s ?p ?o }} }}"
    )  # a change of unknown scope
    assert reader.query("active_goals") == []


def test_a_plain_sparql_clients_write_is_seen_after_max_age(
    server: Server, two: tuple[RdfStore, RdfStore]
) -> None:
    mine, theirs = two
    reader, writer = DecisionGraph(mine), DecisionGraph(theirs)
    writer.add_node(Node(id="g", type="goal", label="Ship"))
    assert ids(reader.query("active_goals")) == ["g"]
    bypass = f"DELETE WHERE {{ GRAPH <{writer.graph}> {{ ?s ?p ?o }} }}"
    answer = httpx.post(server.update_url, data={"update": bypass}, timeout=30)
    assert answer.status_code in (200, 204), answer.text
    follower = follower_of(mine)
    follower.max_age_s = 0.0  # the index is now older than that: the next read reads all
    try:
        assert reader.query("active_goals") == []
    finally:
        follower.max_age_s = 60.0
    writer.add_node(Node(id="g2", type="goal", label="Again"))
    httpx.post(server.update_url, data={"update": bypass}, timeout=30)
    follower.forget()
    assert reader.query("active_goals") == []


def test_a_store_without_the_change_log_reads_the_server(server: Server) -> None:
    store = server.connect()
    try:
        assert graph_follower(store) is None
        graph = DecisionGraph(store)
        graph.add_node(Node(id="g", type="goal", label="Ship"))
        assert ids(graph.query("active_goals")) == ["g"]
    finally:
        store.close()
