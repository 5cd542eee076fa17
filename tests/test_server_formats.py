"""``rdfmem serve`` read by real clients: every format, negotiation, protocol errors, the
service description, Graph Store reads, named queries, health and the page."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pyoxigraph as ox
import pytest
import rdflib
from conftest import StoreFactory
from rdflib.plugins.stores.sparqlstore import SPARQLStore
from SPARQLWrapper import JSON, POST, SPARQLWrapper
from test_server_support import (
    CONSTRUCT_ALL,
    SELECT_ALL,
    fill,
    rows_of,
    triples_of,
)

from rdfmem import RdfStore
from rdfmem.server import BackgroundServer
from rdfmem.server.negotiate import parse_accept

pytest_plugins = ["test_server_support"]


def test_sparqlwrapper_reads_json_by_get_and_post(served: BackgroundServer) -> None:
    for method in ("GET", POST):
        wrapper = SPARQLWrapper(served.sparql_url)
        wrapper.setQuery("SELECT ?o WHERE { <urn:ex:alice> <urn:ex:says> ?o }")
        wrapper.setReturnFormat(JSON)
        wrapper.setMethod(method)
        result = wrapper.queryAndConvert()
        assert isinstance(result, dict)
        binding = result["results"]["bindings"][0]["o"]
        assert binding == {"type": "literal", "value": 'héllo "world"'}


def test_rdflib_sparqlstore_queries_and_matches(served: BackgroundServer) -> None:
    graph = rdflib.Graph(store=SPARQLStore(served.sparql_url, returnFormat="json"))
    rows = list(graph.query("SELECT ?o WHERE { <urn:ex:alice> <urn:ex:age> ?o }"))
    assert [row[0].toPython() for row in rows] == [42]  # type: ignore[index]
    says = set(graph.objects(rdflib.URIRef("urn:ex:bob"), rdflib.URIRef("urn:ex:says")))
    assert says == {rdflib.Literal("salut", lang="fr")}


# -- formats and negotiation ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accept", "content_type", "fmt"),
    [
        ("application/sparql-results+json", "application/sparql-results+json", "JSON"),
        ("application/sparql-results+xml", "application/sparql-results+xml", "XML"),
        ("text/csv", "text/csv", "CSV"),
        ("text/tab-separated-values", "text/tab-separated-values", "TSV"),
        ("application/json", "application/json", "JSON"),
    ],
)
def test_select_in_every_results_format(
    client: httpx.Client, accept: str, content_type: str, fmt: str
) -> None:
    response = client.get("/sparql", params={"query": SELECT_ALL}, headers={"Accept": accept})
    assert response.status_code == 200
    assert response.headers["content-type"].split(";")[0] == content_type
    assert "Accept" in response.headers["vary"]
    rows = rows_of(response.content, getattr(ox.QueryResultsFormat, fmt))
    if fmt == "CSV":  # CSV keeps only lexical forms
        assert ("urn:ex:alice", "urn:ex:says", 'héllo "world"') in rows
    else:
        assert ("<urn:ex:alice>", "<urn:ex:says>", '"héllo \\"world\\""') in rows
        assert ("<urn:ex:bob>", "<urn:ex:says>", '"salut"@fr') in rows
    assert len(rows) == 3  # the default graph only


@pytest.mark.parametrize(
    ("accept", "fmt"),
    [
        ("text/turtle", ox.RdfFormat.TURTLE),
        ("application/n-triples", ox.RdfFormat.N_TRIPLES),
        ("application/rdf+xml", ox.RdfFormat.RDF_XML),
        ("application/ld+json", ox.RdfFormat.JSON_LD),
    ],
)
def test_construct_in_every_rdf_format(
    client: httpx.Client, accept: str, fmt: ox.RdfFormat
) -> None:
    response = client.get("/sparql", params={"query": CONSTRUCT_ALL}, headers={"Accept": accept})
    assert response.status_code == 200
    assert response.headers["content-type"].split(";")[0] == accept
    triples = triples_of(response.content, fmt)
    assert len(triples) == 3
    age = ox.Literal("42", datatype=ox.NamedNode("http://www.w3.org/2001/XMLSchema#integer"))
    assert ox.Triple(ox.NamedNode("urn:ex:alice"), ox.NamedNode("urn:ex:age"), age) in triples


def test_ask_in_every_results_format(client: httpx.Client) -> None:
    query = {"query": "ASK { <urn:ex:alice> ?p ?o }"}
    assert client.get("/sparql", params=query).json() == {"head": {}, "boolean": True}
    for accept in ("application/sparql-results+xml", "text/tab-separated-values"):
        response = client.get("/sparql", params=query, headers={"Accept": accept})
        assert response.status_code == 200
        fmt = ox.QueryResultsFormat.from_media_type(accept)
        assert fmt is not None
        assert bool(ox.parse_query_results(response.content, fmt)) is True
    as_csv = client.get("/sparql", params=query, headers={"Accept": "text/csv"})
    assert as_csv.text == "true"


@pytest.mark.parametrize(
    ("accept", "chosen"),
    [
        (None, "application/sparql-results+json"),
        ("*/*", "application/sparql-results+json"),
        ("text/*", "text/csv"),
        ("text/csv;q=0.5, application/sparql-results+xml;q=0.9", "application/sparql-results+xml"),
        ("text/tab-separated-values, */*;q=0.1", "text/tab-separated-values"),
        ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "application/xml"),
        ("application/sparql-results+json;q=0, */*", "application/sparql-results+xml"),
    ],
)
def test_accept_q_values_pick_the_format(
    client: httpx.Client, accept: str | None, chosen: str
) -> None:
    headers = {} if accept is None else {"Accept": accept}
    response = client.get("/sparql", params={"query": "ASK {}"}, headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"].split(";")[0] == chosen


def test_format_parameter_overrides_accept(client: httpx.Client) -> None:
    response = client.get("/sparql", params={"query": SELECT_ALL, "format": "csv"})
    assert response.headers["content-type"].startswith("text/csv")
    response = client.get("/sparql", params={"query": SELECT_ALL, "format": "nope"})
    assert response.status_code == 406


def test_406_when_nothing_fits(client: httpx.Client) -> None:
    response = client.get("/sparql", params={"query": SELECT_ALL}, headers={"Accept": "text/html"})
    assert response.status_code == 406
    assert "application/sparql-results+json" in response.text
    construct = client.get(
        "/sparql",
        params={"query": CONSTRUCT_ALL},
        headers={"Accept": "application/sparql-results+json"},
    )
    assert construct.status_code == 406
    assert "text/turtle" in construct.text


def test_accept_parser_skips_garbage() -> None:
    ranges = parse_accept("garbage, text/csv;q=abc, text/tsv;q=0.3")
    assert [(r.type, r.subtype, r.q) for r in ranges] == [
        ("text", "csv", 0.0),
        ("text", "tsv", 0.3),
    ]


# -- the protocol -----------------------------------------------------------------------------


def test_query_by_get_post_form_and_direct_post_agree(client: httpx.Client) -> None:
    by_get = client.get("/sparql", params={"query": SELECT_ALL})
    by_form = client.post("/sparql", data={"query": SELECT_ALL})
    direct = client.post(
        "/sparql",
        content=SELECT_ALL.encode(),
        headers={"Content-Type": "application/sparql-query; charset=utf-8"},
    )
    assert by_get.status_code == by_form.status_code == direct.status_code == 200
    assert by_get.json() == by_form.json() == direct.json()
    assert len(by_get.json()["results"]["bindings"]) == 3


def test_dataset_parameters_are_honoured(client: httpx.Client) -> None:
    query = "SELECT ?s WHERE { ?s <urn:ex:knows> ?o }"
    response = client.get("/sparql", params={"query": query, "default-graph-uri": "urn:ex:g1"})
    assert [b["s"]["value"] for b in response.json()["results"]["bindings"]] == ["urn:ex:bob"]
    both = client.get(
        "/sparql",
        params=[
            ("query", query),
            ("default-graph-uri", "urn:ex:g1"),
            ("default-graph-uri", "urn:ex:g2"),
        ],
    )
    assert len(both.json()["results"]["bindings"]) == 2
    named = client.post(
        "/sparql?named-graph-uri=urn:ex:g2",
        content=b"SELECT ?g WHERE { GRAPH ?g { ?s ?p ?o } }",
        headers={"Content-Type": "application/sparql-query"},
    )
    assert [b["g"]["value"] for b in named.json()["results"]["bindings"]] == ["urn:ex:g2"]
    bad = client.get("/sparql", params={"query": query, "default-graph-uri": "not an iri"})
    assert bad.status_code == 400


@pytest.mark.parametrize(
    ("method", "kwargs", "status"),
    [
        ("GET", {"params": [("query", "ASK {}"), ("query", "ASK {}")]}, 400),
        ("POST", {"data": {"query": "ASK {}", "update": "CLEAR ALL"}}, 400),
        ("POST", {"data": {"nothing": "here"}}, 400),
        ("GET", {"params": {"update": "CLEAR ALL"}}, 405),
        ("PUT", {"content": b"ASK {}"}, 405),
        ("POST", {"content": b"ASK {}", "headers": {"Content-Type": "text/plain"}}, 415),
    ],
)
def test_protocol_errors(client: httpx.Client, method: str, kwargs: dict, status: int) -> None:
    response = client.request(method, "/sparql", **kwargs)
    assert response.status_code == status
    assert response.text  # every refusal says why


def test_malformed_query_gets_the_parsers_message(client: httpx.Client) -> None:
    response = client.get("/sparql", params={"query": "SELECT * WHERE { ?s ?p"})
    assert response.status_code == 400
    assert "1:" in response.text and "syntax" in response.text.lower()


def test_non_utf8_input_is_400(client: httpx.Client) -> None:
    direct = client.post(
        "/sparql",
        content=b"ASK { ?s ?p '\xff\xfe' }",
        headers={"Content-Type": "application/sparql-query"},
    )
    assert direct.status_code == 400 and "UTF-8" in direct.text.upper()
    escaped = client.get("/sparql?query=ASK%20%7B%7D%FF")
    assert escaped.status_code == 400
    form = client.post(
        "/sparql",
        content=b"query=ASK%20%7B%7D%C3",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert form.status_code == 400
    latin1 = client.post(
        "/sparql",
        content="ASK { ?s ?p 'é' }".encode("latin-1"),
        headers={"Content-Type": "application/sparql-query; charset=latin-1"},
    )
    # SPARQL 1.1 Protocol 2.1.3/2.2.2: a direct POST body is UTF-8, whatever else is declared.
    assert latin1.status_code == 415 and "UTF-8" in latin1.text


def test_service_description(client: httpx.Client, served: BackgroundServer) -> None:
    response = client.get("/sparql")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/turtle")
    graph = rdflib.Graph().parse(data=response.text, format="turtle")
    sd = rdflib.Namespace("http://www.w3.org/ns/sparql-service-description#")
    service = rdflib.URIRef(served.sparql_url)
    assert (service, rdflib.RDF.type, sd.Service) in graph
    languages = set(graph.objects(service, sd.supportedLanguage))
    assert languages == {sd.SPARQL11Query}  # no update: not started with --allow-update
    as_nt = client.get("/sparql", headers={"Accept": "application/n-triples"})
    assert as_nt.headers["content-type"] == "application/n-triples"


# -- graph store, named queries, health, page -----------------------------------------------


def test_graph_store_reads(client: httpx.Client) -> None:
    one = client.get("/store", params={"graph": "urn:ex:g1"}, headers={"Accept": "text/turtle"})
    assert one.status_code == 200
    assert triples_of(one.content, ox.RdfFormat.TURTLE) == {
        ox.Triple(
            ox.NamedNode("urn:ex:bob"), ox.NamedNode("urn:ex:knows"), ox.NamedNode("urn:ex:alice")
        )
    }
    default = client.get("/store?default", headers={"Accept": "application/n-triples"})
    assert len(triples_of(default.content, ox.RdfFormat.N_TRIPLES)) == 3
    ld = client.get("/store", params={"graph": "urn:ex:g2", "format": "jsonld"})
    assert ld.headers["content-type"].startswith("application/ld+json")
    assert len(triples_of(ld.content, ox.RdfFormat.JSON_LD)) == 1
    whole = client.get("/store")
    assert whole.headers["content-type"] == "application/trig"
    graphs = {q.graph_name for q in ox.parse(whole.content, ox.RdfFormat.TRIG)}
    assert ox.NamedNode("urn:ex:g1") in graphs and ox.NamedNode("urn:rdfmem:graph:store") in graphs
    assert client.get("/store", params={"graph": "urn:ex:none"}).status_code == 404
    assert client.get("/store?default&graph=urn:ex:g1").status_code == 400
    assert client.get("/store", params={"graph": "not an iri"}).status_code == 400
    assert client.get("/store", headers={"Accept": "text/turtle"}).status_code == 406


def test_named_queries_list_and_run(client: httpx.Client, served: BackgroundServer) -> None:
    listing = client.get("/queries")
    assert listing.status_code == 200
    names = {q["name"] for q in listing.json()}
    assert "memories_by_topic" in names
    topic = next(q for q in listing.json() if q["name"] == "memories_by_topic")
    assert {p["name"] for p in topic["parameters"]} >= {"topic"}
    ran = client.get("/queries/memories_by_topic", params={"topic": "nothing-tagged"})
    assert ran.status_code == 200
    assert ran.json()["results"]["bindings"] == []
    assert client.get("/queries/memories_by_topic").status_code == 400  # topic is required
    unknown = client.get("/queries/memories_by_topic", params={"topic": "x", "evil": "1"})
    assert unknown.status_code == 400 and "evil" in unknown.text
    assert client.get("/queries/no_such_query").status_code == 404
    assert client.get("/queries/..%2Fetc").status_code == 404


def test_named_query_parameters_are_bound_not_pasted(tmp_path: Path) -> None:
    from rdfmem.memories import Memories, Memory

    store = RdfStore()
    memories = Memories(store)
    memories.save(Memory(scope="global", title="Quotes", content="x", topics=['a" } #']))
    with BackgroundServer(store) as server:
        hostile = httpx.get(server.url + "/queries/memories_by_topic", params={"topic": 'a" } #'})
        assert hostile.status_code == 200
        titles = [b["title"]["value"] for b in hostile.json()["results"]["bindings"]]
        assert titles == ["Quotes"]
        typed = httpx.get(
            server.url + "/queries/generalisations_by_level", params={"level": "high"}
        )
        assert typed.status_code == 400 and "integer" in typed.text
    store.close()


def test_health_and_page(client: httpx.Client) -> None:
    health = client.get("/health")
    assert health.status_code == 200
    doc = json.loads(health.text)
    assert doc["status"] == "ok" and doc["max_concurrent"] == 4 and doc["updates"] is False
    page = client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "<form" in page.text and "memories_by_topic" in page.text
    assert "http" not in page.text.split("<script>")[1].split("fetch(")[0]  # no CDN


def test_cors_is_off_unless_asked(client: httpx.Client) -> None:
    response = client.get("/health", headers={"Origin": "http://evil.example"})
    assert "access-control-allow-origin" not in response.headers
    store = RdfStore()
    with BackgroundServer(store, cors=["http://yasgui.example"]) as server:
        allowed = httpx.get(server.url + "/health", headers={"Origin": "http://yasgui.example"})
        assert allowed.headers["access-control-allow-origin"] == "http://yasgui.example"


def test_binds_loopback_by_default(served: BackgroundServer) -> None:
    assert served.host == "127.0.0.1"
    from rdfmem.cli import serve

    host = next(p for p in serve.params if p.name == "host")
    assert host.default == "127.0.0.1"


def test_every_backend_serves_the_same(make_store: StoreFactory) -> None:
    store = make_store()
    fill(store)
    with BackgroundServer(store) as server:
        select = httpx.get(server.sparql_url, params={"query": SELECT_ALL, "format": "tsv"})
        assert len(rows_of(select.content, ox.QueryResultsFormat.TSV)) == 3
        graph = httpx.get(server.url + "/store", params={"graph": "urn:ex:g2"})
        assert len(triples_of(graph.content, ox.RdfFormat.TURTLE)) == 1
