"""The remote store on real servers: atomic updates across processes, portable writes,
safe bindings, clear errors, and no partial writes after a crash.

The key/value and triple contracts run on Oxigraph server (and the key/value contract on
Virtuoso) through ``make_store``; this file covers what only a remote store has.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pyoxigraph import DefaultGraph, Literal
from servers import OxigraphServer, Server, free_port

from rdfmem import (
    BackingError,
    Endpoint,
    InvalidTerm,
    QueryError,
    RdfStore,
    RemoteStore,
    Unreachable,
)

EX = "http://example.org/"


@pytest.fixture
def remote(server: Server) -> Iterator[RemoteStore]:
    store = server.connect()
    yield store
    store.close()


def _raw_ask(server: Server, ask: str) -> bool:
    """Ask the server directly, as any SPARQL client would."""
    response = httpx.post(
        server.query_url,
        data={"query": ask},
        headers={"Accept": "application/sparql-results+json"},
    )
    response.raise_for_status()
    return bool(response.json()["boolean"])


# -- atomicity across processes and clients ---------------------------------------------------

CLIENT = """
import sys
from rdfmem import RdfStore
store = RdfStore.connect(sys.argv[1], sys.argv[2])
for _ in range(int(sys.argv[3])):
    store.update("counter", lambda n: (n or 0) + 1)
store.close()
"""


def test_six_processes_times_forty_updates_leave_exactly_240(server: Server) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CLIENT, server.query_url, server.update_url, "40"],
            stderr=subprocess.PIPE,
        )
        for _ in range(6)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err.decode()
    store = server.connect()
    assert store.get("counter") == 240
    assert store.count(predicate=store.value_predicate) == 1
    store.close()


def test_racing_sets_never_leave_two_values(server: Server) -> None:
    clients = [server.connect() for _ in range(4)]
    written = {f"{i}-{j}" for i in range(4) for j in range(10)}

    def work(i: int) -> None:
        for j in range(10):
            clients[i].set("k", f"{i}-{j}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert clients[0].count(predicate=clients[0].value_predicate) == 1
    assert clients[0].get("k") in written
    for c in clients:
        c.close()


def test_async_updates_on_one_client_are_atomic(remote: RemoteStore) -> None:
    async def main() -> None:
        await asyncio.gather(*(remote.aupdate("n", lambda n: (n or 0) + 1) for _ in range(12)))

    asyncio.run(main())
    assert remote.get("n") == 12


def test_update_many_holds_every_key_it_touches(server: Server) -> None:
    a, b = server.connect(), server.connect()

    def move(store: RemoteStore, times: int) -> None:
        for _ in range(times):
            store.update_many(
                ["left", "right"],
                lambda v: {"left": v.get("left", 100) - 1, "right": v.get("right", 0) + 1},
            )

    threads = [threading.Thread(target=move, args=(s, 10)) for s in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (a.get("left"), a.get("right")) == (80, 20)
    a.close()
    b.close()


# -- portable writes: named graphs only, no blank nodes -----------------------------------------


def test_the_default_graph_is_the_servers_own_where_it_has_one(server: Server) -> None:
    store = server.connect()
    default = "urn:rdfmem:graph:default"
    # A raw update is sent as written: on Virtuoso (no writable default graph) it names
    # the named graph that stands in for rdfmem's default graph.
    where = "{ %s }" if isinstance(server, OxigraphServer) else f"{{ GRAPH <{default}> {{ %s }} }}"
    store.assert_(EX + "s", EX + "p", "in the default graph")
    store.sparql_update("INSERT DATA " + where % f"<{EX}s> <{EX}p> 'raw update'")
    store.assert_(EX + "s", EX + "p", "named", graph=EX + "g")
    # rdfmem sees its default graph as the default graph, locally and in raw SPARQL ...
    assert store.count(subject=EX + "s", graph=DefaultGraph()) == 2
    assert store.count(subject=EX + "s") == 3
    rows = store.query(f"SELECT ?o WHERE {{ <{EX}s> <{EX}p> ?o }} ORDER BY ?o")
    if isinstance(server, OxigraphServer):
        assert [r["o"].value for r in rows] == ["in the default graph", "raw update"]
    else:  # a raw query reads Virtuoso's default graph, the union of all, like any client
        assert [r["o"].value for r in rows] == ["in the default graph", "named", "raw update"]
    # ... and finds a named graph by its IRI (sent with rdfmem's graph as the protocol's
    # default-graph-uri, Virtuoso found nothing in GRAPH <iri>).
    rows = store.query(f"SELECT ?o WHERE {{ GRAPH <{EX}g> {{ <{EX}s> <{EX}p> ?o }} }}")
    assert [r["o"].value for r in rows] == ["named"]
    rows = store.query(f"SELECT ?g WHERE {{ GRAPH ?g {{ <{EX}s> <{EX}p> ?o }} }}")
    if isinstance(server, OxigraphServer):
        assert [r["g"].value for r in rows] == [EX + "g"]
        # ... and so does every other client: the server's default graph is rdfmem's.
        assert _raw_ask(server, f"ASK {{ <{EX}s> <{EX}p> 'raw update' }}")
        assert not _raw_ask(server, f"ASK {{ GRAPH ?g {{ <{EX}s> <{EX}p> 'raw update' }} }}")
    else:  # Virtuoso has no writable default graph: a named graph stands in
        assert sorted(r["g"].value for r in rows) == [EX + "g", default, default]
        assert _raw_ask(server, f"ASK {{ GRAPH <{default}> {{ <{EX}s> <{EX}p> 'raw update' }} }}")
    store.sparql_update(
        "CLEAR DEFAULT" if isinstance(server, OxigraphServer) else f"CLEAR GRAPH <{default}>"
    )
    assert store.count(subject=EX + "s") == 1
    store.close()


def test_large_writes_and_long_reads_go_through(server: Server) -> None:
    # Virtuoso refuses updates of ~1,500 quads and (here) cuts results at 1,000 rows.
    store = server.connect()
    entries = [{"key": f"k{i:04}", "value": i} for i in range(1600)]
    store.restore({"version": 1, "type": "rdfmem-store-v1", "entries": entries})
    assert len(store.keys()) == 1600
    assert store.snapshot()["entries"] == entries
    if "virtuoso" in store.backend.server.lower():
        with pytest.raises(BackingError, match="1000 rows"):
            store.query("SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } }")
    store.close()


# -- bindings: pre-bound variables without pasted text ------------------------------------------

HOSTILE = [
    '" } ; DROP ALL ; #',
    "' } UNION { ?s ?p ?o } #",
    "> . <urn:evil> <urn:p> <urn:o",
    "line\nbreak\\",
    "}}}}",
    "é 東京 🎉",
]


def test_hostile_bindings_match_exactly_and_change_nothing(remote: RemoteStore) -> None:
    for i, value in enumerate(HOSTILE):
        remote.assert_(f"{EX}evil{i}", EX + "says", value)
    remote.assert_(EX + "good", EX + "says", "hello")
    q = f"SELECT ?s ?v WHERE {{ ?s <{EX}says> ?said FILTER(?said = ?v) }}"
    for i, value in enumerate(HOSTILE):
        assert [r["s"].value for r in remote.query(q, bindings={"v": value})] == [f"{EX}evil{i}"]
    assert remote.count() == len(HOSTILE) + 1


def test_bindings_reach_filters_sub_selects_and_construct(remote: RemoteStore) -> None:
    local = RdfStore()
    for store in (remote, local):
        for i, name in enumerate(["Ann", "Bob", "Cy"]):
            store.assert_(f"{EX}p{i}", EX + "name", name)
            store.assert_(f"{EX}p{i}", EX + "age", 30 + i)
    queries = [
        f"SELECT ?s ?who WHERE {{ ?s <{EX}name> ?n FILTER(?n = ?who) }}",
        f"SELECT ?s ?who WHERE {{ {{ SELECT ?s ?who WHERE {{ ?s <{EX}name> ?who }} }} }}",
        f"SELECT ?s ?who WHERE {{ ?s <{EX}age> ?a OPTIONAL {{ ?s <{EX}name> ?who }} FILTER(?a > 30) }}",
        f"SELECT (COUNT(?s) AS ?n) ?who WHERE {{ ?s <{EX}name> ?who }} GROUP BY ?who",
        f"ASK {{ ?s <{EX}name> ?who }}",
        f"CONSTRUCT {{ ?s <{EX}label> ?who }} WHERE {{ ?s <{EX}name> ?who }}",
        f"CONSTRUCT WHERE {{ ?s <{EX}name> ?who }}",
    ]
    for q in queries:
        got = remote.query(q, bindings={"who": Literal("Bob")})
        want = local.query(q, bindings={"who": Literal("Bob")})
        if isinstance(want, bool):
            assert got == want, q
        else:
            assert sorted(map(str, got)) == sorted(map(str, want)), q  # type: ignore[arg-type]


def test_binding_a_variable_the_select_does_not_project_is_refused_as_embedded(
    remote: RemoteStore,
) -> None:
    # One rule on every backend (issue 22): SEP-0007, as embedded Oxigraph applies it.
    q = f"SELECT ?s WHERE {{ ?s <{EX}says> ?said FILTER(?said = ?v) }}"
    for store in (remote, RdfStore()):
        with pytest.raises(QueryError, match="projection"):
            store.query(q, bindings={"v": "hello"})
    assert remote.query(f"SELECT * WHERE {{ ?s <{EX}says> ?v }}", bindings={"v": "x"}) == []


def test_a_binding_name_that_is_not_a_variable_is_refused(remote: RemoteStore) -> None:
    remote.assert_(EX + "s", EX + "p", "o")
    with pytest.raises(InvalidTerm):
        remote.query("SELECT * WHERE { ?s ?p ?o }", bindings={"x) {} } DROP ALL #": "v"})
    assert remote.count() == 1


# -- errors ------------------------------------------------------------------------------------


def test_a_dead_port_is_unhealthy_and_unreachable() -> None:
    url = f"http://127.0.0.1:{free_port()}/query"
    store = RdfStore.connect(url, region="lab")
    assert store.endpoint == Endpoint(url, "lab")
    started = time.monotonic()
    assert store.health(300) is False
    assert time.monotonic() - started < 5
    for call in (lambda: store.get("k"), lambda: store.set("k", 1), lambda: store.count()):
        with pytest.raises(Unreachable) as info:
            call()
        assert info.value.reason == "UNREACHABLE"
        assert info.value.endpoint == url
        assert isinstance(info.value.cause, httpx.ConnectError)
    store.close()


def _answering(status: int, body: bytes, media: str) -> RemoteStore:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body, headers={"content-type": media})

    return RemoteStore.connect("http://sparql.test/query", transport=httpx.MockTransport(handler))


JSON_RESULTS = "application/sparql-results+json"
BROKEN_ANSWERS = {
    "cut-json": (200, b'{"head": {"vars": ["s"]}, "results": {"bind', JSON_RESULTS, BackingError),
    "bad-term": (
        200,
        b'{"head":{"vars":["s"]},"results":{"bindings":[{"s":{"type":"nope","value":"x"}}]}}',
        JSON_RESULTS,
        BackingError,
    ),
    "html": (200, b"<html>proxy login</html>", "text/html", BackingError),
    "bad-ntriples": (200, b"<urn:a> <urn:b> .", "application/n-triples", BackingError),
    "503": (503, b"overloaded", "text/plain", BackingError),
    "400": (400, b"Parse error at line 1: expected WHERE", "text/plain", QueryError),
}


@pytest.mark.parametrize("case", BROKEN_ANSWERS)
def test_bodies_are_validated_even_on_200(case: str) -> None:
    status, body, media, error = BROKEN_ANSWERS[case]
    store = _answering(status, body, media)  # a server (or proxy) that answers this
    with pytest.raises(error) as info:
        list(store.query("SELECT ?s WHERE { ?s ?p ?o }"))  # type: ignore[arg-type]
    if status == 400:
        assert "expected WHERE" in str(info.value)
    assert store.health(1000) is False
    store.close()


def test_a_request_the_server_rolled_back_is_sent_again() -> None:
    answers = [
        (500, "Virtuoso 40001 Error SR172: Transaction deadlocked"),
        (500, "Virtuoso 40001 Error SR172: Transaction deadlocked"),
        (204, ""),
        (500, "Virtuoso 42000 Error: out of disk"),
    ]
    sent: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        status, text = answers[len(sent) - 1]
        return httpx.Response(status, text=text)

    store = RemoteStore.connect(
        "http://sparql.test/sparql",
        default_graph="urn:rdfmem:graph:default",
        transport=httpx.MockTransport(handler),
    )
    store.assert_(EX + "s", EX + "p", "o")  # deadlocked twice, then done
    assert len(sent) == 3 and sent[0] == sent[2]
    with pytest.raises(BackingError, match="out of disk"):
        store.assert_(EX + "s", EX + "p", "o2")  # any other failure is not retried
    assert len(sent) == 4
    store.close()


def test_a_server_killed_mid_run_leaves_no_partial_write(tmp_path: Path) -> None:
    server = OxigraphServer(tmp_path)
    try:
        server.start()
        store = server.connect(lease_ttl_ms=1000)
        keys = [f"part{i}" for i in range(5)]
        done: list[int] = []
        failure: list[BaseException] = []

        def writer() -> None:
            try:
                for i in range(1, 100_000):
                    store.update_many(keys, lambda _, i=i: dict.fromkeys(keys, i))
                    done.append(i)
            except BaseException as exc:
                failure.append(exc)

        thread = threading.Thread(target=writer)
        thread.start()
        while len(done) < 20:
            time.sleep(0.01)
        server.kill()
        thread.join(timeout=30)
        assert isinstance(failure[0], Unreachable)
        assert failure[0].endpoint in (server.query_url, server.update_url)
        assert "did not answer" in str(failure[0])
        assert store.health(200) is False

        server.start()  # same port, same data
        values = {store.get(k) for k in keys}
        assert len(values) == 1  # every key of the last write, or none of it
        assert values.pop() in (done[-1], done[-1] + 1)
        store.update("part0", lambda n: n + 1)  # the dead client's lease expires
        store.close()
    finally:
        server.stop()


def test_connect_is_lazy_and_shares_the_query_url_for_updates() -> None:
    store = RdfStore.connect("http://127.0.0.1:9/sparql")
    assert isinstance(store, RemoteStore)
    assert store.backend.update_url == store.backend.query_url
    assert repr(store) == "RemoteStore('http://127.0.0.1:9/sparql')"
    with pytest.raises(InvalidTerm):
        RdfStore.connect("http://127.0.0.1:9/sparql", default_graph="not an iri")
    store.close()
