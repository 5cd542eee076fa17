"""Blank nodes on a remote store are blank nodes on the server (issue 15).

Another SPARQL client must get standard answers about them (``isBlank``, ``isIRI``,
``ORDER BY``), and rdfmem must still read, match and remove the nodes it is handed, by the
rule in ``rdfmem.backends.sparql.client``'s docstring. Real servers, no mocks.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from pyoxigraph import BlankNode, DefaultGraph, NamedNode
from servers import OxigraphServer, Server

from rdfmem import InvalidTerm, RemoteStore

EX = "http://example.org/"
DOC = f"""
<{EX}doc> <{EX}author> [ <{EX}name> "Ann" ; <{EX}age> 41 ] .
<{EX}doc> <{EX}editor> [ <{EX}name> "Bob" ] .
<{EX}zed> <{EX}name> "Zed" .
"""


@pytest.fixture
def remote(server: Server) -> Iterator[RemoteStore]:
    store = server.connect()
    yield store
    store.close()


def _raw_rows(server: Server, remote: RemoteStore, query: str) -> list[dict]:
    """A query sent straight to the server, as any SPARQL client sends it."""
    data = {"query": query}
    graph = remote.backend.default_graph
    if graph is not None:  # Virtuoso: rdfmem's default graph is a named graph there
        data["default-graph-uri"] = graph.value
    response = httpx.post(
        server.query_url,
        data=data,
        headers={"Accept": "application/sparql-results+json"},
        timeout=30,
    )
    response.raise_for_status()
    rows: list[dict] = response.json()["results"]["bindings"]
    return rows


def _objects(remote: RemoteStore, subject: object, predicate: str) -> list:
    return [r["o"] for r in remote.select(subject=subject, predicate=predicate, object="?o")]


def test_outside_queries_see_blank_nodes_as_blank_nodes(
    server: Server, remote: RemoteStore
) -> None:
    remote.load(DOC, "turtle")
    rows = _raw_rows(
        server,
        remote,
        f"SELECT ?who (isBlank(?who) AS ?blank) (isIRI(?who) AS ?iri) "
        f"WHERE {{ ?who <{EX}name> ?n }} ORDER BY ?who",
    )
    types = [r["who"]["type"] for r in rows]
    if isinstance(server, OxigraphServer):  # blank nodes sort first (Virtuoso: last)
        assert types == ["bnode", "bnode", "uri"]
    assert sorted(types) == ["bnode", "bnode", "uri"]
    for row in rows:
        blank = row["who"]["type"] == "bnode"
        assert row["blank"]["value"] in (("true", "1") if blank else ("false", "0"))
        if isinstance(server, OxigraphServer):  # Virtuoso's isIRI is true of its blank nodes
            assert row["iri"]["value"] == ("false" if blank else "true")
    # rdfmem's own raw queries are evaluated by the server: the same answers.
    mine = remote.query(f"SELECT ?who WHERE {{ ?who <{EX}name> ?n FILTER(isBlank(?who)) }}")
    assert len(mine) == 2 and all(isinstance(r["who"], BlankNode) for r in mine)


def test_the_quads_of_one_load_share_their_blank_nodes(server: Server, remote: RemoteStore) -> None:
    remote.load(DOC, "turtle")
    [author] = _objects(remote, EX + "doc", EX + "author")
    assert isinstance(author, BlankNode)
    rows = remote.select(subject=author, predicate="?p", object="?o")
    assert {r["p"].value for r in rows} == {EX + "name", EX + "age"}
    remote.load(DOC, "turtle")  # a second load is a second document: new nodes
    assert remote.count(predicate=EX + "author") == 2


def test_a_read_blank_node_matches_exactly_its_own_quads(remote: RemoteStore) -> None:
    remote.load(DOC, "turtle")
    rows = remote.select(subject="?s", predicate=EX + "name", object="?n")
    nodes = {r["s"] for r in rows if isinstance(r["s"], BlankNode)}
    assert len(nodes) == 2
    for node in nodes:
        names = [o.value for o in _objects(remote, node, EX + "name")]
        assert len(names) == 1
        assert remote.ask(subject=node, predicate=EX + "name", object=names[0])
        [other] = nodes - {node}
        [theirs] = _objects(remote, other, EX + "name")
        assert not remote.ask(subject=node, predicate=EX + "name", object=theirs)
        rows = remote.select(subject="?s", predicate="?p", object=node)
        assert [r["s"] for r in rows] == [NamedNode(EX + "doc")]
    assert not remote.ask(subject=BlankNode("nowhere"), predicate=EX + "name")


def test_removing_a_blank_node_quad_removes_only_that_one(remote: RemoteStore) -> None:
    remote.load(DOC, "turtle")
    [bob] = _objects(remote, EX + "doc", EX + "editor")
    assert remote.retract(bob, EX + "name", "Bob")
    assert remote.count(predicate=EX + "name") == 2  # Ann and Zed are still there
    assert not remote.retract(bob, EX + "name", "Bob")  # already gone: nothing to remove
    assert remote.retract(EX + "doc", EX + "editor", bob)
    assert remote.count(subject=EX + "doc") == 1


def test_a_blank_node_among_look_alikes_is_refused_not_guessed(remote: RemoteStore) -> None:
    remote.load(f"<{EX}a> <{EX}p> [] . <{EX}a> <{EX}p> [] .", "turtle")
    nodes = _objects(remote, EX + "a", EX + "p")
    assert len(set(nodes)) == 2
    with pytest.raises(InvalidTerm, match="2 blank nodes"):
        remote.retract(EX + "a", EX + "p", nodes[0])
    assert remote.count(subject=EX + "a") == 2  # nothing was removed


def test_a_blank_node_can_be_neither_a_bound_value_nor_a_graph(remote: RemoteStore) -> None:
    remote.load(DOC, "turtle")
    [ann] = _objects(remote, EX + "doc", EX + "author")
    with pytest.raises(InvalidTerm, match="pre-bound"):
        remote.query(f"SELECT ?n WHERE {{ ?who <{EX}name> ?n }}", bindings={"who": ann})
    with pytest.raises(InvalidTerm, match="graph"):
        remote.assert_(EX + "s", EX + "p", "o", graph=BlankNode("g"))
    assert remote.count(graph=DefaultGraph()) == 6


def test_an_asserted_blank_node_round_trips_as_the_servers_node(
    server: Server, remote: RemoteStore
) -> None:
    remote.assert_(BlankNode("b1"), EX + "name", "anonymous")
    [node] = [q.subject for q in remote.triples(graph=DefaultGraph())]
    assert isinstance(node, BlankNode)  # the server's own label
    rows = remote.query(f"SELECT ?who WHERE {{ ?who <{EX}name> 'anonymous' }}")
    assert [r["who"] for r in rows] == [node]
    assert _raw_rows(server, remote, "SELECT ?s WHERE { ?s ?p ?o }")[0]["s"]["type"] == "bnode"
    assert remote.retract(node, EX + "name", "anonymous")
    assert remote.count() == 0
