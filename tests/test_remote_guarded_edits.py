"""Edits that remove a JSON or vector literal replace it on every server.

Virtuoso stores a literal of a datatype it does not know (``rdf:JSON``: every key/value
entry; a memory's vector) as typed text, and does not remove it when the operation that
names it to delete also names another graph: a guarded write's receipt (removing a triple
that holds a blank node), a change record, the history graph, or a second data graph. The
triple stayed: ``retract`` said True and the triple was still there, ``clear_graph`` on a
store with history left the literals, ``aset`` / ``aupdate`` with the change log read the
old value again (four ``aupdate`` calls counted 2), and ``SparqlBackend.apply`` over two
graphs kept the old values beside the new ones."""

from __future__ import annotations

import asyncio

import pytest
from pyoxigraph import BlankNode, Literal, NamedNode, Quad
from servers import Server

JSON = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#JSON")
VECTOR = NamedNode("https://w3id.org/rdfmem#float32Vector")
G, H = NamedNode("urn:test:g"), NamedNode("urn:test:h")
DOC, DATA, PART = NamedNode("urn:test:doc"), NamedNode("urn:test:data"), NamedNode("urn:test:part")


def _json(text: str) -> Literal:
    return Literal(text, datatype=JSON)


def _values(server: Server, graph: NamedNode, predicate: NamedNode) -> list[str]:
    """The objects of ``predicate`` in ``graph`` as any SPARQL client reads them."""
    rows = server.rows(
        f"SELECT ?o WHERE {{ GRAPH <{graph.value}> {{ ?s <{predicate.value}> ?o }} }}"
    )
    return sorted(r["o"]["value"] for r in rows)


@pytest.mark.parametrize("change_log", [False, True])
def test_retracting_a_blank_nodes_json_and_vector_removes_them(
    server: Server, change_log: bool
) -> None:
    store = server.connect(change_log=change_log)
    try:
        b = BlankNode()
        store.assert_many(
            [
                (DOC, PART, b, G),
                (b, DATA, _json('{"step": 1, "text": "é \\" \\\\ ;} <x>"}'), G),
                (b, DATA, Literal("AACAPwAAAEA=", datatype=VECTOR), G),
                (b, DATA, _json("2"), G),
            ]
        )
        read = [q for q in store.triples(G) if q.predicate == DATA]
        gone = [q for q in read if q.object != _json("2")]
        assert len(gone) == 2
        for quad in gone:
            assert store.retract(quad.subject, quad.predicate, quad.object, G)
        assert [q.object for q in store.triples(G) if q.predicate == DATA] == [_json("2")]
        assert _values(server, G, DATA) == ["2"]  # the server holds only what is left
        assert store.count(graph=G) == 2
    finally:
        store.close()


@pytest.mark.parametrize("change_log", [False, True])
def test_clear_graph_with_history_then_new_values_leaves_only_those(
    server: Server, change_log: bool
) -> None:
    store = server.connect(change_log=change_log, history=True)
    try:
        b = BlankNode()
        store.assert_many(
            [
                (DOC, DATA, _json('{"v": 1}'), G),
                (DOC, PART, b, G),
                (b, DATA, Literal("AAAAAA==", datatype=VECTOR), G),
            ]
        )
        store.clear_graph(G)
        assert list(store.triples(G)) == []
        store.assert_(DOC, DATA, _json('{"v": 2}'), G)
        assert [q.object for q in store.triples(G)] == [_json('{"v": 2}')]
        assert _values(server, G, DATA) == ['{"v": 2}']
    finally:
        store.close()


def test_async_sets_and_updates_with_the_change_log_replace_the_value(server: Server) -> None:
    store = server.connect(change_log=True)

    async def main() -> tuple[object, object]:
        await store.aset("doc", {"title": "first"})
        await store.aset("doc", {"title": "second"})
        for _ in range(4):
            await store.aupdate("n", lambda n: (n or 0) + 1)
        return await store.aget("doc"), await store.aget("n")

    try:
        assert asyncio.run(main()) == ({"title": "second"}, 4)
        assert store.get("n") == 4
        assert _values(
            server, NamedNode("urn:rdfmem:graph:store"), NamedNode("urn:rdfmem:store:value")
        ) == ["4", '{"title":"second"}']
    finally:
        store.close()


@pytest.mark.parametrize("change_log", [False, True])
def test_a_backend_edit_over_two_graphs_replaces_the_values(
    server: Server, change_log: bool
) -> None:
    store = server.connect(change_log=change_log)
    try:
        old = [Quad(DOC, DATA, _json('{"v": 1}'), g) for g in (G, H)]
        store.backend.apply([], old)
        store.backend.apply(old, [Quad(DOC, DATA, _json('{"v": 2}'), G)])
        assert (_values(server, G, DATA), _values(server, H, DATA)) == (['{"v": 2}'], [])
    finally:
        store.close()


@pytest.mark.parametrize("change_log", [False, True])
def test_a_backend_removal_from_two_graphs_removes_both(server: Server, change_log: bool) -> None:
    store = server.connect(change_log=change_log)
    try:
        quads = [Quad(DOC, DATA, _json('{"v": 3}'), g) for g in (G, H)]
        store.backend.apply([], [*quads, Quad(DOC, PART, DOC, H)])
        store.backend.apply(quads, [])  # removes only: one DELETE DATA on Oxigraph server
        assert [q.predicate for q in store.triples(None) if q.subject == DOC] == [PART]
        assert (_values(server, G, DATA), _values(server, H, DATA)) == ([], [])
    finally:
        store.close()
