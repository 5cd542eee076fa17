"""Remote writes under leases: ``clear_graph`` in one request under a lease on every
subject, and a write made inside a leased block sent with the lease's release.

On real Oxigraph server and Virtuoso (``tests/servers.py``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from pyoxigraph import DefaultGraph
from servers import Server

from rdfmem import BackingError, LeaseDenied, Memories, Memory, QueryError, RemoteStore

EX = "http://example.org/"


@pytest.fixture
def store(server: Server) -> Iterator[RemoteStore]:
    st = server.connect()
    yield st
    st.close()


def _counting(store: RemoteStore) -> list[bytes]:
    """The requests the calling thread sends from now on (not the deletions of claims that
    lingered out, which the client's reaper thread sends)."""
    sent: list[bytes] = []
    caller = threading.get_ident()

    def hook(request: httpx.Request) -> None:
        if threading.get_ident() == caller:
            sent.append(request.read())

    store.backend.client.event_hooks["request"].append(hook)
    return sent


def _no_claims(server: Server) -> bool:
    response = httpx.post(
        server.query_url,
        data={"query": "ASK { GRAPH <urn:rdfmem:graph:leases> { ?s ?p ?o } }"},
        headers={"Accept": "application/sparql-results+json"},
    )
    response.raise_for_status()
    return not response.json()["boolean"]


def test_clear_graph_is_one_request_whatever_the_graph_holds(store: RemoteStore) -> None:
    lines = "\n".join(f'<{EX}s{i}> <{EX}p> "{i}" .' for i in range(3_000))
    store.load(lines, "ntriples", graph=EX + "big")
    store.assert_(EX + "a", EX + "p", "kept", graph=EX + "other")
    store.assert_(EX + "d", EX + "p", "default")
    store.set("k", 1)
    sent = _counting(store)
    store.clear_graph(EX + "big")
    # The lease's claim, its read, then CLEAR with the release: three, not 3,000 quads.
    assert len(sent) == 3
    assert b"CLEAR" in sent[-1]
    assert store.count(graph=EX + "big") == 0
    assert store.count(graph=EX + "other") == 1
    assert store.get("k") == 1
    store.clear_graph(DefaultGraph())
    assert store.count(graph=DefaultGraph()) == 0
    assert store.count(graph=EX + "other") == 1
    store.clear_graph(EX + "never-written")  # nothing there: no error


def test_clear_graph_waits_for_a_lease_another_client_holds(server: Server) -> None:
    holder = server.connect()
    clearer = server.connect(lease_wait_ms=300)
    holder.assert_(EX + "a", EX + "p", "x", graph=EX + "g")
    lease = holder.acquire_lease("job", 10_000, 0)
    with pytest.raises(LeaseDenied):
        clearer.clear_graph(EX + "g")  # a lease on every subject waits for "job"
    assert holder.count(graph=EX + "g") == 1
    holder.release_lease(lease)
    clearer.clear_graph(EX + "g")
    assert holder.count(graph=EX + "g") == 0
    assert _no_claims(server)
    holder.close()
    clearer.close()


def test_the_lease_graph_is_not_cleared(store: RemoteStore) -> None:
    with pytest.raises(ValueError, match="lease graph"):
        store.clear_graph("urn:rdfmem:graph:leases")


def test_a_save_costs_three_requests_then_two(server: Server, store: RemoteStore) -> None:
    memories = Memories(store, project="p")
    memories.save(Memory("project", "First note", "warm"))
    sent = _counting(store)
    memories.save(Memory("project", "Second note", "about deploys"))
    # A new claim; the claims read (on Oxigraph server with the subject's quads, which
    # Virtuoso reads by a query of their own); the write with its change record. Nobody
    # else wanted the subject, so the claim is kept, not released.
    assert len(sent) == (3 if server.name == "oxigraph" else 4)
    assert b"INSERT+DATA" in sent[-1] and b"DELETE" in sent[-1]
    sent.clear()
    memories.save(Memory("project", "Second note", "about releases"))
    assert len(sent) == 2  # under the kept claim: one read (claims and quads), the write
    other = server.connect(lease_wait_ms=0)
    assert Memories(other, project="p").read("project", "Second note").content == ("about releases")
    store.close()  # deletes the kept claims
    assert _no_claims(server)
    other.close()


def test_a_malformed_update_in_a_leased_block_fails_at_once(
    server: Server, store: RemoteStore
) -> None:
    with store.exclusive(EX + "r"):
        with pytest.raises(QueryError):
            store.sparql_update("INSERT DATA { <urn:a> <urn:b> ")  # sent now, not deferred
        store.sparql_update(f"INSERT DATA {{ GRAPH <{EX}g> {{ <{EX}r> <{EX}p> 1 }} }} # c")
        assert store.count(graph=EX + "g") == 1  # a read sends the deferred write first
    store.close()  # its claim was kept (nobody else wanted it): closing deletes it
    assert _no_claims(server)


def test_a_deferred_write_the_server_refuses_still_releases(server: Server) -> None:
    store = server.connect()
    other = server.connect(lease_wait_ms=0)
    store.assert_(EX + "a", EX + "p", "x", graph=EX + "g")
    # Fine on the empty store it is checked on (so it waits for the release), refused by
    # the server, where the graph exists: the release is sent again on its own.
    with pytest.raises((QueryError, BackingError)), store.exclusive(EX + "r"):
        store.sparql_update(f"CREATE GRAPH <{EX}g>")
    with other.exclusive(EX + "r"):  # released: no wait
        pass
    assert store.count(graph=EX + "g") == 1
    store.close()
    other.close()  # deletes the claim it kept
    assert _no_claims(server)


def test_a_load_inside_a_leased_block_is_refused_before_anything_is_fetched(
    store: RemoteStore,
) -> None:
    # Issue 22, item 2: the deferred-write check ran the update on a scratch local store
    # first, so LOAD fetched the URL, and only then was it refused.
    import socket

    from rdfmem import NetworkAccessRefused

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    try:
        with store.exclusive("urn:ex:doc"), pytest.raises(NetworkAccessRefused):
            store.sparql_update(f"LOAD <http://127.0.0.1:{port}/data.ttl>")
        with pytest.raises(socket.timeout):
            listener.accept()  # nobody called
    finally:
        listener.close()
    assert not store.ask(subject="urn:ex:doc")


def _within(seconds: float, work: Callable[[], None]) -> None:
    """Run ``work`` on a thread; fail (instead of hanging the suite) if it deadlocks."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # reported below, on the test's thread
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"deadlocked: still running after {seconds} s"
    if errors:
        raise errors[0]


def test_a_key_written_inside_its_own_exclusive_block(server: Server) -> None:
    # store.set(key) inside store.exclusive(key) took the client's per-subject lock a
    # second time on the same thread and waited for itself forever.
    store = server.connect()

    def read_modify_write() -> None:
        with store.exclusive(store._codec.subject("count")):  # the key's own subject
            store.set("count", (store.get("count") or 0) + 1)
            store.set("count", store.get("count") + 1)
            with store.exclusive():  # every subject, nested: also held already
                store.set("other", "x")

    try:
        _within(30, read_modify_write)
        _within(30, read_modify_write)
        assert store.get("count") == 4
        fresh = server.connect()
        try:
            assert fresh.get("count") == 4  # written to the server, not kept back
        finally:
            fresh.close()
    finally:
        store.close()


def test_a_nested_block_does_not_let_another_thread_in(server: Server) -> None:
    store = server.connect()
    entered = threading.Event()
    order: list[str] = []

    def other() -> None:
        entered.wait(10)
        with store.exclusive(EX + "s"):
            order.append("other")

    def nested() -> None:
        with store.exclusive(EX + "s"):
            with store.exclusive(EX + "s"):
                entered.set()
                time.sleep(0.3)  # the other thread is waiting for EX s now
                order.append("inner")
            time.sleep(0.2)  # leaving the inner block does not release the outer one
            order.append("outer")

    thread = threading.Thread(target=other, daemon=True)
    thread.start()
    try:
        _within(30, nested)
        thread.join(30)
        assert order == ["inner", "outer", "other"]
    finally:
        store.close()
