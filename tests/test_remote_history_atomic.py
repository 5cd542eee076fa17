"""A versioned write (``history=True``) on a server lands whole: the new value, its version
and its change records together, or nothing.

Virtuoso keeps the operations of a request that came before one that failed (a deadlock
between concurrent writers fails an operation), so a versioned write sent as several
operations (the inserts, then one ``DELETE DATA`` per graph, then a change record per
graph) could leave the data changed without its version, or the old value removed without
the new. On Virtuoso it is now one operation, its change records (one per graph) in it; on
Oxigraph server, which applies a request whole, it stays one request of several
operations. Checked here: the value read back, the versions, the server's own count of an
entry's values, the SPARQL a versioned write sends, and counters under concurrent
writers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
from pyoxigraph import Literal, NamedNode
from rdflib.plugins.sparql.parser import parseUpdate
from servers import Server

from rdfmem import RdfStore

KV = "urn:rdfmem:graph:store"
VALUE = "urn:rdfmem:store:value"
LATEST = "https://w3id.org/rdfmem#latestVersion"
LOG = "urn:rdfmem:graph:changes"
CHANGED_GRAPH = "https://w3id.org/rdfmem#changedGraph"
JSON = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#JSON")
G, DOC, DATA = NamedNode("urn:test:g"), NamedNode("urn:test:doc"), NamedNode("urn:test:data")


def _bump(n: int | None) -> int:
    return (n or 0) + 1


def _entry_values(server: Server) -> dict[str, list[str]]:
    """Each key/value entry's values on the server, by subject, as any SPARQL client
    reads them (one each, unless a write left an old value beside a new one)."""
    rows = server.rows(f"SELECT ?s ?o WHERE {{ GRAPH <{KV}> {{ ?s <{VALUE}> ?o }} }}")
    values: dict[str, list[str]] = {}
    for row in rows:
        values.setdefault(row["s"]["value"], []).append(row["o"]["value"])
    return values


def _latest_versions(server: Server) -> list[int]:
    """How many latest versions each resource has in any history graph (one each)."""
    rows = server.rows(
        f"SELECT ?s (COUNT(?v) AS ?n) WHERE {{ GRAPH ?h {{ ?s <{LATEST}> ?v }} }} GROUP BY ?s"
    )
    return [int(r["n"]["value"]) for r in rows]


def _logged_graphs(server: Server) -> list[int]:
    """How many graphs each change record names."""
    rows = server.rows(
        f"SELECT ?c (COUNT(?g) AS ?n) WHERE {{ GRAPH <{LOG}> {{ ?c <{CHANGED_GRAPH}> ?g }} }} "
        "GROUP BY ?c"
    )
    return [int(r["n"]["value"]) for r in rows]


def _check(server: Server, store: RdfStore, change_log: bool) -> None:
    """What the writes of ``doc`` (set twice) and ``n`` (updated three times) left."""
    assert (store.get("doc"), store.get("n")) == ({"title": "second"}, 3)
    assert [v.value for v in store.history("doc")] == [{"title": "first"}, {"title": "second"}]
    assert [v.value for v in store.history("n")] == [1, 2, 3]
    values = sorted(_entry_values(server).values())
    assert values == [["3"], ['{"title":"second"}']]  # one value each: the old ones are gone
    assert _latest_versions(server) == [1, 1]
    if change_log:  # one record per graph: the data's followers read its subjects only
        assert set(_logged_graphs(server)) == {1}


@pytest.mark.parametrize("change_log", [False, True])
def test_versioned_sets_and_updates_replace_the_value(server: Server, change_log: bool) -> None:
    store = server.connect(history=True, change_log=change_log)
    try:
        store.set("doc", {"title": "first"})
        store.set("doc", {"title": "second"})
        for i in range(3):
            assert store.update("n", _bump) == i + 1
        _check(server, store, change_log)
        # A triple replaced with history on: the server holds the new literal only.
        store.assert_(DOC, DATA, Literal('{"v": 1}', datatype=JSON), G)
        store.retract(DOC, DATA, Literal('{"v": 1}', datatype=JSON), G)
        store.assert_(DOC, DATA, Literal('{"v": 2}', datatype=JSON), G)
        rows = server.rows(f"SELECT ?o WHERE {{ GRAPH <{G.value}> {{ ?s <{DATA.value}> ?o }} }}")
        assert [r["o"]["value"] for r in rows] == ['{"v": 2}']
    finally:
        store.close()


@pytest.mark.parametrize("change_log", [False, True])
def test_async_versioned_sets_and_updates_replace_the_value(
    server: Server, change_log: bool
) -> None:
    store = server.connect(history=True, change_log=change_log)

    async def main() -> None:
        await store.aset("doc", {"title": "first"})
        await store.aset("doc", {"title": "second"})
        for i in range(3):
            assert await store.aupdate("n", _bump) == i + 1

    try:
        asyncio.run(main())
        _check(server, store, change_log)
    finally:
        store.close()


@contextmanager
def _updates_sent(store: RdfStore) -> Iterator[list[str]]:
    """The SPARQL updates the remote ``store``'s client sends inside the block."""
    sent: list[str] = []
    client: httpx.Client = store.backend.client  # type: ignore[attr-defined]

    def keep(request: httpx.Request) -> None:
        sent.extend(parse_qs(request.content.decode()).get("update", []))

    client.event_hooks["request"].append(keep)
    try:
        yield sent
    finally:
        client.event_hooks["request"].remove(keep)


def _writing(update: str) -> list[str]:
    """The operations of ``update`` that name the entries' graph, their history graph or
    the change log (leases and fences name only the lease graph and scratch graphs)."""
    graphs = (KV, LOG)  # the history graph's name starts with the data graph's
    ops = parseUpdate(update).request
    return [op.name for op in ops if any(g in str(op) for g in graphs)]


@pytest.mark.parametrize("change_log", [False, True])
def test_a_versioned_write_is_sent_whole(server: Server, change_log: bool) -> None:
    """A failure between two operations of a request leaves the earlier ones applied on
    Virtuoso: its versioned write has no second operation to fail. Oxigraph server applies
    a request whole: the write is one request there."""
    store = server.connect(history=True, change_log=change_log)
    try:
        store.set("doc", {"title": "first"})
        calls: list[Callable[[], Any]] = [
            lambda: store.set("doc", {"title": "second"}),
            lambda: store.update("doc", lambda d: {**d, "n": 1}),
            lambda: store.delete("doc"),
        ]
        for call in calls:
            with _updates_sent(store) as sent:
                call()
            writes = [ops for ops in map(_writing, sent) if ops]
            assert len(writes) == 1, writes  # one request
            if server.name == "virtuoso":
                assert len(writes[0]) == 1, writes[0]  # one operation
        assert [v.value for v in store.history("doc")][-1] is None  # deleted, recorded
        assert _entry_values(server) == {}
    finally:
        store.close()


def test_concurrent_versioned_updates_leave_one_version_each(server: Server) -> None:
    """Two clients, 20 increments each, of two counters at once (deadlocks between writers
    happen on Virtuoso): each counter ends at 40 with versions 1 … 40, no gap, none twice."""
    clients = [server.connect(history=True) for _ in range(2)]
    errors: list[BaseException] = []

    def work(store: RdfStore) -> None:
        try:
            for _ in range(20):
                store.update("a", _bump)
                store.update("b", _bump)
        except BaseException as exc:  # reported below: every write must be acknowledged
            errors.append(exc)

    try:
        threads = [threading.Thread(target=work, args=(c,)) for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join(240)
        assert errors == []
        store = clients[0]
        for key in ("a", "b"):
            assert store.get(key) == 40
            assert [v.value for v in store.history(key)] == list(range(1, 41))
        assert sorted(_entry_values(server).values()) == [["40"], ["40"]]
        assert _latest_versions(server) == [1, 1]
    finally:
        for c in clients:
            c.close()
