"""Fenced remote writes (issue 22, item 1): a write under a lease lands only while the
server still holds that lease for this client, judged by the server in the write's own
request; a write that outlived its lease, or arrives twice, is refused and its client
says so instead of reporting success.

On real Oxigraph server and Virtuoso (``tests/servers.py``).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest
from servers import Server

from rdfmem import LeaseExpired, RemoteStore
from rdfmem.decisions import DecisionGraph, Node


class _Delaying(httpx.HTTPTransport):
    """A transport that holds back the next request carrying a data write (``INSERT DATA``)
    for ``delay`` seconds before sending it, as a slow network would; it keeps the bodies
    of the data writes it sent, so a test can send one again."""

    def __init__(self) -> None:
        super().__init__()
        self.delay = 0.0
        self.writes: list[bytes] = []
        self.sent_at: float | None = None

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        if b"INSERT+DATA" in body or b"WHERE+%7B%7D" in body:
            self.writes.append(body)
            if self.delay:
                delay, self.delay = self.delay, 0.0
                time.sleep(delay)
                self.sent_at = time.monotonic()
        return super().handle_request(request)


class _SlowParts(httpx.HTTPTransport):
    """A slow network for the parts of a staged write: each waits ``pause`` seconds before
    it is sent. Fenced requests (the write's apply, a renewal) go at once."""

    def __init__(self, pause: float) -> None:
        super().__init__()
        self.pause = pause
        self.parts = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        if b"INSERT+DATA" in body and b"leaseFence" not in body:
            self.parts += 1
            time.sleep(self.pause)
        return super().handle_request(request)


def _ask(server: Server, sparql: str) -> bool:
    response = httpx.post(
        server.query_url,
        data={"query": sparql},
        headers={"Accept": "application/sparql-results+json"},
        timeout=30,
    )
    response.raise_for_status()
    return bool(response.json()["boolean"])


def _values(server: Server, key: str) -> list[str]:
    """Every value the server holds for ``key`` (a raw read by another SPARQL client)."""
    response = httpx.post(
        server.query_url,
        data={
            "query": "SELECT ?v WHERE { GRAPH ?g { ?s <urn:rdfmem:store:value> ?v } "
            f'FILTER(STRENDS(STR(?s), "{key}")) }}'
        },
        headers={"Accept": "application/sparql-results+json"},
        timeout=30,
    )
    response.raise_for_status()
    return sorted(b["v"]["value"] for b in response.json()["results"]["bindings"])


def _leftovers(server: Server) -> bool:
    """Whether a claim or a scratch graph is left on the server."""
    claims = _ask(server, "ASK { GRAPH <urn:rdfmem:graph:leases> { ?s ?p ?o } }")
    return claims or bool(server.scratch_graphs())


def test_a_write_that_outlives_its_lease_is_refused(server: Server) -> None:
    """A's write is held back 2.5 s by its network while its 1 s lease runs out; B takes
    the key over and increments it. Before fencing, both ``update`` calls reported
    success and the two increments of 0 left 1."""
    delaying = _Delaying()
    a = server.connect(lease_ttl_ms=1000, transport=delaying)
    b = server.connect(lease_ttl_ms=1000)
    a.set("n", 0)
    outcome: dict[str, str] = {}

    def increment_a() -> None:
        try:
            a.update("n", lambda n: n + 1)
            outcome["a"] = "ok"
        except LeaseExpired:
            outcome["a"] = "refused"

    delaying.delay = 2.5
    thread = threading.Thread(target=increment_a)
    thread.start()
    time.sleep(0.3)  # A holds its claim and its write is on the way
    b.update("n", lambda n: n + 1)
    b_done = time.monotonic()
    thread.join(10)
    assert delaying.sent_at is not None and delaying.sent_at > b_done  # B went first
    successes = 1 + (outcome["a"] == "ok")
    assert a.get("n") == b.get("n") == successes  # every increment reported is there
    assert outcome["a"] == "refused"  # A's late write did not land, and A said so
    a.update("n", lambda n: n + 1)  # A goes on, under a new claim
    assert b.get("n") == 2
    a.close()
    b.close()
    assert not _leftovers(server)


def test_a_write_delivered_twice_lands_once(server: Server) -> None:
    """A network that delivers a request again later (a retrying proxy) cannot bring back
    an old value: the copy is refused, even under the claim its client still keeps."""
    delaying = _Delaying()
    store: RemoteStore = server.connect(transport=delaying)
    store.set("k", "first")
    store.set("k", "second")  # under the claim kept from the first write
    old = delaying.writes[-2]
    again = httpx.post(
        server.update_url,
        content=old,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        timeout=30,
    )
    assert again.status_code >= 400  # the server refused the stale copy
    assert store.get("k") == "second"
    other = server.connect()
    assert other.get("k") == "second"
    graphs = {str(q.graph_name) for q in store.backend.match()}
    assert not any("staging" in g for g in graphs)  # fence graphs are hidden from reads
    store.close()
    other.close()
    assert not _ask(server, "ASK { GRAPH <urn:rdfmem:graph:leases> { ?s ?p ?o } }")
    # Virtuoso does not roll a refused request back: the copy nobody waited for leaves its
    # fence graph (one triple, hidden from reads; dropped as abandoned after an hour).
    left = server.scratch_graphs()
    assert left == [] if server.name == "oxigraph" else all("-fence-" in g for g in left)


def test_a_long_section_renews_its_lease_instead_of_failing(server: Server) -> None:
    """A read-modify-write that keeps talking to the server longer than its lease lives
    renews the lease as it goes, and its write lands."""
    store = server.connect(lease_ttl_ms=1000)
    store.set("slow", 0)
    other = server.connect(lease_ttl_ms=1000, lease_wait_ms=5000)

    def slow(n: int) -> int:
        for _ in range(6):  # 1.8 s of reads, each well within the lease
            time.sleep(0.3)
            store.get("another key")
        return n + 1

    started = time.monotonic()
    result: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: result.update(v=store.update("slow", slow)))
    thread.start()
    time.sleep(0.2)
    other.update("slow", lambda n: n + 10)  # waits for the long section, then goes on
    thread.join(10)
    assert time.monotonic() - started >= 1.8
    assert result["v"] == 1
    assert other.get("slow") == 11
    store.close()
    other.close()
    assert not _leftovers(server)


@pytest.mark.parametrize("ttl_ms", [1000])
def test_a_refused_write_reports_the_lease_not_a_server_error(server: Server, ttl_ms: int) -> None:
    """A write refused by the fence raises ``LeaseExpired`` naming the key, and nothing of
    it is on the server."""
    delaying = _Delaying()
    store = server.connect(lease_ttl_ms=ttl_ms, transport=delaying)
    taker = server.connect(lease_ttl_ms=ttl_ms)
    store.set("x", "old")
    time.sleep(0.3)  # the kept claim lingered out
    delaying.delay = 1.5
    result: dict[str, Any] = {}

    def write() -> None:
        try:
            store.set("x", "late")
        except LeaseExpired as exc:
            result["error"] = exc

    thread = threading.Thread(target=write)
    thread.start()
    time.sleep(0.2)
    taker.set("x", "taker")
    thread.join(10)
    error = result.get("error")
    assert isinstance(error, LeaseExpired) and error.reason == "LEASE_EXPIRED"
    assert "nothing was written" in str(error)
    assert taker.get("x") == "taker"
    assert _values(server, "x") == ['"taker"']  # one value, the taker's
    store.close()
    taker.close()
    assert not _leftovers(server)


def test_a_large_decision_graph_write_renews_its_lease(server: Server) -> None:
    """``add_nodes`` of 1,500 nodes, staged in parts over a slow network, outlives its
    lease: it failed with ``LeaseExpired`` after writing nothing; it renews as it goes and
    lands. The slow parts, not the machine, make it outlive the lease: a section renews its
    claim only when it talks to the server, so the lease must outlast the section's longest
    request or stretch of its own work (on 2 cores under load, the 1,500-id clash read took
    1.7 s on Virtuoso and the work before the first part 1.8 s: a 1 s lease failed here)."""
    ttl_ms = 10_000
    slow = _SlowParts(pause=0.65)  # 18 parts of 500 quads (Virtuoso's own size)
    store = server.connect(lease_ttl_ms=ttl_ms, max_quads_per_request=500, transport=slow)
    other = server.connect()
    try:
        nodes = [Node(type="goal", label=f"goal {i}") for i in range(1500)]
        assert DecisionGraph(store).add_nodes(nodes) == 1500
        assert slow.parts * slow.pause > 1.1 * ttl_ms / 1000  # the write outlived its lease
        reader = DecisionGraph(other)
        for node in nodes[::100] + nodes[-1:]:  # another client reads them
            assert reader.get_node(node.id).label == node.label
    finally:
        store.close()
        other.close()
    assert not _leftovers(server)


def test_the_lease_clock_counts_suspended_time() -> None:
    """A lease runs on the server while the client's machine sleeps, so the client's trust
    runs on a clock that counts suspend (Linux ``CLOCK_BOOTTIME``; ``time.monotonic``
    stops while suspended)."""
    from rdfmem.backends.sparql.lease_steps import clock

    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    if boottime is None:
        pytest.skip("no CLOCK_BOOTTIME on this system (time.monotonic is used)")
    assert abs(clock() - time.clock_gettime(boottime)) < 0.05


def test_the_sweep_removes_a_fence_left_without_its_claim(server: Server) -> None:
    """A late copy of a fenced write that a server without isolation applied while its
    claim was being released leaves the claim's counter alone in the lease graph (seen on
    Virtuoso in the fault suite). The sweep every contender can run removes it, and only
    it: a live claim keeps its counter."""
    from rdfmem.backends.sparql.lease_run import run
    from rdfmem.backends.sparql.lease_steps import sweep

    store = server.connect(lease_ttl_ms=60_000)
    try:
        with store.exclusive("urn:rdfmem:store:entry:k"):
            store.set("k", 1)  # a fenced write: the live claim now has a counter
            litter = "<urn:rdfmem:lease:0123456789abcdef0123456789abcdef>"
            httpx.post(
                server.update_url,
                data={
                    "update": "INSERT DATA { GRAPH <urn:rdfmem:graph:leases> { "
                    f"{litter} <https://w3id.org/rdfmem#leaseFence> 1 }} }}"
                },
                timeout=30,
            ).raise_for_status()
            backend: Any = store.backend
            assert run(sweep(backend.lease_graph), backend) == 1
            assert not _ask(server, f"ASK {{ GRAPH ?g {{ {litter} ?p ?o }} }}")
            assert _ask(
                server,
                "ASK { GRAPH <urn:rdfmem:graph:leases> { ?c <https://w3id.org/rdfmem#leaseFence> ?f } }",
            )  # the live claim's counter stays
        assert store.get("k") == 1
    finally:
        store.close()
    assert not _leftovers(server)
