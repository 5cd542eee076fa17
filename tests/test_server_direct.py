"""Answers read straight from the indexes (``rdfmem.server.direct``): the rows the query
engine gives, written byte for byte as its SPARQL JSON writer writes them; every query past
the bounds (a join whose first pattern has many rows, a large result, other formats, named
graphs, a write running) goes the usual way, and a served join needs no child process.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import httpx
import pyoxigraph as ox
import pytest
from test_server_support import filled_store

from rdfmem import RdfStore
from rdfmem.backends.oxigraph import OxigraphBackend
from rdfmem.core.errors import QueryError
from rdfmem.server import BackgroundServer
from rdfmem.server.direct import OUTER, direct_rows, parse_direct

_N = ox.NamedNode
_JSON = "application/sparql-results+json"


def _store() -> ox.Store:
    store = ox.Store()
    s, p, q, r = _N("urn:s"), _N("urn:p"), _N("urn:q"), _N("urn:r")
    odd = "".join(chr(i) for i in range(0x30)) + '"\\\x7f\u2028é😀</script>'
    objects: list[Any] = [
        _N("urn:a"),
        _N("http://x/é?a=b&c#f"),
        ox.BlankNode("b1"),
        ox.Literal(odd),
        ox.Literal("hi", language="en-GB"),
        ox.Literal("5", datatype=_N("http://www.w3.org/2001/XMLSchema#integer")),
        ox.Literal(""),
    ]
    for o in objects:
        store.add(ox.Quad(s, p, o))
    store.add(ox.Quad(_N("urn:a"), q, ox.Literal("from a")))
    store.add(ox.Quad(_N("urn:a"), q, _N("urn:s")))
    store.add(ox.Quad(ox.BlankNode("b1"), q, ox.Literal("from b1")))
    store.add(ox.Quad(_N("urn:a"), r, _N("urn:a")))
    store.add(ox.Quad(s, q, ox.Literal("only in g"), _N("urn:g")))  # not the default graph
    return store


_QUERIES = [
    "SELECT ?o WHERE { <urn:s> <urn:p> ?o }",
    "SELECT ?o ?x WHERE { <urn:s> <urn:p> ?o }",
    "select ?p ?o { <urn:s> ?p ?o . }",
    "SELECT ?s WHERE { ?s <urn:q> <urn:s> }",
    "SELECT ?s ?p ?o WHERE { ?s ?p ?o }",
    "SELECT ?o WHERE { <urn:s> <urn:p> ?o } LIMIT 2",
    "SELECT ?o WHERE { <urn:s> <urn:p> ?o } LIMIT 0",
    "SELECT ?o WHERE { <urn:nobody> <urn:p> ?o }",
    "SELECT ?o WHERE { <urn:s> <urn:q> ?o }",
    "SELECT ?o ?n WHERE { <urn:s> <urn:p> ?n . ?n <urn:q> ?o }",
    "SELECT ?o WHERE { ?n <urn:q> ?o . <urn:s> <urn:p> ?n }",
    "SELECT ?n ?o WHERE { <urn:s> <urn:p> ?n . ?n ?o <urn:a> }",
    "SELECT ?a ?b WHERE { <urn:s> <urn:p> ?a . <urn:a> <urn:q> ?b }",
    "SELECT ?o WHERE { <urn:s> <urn:p> ?n . ?n <urn:q> ?o } LIMIT 1",
    "SELECT ?x ?y WHERE { ?x <urn:q> ?y . ?y <urn:p> ?z }",
    "SELECT ?x WHERE { ?x <urn:r> ?y . ?y <urn:r> ?x }",
]


def _rows(doc: bytes) -> tuple[list[str], Counter[str]]:
    parsed = json.loads(doc)
    rows = Counter(json.dumps(b, sort_keys=True) for b in parsed["results"]["bindings"])
    return parsed["head"]["vars"], rows


@pytest.mark.parametrize("query", _QUERIES)
def test_the_rows_are_the_engines_written_as_its_writer_writes_them(query: str) -> None:
    store = _store()
    plan = parse_direct(query)
    assert plan is not None, query
    mine = direct_rows(store, plan, 1 << 20, lambda: True)
    assert mine is not None
    engine = store.query(query).serialize(format=ox.QueryResultsFormat.JSON)
    assert isinstance(engine, bytes)
    if "LIMIT" in query and "LIMIT 0" not in query:
        head, rows = _rows(mine)
        assert head == _rows(engine)[0]
        assert sum(rows.values()) == sum(_rows(engine)[1].values())
        assert not rows - _rows(store.query(query.split("LIMIT")[0]).serialize(
            format=ox.QueryResultsFormat.JSON
        ))[1]  # fmt: skip
        return
    assert _rows(mine) == _rows(engine)
    if len(plan.patterns) == 1:
        assert mine == engine  # the same bytes, the same order


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * WHERE { <urn:s> <urn:p> ?o }",
        "SELECT ?o WHERE { <urn:s> <urn:p> ?o FILTER(?o) }",
        "SELECT ?o WHERE { <urn:s> <urn:p> 'x' }",
        "SELECT ?o WHERE { <s> <urn:p> ?o }",  # relative: resolved against the base
        "SELECT ?o WHERE { ?o ?o ?x }",
        "SELECT ?o ?o WHERE { <urn:s> <urn:p> ?o }",
        "SELECT DISTINCT ?o WHERE { <urn:s> <urn:p> ?o }",
        "SELECT ?o WHERE { GRAPH ?g { <urn:s> <urn:p> ?o } }",
        "SELECT ?o WHERE { ?a ?b ?c . ?c ?d ?e . ?e ?f ?o }",
        "ASK { <urn:s> <urn:p> ?o }",
        "PREFIX ex: <urn:> SELECT ?o WHERE { ex:s ex:p ?o }",
    ],
)
def test_other_queries_go_the_usual_way(query: str) -> None:
    assert parse_direct(query) is None


def test_a_join_past_its_bounds_goes_the_usual_way() -> None:
    store = ox.Store()
    hub, p = _N("urn:hub"), _N("urn:p")
    for i in range(OUTER + 1):
        store.add(ox.Quad(hub, p, _N(f"urn:n{i}")))  # none has q: no row would be written
    join = parse_direct("SELECT ?o WHERE { <urn:hub> <urn:p> ?n . ?n <urn:q> ?o }")
    assert join is not None
    assert direct_rows(store, join, 1 << 20, lambda: True) is None  # 257 lookups: too many
    point = parse_direct("SELECT ?n WHERE { <urn:hub> <urn:p> ?n }")
    assert point is not None
    assert direct_rows(store, point, 1 << 20, lambda: True) is not None
    assert direct_rows(store, point, 2000, lambda: True) is None  # larger than the cap
    store.remove(ox.Quad(hub, p, _N("urn:n0")))
    assert direct_rows(store, join, 1 << 20, lambda: True) is not None
    assert direct_rows(store, join, 1 << 20, lambda: False) is None  # a write in between


def test_a_served_join_is_answered_without_a_child_process() -> None:
    with BackgroundServer(filled_store(30), timeout=5.0) as server:
        runner = server.app.state.endpoint.runner
        join = "SELECT ?o WHERE { <urn:ex:s1> <urn:ex:next> ?n . ?n <urn:ex:p> ?o }"
        with httpx.Client(base_url=server.url) as client:
            got = client.get("/sparql", params={"query": join}, headers={"Accept": _JSON})
            csv = client.get("/sparql", params={"query": join}, headers={"Accept": "text/csv"})
            forks_before_csv = 0 if runner.sandbox is None else runner.sandbox.forks
        assert got.status_code == 200, got.text
        assert got.headers["content-type"] == "application/sparql-results+json; charset=utf-8"
        assert [b["o"]["value"] for b in got.json()["results"]["bindings"]] == ["value 2"]
        assert csv.status_code == 200
        assert csv.text.split() == ["o", "value", "2"]
        assert runner.sandbox is not None and forks_before_csv >= 1  # CSV: the usual way


def test_the_usual_way_answers_while_an_update_runs(tmp_path: Any) -> None:
    store = RdfStore()
    store.assert_(ox.NamedNode("urn:s"), ox.NamedNode("urn:p"), ox.NamedNode("urn:a"))
    store.assert_(ox.NamedNode("urn:a"), ox.NamedNode("urn:q"), "x")
    with BackgroundServer(store, timeout=5.0) as server:
        endpoint = server.app.state.endpoint
        endpoint.runner.writing = 1  # as while an update runs on a worker
        try:
            started = endpoint.start_query(
                "SELECT ?o WHERE { <urn:s> <urn:p> ?n . ?n <urn:q> ?o }",
                accept=_JSON,
                base="http://127.0.0.1/sparql",
            )
            assert not hasattr(started, "body")  # a coroutine: the sandbox answers
            started.close()  # type: ignore[union-attr]
            point = endpoint.start_query(
                "SELECT ?o WHERE { <urn:s> <urn:p> ?o }", accept=_JSON, base="x:"
            )
            assert getattr(point, "status", None) == 200  # one read: one snapshot
        finally:
            endpoint.runner.writing = 0


def test_a_join_is_read_here_only_when_no_write_of_the_store_overlaps_it(tmp_path: Any) -> None:
    """Writes that do not go through the endpoint (the program embedding ``serve``, or
    processes attached to the store it owns) count too: a join read while one is under way,
    or across one, goes the usual way."""
    from rdfmem.store.readonly import ReadOnlyOpen, unchanged_since

    store = RdfStore.open(tmp_path / "db")
    store.assert_(ox.NamedNode("urn:s"), ox.NamedNode("urn:p"), ox.NamedNode("urn:a"))
    before = unchanged_since(store)
    assert before is not None and before()
    seen_while_writing: list[object] = []
    store.backend.write_hooks.append(lambda _: seen_while_writing.append(unchanged_since(store)))
    store.assert_(ox.NamedNode("urn:a"), ox.NamedNode("urn:q"), "x")
    assert seen_while_writing == [None]  # under way: not even tried
    assert not before()  # a write began and ended since: this join's reads may differ
    after = unchanged_since(store)
    assert after is not None and after()
    with pytest.raises(QueryError):  # the engine refuses it: a write begun, and ended
        store.backend.update("INSERT DATA { <urn:b> <urn:q> <urn:c> } ; NOT SPARQL")
    assert not after()
    assert unchanged_since(store) is not None
    store.close()
    handed_in = RdfStore(OxigraphBackend(store=ox.Store()))
    assert unchanged_since(handed_in) is None  # may be written around: never
    reader = ReadOnlyOpen(tmp_path / "db")
    check = unchanged_since(reader.store)
    assert check is not None and check()  # a read-only open is one state
