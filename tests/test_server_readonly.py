"""Read paths never write (issue 23, item 2): text sent as a query is judged by pyoxigraph's
parser before any backend sees it, so an update reaches no server through ``query=``.

Virtuoso runs updates sent as ``query=``: on a store backed by it, ``GET /sparql?query=CLEAR
GRAPH …`` used to wipe the memory with no token, and the "read-only" MCP tool ran ``DROP``.
Each update below is tried on a real Virtuoso and a real Oxigraph server, through the three
read paths: ``rdfmem serve``'s GET and POST ``query=``, the remote store's ``query`` (the
CLI's remote reads) and MCP ``sparql_query``'s check; the data must be unchanged after each.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from servers import Server

from rdfmem import RdfStore
from rdfmem.core.errors import QueryError
from rdfmem.core.guard import query_form
from rdfmem.mcp.services import Services
from rdfmem.mcp.sparql import run_query
from rdfmem.server import BackgroundServer

GRAPH = "urn:ex:kept"
_DATA = f"INSERT DATA {{ GRAPH <{GRAPH}> {{ <urn:ex:a> <urn:ex:p> 'kept' , 'too' }} }}"
_G = f"<{GRAPH}>"

#: Every update form the issue names, in the spellings the guard knows: case, comments,
#: prologues, ``\\u`` / ``\\U`` escapes (keyword, quote closing a string, newline ending a
#: comment), glued tokens, the long s and dotless i.
UPDATES = [
    f"CLEAR GRAPH {_G}",
    f"cLeAr SILENT graph {_G}",
    "CLEAR ALL",
    f"# a comment\nCLEAR GRAPH {_G}",
    f"PREFIX ex: <urn:ex:> CLEAR GRAPH {_G}",
    f"\\u0043LEAR GRAPH {_G}",
    f"\\U00000043\\U0000004cEAR GRAPH {_G}",
    f"ASK {{}} # note \\u000A CLEAR GRAPH {_G}",
    f"SELECT * {{ ?s ?p '\\u0027 }} CLEAR GRAPH {_G} #' }}",
    f'SELECT * {{ ?s ?p "\\u0022 }} DROP GRAPH {_G} #" }}',
    f"SELECT * {{}} ; CLEAR GRAPH {_G}",
    f"DROP GRAPH {_G}",
    f"DROP SILENT GRAPH {_G}",
    "DROP ALL",
    f"dr\\u006Fp graph {_G}",
    f"INSERT DATA {{ GRAPH {_G} {{ <urn:ex:x> <urn:ex:p> 'new' }} }}",
    f"\u0131nsert data {{ GRAPH {_G} {{ <urn:ex:x> <urn:ex:p> 'new' }} }}",
    f"\\u0049NSERT DATA {{ GRAPH {_G} {{ <urn:ex:x> <urn:ex:p> 'new' }} }}",
    f"DELETE WHERE {{ GRAPH {_G} {{ ?s ?p ?o }} }}",
    f"delete where{{GRAPH{_G}{{?s ?p ?o}}}}",
    f"DEL\\u0045TE WHERE {{ GRAPH {_G} {{ ?s ?p ?o }} }}",
    f"WITH {_G} DELETE {{ ?s ?p ?o }} WHERE {{ ?s ?p ?o }}",
    f"LOAD <http://127.0.0.1:9/x.ttl> INTO GRAPH {_G}",
    f"\u017felect * {{}} ; LOAD <http://127.0.0.1:9/x.ttl> INTO GRAPH {_G}",
    f"CREATE GRAPH <urn:ex:new> ; DROP GRAPH {_G}",
    f"MOVE {_G} TO <urn:ex:elsewhere>",
    f"COPY <urn:ex:empty> TO {_G}",
    f"ADD <urn:ex:empty> TO {_G}",
]


def _count(server: Server) -> int:
    """The triples in ``GRAPH``, asked of the server directly."""
    response = httpx.post(
        server.query_url,
        data={"query": f"SELECT (COUNT(*) AS ?n) {{ GRAPH {_G} {{ ?s ?p ?o }} }}"},
        headers={"Accept": "application/sparql-results+json"},
        timeout=30,
    )
    response.raise_for_status()
    return int(response.json()["results"]["bindings"][0]["n"]["value"])


@pytest.fixture(scope="module", params=["oxigraph_server", "virtuoso_server"])
def remote(request: pytest.FixtureRequest) -> Iterator[tuple[Server, RdfStore, BackgroundServer]]:
    """A real server holding two triples in ``GRAPH``, a store on it, and ``rdfmem serve``
    (no updates allowed, no token) over that store."""
    server: Server = request.getfixturevalue(request.param)
    server.wipe()
    httpx.post(server.update_url, data={"update": _DATA}, timeout=30).raise_for_status()
    store = server.connect()
    with BackgroundServer(store) as served:
        yield server, store, served
    store.close()
    server.wipe()


@pytest.mark.parametrize("update", UPDATES)
def test_no_read_path_changes_data(
    remote: tuple[Server, RdfStore, BackgroundServer], update: str
) -> None:
    server, store, served = remote
    assert _count(server) == 2
    url = served.url + "/sparql"
    got = httpx.get(url, params={"query": update}, timeout=30)
    assert got.status_code in (400, 403), got.text
    posted = httpx.post(url, data={"query": update}, timeout=30)
    assert posted.status_code in (400, 403), posted.text
    direct = httpx.post(
        url, content=update.encode(), headers={"Content-Type": "application/sparql-query"}
    )
    assert direct.status_code in (400, 403), direct.text
    with pytest.raises(QueryError):
        store.query(update)  # the CLI's remote reads
    with pytest.raises(QueryError):
        store.backend.query(update)  # below the store's own guard too
    with pytest.raises(QueryError):
        run_query(Services(store), update)  # MCP sparql_query
    assert _count(server) == 2


def test_queries_still_answer_on_the_same_paths(
    remote: tuple[Server, RdfStore, BackgroundServer],
) -> None:
    server, store, served = remote
    ask = f"ASK {{ GRAPH {_G} {{ <urn:ex:a> <urn:ex:p> 'kept' }} }}"
    got = httpx.get(
        served.url + "/sparql",
        params={"query": ask},
        headers={"Accept": "application/sparql-results+json"},
        timeout=30,
    )
    assert got.status_code == 200 and got.json()["boolean"] is True
    # Words that spell update keywords in strings, IRIs, variables and prefixes are fine.
    select = (
        "PREFIX clear: <urn:ex:> SELECT ?drop WHERE { GRAPH <urn:ex:kept> "
        "{ clear:a clear:p ?drop FILTER(?drop != 'INSERT DATA') } } "
        "ORDER BY ?drop"
    )
    assert [r["drop"].value for r in store.query(select).rows] == ["kept", "too"]
    answer = run_query(Services(store), select)
    assert answer  # answered, whatever its shape
    # A quote written as an escape in a string: the text with escapes expanded does not
    # parse, but holds no update keyword either, so the query is sent.
    quoted = f'ASK {{ GRAPH {_G} {{ ?s ?p ?o FILTER(?o != "\\u0022") }} }}'
    assert store.query(quoted) is True
    assert _count(server) == 2


@pytest.mark.parametrize(
    ("text", "form"),
    [
        ("ASK {}", "ASK"),
        ("PREFIX ask: <urn:x> ASK { ?s ask:p ?o } GROUP BY ?s", "ASK"),
        ("BASE <urn:x> SELECT * {}", "SELECT"),
        ("CONSTRUCT WHERE { ?s ?p ?o }", "CONSTRUCT"),
        ("DESCRIBE <urn:x>", "CONSTRUCT"),
        ('SELECT * { ?s ?p "say \\u0022hi\\u0022" }', "SELECT"),
    ],
)
def test_query_form_names_the_form(text: str, form: str) -> None:
    assert query_form(text) == form


def test_an_ask_is_parsed_not_evaluated() -> None:
    # pyoxigraph answers an ASK at once: a cross product of three 2,000-row VALUES would
    # take minutes on an empty store. The check parses it and returns at once.
    values = " ".join(str(i) for i in range(2000))
    text = (
        f"ASK {{ VALUES ?a {{ {values} }} VALUES ?b {{ {values} }} VALUES ?c {{ {values} }} "
        "FILTER(false) }"
    )
    assert query_form(text) == "ASK"


def test_a_refusal_says_what_to_do() -> None:
    with pytest.raises(QueryError, match=r"this is an update \(CLEAR\).*POST update="):
        query_form(f"CLEAR GRAPH {_G}")
    with pytest.raises(QueryError, match="not a SPARQL query: syntax error at 1:17"):
        query_form("SELECT * WHERE {")
