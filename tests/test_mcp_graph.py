"""``KnowledgeGraph``: the official memory server's semantics, kept as RDF, on every backend
(embedded Oxigraph in memory and on disk, rdflib, Oxigraph server)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from conftest import StoreFactory

from rdfmem import RdfStore
from rdfmem.core.errors import FormatError
from rdfmem.core.results import SelectResult
from rdfmem.mcp import Client, KnowledgeGraph, KnowledgeGraphError, read_jsonl, write_jsonl

HOSTILE = ['a "quoted" name', "new\nline", "close } brace", "<angle> & >", "ü/ß\\x", ""]


def entity(name: str, kind: str = "person", *observations: str) -> dict[str, Any]:
    return {"name": name, "entityType": kind, "observations": list(observations)}


def rel(source: str, target: str, kind: str) -> dict[str, str]:
    return {"from": source, "to": target, "relationType": kind}


def names(graph: dict[str, Any]) -> list[str]:
    return [e["name"] for e in graph["entities"]]


def test_entities_relations_observations_as_the_official_server(make_store: StoreFactory) -> None:
    kg = KnowledgeGraph(make_store())
    created = kg.create_entities([entity("Alice", "person", "Likes tea"), entity("Acme", "org")])
    assert names({"entities": created}) == ["Alice", "Acme"]
    # Existing names are skipped: only new entities come back, the old one is unchanged.
    again = kg.create_entities([entity("Alice", "robot", "x"), entity("Bob")])
    assert again == [entity("Bob")]
    assert kg.open_nodes(["Alice"])["entities"] == [entity("Alice", "person", "Likes tea")]

    assert kg.create_relations([rel("Alice", "Acme", "works_at")]) == [
        rel("Alice", "Acme", "works_at")
    ]
    assert kg.create_relations([rel("Alice", "Acme", "works_at"), rel("Bob", "Acme", "x")]) == [
        rel("Bob", "Acme", "x")
    ]

    added = kg.add_observations(
        [{"entityName": "Alice", "contents": ["Likes tea", "Speaks Dutch"]}]
    )
    assert added == [{"entityName": "Alice", "addedObservations": ["Speaks Dutch"]}]

    graph = kg.read_graph()
    assert names(graph) == ["Alice", "Acme", "Bob"]
    assert graph["entities"][0]["observations"] == ["Likes tea", "Speaks Dutch"]
    assert graph["relations"] == [rel("Alice", "Acme", "works_at"), rel("Bob", "Acme", "x")]

    # search: case-insensitive over name, type and observations; relations with one end in.
    found = kg.search_nodes("DUTCH")
    assert names(found) == ["Alice"]
    assert found["relations"] == [rel("Alice", "Acme", "works_at")]
    assert names(kg.search_nodes("ORG")) == ["Acme"]
    assert kg.search_nodes("nothing like it") == {"entities": [], "relations": []}
    assert names(kg.open_nodes(["Bob", "Nobody"])) == ["Bob"]


def test_missing_entity_is_an_error_and_nothing_is_written(make_store: StoreFactory) -> None:
    kg = KnowledgeGraph(make_store())
    kg.create_entities([entity("Alice")])
    before = kg.read_graph()
    with pytest.raises(KnowledgeGraphError, match="Entity with name Ghost not found"):
        kg.add_observations(
            [
                {"entityName": "Alice", "contents": ["would be new"]},
                {"entityName": "Ghost", "contents": ["x"]},
            ]
        )
    assert kg.read_graph() == before


def test_deletes_cascade_and_ignore_what_is_missing(make_store: StoreFactory) -> None:
    store = make_store()
    kg = KnowledgeGraph(store)
    kg.create_entities([entity("A", "t", "a1", "a2"), entity("B"), entity("C")])
    kg.create_relations([rel("A", "B", "r"), rel("B", "C", "r"), rel("C", "A", "r")])
    kg.delete_observations(
        [
            {"entityName": "A", "observations": ["a1", "nope"]},
            {"entityName": "Z", "observations": []},
        ]
    )
    assert kg.open_nodes(["A"])["entities"][0]["observations"] == ["a2"]
    kg.delete_relations([rel("B", "C", "r"), rel("X", "Y", "r")])
    assert kg.read_graph()["relations"] == [rel("A", "B", "r"), rel("C", "A", "r")]
    kg.delete_entities(["A", "Nobody"])
    assert kg.read_graph() == {"entities": [entity("B"), entity("C")], "relations": []}
    # Nothing of A is left in the store: no observation resources, no relation resources.
    rows = store.query(
        "SELECT ?s WHERE { GRAPH <urn:rdfmem:graph:knowledge> { ?s ?p ?o } "
        "FILTER(CONTAINS(STR(?s), '/entity/A') || CONTAINS(STR(?s), '/relation/')) }"
    )
    assert isinstance(rows, SelectResult) and len(rows) == 0


def test_hostile_names_round_trip_and_stay_in_their_place(make_store: StoreFactory) -> None:
    store = make_store()
    kg = KnowledgeGraph(store)
    kg.create_entities([entity(n, n, n) for n in HOSTILE])
    kg.create_relations([rel(a, b, a + b) for a, b in itertools.pairwise(HOSTILE)])
    graph = kg.read_graph()
    assert names(graph) == HOSTILE
    assert [e["observations"] for e in graph["entities"]] == [[n] for n in HOSTILE]
    assert len(graph["relations"]) == len(HOSTILE) - 1
    assert names(kg.open_nodes(HOSTILE[:2])) == HOSTILE[:2]
    # Nothing leaked out of the knowledge graph's named graph.
    assert store.count(graph="urn:rdfmem:graph:knowledge") > 0
    assert store.count(graph=None) == store.count(graph="urn:rdfmem:graph:knowledge")


def test_projects_are_kept_apart(make_store: StoreFactory) -> None:
    store = make_store()
    KnowledgeGraph(store, "web").create_entities([entity("Alice")])
    KnowledgeGraph(store, "ml").create_entities([entity("Bob")])
    assert names(KnowledgeGraph(store, "web").read_graph()) == ["Alice"]
    assert names(KnowledgeGraph(store, "ml").read_graph()) == ["Bob"]
    assert KnowledgeGraph(store).read_graph() == {"entities": [], "relations": []}


def test_creation_time_and_client_are_recorded_as_prov(make_store: StoreFactory) -> None:
    store = make_store()
    kg = KnowledgeGraph(store)
    kg.create_entities([entity("Alice", "person", "Likes tea")], Client("claude-code", "1.2"))
    rows = store.query(
        "PREFIX prov: <http://www.w3.org/ns/prov#> "
        "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> "
        "SELECT ?kind ?when ?label WHERE { GRAPH ?g { ?s a ?kind ; prov:generatedAtTime ?when ; "
        "prov:wasAttributedTo ?who . ?who rdfs:label ?label } } ORDER BY ?kind"
    )
    assert isinstance(rows, SelectResult)
    kinds = [r["kind"].value.rsplit("#", 1)[1] for r in rows]
    assert kinds == ["EntityObservation", "KnowledgeEntity"]
    assert {r["label"].value for r in rows} == {"claude-code 1.2"}
    assert all(r["when"].datatype.value.endswith("#dateTime") for r in rows)


def test_a_write_by_another_writer_is_seen(make_store: StoreFactory) -> None:
    """The mirror of an embedded store notices writes that bypassed it."""
    store = make_store()
    kg = KnowledgeGraph(store)
    kg.create_entities([entity("Alice", "person", "a")])
    assert names(kg.read_graph()) == ["Alice"]
    other = KnowledgeGraph(store)
    other.create_entities([entity("Bob")])
    store.sparql_update(
        "DELETE WHERE { GRAPH <urn:rdfmem:graph:knowledge> { "
        "<urn:rdfmem:graph:knowledge/entity/Alice> ?p ?o } }"
    )
    assert names(kg.read_graph()) == ["Bob"]
    with pytest.raises(KnowledgeGraphError):
        kg.add_observations([{"entityName": "Alice", "contents": ["b"]}])


def test_data_conforms_to_the_shapes(tmp_path: Any) -> None:
    pytest.importorskip("pyshacl")
    import pyshacl
    import rdflib

    from rdfmem.core.ontology import ontology_path

    store = RdfStore()
    kg = KnowledgeGraph(store, "p")
    kg.create_entities([entity("A", "t", "o1", "o2"), entity("B")], Client("c", "1"))
    kg.create_relations([rel("A", "B", "r"), rel("A", "Nobody", "r")])
    data = rdflib.Graph().parse(data=store.export("ntriples", graph=kg.graph), format="nt")
    shapes = rdflib.Graph().parse(ontology_path() / "shapes.ttl")
    conforms, _, report = pyshacl.validate(data, shacl_graph=shapes, inference="rdfs")
    assert conforms, report
    # and a broken entity is caught
    store.sparql_update(
        "INSERT DATA { GRAPH <urn:x> { <urn:e> a <https://w3id.org/rdfmem#KnowledgeEntity> } }"
    )
    bad = rdflib.Graph().parse(data=store.export("ntriples", graph="urn:x"), format="nt")
    assert not pyshacl.validate(bad, shacl_graph=shapes)[0]


def test_jsonl_round_trip_and_import_merges(make_store: StoreFactory) -> None:
    text = (
        '{"type":"entity","name":"A","entityType":"t","observations":["o1","ü"]}\n'
        '{"type":"entity","name":"B","entityType":"t","observations":[]}\n'
        '{"type":"relation","from":"A","to":"B","relationType":"r"}\n'
    )
    kg = KnowledgeGraph(make_store())
    kg.create_entities([entity("A", "t", "o0")])
    assert kg.import_model(read_jsonl(text)) == (1, 2, 1)
    graph = kg.read_graph()
    assert graph["entities"][0]["observations"] == ["o0", "o1", "ü"]
    assert write_jsonl(kg.model()).splitlines()[1:] == text.splitlines()[1:]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "line 2: not JSON"),
        ('["a"]', "line 2: expected a JSON object"),
        ('{"type":"thing"}', 'line 2: "type" must be "entity" or "relation"'),
        ('{"type":"relation","from":"A","to":1,"relationType":"r"}', 'needs "to"'),
        ('{"type":"entity","name":"A","entityType":"t","observations":[1]}', "list of strings"),
        ('{"type":"entity","name":"\\ud800","entityType":"t","observations":[]}', "surrogate"),
    ],
)
def test_a_broken_jsonl_line_is_named(line: str, message: str) -> None:
    good = '{"type":"entity","name":"A","entityType":"t","observations":[]}'
    with pytest.raises(FormatError, match=message):
        read_jsonl(f"{good}\n{line}\n")


def test_writes_vouched_elsewhere_keep_the_mirror_and_others_do_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = RdfStore()
    kg = KnowledgeGraph(store)
    kg.create_entities([entity("Alice")])
    scans: list[object] = []
    real = store.backend.match

    def match(*pattern: Any) -> Any:
        if pattern[-1] == kg.graph:
            scans.append(pattern)
        return real(*pattern)

    monkeypatch.setattr(store.backend, "match", match)
    with kg.writes_elsewhere():
        store.set("note", 1)  # the key/value graph, not the knowledge graph
    assert names(kg.read_graph()) == ["Alice"] and scans == []
    store.set("note", 2)  # not vouched for: the graph is read again
    assert names(kg.read_graph()) == ["Alice"] and scans


def test_creation_order_survives_a_store_that_rewrites_times() -> None:
    """Oxigraph prints 10:00:59.100000+00:00 as 10:00:59.1Z: the order is by instant, not
    by text (by text, .100001Z sorted before .1Z and entities came back swapped)."""
    from pyoxigraph import Literal, NamedNode

    from rdfmem.mcp.model import model_from_quads
    from rdfmem.mcp.vocab import ENTITY_NAME, ENTITY_TYPE, GENERATED, entity_iri, graph_iri

    g = graph_iri(None)
    xsd = NamedNode("http://www.w3.org/2001/XMLSchema#dateTime")
    rows = []
    for name, when in [
        ("second", "2026-01-01T10:00:59.100001Z"),
        ("first", "2026-01-01T10:00:59.1Z"),
    ]:
        iri = entity_iri(g, name)
        rows += [
            (iri, ENTITY_NAME, Literal(name)),
            (iri, ENTITY_TYPE, Literal("t")),
            (iri, GENERATED, Literal(when, datatype=xsd)),
        ]
    assert list(model_from_quads(g, rows).entities) == ["first", "second"]


def test_a_cold_search_answers_as_the_graph_read_into_memory(tmp_path: Any) -> None:
    """Right after opening, ``search_nodes`` and ``open_nodes`` ask the store for just what
    they need (no whole-graph read); the answers are those of the mirror read afterwards."""
    path = str(tmp_path / "store")
    with RdfStore.open(path) as store:
        kg = KnowledgeGraph(store)
        people = [
            entity(f"P{i}", "person" if i % 2 else "robot", f"likes {i}", "Tea") for i in range(30)
        ]
        kg.create_entities([*people, entity('Qu"ote }>', "ÄÖ", "naïve 東京")])
        kg.create_relations([rel(f"P{i}", f"P{i + 1}", "knows") for i in range(29)])
        kg.create_relations([rel("P1", "Nobody", "ghost")])
    queries = ["p1", "ROBOT", "tea", "likes 2", "äö", "東京", "nothing", ""]
    with RdfStore.open(path) as store:
        kg = KnowledgeGraph(store)
        assert kg.cold
        cold = {q: kg.search_nodes(q) for q in queries if q}
        opened = kg.open_nodes(["P3", "Nobody", 'Qu"ote }>'])
        assert kg.cold  # nothing above read the whole graph
        kg.warm()
        assert not kg.cold
        assert {q: kg.search_nodes(q) for q in queries if q} == cold
        assert kg.open_nodes(["P3", "Nobody", 'Qu"ote }>']) == opened
        assert names(cold["p1"])[:2] == ["P1", "P10"]
