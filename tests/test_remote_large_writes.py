"""A write too large for one Virtuoso request is still seen all at once (issue 14, 15).

Virtuoso refuses an update of ~1,500 quads, so the remote store stages a larger write in
scratch graphs, 500 quads per request, and applies it in one request: a reader polling
the server meanwhile sees none of it or all of it, never a part. Real Virtuoso (and
Oxigraph server with a small ``max_quads_per_request``), no mocks.
"""

from __future__ import annotations

import threading

import httpx
from pyoxigraph import BlankNode, Literal, NamedNode, Quad
from servers import Server

from rdfmem import RemoteStore

EX = "http://example.org/"
GRAPH = NamedNode(EX + "big")


def _connect(server: Server) -> RemoteStore:
    # Virtuoso stages past 500 quads by default; Oxigraph server only when told to.
    if "virtuoso" in type(server).__name__.lower():
        return server.connect()
    return server.connect(max_quads_per_request=500)


def _count(server: Server, graph: NamedNode) -> int:
    response = httpx.post(
        server.query_url,
        data={"query": f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{graph.value}> {{ ?s ?p ?o }} }}"},
        headers={"Accept": "application/sparql-results+json"},
        timeout=30,
    )
    response.raise_for_status()
    return int(response.json()["results"]["bindings"][0]["n"]["value"])


def _graphs(server: Server) -> list[str]:
    response = httpx.post(
        server.query_url,
        data={"query": "SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }"},
        headers={"Accept": "application/sparql-results+json"},
        timeout=30,
    )
    response.raise_for_status()
    return [r["g"]["value"] for r in response.json()["results"]["bindings"]]


def _quads(n: int, tag: str) -> list[Quad]:
    return [
        Quad(NamedNode(f"{EX}{tag}{i}"), NamedNode(EX + "v"), Literal(i), GRAPH) for i in range(n)
    ]


def test_a_large_write_is_seen_whole_or_not_at_all(server: Server) -> None:
    store = _connect(server)
    seen: set[int] = set()
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            seen.add(_count(server, GRAPH))

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        store.backend.apply([], _quads(3000, "a"))
    finally:
        done.set()
        reader.join()
    assert _count(server, GRAPH) == 3000
    assert seen <= {0, 3000}, sorted(seen)  # never a part of the write
    assert not [g for g in _graphs(server) if "staging" in g]  # scratch graphs dropped
    store.close()


def test_a_large_replacement_removes_and_adds_in_one_step(server: Server) -> None:
    store = _connect(server)
    old, new = _quads(1200, "old"), _quads(1300, "new")
    store.backend.apply([], old)
    store.backend.apply(old, new)
    rows = store.select(subject="?s", predicate=EX + "v", object="?o", graph=GRAPH)
    assert len(rows) == 1300 and all("/new" in r["s"].value for r in rows)
    assert not [g for g in _graphs(server) if "staging" in g]
    store.close()


def test_a_large_load_keeps_each_blank_node_whole(server: Server) -> None:
    store = _connect(server)
    quads = []
    for i in range(800):  # 1,600 quads: two per blank node, staged in parts of 500
        node = BlankNode(f"n{i}")
        quads.append(Quad(NamedNode(f"{EX}doc{i}"), NamedNode(EX + "author"), node, GRAPH))
        quads.append(Quad(node, NamedNode(EX + "name"), Literal(f"author {i}"), GRAPH))
    store.backend.apply([], quads)
    response = httpx.post(
        server.query_url,
        data={
            "query": f"SELECT (COUNT(DISTINCT ?a) AS ?n) WHERE {{ GRAPH <{GRAPH.value}> "
            f"{{ ?d <{EX}author> ?a . ?a <{EX}name> ?name FILTER(isBlank(?a)) }} }}"
        },
        headers={"Accept": "application/sparql-results+json"},
        timeout=30,
    )
    response.raise_for_status()
    n = int(response.json()["results"]["bindings"][0]["n"]["value"])
    assert n == 800  # every author is one node with both its quads
    store.close()


def test_scratch_graphs_abandoned_by_a_killed_client_are_dropped_by_the_next(
    server: Server,
) -> None:
    # Issue 22: a client killed between staging and applying left its scratch graphs on the
    # server for good. The next client that stages drops those older than an hour, and
    # leaves a write that another client is staging right now alone.
    import time

    from rdfmem.backends.sparql.wire import STAGING_PREFIX

    hours_ago = int((time.time() - 2 * 3600) * 1000)
    abandoned = f"{STAGING_PREFIX}{hours_ago}-dead:0"
    under_way = f"{STAGING_PREFIX}{int(time.time() * 1000)}-busy:0"
    for graph in (abandoned, under_way):
        done = httpx.post(
            server.update_url,
            data={"update": f"INSERT DATA {{ GRAPH <{graph}> {{ <urn:x> <urn:p> 1 }} }}"},
            timeout=30,
        )
        assert done.status_code < 300, done.text
    store = _connect(server)
    store.backend.apply([], _quads(1200, "n"))
    graphs = _graphs(server)
    assert abandoned not in graphs
    assert under_way in graphs
    assert _count(server, GRAPH) == 1200
    store.close()
