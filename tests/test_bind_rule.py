"""One rule for binding a variable the query does not project, on every backend (issue 22,
left from last time: the remote store answered, embedded Oxigraph refused).

The rule (``rdfmem.core.outline.check_bindings``, SEP-0007 as embedded Oxigraph reads it):
a ``SELECT`` that does not project a pre-bound variable, nor writes ``SELECT *``, is refused
with ``QueryError`` naming the variable; ``SELECT *``, ``ASK`` and a projected variable
are answered alike everywhere. Real backends: embedded Oxigraph, rdflib, Oxigraph server
and Virtuoso.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyoxigraph import Literal, NamedNode

from rdfmem import OxigraphBackend, QueryError, RdflibBackend, RdfStore

EX = "http://example.org/"
DATA = f'<{EX}a> <{EX}p> "1" . <{EX}b> <{EX}p> "2" .'
BOUND = {"s": NamedNode(EX + "a")}


@pytest.fixture(
    params=[
        "oxigraph",
        pytest.param("rdflib", id="rdflib"),
        "oxigraph_server",
        "virtuoso_server",
    ]
)
def store(request: pytest.FixtureRequest) -> Iterator[RdfStore]:
    kind = request.param
    if kind == "oxigraph":
        opened = RdfStore(OxigraphBackend())
    elif kind == "rdflib":
        opened = RdfStore(RdflibBackend())
    else:
        server = request.getfixturevalue(kind)
        server.wipe()
        opened = server.connect()
    opened.load(DATA, "turtle")
    yield opened
    opened.close()


UNPROJECTED = [
    f"SELECT ?o WHERE {{ ?s <{EX}p> ?o }}",
    f"SELECT ?o WHERE {{ {{ SELECT ?o WHERE {{ ?s <{EX}p> ?o }} }} }}",
    f"SELECT (COUNT(*) AS ?n) WHERE {{ ?s <{EX}p> ?o }}",
]


@pytest.mark.parametrize("query", UNPROJECTED)
def test_binding_a_variable_the_select_does_not_project_is_refused(
    store: RdfStore, query: str
) -> None:
    try:
        answer = store.query(query, bindings=BOUND)
    except QueryError as exc:
        assert "?s" in str(exc) and "projection" in str(exc)
        return
    raise AssertionError(f"answered instead of refused: {answer!r}")


def test_a_bound_variable_the_query_shows_is_answered_alike(store: RdfStore) -> None:
    rows = store.query(f"SELECT * WHERE {{ ?s <{EX}p> ?o }}", bindings=BOUND)
    assert [(r["s"], r["o"]) for r in rows] == [(NamedNode(EX + "a"), Literal("1"))]
    rows = store.query(f"SELECT ?s ?o WHERE {{ ?s <{EX}p> ?o }}", bindings=BOUND)
    assert [r["o"] for r in rows] == [Literal("1")]
    assert store.query(f'ASK {{ ?s <{EX}p> "1" }}', bindings=BOUND) is True
    assert store.query(f'ASK {{ ?s <{EX}p> "2" }}', bindings=BOUND) is False
