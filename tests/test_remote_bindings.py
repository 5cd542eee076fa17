"""Pre-bound variables on a remote store give embedded Oxigraph's answers (issue 15).

The remote store writes bindings into the query as standard ``VALUES`` blocks
(``rdfmem.backends.sparql.bind``); here each query runs with the same binding on a real
Oxigraph server through rdfmem and on embedded Oxigraph through rdfmem, and the answers
must be the same. The W3C suites (``test_w3c.py``) check the same on every SELECT test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pyoxigraph import Literal, NamedNode
from servers import Server

from rdfmem import RdfStore, RemoteStore

EX = "http://example.org/"
DATA = f"""
@prefix : <{EX}> .
:p0 :name "Ann" ; :age 30 ; :knows :p1 .
:p1 :name "Bob" ; :age 31 ; :knows :p2 .
:p2 :name "Cy" ; :age 32 .
:p3 :age 31 .
"""
INT = NamedNode("http://www.w3.org/2001/XMLSchema#integer")
P = f"PREFIX : <{EX}>\n"

CASES: list[tuple[str, str, Any]] = [
    # read only: VALUES in every group, OPTIONAL and MINUS see the binding too
    ("SELECT ?s ?n WHERE { ?s :name ?n }", "n", Literal("Bob")),
    ("SELECT ?s ?n WHERE { ?s :age ?a OPTIONAL { ?s :name ?n } }", "n", Literal("Bob")),
    ("SELECT ?s ?a WHERE { ?s :age ?a MINUS { ?s :name ?n } }", "a", Literal("31", datatype=INT)),
    (
        "SELECT ?s ?o WHERE { ?s :knows ?o { SELECT ?o WHERE { ?o :name ?x } } }",
        "o",
        NamedNode(EX + "p2"),
    ),
    # assigned by BIND: joined after the WHERE group
    (
        "SELECT ?s ?next WHERE { ?s :age ?a BIND(?a + 1 AS ?next) }",
        "next",
        Literal("32", datatype=INT),
    ),
    # assigned by SELECT (… AS …) and GROUP BY (… AS …): joined after the whole query, LIMIT after
    (
        "SELECT ?s (?a * 2 AS ?twice) WHERE { ?s :age ?a } ORDER BY ?s LIMIT 1",
        "twice",
        Literal("62", datatype=INT),
    ),
    (
        "SELECT ?g (COUNT(*) AS ?c) WHERE { ?s :age ?a } GROUP BY (?a > 30 AS ?g)",
        "c",
        Literal("3", datatype=INT),
    ),
    (
        "SELECT ?a (COUNT(?s) AS ?c) WHERE { ?s :age ?a } GROUP BY ?a",
        "c",
        Literal("2", datatype=INT),
    ),
    (f"SELECT ?s (STR(?n) AS ?label) FROM <{EX}g> WHERE {{ ?s :name ?n }}", "label", Literal("Cy")),
    (
        "SELECT (1 AS ?one) ?s WHERE { ?s :name ?n } # a comment at the very end",
        "one",
        Literal("1", datatype=INT),
    ),
    # other forms
    ("ASK { ?s :name ?n }", "n", Literal("Nobody")),
    ("ASK { BIND(:p9 AS ?x) }", "x", NamedNode(EX + "p9")),
    ("ASK { BIND(:p9 AS ?x) }", "x", NamedNode(EX + "p8")),
    ("CONSTRUCT WHERE { ?s :name ?n }", "n", Literal("Ann")),
    ("CONSTRUCT { ?s :label ?n } WHERE { ?s :name ?n }", "s", NamedNode(EX + "p1")),
    # a hostile value is one term, nothing more
    ("SELECT ?s ?n WHERE { ?s :name ?n }", "n", Literal('" } UNION { ?s ?p ?n } #')),
]


@pytest.fixture
def stores(oxigraph_server: Server) -> Iterator[tuple[RemoteStore, RdfStore]]:
    oxigraph_server.wipe()
    remote, local = oxigraph_server.connect(), RdfStore()
    for store in (remote, local):
        store.load(DATA, "turtle")
        store.load(DATA, "turtle", graph=EX + "g")
    yield remote, local
    remote.close()


def _answer(result: Any) -> Any:
    if isinstance(result, bool):
        return result
    if hasattr(result, "variables"):
        return list(result.variables), [
            sorted((k, str(v)) for k, v in row.items()) for row in result
        ]
    return sorted(str(t) for t in result)


@pytest.mark.parametrize(("query", "name", "value"), CASES)
def test_a_binding_gives_the_answer_of_embedded_oxigraph(
    stores: tuple[RemoteStore, RdfStore], query: str, name: str, value: Any
) -> None:
    remote, local = stores
    want = _answer(local.query(P + query, bindings={name: value}))
    got = _answer(remote.query(P + query, bindings={name: value}))
    if isinstance(want, tuple) and "ORDER BY" not in query:
        want, got = (want[0], sorted(want[1])), (got[0], sorted(got[1]))
    assert got == want
