"""The remote store's graphs: updates reach the server exactly as written, a query's
request does not grow with the server's named graphs, and ``restore`` holds every key it
replaces against other clients."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
from pyoxigraph import DefaultGraph, NamedNode
from servers import Server, VirtuosoServer

from rdfmem import BackingError, LeaseDenied, QueryError, RemoteStore

EX = "http://example.org/"


class Listener:
    """A TCP port that counts the connections made to it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop = True
        self._thread.join()
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    listening = Listener()
    yield listening
    listening.close()


def _sent_updates(store_options: dict[str, Any], payload: str) -> list[str]:
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        form = parse_qs(request.content.decode())
        if "update" in form:
            sent.extend(form["update"])
            return httpx.Response(204)
        return httpx.Response(
            200,
            json={"head": {}, "boolean": True},
            headers={"content-type": "application/sparql-results+json"},
        )

    store = RemoteStore.connect(
        "http://sparql.test/query", transport=httpx.MockTransport(handler), **store_options
    )
    store.sparql_update(payload, allow_network=True)
    store.close()
    return sent


# A prefixed name may hold an escaped quote (``ex:o\'``): a text reader that takes it for a
# string start misplaces the comment that follows. rdfmem once rewrote updates with such a
# reader, and its inserted line break ended the comment: the LOAD hidden in it then ran.
HIDDEN_LOAD = (
    "PREFIX ex: <urn:ex:>\n"
    "INSERT DATA {{ ex:s ex:p ex:o\\' . # ' }} ; LOAD <http://127.0.0.1:{port}/x> "
    "INTO GRAPH <urn:x> ; INSERT DATA {{ #\n}}"
)


@pytest.mark.parametrize("options", [{}, {"default_graph": "urn:rdfmem:graph:default"}])
def test_an_update_reaches_the_server_byte_for_byte(options: dict[str, str]) -> None:
    payload = HIDDEN_LOAD.format(port=9)
    assert _sent_updates(options, payload) == [payload]
    # With the change log, a record of it (of unknown scope) follows, in its own request.
    sent = _sent_updates({**options, "change_log": True}, payload)
    assert sent[0] == payload
    assert len(sent) == 2 and "changedUnknown" in sent[1]


def test_a_load_hidden_in_a_comment_stays_hidden(server: Server, listener: Listener) -> None:
    store = server.connect()
    if isinstance(server, VirtuosoServer):  # reads no escapes in prefixed names: refused
        with pytest.raises(QueryError):
            store.sparql_update(HIDDEN_LOAD.format(port=listener.port), allow_network=True)
    else:  # the server read what the caller wrote: one triple, and a comment
        store.sparql_update(HIDDEN_LOAD.format(port=listener.port), allow_network=True)
        objects = [q.object for q in store.triples(graph=DefaultGraph())]
        assert objects == [NamedNode("urn:ex:o'")]
    assert not store.ask(graph="urn:x")
    assert listener.connections == 0
    store.close()


def _graph_query_bodies(server: Server, graphs: int) -> list[bytes]:
    bodies: list[bytes] = []

    def record(request: httpx.Request) -> None:
        bodies.append(request.read())

    store = server.connect()
    store.backend.client.event_hooks["request"].append(record)
    for start in range(0, graphs, 500):
        data = " ".join(
            f"GRAPH <{EX}g{i}> {{ <{EX}s> <{EX}p> {i} }}"
            for i in range(start, min(graphs, start + 500))
        )
        store.sparql_update(f"INSERT DATA {{ {data} }}")
    bodies.clear()
    rows = store.query(f"SELECT (COUNT(?g) AS ?n) WHERE {{ GRAPH ?g {{ <{EX}s> <{EX}p> ?o }} }}")
    assert int(rows[0]["n"].value) == graphs
    store.close()
    return bodies


def test_a_graph_query_is_one_request_of_one_size_whatever_the_graph_count(
    oxigraph_server: Server,
) -> None:
    oxigraph_server.wipe()
    few = _graph_query_bodies(oxigraph_server, 3)
    oxigraph_server.wipe()
    many = _graph_query_bodies(oxigraph_server, 1200)
    assert len(few) == len(many) == 1  # no listing of the graphs first
    assert len(many[0]) == len(few[0])  # and no list of graphs sent


def test_restore_holds_every_key_against_another_clients_set(server: Server) -> None:
    # Before: restore took no lease, and a racing set left a key with two values.
    keys = [f"k{i}" for i in range(4)]
    restorer, setters = server.connect(), [server.connect() for _ in range(4)]
    snapshot = {
        "version": 1,
        "type": "rdfmem-store-v1",
        "entries": [{"key": k, "value": "restored"} for k in keys],
    }
    errors: list[BaseException] = []
    done = threading.Event()

    def sets(setter: RemoteStore, key: str) -> None:
        try:
            round_ = 0
            while not done.is_set():
                setter.set(key, round_)
                round_ += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=sets, args=(setter, key))
        for setter, key in zip(setters, keys, strict=True)
    ]
    for thread in threads:
        thread.start()
    for _ in range(60):
        restorer.restore(snapshot)
    done.set()
    for thread in threads:
        thread.join()
    assert errors == []
    for key in keys:
        values = list(restorer.backend.match(restorer._codec.subject(key), None, None, None))
        assert len(values) == 1, (key, values)
    restorer.close()
    for setter in setters:
        setter.close()


def test_restore_waits_for_another_clients_lease_on_a_key(server: Server) -> None:
    holder, restorer = server.connect(), server.connect(lease_wait_ms=300)
    holder.set("k0", "before")
    lease = holder.acquire_lease("k0", ttl_ms=10_000, max_wait_ms=1_000)
    snapshot = {"version": 1, "type": "rdfmem-store-v1", "entries": [{"key": "k0", "value": 1}]}
    with pytest.raises(LeaseDenied):
        restorer.restore(snapshot)
    assert holder.get("k0") == "before"
    holder.restore(snapshot)  # the holder's own restore goes ahead under its lease
    assert restorer.get("k0") == 1
    holder.release_lease(lease)
    restorer.restore({**snapshot, "entries": [{"key": "k0", "value": 2}]})
    assert holder.get("k0") == 2
    holder.close()
    restorer.close()


def test_an_rdfxml_entity_bomb_from_the_server_is_refused() -> None:
    lol = b"".join(
        b'<!ENTITY a%d "%s">' % (i, b"&a%d;" % (i - 1) * 10 if i else b"lol") for i in range(9)
    )
    bomb = b'<?xml version="1.0"?><!DOCTYPE r [' + lol + b"]><r>&a8;</r>"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=bomb, headers={"content-type": "application/rdf+xml"})

    store = RemoteStore.connect(
        "http://sparql.test/query",
        default_graph="urn:d",
        transport=httpx.MockTransport(handler),
    )
    with pytest.raises(BackingError, match="entities would expand"):
        store.query("CONSTRUCT WHERE { ?s ?p ?o }")
    store.close()
