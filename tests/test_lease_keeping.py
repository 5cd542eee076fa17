"""Kept claims and range claims: two requests per write when nobody else wants the subject,
and still never two holders at once.

First step by step (contenders wanting subjects, ranges and ranges within ranges,
interleaved in seeded random orders against one Oxigraph store, as in ``test_leases``),
then with real clients on Oxigraph server and Virtuoso: the requests a write costs, a
waiter served without waiting for the ttl, exact counts under contention, a killed
holder, and a sync client's kept claim meeting its own async task.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pyoxigraph import NamedNode, Store
from servers import Server
from test_leases import drive

from rdfmem import RdfStore, RemoteStore
from rdfmem.backends.sparql.lease_steps import Claim, Sleep, acquire, range_node, release
from rdfmem.memories import Memories, Memory

GRAPH = NamedNode("urn:rdfmem:graph:leases")
CONCRETE = ["urn:res:a", "urn:res:b", "urn:res:x:c", "urn:res:x:d", "urn:other:e"]
WANTS: list[list[NamedNode]] = [
    [NamedNode("urn:res:a")],
    [NamedNode("urn:res:x:c")],
    [NamedNode("urn:res:b"), NamedNode("urn:res:x:d")],
    [NamedNode("urn:other:e")],
    [range_node("urn:res:")],
    [range_node("urn:res:x:")],
    [range_node("urn:res:x:"), NamedNode("urn:other:e")],
]


def _covered(wants: list[NamedNode]) -> set[str]:
    """The concrete subjects a claim on ``wants`` excludes others from."""
    probe = Claim("t", tuple(wants), "t", 0.0, 0)
    return {iri for iri in CONCRETE if probe.covers(NamedNode(iri))}


def _contender(
    wants: list[NamedNode], rounds: int, holding: dict[str, set[int]], me: int, log: list[str]
) -> Iterator[Any]:
    for _ in range(rounds):
        claim: Claim = yield from acquire(
            GRAPH, wants, holder=f"c{me}", ttl_ms=10**9, max_wait_ms=10**9, label="res"
        )
        covered = _covered(wants)
        for iri in covered:
            assert not holding.setdefault(iri, set()), f"{iri} held by {holding[iri]} and c{me}"
            holding[iri].add(me)
        log.append(f"c{me}+")
        for _ in range(random.randint(0, 3)):
            yield Sleep(0)
        for iri in covered:
            holding[iri].discard(me)
        yield from release(GRAPH, claim)


@pytest.mark.parametrize("seed", range(60))
def test_no_schedule_gives_a_range_and_a_subject_in_it_to_two_holders(seed: int) -> None:
    random.seed(seed)
    store = Store()
    holding: dict[str, set[int]] = {}
    log: list[str] = []
    drive(store, {i: _contender(random.choice(WANTS), 3, holding, i, log) for i in range(4)})
    assert len(log) == 12 and len(store) == 0


# -- real servers ----------------------------------------------------------------------------


class _Counting(httpx.HTTPTransport):
    """Counts the requests a client sends from the thread that made it (not the deletions
    of claims that lingered out, sent by the client's own reaper thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = 0
        self.caller = threading.get_ident()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if threading.get_ident() == self.caller:
            self.sent += 1
        return super().handle_request(request)


def _claims(server: Server) -> int:
    probe = RdfStore.connect(server.query_url, server.update_url)
    try:
        rows = probe.query(
            "SELECT (COUNT(DISTINCT ?c) AS ?n) WHERE { GRAPH <urn:rdfmem:graph:leases> "
            "{ ?c ?p ?o } }"
        )
        return int(next(iter(rows))["n"].value)  # type: ignore[call-overload, index]
    finally:
        probe.close()


def test_an_uncontended_write_costs_two_requests(server: Server) -> None:
    counting = _Counting()
    store = server.connect(transport=counting)
    memories = Memories(store, session="s")

    def cost(write: Any, times: int) -> float:
        for first in (100, 101, 102):  # claims of its own, then of the whole range
            write(first)
        counting.sent = 0
        for i in range(times):
            write(i)
        return counting.sent / times

    assert cost(lambda i: store.update("hits", lambda n: (n or 0) + 1), 10) == 2
    assert cost(lambda i: store.set(f"key {i}", i), 10) == 2  # new keys: the namespace
    assert cost(lambda i: memories.save(Memory("session", f"note {i}", "x")), 10) == 2
    assert store.get("hits") == 13 and store.get("key 100") == 100
    assert memories.read("session", "note 9").content == "x"
    other = server.connect()  # and another client sees every write at once
    assert other.get("hits") == 13 and other.get("key 9") == 9
    assert len(Memories(other, session="s").list("session")) == 13
    store.close()
    other.close()
    assert _claims(server) == 0  # closing deleted the kept claims


def test_a_kept_claim_makes_another_client_wait_no_longer_than_its_linger(
    server: Server,
) -> None:
    a = server.connect(lease_linger_ms=300)
    b = server.connect()
    a.set("k", "a")
    a.set("k", "a2")  # kept since the first: nobody else wanted it
    started = time.monotonic()
    b.set("k", "b")  # waits for a's claim to linger out, not for its 10 s ttl
    waited = time.monotonic() - started
    assert waited < 5.0
    assert a.get("k") == b.get("k") == "b"
    for _ in range(5):  # both now write by turns: every write lands
        a.update("n", lambda n: (n or 0) + 1)
        b.update("n", lambda n: (n or 0) + 1)
    assert a.get("n") == 10
    a.close()
    b.close()


def test_clients_escalating_and_contending_lose_no_update(server: Server) -> None:
    clients = [server.connect(lease_linger_ms=100) for _ in range(4)]
    errors: list[BaseException] = []

    def work(me: int, store: RemoteStore) -> None:
        try:
            for i in range(15):
                store.set(f"own {me} {i}", i)  # its own keys: it soon claims the namespace
                store.update("shared", lambda n: (n or 0) + 1)
                store.update(f"mine {me}", lambda n: (n or 0) + 1)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i, c)) for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    check = server.connect()
    assert check.get("shared") == 60
    assert [check.get(f"mine {i}") for i in range(4)] == [15] * 4
    assert len(check.keys("own ")) == 60
    for c in [*clients, check]:
        c.close()


def test_memories_of_two_clients_in_one_scope_all_land(server: Server) -> None:
    a = Memories(server.connect(), project="p")
    b = Memories(server.connect(), project="p")
    for i in range(4):
        a.save(Memory("project", f"a {i}", "from a"))  # a claims the scope after two
    b.save(Memory("project", "b 0", "from b"))  # waits for a's scope claim to linger out
    a.save(Memory("project", "a 4", "from a"))
    b.save(Memory("project", "a 0", "rewritten by b"))
    assert sorted(a.list("project")) == sorted(b.list("project"))
    assert len(a.list("project")) == 6
    assert a.read("project", "a 0").content == "rewritten by b"
    a.store.close()
    b.store.close()


_HOLDER = textwrap.dedent(
    """
    import sys, time
    from rdfmem import RemoteStore
    store = RemoteStore.connect(sys.argv[1], sys.argv[2], lease_ttl_ms=1500,
                                lease_linger_ms=60_000)
    store.set("k", "killed")
    store.set("k", "killed again")  # its claim kept, for a minute
    print("kept", flush=True)
    time.sleep(600)
    """
)


def test_a_killed_holders_kept_claim_dies_at_its_ttl(server: Server) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, server.query_url, server.update_url],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"kept"
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        other = server.connect(lease_wait_ms=20_000)
        started = time.monotonic()
        other.set("k", "after")
        assert time.monotonic() - started < 15.0
        assert other.get("k") == "after"
        other.close()
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def test_an_async_task_does_not_wait_for_its_own_clients_kept_claim(server: Server) -> None:
    store = server.connect(lease_linger_ms=60_000)
    store.set("k", 1)
    store.set("k", 2)  # kept for a minute

    async def main() -> Any:
        return await asyncio.wait_for(store.aupdate("k", lambda n: n + 1), 10.0)

    assert asyncio.run(main()) == 3
    assert store.get("k") == 3
    store.close()
    assert _claims(server) == 0


_FORGETFUL = textwrap.dedent(
    """
    import sys
    from rdfmem import RemoteStore
    store = RemoteStore.connect(sys.argv[1], sys.argv[2], lease_linger_ms=60_000)
    store.set("k", 1)
    store.set("k", 2)  # its claim kept for a minute; the script ends without close()
    """
)


def test_a_process_that_ends_without_closing_deletes_its_kept_claims(server: Server) -> None:
    subprocess.run(
        [sys.executable, "-c", _FORGETFUL, server.query_url, server.update_url],
        check=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        timeout=60,
    )
    assert _claims(server) == 0
    other = server.connect(lease_wait_ms=0)
    other.set("k", 3)  # no wait
    assert other.get("k") == 3
    other.close()


def test_a_client_does_not_claim_a_namespace_another_client_writes_in(server: Server) -> None:
    holder = server.connect()
    lease = holder.acquire_lease("held", 10_000, 0)  # a claim on one key of the namespace
    counting = _Counting()
    writer = server.connect(transport=counting, lease_wait_ms=0)
    for i in range(6):  # claiming the whole namespace would wait for "held": LeaseDenied
        writer.set(f"new {i}", i)
    assert counting.sent / 6 > 2.5  # claims of its own keys, each new: three requests
    assert [writer.get(f"new {i}") for i in range(6)] == list(range(6))
    holder.release_lease(lease)
    holder.close()
    writer.close()


class _SlowRelease(httpx.HTTPTransport):
    """Holds back, ``pause`` seconds, the request that deletes kept claims alone (the
    reaper's, once a claim lingered out)."""

    def __init__(self, pause: float) -> None:
        super().__init__()
        self.pause = pause
        self.held = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.read().startswith(b"update=DELETE+%7B+GRAPH+%3Curn%3Ardfmem%3Agraph%3Aleases"):
            self.held += 1
            time.sleep(self.pause)
        return super().handle_request(request)


def test_a_store_closed_while_a_kept_claim_is_deleted_leaves_no_claim(server: Server) -> None:
    """Closed while its reaper deletes a claim that lingered out: ``close`` waits for that
    delete, so no claim is left on the server for other clients to wait on (it used to be
    cut off with the connection, and stay until its ttl)."""
    slow = _SlowRelease(1.0)
    store = server.connect(transport=slow, lease_linger_ms=50)
    store.set("k", 1)
    deadline = time.monotonic() + 10.0
    while slow.held == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert slow.held == 1  # the reaper's delete is under way
    store.close()
    left = httpx.post(
        server.query_url,
        data={"query": "ASK { GRAPH <urn:rdfmem:graph:leases> { ?s ?p ?o } }"},
        headers={"Accept": "application/sparql-results+json"},
        timeout=30,
    )
    assert left.json()["boolean"] is False
