"""Leases: never two holders at once, expiry and takeover, idempotent release.

The protocol (``rdfmem.backends.sparql.leases``) is first checked step by step: several contenders' steps
are interleaved in random orders against one Oxigraph store, each step one atomic request
(the only isolation the protocol counts on), over a hundred seeded schedules. Then the same
properties are checked on real Oxigraph server and Virtuoso with real clients.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pyoxigraph import NamedNode, Store, Variable
from servers import Server

from rdfmem import LeaseDenied, LeaseExpired, RemoteStore
from rdfmem.backends.sparql.leases import Claim, Select, Sleep, Update, acquire, release

GRAPH = NamedNode("urn:rdfmem:graph:leases")
SUBJECTS = [NamedNode(f"urn:res:{name}") for name in "abc"]


def _rows(store: Store, sparql: str) -> list[dict[str, Any]]:
    solutions = store.query(sparql)
    names = [v.value for v in solutions.variables]  # type: ignore[union-attr]
    return [
        {n: s[Variable(n)] for n in names if s[Variable(n)] is not None}
        for s in solutions  # type: ignore[union-attr]
    ]


def _contender(
    wants: list[NamedNode], rounds: int, holding: dict[str, set[int]], me: int, log: list[str]
) -> Iterator[Any]:
    """Acquire ``wants`` ``rounds`` times; while holding, check nobody else holds them."""
    for _ in range(rounds):
        claim: Claim = yield from acquire(
            GRAPH,
            wants,
            holder=f"c{me}",
            ttl_ms=10**9,
            max_wait_ms=10**9,
            label="res",
        )
        for subject in wants:
            others = holding.setdefault(subject.value, set())
            assert not others, f"{subject.value} held by {others} and c{me}"
            others.add(me)
        log.append(f"c{me}+")
        for _ in range(random.randint(0, 3)):
            yield Sleep(0)  # hold across other contenders' steps
        for subject in wants:
            holding[subject.value].discard(me)
        yield from release(GRAPH, claim)


def _interleave(seed: int, contenders: int, rounds: int) -> list[str]:
    """Run contenders' steps in a random order chosen by ``seed``; return who held when."""
    random.seed(seed)
    store = Store()
    holding: dict[str, set[int]] = {}
    log: list[str] = []
    wants = [random.sample(SUBJECTS, random.randint(1, 2)) for _ in range(contenders)]
    drive(store, {i: _contender(wants[i], rounds, holding, i, log) for i in range(contenders)})
    assert len(store) == 0, "every claim is released"
    return log


def drive(store: Store, running: dict[int, Iterator[Any]]) -> None:
    """Run the contenders' steps against ``store``, one step at a time, the next contender
    chosen by ``random`` (seeded by the caller), until every one has finished."""
    replies: dict[int, Any] = dict.fromkeys(running)
    steps = 0
    while running:
        steps += 1
        assert steps < 100_000, "no progress"
        me = random.choice(list(running))
        try:
            step = running[me].send(replies[me])
        except StopIteration:
            del running[me]
            continue
        replies[me] = None
        if isinstance(step, Select):
            replies[me] = _rows(store, step.sparql)
        elif isinstance(step, Update):
            store.update(step.sparql)


@pytest.mark.parametrize("seed", range(100))
def test_no_schedule_gives_two_holders(seed: int) -> None:
    log = _interleave(seed, contenders=4, rounds=3)
    assert len(log) == 12  # and everybody got through, every time


# -- real servers ----------------------------------------------------------------------------


def test_racing_clients_never_hold_one_lease_together(server: Server) -> None:
    clients = [server.connect() for _ in range(5)]
    inside: list[int] = []
    most = [0]
    acquired = [0]
    guard = threading.Lock()
    errors: list[BaseException] = []

    def work(store: RemoteStore) -> None:
        try:
            for _ in range(6):
                lease = store.acquire_lease("shared", 10_000, 60_000)
                with guard:
                    inside.append(1)
                    most[0] = max(most[0], len(inside))
                    acquired[0] += 1
                time.sleep(0.002)
                with guard:
                    inside.pop()
                store.release_lease(lease)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in clients:
        c.close()
    assert errors == []
    assert acquired[0] == 30
    assert most[0] == 1


def test_a_lease_makes_plain_get_and_set_safe_across_clients(server: Server) -> None:
    clients = [server.connect() for _ in range(4)]

    def work(store: RemoteStore) -> None:
        for _ in range(8):
            lease = store.acquire_lease("counter", 10_000, 60_000)
            store.set("counter", (store.get("counter") or 0) + 1)  # not atomic by itself
            store.release_lease(lease)

    threads = [threading.Thread(target=work, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert clients[0].get("counter") == 32
    for c in clients:
        c.close()


def test_a_held_lease_makes_others_wait_then_denies(server: Server) -> None:
    holder = server.connect()
    other = server.connect(lease_wait_ms=300)
    lease = holder.acquire_lease("job", 10_000, 0)
    started = time.monotonic()
    with pytest.raises(LeaseDenied) as info:
        other.acquire_lease("job", 10_000, 300)
    assert time.monotonic() - started >= 0.3
    assert info.value.reason == "LEASE_DENIED"
    assert info.value.subject == "job"
    assert info.value.holder == holder.backend.leases.holder
    with pytest.raises(LeaseDenied):
        other.set("job", "mine")  # the key "job" is leased: other clients' writes wait
    holder.set("job", "holder's")  # the holder's own writes go ahead
    holder.release_lease(lease)
    other.set("job", "mine")
    assert holder.get("job") == "mine"
    holder.close()
    other.close()


def test_an_expired_lease_is_taken_over_and_refuses_its_holder(server: Server) -> None:
    first = server.connect()
    second = server.connect()
    lease = first.acquire_lease("task", 400, 0)
    assert lease.expires_at - time.time() * 1000 <= 400
    started = time.monotonic()
    taken = second.acquire_lease("task", 10_000, 5_000)  # waits for the expiry, takes over
    assert time.monotonic() - started >= 0.2
    with pytest.raises(LeaseExpired) as info:
        first.set("task", "late write")
    assert (info.value.reason, info.value.subject, info.value.token) == (
        "LEASE_EXPIRED",
        "task",
        lease.token,
    )
    assert first.get("task") is None  # nothing was written
    with pytest.raises(LeaseExpired):
        first.release_lease(lease)
    first.release_lease(lease)  # released already: a no-op
    second.set("task", "winner")
    with pytest.raises(LeaseDenied):
        first.acquire_lease("task", 1_000, 100)  # the takeover holds
    second.release_lease(taken)
    assert first.get("task") == "winner"
    first.close()
    second.close()


def test_release_is_idempotent_and_frees_the_lease_at_once(server: Server) -> None:
    a = server.connect()
    b = server.connect()
    lease = a.acquire_lease("r", 10_000, 0)
    a.release_lease(lease)
    a.release_lease(lease)
    again = b.acquire_lease("r", 10_000, 0)  # no wait needed
    a.release_lease(lease)  # an old token never frees someone else's lease
    with pytest.raises(LeaseDenied):
        a.acquire_lease("r", 10_000, 50)
    # A lease handed to another client object can be released there.
    c = server.connect()
    c.release_lease(again)
    a.release_lease(a.acquire_lease("r", 10_000, 0))
    for s in (a, b, c):
        s.close()


def test_leases_leave_no_trace_in_the_data(server: Server) -> None:
    store = server.connect()
    lease = store.acquire_lease("x", 10_000, 0)
    assert store.count() == 0  # claims live in a graph that reads of every graph skip
    store.release_lease(lease)
    store.update("n", lambda n: (n or 0) + 1)
    assert sorted(map(str, store.triples())) == [
        str(q) for q in store.triples(graph="urn:rdfmem:graph:store")
    ]
    store.close()
