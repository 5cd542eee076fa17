"""``rdfmem serve``: a real uvicorn server on a free loopback port, read by real clients.

SPARQLWrapper (JSON), rdflib's ``SPARQLStore`` and plain httpx for every format and status
code; the hostile cases (SERVICE/LOAD in every spelling, runaway queries, oversized bodies,
updates without the token, malformed and non-UTF-8 input).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pyoxigraph as ox
import pytest
import rdflib
from conftest import StoreFactory
from hypothesis import given, settings
from hypothesis import strategies as st
from rdflib.plugins.stores.sparqlstore import SPARQLStore
from SPARQLWrapper import JSON, POST, SPARQLWrapper

from rdfmem import RdfStore
from rdfmem.server import BackgroundServer, ServerConfigError, create_app
from rdfmem.server.negotiate import parse_accept
from rdfmem.sparql_guard import find_forbidden, is_point_query

SELECT_ALL = "SELECT ?s ?p ?o WHERE { ?s ?p ?o } ORDER BY ?s ?p ?o"
CONSTRUCT_ALL = "CONSTRUCT WHERE { ?s ?p ?o }"
TOKEN = "s3cret-token"


def fill(store: RdfStore) -> None:
    store.assert_("urn:ex:alice", "urn:ex:says", 'héllo "world"')
    store.assert_("urn:ex:alice", "urn:ex:age", 42)
    store.assert_("urn:ex:bob", "urn:ex:says", ox.Literal("salut", language="fr"))
    store.assert_("urn:ex:bob", "urn:ex:knows", ox.NamedNode("urn:ex:alice"), graph="urn:ex:g1")
    store.assert_("urn:ex:carol", "urn:ex:knows", ox.NamedNode("urn:ex:bob"), graph="urn:ex:g2")
    store.set("budget", {"tokens": 4096})


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundServer]:
    """One on-disk store with a little data, served read-only with default limits."""
    store = RdfStore.open(tmp_path_factory.mktemp("served") / "store")
    fill(store)
    with BackgroundServer(store) as server:
        yield server
    store.close()


@pytest.fixture
def client(served: BackgroundServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, timeout=30) as c:
        yield c


def rows_of(data: bytes, fmt: ox.QueryResultsFormat) -> set[tuple[str, ...]]:
    if fmt == ox.QueryResultsFormat.CSV:  # lossy: pyoxigraph does not read it back
        lines = list(csv.reader(io.StringIO(data.decode("utf-8"))))
        return {tuple(line) for line in lines[1:]}
    parsed = ox.parse_query_results(data, fmt)
    assert isinstance(parsed, ox.QuerySolutions)
    names = [v.value for v in parsed.variables]
    return {tuple(str(s[n]) for n in names) for s in parsed}


def triples_of(data: bytes, fmt: ox.RdfFormat) -> set[ox.Triple]:
    return {q.triple if isinstance(q, ox.Quad) else q for q in ox.parse(data, fmt)}


# -- real clients ---------------------------------------------------------------------------


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
    assert latin1.status_code == 200  # a declared charset is honoured


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


# -- updates ----------------------------------------------------------------------------------


@pytest.fixture
def writable() -> Iterator[tuple[BackgroundServer, RdfStore]]:
    store = RdfStore()
    fill(store)
    with BackgroundServer(store, allow_update=True, token=TOKEN) as server:
        yield server, store


def test_updates_are_refused_without_allow_update(client: httpx.Client) -> None:
    response = client.post("/sparql", data={"update": "CLEAR ALL"})
    assert response.status_code == 403
    assert "--allow-update" in response.text
    direct = client.post(
        "/sparql",
        content=b"CLEAR ALL",
        headers={"Content-Type": "application/sparql-update", "Authorization": "Bearer x"},
    )
    assert direct.status_code == 403
    assert (
        len(client.get("/sparql", params={"query": SELECT_ALL}).json()["results"]["bindings"]) == 3
    )


def test_update_needs_the_right_bearer_token(writable: tuple[BackgroundServer, RdfStore]) -> None:
    server, store = writable
    update = "INSERT DATA { <urn:ex:dan> <urn:ex:says> 'hi' }"
    for headers in (
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": TOKEN},
        {"Authorization": f"Basic {TOKEN}"},
    ):
        refused = httpx.post(server.sparql_url, data={"update": update}, headers=headers)
        assert refused.status_code == 403
    assert not store.ask(subject="urn:ex:dan")
    ok = httpx.post(
        server.sparql_url,
        content=update.encode(),
        headers={"Content-Type": "application/sparql-update", "Authorization": f"Bearer {TOKEN}"},
    )
    assert ok.status_code == 204
    assert store.ask(subject="urn:ex:dan")
    description = httpx.get(server.sparql_url, headers={"Accept": "application/n-triples"})
    assert "SPARQL11Update" in description.text


def test_bad_update_changes_nothing(writable: tuple[BackgroundServer, RdfStore]) -> None:
    server, store = writable
    before = sorted(str(q) for q in store.triples())
    auth = {"Authorization": f"Bearer {TOKEN}"}
    bad = httpx.post(server.sparql_url, data={"update": "INSERT DATA { <urn:x> }"}, headers=auth)
    assert bad.status_code == 400
    load = httpx.post(
        server.sparql_url, data={"update": "load <http://127.0.0.1:9/x.ttl>"}, headers=auth
    )
    assert load.status_code == 403 and "LOAD" in load.text
    assert sorted(str(q) for q in store.triples()) == before


def test_allow_update_needs_a_token() -> None:
    with pytest.raises(ServerConfigError, match="token"):
        create_app(RdfStore(), allow_update=True)


# -- hostile input ------------------------------------------------------------------------------


class Listener:
    """A loopback TCP listener that counts connections: SERVICE or LOAD would connect here."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/"
        self.hits = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def listener() -> Iterator[Listener]:
    lst = Listener()
    yield lst
    lst.close()


def spellings(url: str) -> list[str]:
    pre = f"PREFIX : <{url}> PREFIX svc: <{url}> "
    where = "SELECT * WHERE { BIND(1 AS ?one) "
    return [
        f"SELECT * WHERE {{ SERVICE <{url}> {{ ?s ?p ?o }} }}",
        f"select * where {{ service <{url}> {{ ?s ?p ?o }} }}",
        f"SELECT * WHERE {{ sErViCe SiLeNt <{url}> {{ ?s ?p ?o }} }}",
        f"SELECT * WHERE {{ SERVICE#comment\n<{url}>{{}} }}",
        f"SELECT * WHERE {{ SERVICE\t\r\n<{url}>{{}} }}",
        f"{pre}SELECT * WHERE {{ SERVICE svc:x {{ }} }}",
        f"{pre}SELECT * WHERE {{ SERVICE:x{{}} }}",
        f"{pre}{where}SERVICE:{{}} }}",
        f"{where}BIND(IRI('{url}') AS ?u) SERVICE ?u {{ }} }}",
        f"SELECT * WHERE {{ ?s ?p falseSERVICE<{url}>{{}} }}",
        f"SELECT * WHERE {{ ?s ?p ?o SERVICESILENT<{url}>{{}} }}",
        f"{pre}SELECT * WHERE {{ ?s ?p ex:x.y.SERVICE<{url}>{{}} }}",
        f"SELECT * WHERE {{ {{}}SERVICE<{url}>{{}} }}",
        f"SELECT * WHERE {{ OPTIONAL{{SERVICE<{url}>{{}}}} }}",
        f"SELECT * WHERE {{ \\u0053ERVICE <{url}> {{}} }}",
        f"# SERVICE in a comment is fine, but not here:\nSELECT * {{ SERVICE <{url}> {{}} }}",
        f"SELECT * WHERE {{ ?s ?p 'x' . SERVICE <{url}> {{}} }}",
    ]


@pytest.mark.parametrize("index", range(17))
def test_service_is_refused_however_written(
    client: httpx.Client, listener: Listener, index: int
) -> None:
    query = spellings(listener.url)[index]
    hits = listener.hits
    for response in (
        client.get("/sparql", params={"query": query}),
        client.post("/sparql", data={"query": query}),
    ):
        assert response.status_code == 403, query
        assert "SERVICE" in response.text
    assert listener.hits == hits


@pytest.mark.parametrize(
    "update",
    [
        "LOAD <{url}>",
        "load silent <{url}> into graph <urn:g>",
        "# LOAD\nLoAd<{url}>",
        "CLEAR SILENT GRAPH <urn:x> ; LOAD <{url}>",
        "INSERT { ?s ?p ?o } WHERE { SERVICE <{url}> { ?s ?p ?o } }",
    ],
)
def test_load_is_refused_even_with_the_token(
    writable: tuple[BackgroundServer, RdfStore], listener: Listener, update: str
) -> None:
    server, _ = writable
    hits = listener.hits
    response = httpx.post(
        server.sparql_url,
        data={"update": update.replace("{url}", listener.url)},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert response.status_code == 403
    assert listener.hits == hits


@pytest.mark.parametrize(
    "query",
    [
        "SELECT ?service WHERE { ?service a <http://schema.org/Service> }",
        "PREFIX ex: <urn:ex:> SELECT * WHERE { ?s ex:payload ?load ; ex:download 'SERVICE' }",
        'SELECT * WHERE { ?s ?p """LOAD <http://x/>\nSERVICE""" } # SERVICE LOAD',
        "PREFIX schema: <http://schema.org/> SELECT * { ?s schema:serviceType _:loader }",
        "SELECT * { <http://example.org/service/load> ?p ?o FILTER(LANG(?o) = 'en') }",
    ],
)
def test_words_in_names_strings_and_comments_are_not_refused(query: str) -> None:
    assert find_forbidden(query) is None


_GLUE = st.sampled_from(["", " ", "\n", "#c\n", ".", " . ", "\t", "\r\n"])
_BEFORE = st.sampled_from(
    [
        "",
        "true",
        "false",
        "1",
        "1.5",
        "1e3",
        '"x"',
        '"x"@en',
        "<urn:x>",
        "ex:x",
        "_:b",
        "ex:x.y",
        "ex:x-y",
        "ex:x%41",
        "?v",
        '"x"^^ex:t',
        "[]",
        "()",
        "'''x'''",
        "{}",
    ]
)
_TARGET = st.sampled_from([":", ":x", "?u", "<{url}>", "<{url}x>"])


@settings(max_examples=150, deadline=None)
@given(
    before=_BEFORE,
    glue=_GLUE,
    keyword=st.sampled_from(["SERVICE", "SERVICE SILENT", "SERVICESILENT"]),
    flips=st.lists(st.booleans(), min_size=14, max_size=14),
    after=_GLUE,
    target=_TARGET,
)
def test_guard_passes_nothing_that_pyoxigraph_would_fetch(
    listener: Listener,
    before: str,
    glue: str,
    keyword: str,
    flips: list[bool],
    after: str,
    target: str,
) -> None:
    """Against pyoxigraph itself: whatever the guard lets through must not connect out."""
    spelt = "".join(c.lower() if flip else c for c, flip in zip(keyword, flips, strict=False))
    query = (
        f"PREFIX : <{listener.url}> PREFIX ex: <urn:ex:> SELECT * WHERE {{ "
        f"BIND(IRI(<{listener.url}>) AS ?u) <urn:s> <urn:p> {before}{glue}{spelt}{after}"
        f"{target.format(url=listener.url)}{{}} }}"
    )
    if find_forbidden(query) is not None:
        return
    store = ox.Store()
    for obj in ("true", "false", "1", "1.5", "1e3", '"x"', '"x"@en', "<urn:x>", "<urn:ex:x>"):
        store.update(f"INSERT DATA {{ <urn:s> <urn:p> {obj} }}")
    hits = listener.hits
    with contextlib.suppress(SyntaxError, OSError, RuntimeError, TypeError):
        list(store.query(query))  # type: ignore[arg-type]
    assert listener.hits == hits, query


def test_from_does_not_fetch(client: httpx.Client, listener: Listener) -> None:
    hits = listener.hits
    query = f"SELECT * FROM <{listener.url}> FROM NAMED <{listener.url}> WHERE {{ ?s ?p ?o }}"
    assert client.get("/sparql", params={"query": query}).status_code == 200
    assert listener.hits == hits


def test_oversized_body_is_413(client: httpx.Client) -> None:
    big = b"ASK {} #" + b"x" * (2 << 20)
    declared = client.post(
        "/sparql", content=big, headers={"Content-Type": "application/sparql-query"}
    )
    assert declared.status_code == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: the server counts as it reads
        yield b"ASK {} #"
        for _ in range(40):
            yield b"y" * 65536

    streamed = client.post(
        "/sparql", content=chunks(), headers={"Content-Type": "application/sparql-query"}
    )
    assert streamed.status_code == 413
    assert client.get("/health").status_code == 200


@contextmanager
def limited(max_result_bytes: int = 1 << 20, timeout: float = 0.5) -> Iterator[BackgroundServer]:
    """A server with tight limits over 200 triples (cross products explode quickly)."""
    store = RdfStore()
    for i in range(200):
        store.assert_(f"urn:ex:s{i}", "urn:ex:p", i)
    with BackgroundServer(
        store, timeout=timeout, max_concurrent=2, max_waiting=0, max_result_bytes=max_result_bytes
    ) as server:
        yield server


def _running(server: BackgroundServer) -> int:
    return int(httpx.get(server.url + "/health").json()["queries_running"])


def test_runaway_query_times_out_while_others_answer() -> None:
    # 200^4 = 1.6e9 rows, minutes of work: answered with a timeout, stopped at its next write.
    runaway = "SELECT ?a WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l }"
    outcome: dict[str, httpx.Response] = {}

    def run(url: str) -> None:
        outcome["r"] = httpx.get(url, params={"query": runaway, "format": "tsv"}, timeout=30)

    # No size cap to speak of: the runaway is stopped by its time limit.
    with limited(max_result_bytes=1 << 40) as server, httpx.Client(timeout=30) as other:
        thread = threading.Thread(target=run, args=(server.sparql_url,))
        thread.start()
        time.sleep(0.1)
        answered = other.get(server.sparql_url, params={"query": "ASK { ?s ?p 7 }"})
        health = other.get(server.url + "/health")
        thread.join(30)
        response = outcome["r"]
        deadline = time.monotonic() + 10
        while _running(server) and time.monotonic() < deadline:
            time.sleep(0.05)
        still_running = _running(server)
    assert answered.status_code == 200 and answered.json()["boolean"] is True
    assert health.status_code == 200
    assert response.status_code == 503
    assert "time limit" in response.text and response.headers["retry-after"]
    assert still_running == 0  # the runaway stopped rather than running on for minutes


def test_concurrency_cap_turns_extra_queries_away() -> None:
    # A COUNT cannot be stopped once started (about a second here): each holds a worker.
    blocking = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }"
    results: list[httpx.Response] = []

    def ask(url: str) -> None:
        results.append(httpx.get(url, params={"query": blocking}, timeout=30))

    with limited(timeout=0.3) as server:
        threads = [threading.Thread(target=ask, args=(server.sparql_url,)) for _ in range(2)]
        for t in threads:
            t.start()
        time.sleep(0.15)
        extra = httpx.get(server.sparql_url, params={"query": "ASK {}"})
        for t in threads:
            t.join(30)
        deadline = time.monotonic() + 30
        while _running(server) and time.monotonic() < deadline:
            time.sleep(0.1)
        after = httpx.get(server.sparql_url, params={"query": "ASK {}"})
    assert extra.status_code == 503 and extra.headers["retry-after"] == "1"
    assert "busy" in extra.text
    assert [r.status_code for r in results] == [503, 503]  # both over the 0.3 s limit
    assert after.status_code == 200


def test_result_size_cap_is_422() -> None:
    with limited(timeout=30) as server:
        response = httpx.get(
            server.sparql_url, params={"query": "SELECT * WHERE { ?a ?b ?c . ?d ?e ?f }"}
        )
        graph = httpx.get(
            server.sparql_url,
            params={"query": "CONSTRUCT { ?a ?b ?f } WHERE { ?a ?b ?c . ?d ?e ?f }"},
        )
        small = httpx.get(server.sparql_url, params={"query": "SELECT * { ?a ?b ?c } LIMIT 5"})
    assert response.status_code == 422
    assert "--max-result-bytes" in response.text
    assert graph.status_code == 422
    assert small.status_code == 200


@pytest.mark.parametrize(
    ("query", "point"),
    [
        ("SELECT ?o WHERE { <urn:ex:s1> <urn:ex:p> ?o }", True),
        ("PREFIX ex: <urn:ex:> SELECT * FROM <urn:g> { GRAPH ?g { ?s a ex:x } . }", True),
        ('ASK { ?s ?p "x"@en }', True),
        ("# a comment }\nSELECT ?o {?s ?p ?o}LIMIT 1", True),
        ("SELECT ?o { ?s ?p ?o } OFFSET 5", False),
        ("SELECT ?o { ?s ?p ?o } LIMIT 5 OFFSET 3", False),
        ("SELECT ?o { ?s ?p ?o } ORDER BY ?o", False),
        ("SELECT ?o { ?s ?p ?o . ?o ?q ?r }", False),
        ("SELECT ?o { ?s ?p ?o ; ?q ?r }", False),
        ("SELECT ?o { ?s <urn:p>/<urn:q> ?o }", False),
        ("SELECT ?o { ?s <urn:p>* ?o }", False),
        ("SELECT ?o { ?s ?p ?o FILTER(?o) }", False),
        ("SELECT (COUNT(*) AS ?n) { ?s ?p ?o }", False),
        ("SELECT ?o { ?s ?p ?o # } LIMIT 1\n . ?a ?b ?c }", False),
        ("CONSTRUCT WHERE { ?s ?p ?o }", False),
    ],
)
def test_point_queries_are_recognised(query: str, point: bool) -> None:
    assert is_point_query(query) is point


def test_a_large_single_pattern_result_is_complete() -> None:
    """Point queries are answered on the event loop up to 64 KiB, then by a worker."""
    store = RdfStore()
    for i in range(3000):
        store.assert_(f"urn:ex:s{i}", "urn:ex:p", f"a value long enough to add up {i}")
    with BackgroundServer(store) as server:
        everything = httpx.get(server.sparql_url, params={"query": "SELECT * { ?s ?p ?o }"})
        assert everything.status_code == 200
        assert len(everything.json()["results"]["bindings"]) == 3000
    with BackgroundServer(store, max_result_bytes=10_000) as server:
        capped = httpx.get(server.sparql_url, params={"query": "SELECT * { ?s ?p ?o }"})
        assert capped.status_code == 422
