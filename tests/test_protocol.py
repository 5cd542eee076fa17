"""The SPARQL 1.1 Protocol against a real ``rdfmem serve`` process (issue 15, endpoint part).

One test per case of the W3C SPARQL 1.1 Protocol test suite, written here from the suite's
descriptions (https://www.w3.org/2009/sparql/docs/tests/data-sparql11/protocol/), then real
clients: SPARQLWrapper in every format, rdflib's ``SPARQLStore`` and ``SPARQLUpdateStore``
with the token, and the page at ``/`` with a shared ``?query=`` link.
"""

from __future__ import annotations

import html
from collections.abc import Iterator

import httpx
import pyoxigraph as ox
import pytest
import rdflib
from rdflib.plugins.stores.sparqlstore import SPARQLStore, SPARQLUpdateStore
from SPARQLWrapper import CSV, JSON, JSONLD, N3, POST, RDFXML, TSV, TURTLE, XML, SPARQLWrapper
from test_server_support import TOKEN, Served, serve_process

EX = "http://example.org/protocol-test/"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
FORM = "application/x-www-form-urlencoded"
DIRECT_QUERY = "application/sparql-query"
DIRECT_UPDATE = "application/sparql-update"
JSON_RESULTS = {"Accept": "application/sparql-results+json"}

DATA = f"""
PREFIX ex: <{EX}>
INSERT DATA {{
  ex:s ex:p "default" .
  GRAPH ex:data1 {{ ex:a ex:b ex:c . ex:x ex:in "data1" }}
  GRAPH ex:data2 {{ ex:x ex:in "data2" }}
  GRAPH ex:data3 {{ ex:x ex:in "data3" }}
}}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("protocol")
    options = ("--allow-update", "--token", TOKEN)
    with serve_process(":memory:", *options, tmp_path=folder) as served:
        answer = httpx.post(served.sparql_url, data={"update": DATA}, headers=AUTH)
        assert answer.status_code == 204, answer.text
        yield served


@pytest.fixture
def client(server: Served) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as c:
        yield c


def ask(client: httpx.Client, query: str, **params: str | list[str]) -> bool:
    answer = client.get("/sparql", params={"query": query, **params}, headers=JSON_RESULTS)
    assert answer.status_code == 200, answer.text
    return bool(answer.json()["boolean"])


def fresh_graph(client: httpx.Client, name: str) -> str:
    """An empty graph IRI for one update test."""
    graph = f"{EX}{name}"
    client.post("/sparql", data={"update": f"DROP SILENT GRAPH <{graph}>"}, headers=AUTH)
    return graph


# -- queries -------------------------------------------------------------------------------

ASK_DATA1 = f"ASK {{ <{EX}a> <{EX}b> <{EX}c> }}"


def test_query_get(client: httpx.Client) -> None:
    assert ask(client, f"ASK {{ <{EX}s> <{EX}p> 'default' }}")


def test_query_post_form(client: httpx.Client) -> None:
    answer = client.post("/sparql", data={"query": "ASK {}"}, headers=JSON_RESULTS)
    assert answer.status_code == 200 and answer.json()["boolean"] is True


def test_query_post_direct(client: httpx.Client) -> None:
    answer = client.post(
        "/sparql",
        content=b"ASK {}",
        headers={"Content-Type": DIRECT_QUERY, **JSON_RESULTS},
    )
    assert answer.status_code == 200 and answer.json()["boolean"] is True


def test_query_dataset_default_graph_get(client: httpx.Client) -> None:
    assert ask(client, ASK_DATA1, **{"default-graph-uri": f"{EX}data1"})
    assert not ask(client, ASK_DATA1)  # not in the service's default graph


def test_query_dataset_default_graph_post(client: httpx.Client) -> None:
    answer = client.post(
        "/sparql",
        data={"query": ASK_DATA1, "default-graph-uri": f"{EX}data1"},
        headers=JSON_RESULTS,
    )
    assert answer.json()["boolean"] is True


def test_query_dataset_default_graph_post_direct(client: httpx.Client) -> None:
    answer = client.post(
        "/sparql",
        params={"default-graph-uri": f"{EX}data1"},
        content=ASK_DATA1.encode(),
        headers={"Content-Type": DIRECT_QUERY, **JSON_RESULTS},
    )
    assert answer.json()["boolean"] is True


NAMED = f"SELECT ?g ?v WHERE {{ GRAPH ?g {{ <{EX}x> <{EX}in> ?v }} }} ORDER BY ?v"


def _graphs(answer: httpx.Response) -> list[str]:
    assert answer.status_code == 200, answer.text
    return [b["v"]["value"] for b in answer.json()["results"]["bindings"]]


def test_query_dataset_named_graphs_get(client: httpx.Client) -> None:
    params = {"query": NAMED, "named-graph-uri": [f"{EX}data2", f"{EX}data3"]}
    answer = client.get("/sparql", params=params, headers=JSON_RESULTS)
    assert _graphs(answer) == ["data2", "data3"]


def test_query_dataset_named_graphs_post(client: httpx.Client) -> None:
    form = {"query": NAMED, "named-graph-uri": [f"{EX}data1", f"{EX}data3"]}
    answer = client.post("/sparql", data=form, headers=JSON_RESULTS)
    assert _graphs(answer) == ["data1", "data3"]


def test_query_dataset_full(client: httpx.Client) -> None:
    query = f"SELECT ?v ?w {{ <{EX}x> <{EX}in> ?v . GRAPH ?g {{ <{EX}x> <{EX}in> ?w }} }}"
    params = {
        "query": query,
        "default-graph-uri": f"{EX}data1",
        "named-graph-uri": [f"{EX}data2"],
    }
    rows = client.get("/sparql", params=params, headers=JSON_RESULTS).json()
    got = [(b["v"]["value"], b["w"]["value"]) for b in rows["results"]["bindings"]]
    assert got == [("data1", "data2")]


def test_query_multiple_dataset(client: httpx.Client) -> None:
    """The protocol's dataset overrides the query's FROM / FROM NAMED."""
    query = f"SELECT ?v FROM <{EX}data3> {{ <{EX}x> <{EX}in> ?v }}"
    rows = client.get(
        "/sparql",
        params={"query": query, "default-graph-uri": f"{EX}data2"},
        headers=JSON_RESULTS,
    ).json()
    assert [b["v"]["value"] for b in rows["results"]["bindings"]] == ["data2"]


@pytest.mark.parametrize(
    ("query", "accept", "types"),
    [
        (
            "SELECT * { ?s ?p ?o }",
            "application/sparql-results+xml",
            {"application/sparql-results+xml"},
        ),
        ("ASK {}", "application/sparql-results+json", {"application/sparql-results+json"}),
        (f"DESCRIBE <{EX}s>", "text/turtle", {"text/turtle"}),
        ("CONSTRUCT WHERE { ?s ?p ?o }", "application/rdf+xml", {"application/rdf+xml"}),
        ("SELECT * { ?s ?p ?o }", "*/*", {"application/sparql-results+json"}),
        ("CONSTRUCT WHERE { ?s ?p ?o }", "*/*", {"text/turtle", "application/n-triples"}),
    ],
)
def test_query_content_type(client: httpx.Client, query: str, accept: str, types: set[str]) -> None:
    answer = client.get("/sparql", params={"query": query}, headers={"Accept": accept})
    assert answer.status_code == 200
    assert answer.headers["content-type"].split(";")[0] in types


def test_query_base_iri_is_the_service_url(client: httpx.Client, server: Served) -> None:
    answer = client.get("/sparql", params={"query": "SELECT ?x { BIND(<thing> AS ?x) }"})
    value = answer.json()["results"]["bindings"][0]["x"]["value"]
    assert value == f"{server.url}/thing"


# -- updates -------------------------------------------------------------------------------


def test_update_post_form(client: httpx.Client) -> None:
    graph = fresh_graph(client, "form")
    update = f"INSERT DATA {{ GRAPH <{graph}> {{ <{EX}a> <{EX}b> 'form' }} }}"
    assert client.post("/sparql", data={"update": update}, headers=AUTH).status_code == 204
    assert ask(client, f"ASK {{ GRAPH <{graph}> {{ ?s ?p 'form' }} }}")


def test_update_post_direct(client: httpx.Client) -> None:
    graph = fresh_graph(client, "direct")
    update = f"INSERT DATA {{ GRAPH <{graph}> {{ <{EX}a> <{EX}b> 'direct' }} }}"
    answer = client.post(
        "/sparql", content=update.encode(), headers={"Content-Type": DIRECT_UPDATE, **AUTH}
    )
    assert answer.status_code == 204
    assert ask(client, f"ASK {{ GRAPH <{graph}> {{ ?s ?p 'direct' }} }}")


def test_update_base_uri(client: httpx.Client, server: Served) -> None:
    graph = fresh_graph(client, "base")
    update = f"INSERT DATA {{ GRAPH <{graph}> {{ <relative> <{EX}b> 'base' }} }}"
    assert client.post("/sparql", data={"update": update}, headers=AUTH).status_code == 204
    assert ask(client, f"ASK {{ GRAPH <{graph}> {{ <{server.url}/relative> ?p 'base' }} }}")


def _copy_into(client: httpx.Client, target: str, **params: str | list[str]) -> httpx.Response:
    update = f"INSERT {{ GRAPH <{target}> {{ ?s ?p ?v }} }} WHERE {{ ?s ?p ?v }}"
    return client.post("/sparql", data={"update": update, **params}, headers=AUTH)


def _values(client: httpx.Client, graph: str) -> list[str]:
    query = f"SELECT ?v {{ GRAPH <{graph}> {{ <{EX}x> <{EX}in> ?v }} }} ORDER BY ?v"
    rows = client.get("/sparql", params={"query": query}, headers=JSON_RESULTS).json()
    return [b["v"]["value"] for b in rows["results"]["bindings"]]


def test_update_dataset_default_graph(client: httpx.Client) -> None:
    target = fresh_graph(client, "using1")
    answer = _copy_into(client, target, **{"using-graph-uri": f"{EX}data2"})
    assert answer.status_code == 204, answer.text
    assert _values(client, target) == ["data2"]


def test_update_dataset_default_graphs(client: httpx.Client) -> None:
    target = fresh_graph(client, "using2")
    answer = _copy_into(client, target, **{"using-graph-uri": [f"{EX}data2", f"{EX}data3"]})
    assert answer.status_code == 204, answer.text
    assert _values(client, target) == ["data2", "data3"]


def test_update_dataset_named_graphs(client: httpx.Client) -> None:
    target = fresh_graph(client, "using3")
    update = f"INSERT {{ GRAPH <{target}> {{ ?s ?p ?v }} }} WHERE {{ GRAPH ?g {{ ?s ?p ?v }} }}"
    params = {"update": update, "using-named-graph-uri": [f"{EX}data1", f"{EX}data3"]}
    answer = client.post("/sparql", data=params, headers=AUTH)
    assert answer.status_code == 204, answer.text
    assert _values(client, target) == ["data1", "data3"]


def test_update_dataset_full(client: httpx.Client) -> None:
    target = fresh_graph(client, "using4")
    update = (
        f"INSERT {{ GRAPH <{target}> {{ <{EX}x> <{EX}in> ?v, ?w }} }} "
        f"WHERE {{ <{EX}x> <{EX}in> ?v . GRAPH ?g {{ <{EX}x> <{EX}in> ?w }} }}"
    )
    params = {
        "update": update,
        "using-graph-uri": f"{EX}data1",
        "using-named-graph-uri": f"{EX}data3",
    }
    answer = client.post("/sparql", data=params, headers=AUTH)
    assert answer.status_code == 204, answer.text
    assert _values(client, target) == ["data1", "data3"]


# -- refusals ------------------------------------------------------------------------------


def _status(client: httpx.Client, method: str, **kwargs: object) -> int:
    return client.request(method, "/sparql", **kwargs).status_code  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "method", "kwargs"),
    [
        ("bad_query_method", "PUT", {"params": {"query": "ASK {}"}}),
        ("bad_multiple_queries", "GET", {"params": {"query": ["ASK {}", "ASK {}"]}}),
        (
            "bad_query_wrong_media_type",
            "POST",
            {"content": b"ASK {}", "headers": {"Content-Type": "text/plain"}},
        ),
        ("bad_query_missing_form_type", "POST", {"content": b"query=ASK%20%7B%7D"}),
        ("bad_query_missing_direct_type", "POST", {"content": b"ASK {}"}),
        (
            "bad_query_non_utf8",
            "POST",
            {
                "content": "ASK { ?s ?p 'é' }".encode("utf-16"),
                "headers": {"Content-Type": f"{DIRECT_QUERY}; charset=UTF-16"},
            },
        ),
        ("bad_query_syntax", "GET", {"params": {"query": "ASK {"}}),
        ("bad_update_get", "GET", {"params": {"update": "CLEAR ALL"}, "headers": AUTH}),
        (
            "bad_multiple_updates",
            "POST",
            {"data": {"update": ["CLEAR SILENT GRAPH <urn:a>"] * 2}, "headers": AUTH},
        ),
        (
            "bad_update_wrong_media_type",
            "POST",
            {
                "content": b"CLEAR SILENT GRAPH <urn:a>",
                "headers": {"Content-Type": "text/plain", **AUTH},
            },
        ),
        (
            "bad_update_missing_form_type",
            "POST",
            {"content": b"update=CLEAR%20SILENT%20GRAPH%20%3Curn%3Aa%3E", "headers": AUTH},
        ),
        (
            "bad_update_non_utf8",
            "POST",
            {
                "content": "CLEAR SILENT GRAPH <urn:é>".encode("utf-16"),
                "headers": {"Content-Type": f"{DIRECT_UPDATE}; charset=UTF-16", **AUTH},
            },
        ),
        ("bad_update_syntax", "POST", {"data": {"update": "CLEAR GRAPH"}, "headers": AUTH}),
        (
            "bad_update_dataset_conflict",
            "POST",
            {
                "data": {
                    "update": f"INSERT {{ <{EX}a> <{EX}b> ?o }} USING <{EX}data1> WHERE {{ ?s ?p ?o }}",
                    "using-graph-uri": f"{EX}data2",
                },
                "headers": AUTH,
            },
        ),
    ],
)
def test_bad_requests_are_4xx(
    client: httpx.Client, name: str, method: str, kwargs: dict[str, object]
) -> None:
    before = client.get("/store", params={"format": "nquads"}).text
    status = _status(client, method, **kwargs)
    assert 400 <= status < 500, name
    assert client.get("/store", params={"format": "nquads"}).text == before  # nothing changed


# -- real clients --------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", [JSON, XML, CSV, TSV])
@pytest.mark.parametrize("method", ["GET", POST])
def test_sparqlwrapper_select_in_every_format(server: Served, fmt: str, method: str) -> None:
    wrapper = SPARQLWrapper(server.sparql_url)
    wrapper.setQuery(f"SELECT ?o WHERE {{ <{EX}s> <{EX}p> ?o }}")
    wrapper.setReturnFormat(fmt)
    wrapper.setMethod(method)
    result = wrapper.query()
    body = result.response.read()
    assert b"default" in body
    assert result.response.status == 200


@pytest.mark.parametrize("fmt", [TURTLE, N3, RDFXML, JSONLD, XML])
def test_sparqlwrapper_construct_in_every_format(server: Served, fmt: str) -> None:
    wrapper = SPARQLWrapper(server.sparql_url)
    wrapper.setQuery(f"CONSTRUCT WHERE {{ <{EX}s> <{EX}p> ?o }}")
    wrapper.setReturnFormat(fmt)
    response = wrapper.query().response  # its own convert() uses rdflib's deprecated API
    media = response.headers["Content-Type"].split(";")[0]
    fmt_read = ox.RdfFormat.from_media_type(media)
    assert fmt_read is not None, media
    triples = {q.triple for q in ox.parse(response.read(), fmt_read)}
    expected = ox.Triple(ox.NamedNode(f"{EX}s"), ox.NamedNode(f"{EX}p"), ox.Literal("default"))
    assert triples == {expected}


def test_sparqlwrapper_update_with_the_token(server: Served) -> None:
    wrapper = SPARQLWrapper(server.sparql_url)
    wrapper.addCustomHttpHeader("Authorization", f"Bearer {TOKEN}")
    wrapper.setMethod(POST)
    wrapper.setQuery(f"INSERT DATA {{ GRAPH <{EX}wrapper> {{ <{EX}a> <{EX}b> 'w' }} }}")
    wrapper.query()
    with httpx.Client(base_url=server.url) as client:
        assert ask(client, f"ASK {{ GRAPH <{EX}wrapper> {{ ?s ?p 'w' }} }}")


@pytest.mark.parametrize("fmt", ["json", "xml", "csv"])
def test_rdflib_sparqlstore_reads(server: Served, fmt: str) -> None:
    graph = rdflib.Graph(store=SPARQLStore(server.sparql_url, returnFormat=fmt))
    rows = list(graph.query(f"SELECT ?o WHERE {{ <{EX}s> <{EX}p> ?o }}"))
    assert [str(row[0]) for row in rows] == ["default"]  # type: ignore[index]


def test_rdflib_sparqlupdatestore_with_the_token(server: Served) -> None:
    store = SPARQLUpdateStore(
        server.sparql_url, server.sparql_url, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    graph = rdflib.Graph(store=store, identifier=rdflib.URIRef(f"{EX}updatestore"))
    triple = (rdflib.URIRef(f"{EX}u"), rdflib.URIRef(f"{EX}v"), rdflib.Literal("stored"))
    graph.add(triple)
    assert triple in graph
    graph.remove(triple)
    assert triple not in graph
    store.close()


def test_rdflib_sparqlupdatestore_without_the_token_is_refused(server: Served) -> None:
    store = SPARQLUpdateStore(server.sparql_url, server.sparql_url)
    graph = rdflib.Graph(store=store, identifier=rdflib.URIRef(f"{EX}refused"))
    with pytest.raises(Exception, match="403"):
        graph.add((rdflib.URIRef(f"{EX}u"), rdflib.URIRef(f"{EX}v"), rdflib.Literal("x")))
    store.close()


def test_the_page_holds_and_runs_a_shared_query(client: httpx.Client) -> None:
    query = 'SELECT ?o WHERE { ?s ?p ?o } # <b>shared</b> & "linked"'
    page = client.get("/", params={"query": query})
    assert page.status_code == 200
    assert html.escape(query) in page.text  # escaped: no markup from the link
    assert "<b>shared</b>" not in page.text
    assert "if (true) form.requestSubmit();" in page.text
    plain = client.get("/").text
    assert "if (false) form.requestSubmit();" in plain
