"""The triple contract (Dagonizer TripleStore, with real joins) and SPARQL, on every backend."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
import rdflib
from pyoxigraph import BlankNode, DefaultGraph, Literal, NamedNode, Triple

from rdfmem import FormatError, GraphResult, InvalidTerm, QueryError, RdfStore, SelectResult
from rdfmem.store.triples import compile_patterns

EX = "http://example.org/"
AUTHOR = EX + "author"
NAME = EX + "name"
KNOWS = EX + "knows"


@pytest.fixture
def people(store: RdfStore) -> RdfStore:
    alice, bob = NamedNode(EX + "alice"), NamedNode(EX + "bob")
    store.assert_(EX + "doc1", AUTHOR, alice)
    store.assert_(EX + "doc2", AUTHOR, bob, graph=EX + "g1")
    store.assert_(alice, NAME, "Alice")
    store.assert_(bob, NAME, "Bob", graph=EX + "g1")
    store.assert_(alice, KNOWS, alice)
    store.assert_(alice, KNOWS, bob)
    return store


def test_assert_then_ask_and_retract(store: RdfStore) -> None:
    store.assert_(EX + "s", EX + "p", "o")
    assert store.ask(subject=EX + "s", predicate=EX + "p", object="o")
    assert store.retract(EX + "s", EX + "p", "o") is True
    assert store.retract(EX + "s", EX + "p", "o") is False
    assert not store.ask(subject=EX + "s")


def test_assert_defaults_to_the_default_graph_and_graphs_are_separate(store: RdfStore) -> None:
    store.assert_(EX + "s", EX + "p", "o")
    store.assert_(EX + "s", EX + "p", "o", graph=EX + "g")
    assert [q.graph_name for q in store.triples(DefaultGraph())] == [DefaultGraph()]
    assert [q.graph_name for q in store.triples(EX + "g")] == [NamedNode(EX + "g")]
    assert store.count(subject=EX + "s") == 2  # graph omitted: any graph
    assert store.retract(EX + "s", EX + "p", "o", graph=EX + "g")
    assert store.count(subject=EX + "s") == 1


def test_plain_strings_are_iris_except_in_object_position(store: RdfStore) -> None:
    store.assert_(EX + "s", EX + "p", EX + "not-an-iri-here")
    [row] = store.select(subject="?s", predicate="?p", object="?o")
    assert row["s"] == NamedNode(EX + "s")
    assert row["o"] == Literal(EX + "not-an-iri-here")


@pytest.mark.parametrize(
    ("value", "datatype"),
    [
        (3, "integer"),
        (2.5, "double"),
        (True, "boolean"),
        (Decimal("1.10"), "decimal"),
        (dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc), "dateTime"),
        (dt.date(2026, 1, 2), "date"),
    ],
)
def test_python_values_become_typed_literals(store: RdfStore, value: object, datatype: str) -> None:
    store.assert_(EX + "s", EX + "p", value)
    [row] = store.select(subject=EX + "s", predicate=EX + "p", object="?o")
    assert row["o"].datatype == NamedNode("http://www.w3.org/2001/XMLSchema#" + datatype)
    assert store.ask(subject=EX + "s", object=value)


def test_rdflib_terms_are_accepted(store: RdfStore) -> None:
    store.assert_(rdflib.URIRef(EX + "s"), rdflib.URIRef(EX + "p"), rdflib.Literal("hi", lang="en"))
    store.assert_(rdflib.URIRef(EX + "s"), rdflib.URIRef(EX + "p"), rdflib.URIRef(EX + "o"))
    assert store.ask(subject=EX + "s", object=Literal("hi", language="en"))
    assert store.ask(subject=EX + "s", object=NamedNode(EX + "o"))
    assert store.count(subject=rdflib.URIRef(EX + "s"), object=rdflib.Variable("x")) == 2


def test_single_pattern_select_binds_variables(people: RdfStore) -> None:
    rows = people.select(predicate=AUTHOR, subject="?doc", object="?who")
    assert sorted((r["doc"].value, r["who"].value) for r in rows) == [
        (EX + "doc1", EX + "alice"),
        (EX + "doc2", EX + "bob"),
    ]


def test_graph_variable_binds_named_graphs(people: RdfStore) -> None:
    rows = people.select(subject="?doc", predicate=AUTHOR, object=None, graph="?g")
    assert [(r["doc"].value, r["g"].value) for r in rows] == [(EX + "doc2", EX + "g1")]


def test_join_on_shared_variables_across_graphs(people: RdfStore) -> None:
    rows = people.select([("?doc", AUTHOR, "?who"), ("?who", NAME, "?name")])
    assert sorted((r["doc"].value, r["name"].value) for r in rows) == [
        (EX + "doc1", "Alice"),
        (EX + "doc2", "Bob"),
    ]
    assert people.count([("?doc", AUTHOR, "?who"), ("?who", NAME, "?name")]) == 2
    assert people.ask([("?doc", AUTHOR, "?who"), ("?who", NAME, "Bob")])
    assert not people.ask([("?doc", AUTHOR, "?who"), ("?who", NAME, "Carol")])


def test_join_restricted_to_a_graph(people: RdfStore) -> None:
    rows = people.select([("?doc", AUTHOR, "?who", EX + "g1"), ("?who", NAME, "?n", EX + "g1")])
    assert [r["n"].value for r in rows] == ["Bob"]
    rows = people.select([("?doc", AUTHOR, "?who", DefaultGraph()), ("?who", NAME, "?n")])
    assert [r["n"].value for r in rows] == ["Alice"]


def test_a_repeated_variable_must_bind_the_same_term(people: RdfStore) -> None:
    rows = people.select(subject="?x", predicate=KNOWS, object="?x")
    assert [r["x"].value for r in rows] == [EX + "alice"]
    rows = people.select([("?x", KNOWS, "?x"), ("?x", NAME, "?n")])
    assert [r["n"].value for r in rows] == ["Alice"]


def test_omitted_slots_match_anything(people: RdfStore) -> None:
    assert people.count() == 6
    assert people.count(predicate=KNOWS) == 2
    assert people.select(subject=EX + "bob", predicate=NAME, object="Bob") == [{}]
    assert people.select(subject=EX + "bob", predicate=NAME, object="Nobody") == []


def test_blank_nodes_match_in_a_single_pattern(store: RdfStore) -> None:
    store.assert_(EX + "s", EX + "p", BlankNode("b1"))
    [row] = store.select(subject="?s", predicate=EX + "p", object="?o")
    node = row["o"]
    assert store.ask(subject=EX + "s", object=node)
    with pytest.raises(InvalidTerm, match="blank node"):
        store.select([("?s", EX + "p", node), ("?s", "?p", "?o")])


@pytest.mark.parametrize(
    "pattern",
    [
        ("?bad name", EX + "p", "o"),
        ("?x", "not an iri", "o"),
        ("?__rdfmem_w0", EX + "p", "o"),
        (EX + "s", "?p"),
        ("literal subject", EX + "p", 1),
    ],
)
def test_malformed_patterns_are_refused(store: RdfStore, pattern: tuple) -> None:
    with pytest.raises(InvalidTerm):
        store.select([pattern, ("?a", "?b", "?c")])


def test_compile_patterns_escapes_hostile_literals() -> None:
    sparql, names = compile_patterns([("?s", EX + "p", '" } ; DROP ALL ; #\n')])
    assert "DROP ALL" in sparql and '\\" } ; DROP ALL ; #\\n' in sparql
    assert names == ["s"]


def test_hostile_literals_do_not_break_out(store: RdfStore) -> None:
    evil = '"} ; INSERT DATA { <urn:x> <urn:y> <urn:z> } #\n\\'
    store.assert_(EX + "s", EX + "p", evil)
    assert store.select([("?s", EX + "p", evil), ("?s", "?p", "?o")])[0]["o"].value == evil
    assert store.count() == 1


def test_clear_graph_empties_only_that_graph(people: RdfStore) -> None:
    people.clear_graph(EX + "g1")
    assert list(people.triples(EX + "g1")) == []
    assert people.count() == 4
    people.clear_graph(DefaultGraph())
    assert people.count() == 0


def test_query_select_ask_construct(people: RdfStore) -> None:
    rows = people.query(f"SELECT ?n WHERE {{ ?s <{NAME}> ?n }} ORDER BY ?n")
    assert isinstance(rows, SelectResult)
    assert rows.variables == ["n"]
    assert [r["n"].value for r in rows] == ["Alice"]  # default graph only, as SPARQL says
    rows = people.query(f"SELECT ?n WHERE {{ GRAPH ?g {{ ?s <{NAME}> ?n }} }}")
    assert [r["n"].value for r in rows] == ["Bob"]
    assert people.query(f"ASK {{ ?s <{NAME}> 'Alice' }}") is True
    graph = people.query(f"CONSTRUCT {{ ?s <{EX}label> ?n }} WHERE {{ ?s <{NAME}> ?n }}")
    assert isinstance(graph, GraphResult)
    assert list(graph) == [
        Triple(NamedNode(EX + "alice"), NamedNode(EX + "label"), Literal("Alice"))
    ]
    assert b"Alice" in graph.serialize("turtle")


def test_unbound_variables_are_left_out_of_rows(people: RdfStore) -> None:
    rows = people.query(
        f"SELECT ?s ?n WHERE {{ ?s <{KNOWS}> ?o OPTIONAL {{ ?o <{NAME}> ?n }} }} ORDER BY ?n"
    )
    assert sorted(len(r) for r in rows) == [1, 2]


def test_bindings_pre_bind_variables_without_pasting_text(people: RdfStore) -> None:
    q = f"SELECT ?s ?name WHERE {{ ?s <{NAME}> ?name }}"  # bound variables are projected
    assert [r["s"].value for r in people.query(q, bindings={"name": "Alice"})] == [EX + "alice"]
    assert list(people.query(q, bindings={"name": '" } UNION { ?s ?p ?o } #'})) == []


def test_results_serialize_to_every_results_format(people: RdfStore) -> None:
    q = f"SELECT ?s ?n WHERE {{ ?s <{NAME}> ?n }}"
    for fmt, needle in [
        ("json", b'"Alice"'),
        ("xml", b"<literal>Alice"),
        ("csv", b"Alice"),
        ("tsv", b'"Alice"'),
    ]:
        result = people.query(q)
        assert isinstance(result, SelectResult)
        assert needle in result.serialize(fmt), fmt
    result = people.query(q)
    assert isinstance(result, SelectResult)
    assert len(result) == 1  # rows read first, then serialised from them
    assert b"Alice" in result.serialize("xml")
    with pytest.raises(FormatError):
        result.serialize("yaml")


@pytest.mark.parametrize(
    "bad",
    ["SELEC * WHERE { ?s ?p ?o }", "SELECT * WHERE { ?s ?p }", "ASK { <not closed ?p ?o }"],
)
def test_malformed_sparql_raises_query_error_saying_where(store: RdfStore, bad: str) -> None:
    with pytest.raises(QueryError) as info:
        store.query(bad)
    assert "error" in str(info.value).lower() or "expected" in str(info.value).lower()


def test_sparql_update_and_malformed_update(store: RdfStore) -> None:
    store.sparql_update(
        f'INSERT DATA {{ <{EX}s> <{EX}p> "o" . GRAPH <{EX}g> {{ <{EX}s> <{EX}p> 1 }} }}'
    )
    assert store.count() == 2
    assert store.ask(subject=EX + "s", object="o", graph=DefaultGraph())
    with pytest.raises(QueryError):
        store.sparql_update("INSERT DATA { broken")
    assert store.count() == 2
    store.sparql_update(f"DELETE WHERE {{ GRAPH <{EX}g> {{ ?s ?p ?o }} }}")
    assert store.count() == 1


ALL_FORMATS = ["turtle", "trig", "ntriples", "nquads", "xml", "json-ld"]


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_export_then_load_round_trips(make_store, fmt: str) -> None:
    source = make_store(namespace="src")
    source.set("k", {"v": 'quote " and \n newline'})
    source.assert_(EX + "s", EX + "p", "default graph")
    source.assert_(EX + "s", EX + "p", "named graph", graph=EX + "g")
    text = source.export(fmt)
    target = RdfStore()
    target.load(text, fmt)
    dataset_format = fmt in {"trig", "nquads", "json-ld"}
    if dataset_format:
        assert sorted(map(str, target.triples())) == sorted(map(str, source.triples()))
        assert target.with_namespace("src").get("k") == {"v": 'quote " and \n newline'}
    else:
        assert sorted(str(q.triple) for q in target.triples()) == sorted(
            str(q.triple) for q in source.triples(DefaultGraph())
        )


# rdflib 7.6's parsers call its own deprecated Dataset API.
@pytest.mark.filterwarnings("ignore:Dataset.default_context is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:ConjunctiveGraph is deprecated:DeprecationWarning")
@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_exports_load_back_into_rdflib(people: RdfStore, fmt: str) -> None:
    people.set("k", [1, "two"])
    text = people.export(fmt)
    dataset = rdflib.Dataset()
    dataset.parse(data=text, format={"ntriples": "nt", "json-ld": "json-ld"}.get(fmt, fmt))
    loaded = {(str(s), str(p), str(o)) for s, p, o, _ in dataset.quads()}
    if fmt in {"trig", "nquads", "json-ld"}:
        expected = list(people.triples())
    else:
        expected = list(people.triples(DefaultGraph()))
    assert loaded == {(q.subject.value, q.predicate.value, q.object.value) for q in expected}


def test_export_of_a_named_graph_in_a_triple_format(people: RdfStore) -> None:
    text = people.export("ntriples", graph=EX + "g1")
    assert "Bob" in text and "Alice" not in text


def test_load_into_a_graph_from_a_path(store: RdfStore, tmp_path) -> None:
    path = tmp_path / "data.ttl"
    path.write_text(f'<{EX}s> <{EX}p> "from file" .', encoding="utf-8")
    assert store.load(path, graph=EX + "g") == 1
    assert store.load(path=str(path)) == 1
    assert store.count(object="from file", graph=EX + "g") == 1
    assert store.count(object="from file", graph=DefaultGraph()) == 1


def test_a_str_is_always_data_never_a_file_name(store: RdfStore, tmp_path) -> None:
    # Issue 10 item 17: a one-line str naming a file used to be read from disk.
    path = tmp_path / "secret.nt"
    path.write_text('<urn:a> <urn:b> "secret" .\n', encoding="utf-8")
    with pytest.raises(FormatError) as caught:
        store.load(str(path), "ntriples")
    assert "secret" not in str(caught.value)
    assert store.count() == 0
    # A valid one-line document of 256-4,095 characters is data, not an OSError.
    line = f'<urn:a> <urn:b> "{"x" * 3000}" .'
    assert store.load(line, "ntriples") == 1
    with pytest.raises(FormatError, match="one source"):
        store.load("<urn:a> <urn:b> <urn:c> .", "nt", path=path)


@pytest.mark.parametrize(
    ("data", "fmt"),
    [
        ("<urn:a> <urn:b> .", "turtle"),
        ("<urn:a> <urn:b> <urn:c>", "ntriples"),
        ("{ not json-ld", "json-ld"),
        ("<rdf:RDF", "xml"),
        ("<urn:a> <urn:b> <urn:c> .", "yaml"),
    ],
)
def test_broken_input_is_a_format_error_and_loads_nothing(
    store: RdfStore, data: str, fmt: str
) -> None:
    store.assert_(EX + "s", EX + "p", "kept")
    with pytest.raises(FormatError):
        store.load(f'<{EX}x> <{EX}y> "first line is fine" .\n' + data, fmt)
    assert [q.object for q in store.triples()] == [Literal("kept")]


def test_load_of_text_needs_a_format(store: RdfStore) -> None:
    with pytest.raises(FormatError, match="format"):
        store.load("<urn:a> <urn:b> <urn:c> .")


def test_asserting_a_malformed_json_literal_is_refused(store: RdfStore) -> None:
    json_type = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#JSON")
    with pytest.raises(InvalidTerm, match="JSON"):
        store.assert_(EX + "s", EX + "p", Literal("{nope", datatype=json_type))
    assert store.count() == 0


def test_assert_many_is_all_or_nothing(store: RdfStore) -> None:
    assert store.assert_many([(EX + "a", EX + "p", 1), (EX + "b", EX + "p", 2, EX + "g")]) == 2
    assert store.count(predicate=EX + "p") == 2
    with pytest.raises(InvalidTerm):
        store.assert_many([(EX + "c", EX + "p", 3), ("not an iri", EX + "p", 4)])
    assert store.count(predicate=EX + "p") == 2
