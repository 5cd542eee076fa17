"""``RemoteStore``: an ``RdfStore`` on a SPARQL 1.1 server, with leases and a health probe.

Several agents, processes or machines share one memory by connecting to one server::

    store = RdfStore.connect("http://127.0.0.1:7878/query", "http://127.0.0.1:7878/update")
    store.update("runs", lambda n: (n or 0) + 1)    # atomic across every client
    lease = store.acquire_lease("run-abc", ttl_ms=5_000, max_wait_ms=1_000)
    ...                                              # others' writes to "run-abc" wait
    store.release_lease(lease)

The asyncio twins of ``get``, ``has``, ``set``, ``update`` and ``delete`` run on an
``httpx.AsyncClient`` (over ``rdfmem.backends.sparql.http.LeanTransport`` for ``http://`` URLs,
which costs the client about half the CPU of httpx's default async transport): one event loop
drives hundreds of concurrent calls without a thread each, at most ``_CONNECTIONS``
requests in flight; the lease protocol is the same generator of steps, run by ``arun``
instead of ``run``. The other ``a*`` twins run the sync call on a thread.

Writes under leases: a write of one request made inside an ``exclusive`` block that took
its own lease (``Memories.save``'s update, a key/value write) travels with the lease's
release, in one request, or alone when the client keeps its claim for its next write there
(nobody else wanted it: two requests a write, ``rdfmem.backends.sparql.leases.Leases``); the async
twins take a new claim each time and release it with the write. ``clear_graph`` is one
``CLEAR`` request under a lease on every subject; ``restore`` replaces the entries in one
request under the same lease (a write too large for one Virtuoso request is staged first:
``SparqlBackend``). A request is all or nothing on the server, also when the server is
killed while it runs.

Everything ``RdfStore`` offers works unchanged (see ``rdfmem.backends.sparql.client`` for what
"the default graph" and blank nodes mean on a server, and ``rdfmem.backends.sparql.leases`` for why
the leases hold on a server that isolates nothing but single writes).
"""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from pyoxigraph import DefaultGraph, NamedNode, Quad, Store

from rdfmem.backends.sparql.answers import answer_rows, retry_pause, unreachable
from rdfmem.backends.sparql.client import SparqlBackend
from rdfmem.backends.sparql.http import LeanTransport
from rdfmem.backends.sparql.lease_fence import Fence, expired
from rdfmem.backends.sparql.lease_steps import (
    Claim,
    Lease,
    Select,
    Sleep,
    Steps,
    Update,
    acquire,
    delete_claims,
    release,
)
from rdfmem.backends.sparql.leases import check
from rdfmem.backends.sparql.oneop import write_operation
from rdfmem.backends.sparql.text import DEFAULT_GRAPH_LABEL, change_template, log_change
from rdfmem.backends.sparql.wire import compile_match, edit_requests, to_wire
from rdfmem.core.errors import BackingError, InvalidTerm, QueryError, StoreError
from rdfmem.core.keys import KeyCodec, decode_value, encode_value
from rdfmem.core.terms import sparql_term
from rdfmem.store.history import LATEST, VALUE, Recorder, history_graph
from rdfmem.store.history_wire import versioned_write
from rdfmem.store.kv import Edit, delete_edit, set_edit, update_edit
from rdfmem.store.triples import refuse_network

__all__ = ["Endpoint", "Lease", "NetworkEntries", "clear_graph_request", "deferred_update"]

T = TypeVar("T")
_CONNECTIONS = 16  # requests in flight at once from one event loop
_DEFERRED_MAX = 256 * 1024  # characters of an update that may wait for a lease's release


@dataclass(frozen=True)
class Endpoint:
    """Where a remote store lives: ``url`` (its query endpoint) and ``region`` (a placement
    hint, ``""`` when none applies)."""

    url: str
    region: str = ""


class NetworkEntries:
    """Key/value entries of a remote store read and written on an ``httpx.AsyncClient``,
    from an event loop, without a thread per call (``RemoteStore``'s async twins)."""

    def __init__(
        self,
        backend: SparqlBackend,
        codec: KeyCodec,
        value_predicate: NamedNode,
        kv_graph: NamedNode,
        on_write: Callable[[], None],
        *,
        history: Recorder | None = None,
    ) -> None:
        self.history = history
        self.backend = backend
        self.codec = codec
        self.value_predicate = value_predicate
        self.kv_graph = kv_graph
        self.on_write = on_write
        self._aclient: httpx.AsyncClient | None = None
        self._aloop: asyncio.AbstractEventLoop | None = None
        self._asem = asyncio.Semaphore(_CONNECTIONS)
        self._closing: asyncio.Future[None] | None = None
        self._keeper: AsyncIterator[None] | None = None
        self._alocks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._alocks_loop: asyncio.AbstractEventLoop | None = None

    async def _apost(self, form: Mapping[str, Any], *, update: bool = False) -> httpx.Response:
        """POST on this event loop's ``httpx.AsyncClient``, with ``_post``'s retries and
        errors."""
        backend = self.backend
        if backend.closed:
            raise BackingError("this remote store is closed", cause=None)
        loop = asyncio.get_running_loop()
        if self._aclient is None or self._aloop is not loop:
            limits = httpx.Limits(
                max_connections=_CONNECTIONS, max_keepalive_connections=_CONNECTIONS
            )
            self._aclient = httpx.AsyncClient(
                auth=backend.client.auth,
                timeout=backend.client.timeout,
                headers=backend.client.headers,
                transport=LeanTransport(httpx.AsyncHTTPTransport(limits=limits)),
            )
            self._aloop = loop
            # At most this many requests in flight: more wait here, in a queue that costs
            # nothing per waiter (httpx's pool rescans its waiting requests on each answer).
            self._asem = asyncio.Semaphore(_CONNECTIONS)
            # Closed on this loop when it shuts down (asyncio.run finalises open async
            # generators), so no connection outlives the loop that opened it.
            self._keeper = _closing_at_shutdown(self._aclient)
            await self._keeper.__anext__()
        url = backend.update_url if update else backend.query_url
        accept = "*/*" if update else "application/sparql-results+json"
        for attempt in range(8):
            try:
                async with self._asem:
                    response = await self._aclient.post(url, data=form, headers={"Accept": accept})
            except httpx.TransportError as exc:
                raise unreachable(url, exc) from exc
            if backend.answered(response, attempt):
                return response
            await asyncio.sleep(retry_pause(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    async def _arows(self, sparql: str) -> list[dict[str, Any]]:
        # No frame keeps pyoxigraph's unsendable solutions (``answer_rows``).
        _, rows = answer_rows(await self._apost({"query": sparql}))
        return rows

    async def _aknow_server(self) -> None:
        """Learn who the server is (default graph, snapshot reads) without blocking."""
        if not self.backend.server:
            await self._apost({"query": "ASK {}"})

    async def arun(self, steps: Steps[T]) -> T:
        """Run lease protocol steps on the event loop."""
        reply: Any = None
        while True:
            try:
                step = steps.send(reply)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            reply = None
            if isinstance(step, Select):
                reply = await self._arows(step.sparql)
            elif isinstance(step, Update):
                await self._apost({"update": step.sparql}, update=True)
            elif isinstance(step, Sleep):
                await asyncio.sleep(step.seconds)

    async def _aentry(self, subject: NamedNode) -> list[Quad]:
        sparql, _ = compile_match(
            subject, self.value_predicate, None, self.kv_graph, default_graph=None
        )
        rows = await self._arows(sparql)
        return [Quad(subject, self.value_predicate, r["o"], self.kv_graph) for r in rows]

    async def _amodify(self, key: str, edit: Edit) -> Any:
        """One leased read-modify-write of ``key``'s entry by ``edit`` (the same edits the
        sync methods run, ``rdfmem.store.kv``); the write travels with the release, in one
        request. Returns what the edit returns."""
        await self._aknow_server()
        subject = self.codec.subject(key)
        # Tasks of this client take turns per key (as threads do), so that one claim at a
        # time waits on the server for it. The locks are this loop's (an asyncio.Lock is
        # bound to one), made anew here when the loop changes, never while one is held.
        loop = asyncio.get_running_loop()
        if self._alocks_loop is not loop:
            self._alocks, self._alocks_loop = weakref.WeakValueDictionary(), loop
        lock = self._alocks.get(subject.value)
        if lock is None:
            lock = self._alocks[subject.value] = asyncio.Lock()
        async with lock:
            return await self._amodify_held(subject, edit)

    async def _amodify_held(self, subject: NamedNode, edit: Edit) -> Any:
        backend, leases = self.backend, self.backend.leases
        covering = leases.covering(subject)
        claim: Claim | None = None
        if covering is None:
            # This client's sync side may keep a claim on the key: delete it first, or
            # this claim would wait for it to linger out.
            surrender = leases.surrendering([subject])
            if surrender is not None:
                await self._apost({"update": surrender}, update=True)
            claim = await self.arun(
                acquire(
                    leases.graph,
                    [subject],
                    holder=leases.holder,
                    ttl_ms=leases.ttl_ms,
                    max_wait_ms=leases.wait_ms,
                    label=subject.value,
                    pace=leases.pace,
                    prefetch=[subject] if backend.snapshot_reads() else (),
                )
            )
        try:
            if claim is not None and claim.prefetch is not None:
                old = [
                    Quad(subject, self.value_predicate, r["po"], self.kv_graph)
                    for r in claim.prefetch
                    if r.get("ps") == subject
                    and r.get("pp") == self.value_predicate
                    and r.get("pg") == self.kv_graph
                ]
            else:
                old = await self._aentry(subject)
            new, result = edit(old)
            parts: list[str] = []
            change_logged = False
            if new is not None:
                gone, added = await self._aversioned(subject, new, claim)
                if gone or added:  # with its records: one operation on Virtuoso
                    log = backend.change_graph if backend.change_log else None
                    request = versioned_write(
                        old + gone,
                        new + added,
                        backend.default_graph,
                        whole=backend.server.lower().startswith("oxigraph"),
                        log=log,
                        name=backend.record_name,
                    )
                    parts = [request] if request else []
                    change_logged = True
                elif backend.server.lower().startswith("oxigraph") or not (old or new):
                    parts = edit_requests(old, new, default_graph=backend.default_graph)
                else:  # one operation: Virtuoso keeps the operations before one that fails
                    change = ""
                    if backend.change_log:
                        graphs = [self.kv_graph.value]
                        change = change_template(
                            backend.change_graph, uuid.uuid4().hex, graphs, [subject]
                        )
                    written = [q for q in new if q not in old]
                    gone_now = [q for q in old if q not in new]
                    if gone_now or written:
                        parts = [
                            write_operation(
                                gone_now,
                                written,
                                default_graph=backend.default_graph,
                                change=change,
                            )
                        ]
                    change_logged = True
                if parts and backend.change_log and not change_logged:
                    parts[-1] += " ; " + log_change(
                        backend.change_graph, uuid.uuid4().hex, [self.kv_graph.value], [subject]
                    )
                for fence in (claim, covering):
                    if fence is not None:
                        check(fence)
        except BaseException:
            if claim is not None:
                await self.arun(release(leases.graph, claim))
            raise
        writes = bool(parts)
        if claim is not None:
            parts.append(delete_claims(leases.graph, [claim.node]))
        if parts:  # the write, its change record and the release: one request
            try:
                fences = [c for c in (claim, covering) if c is not None]
                if writes and fences:  # checked by the server in the same request
                    await self._afenced(Fence(leases.graph, fences), " ; ".join(parts), claim)
                else:
                    await self._apost({"update": " ; ".join(parts)}, update=True)
            finally:
                if writes:  # counted where it is sent, also when it failed (it may be applied)
                    self.on_write()
        return result

    async def _afenced(self, fence: Fence, request: str, claim: Claim | None) -> None:
        """Send a write with its fence (``rdfmem.backends.sparql.lease_fence``): a write
        the server refuses because the lease ended raises ``LeaseExpired``."""
        try:
            await self._apost({"update": fence.wrap(request)}, update=True)
        except (QueryError, BackingError) as exc:
            try:
                lost = fence.refused(await self._arows(fence.state()))
            except StoreError:
                fence.unsure()
                raise exc from None
            if lost is None and fence.named_in(exc):  # refused by the guard: claim still live
                lost = fence.claims[0]
            if lost is None:
                raise
            with suppress(StoreError):
                await self._apost({"update": fence.cleared()}, update=True)
            if claim is not None:
                with suppress(StoreError):
                    await self.arun(release(self.backend.leases.graph, claim))
            raise expired(
                lost, " before its write reached the server; nothing was written"
            ) from exc
        except BaseException:
            fence.unsure()
            raise
        fence.passed()

    async def _aversioned(
        self, subject: NamedNode, new: list[Quad], claim: Claim | None
    ) -> tuple[list[Quad], list[Quad]]:
        """The history quads of a write of ``subject`` (none without history): its latest
        version read along with the claim, or in one query."""
        recorder = self.history
        if recorder is None:
            return [], []
        history = history_graph(self.kv_graph)
        heads: dict[NamedNode, NamedNode] = {}
        if claim is not None and claim.prefetch is not None:
            rows = [
                r
                for r in claim.prefetch
                if r.get("ps") == subject and r.get("pp") == LATEST and r.get("pg") == history
            ]
        else:
            sparql, _ = compile_match(subject, LATEST, None, history, default_graph=None)
            rows = [{"po": r["o"]} for r in await self._arows(sparql) if "o" in r]
        for row in rows:
            if isinstance(row.get("po"), NamedNode):
                heads[subject] = row["po"]
        return recorder.record(
            self.kv_graph, [(subject, new)], heads, rename={self.value_predicate: VALUE}
        )

    async def aget(self, key: str, default: Any = None) -> Any:
        """Async ``get``, on the network without a thread."""
        old = await self._aentry(self.codec.subject(key))
        return decode_value(old[0].object) if old else default

    async def ahas(self, key: str) -> bool:
        """Async ``has``, on the network without a thread."""
        return bool(await self._aentry(self.codec.subject(key)))

    async def aset(self, key: str, value: Any) -> None:
        """Async ``set``: leased, like ``set``; on the network without a thread."""
        subject = self.codec.subject(key)
        entry = Quad(subject, self.value_predicate, encode_value(value), self.kv_graph)
        await self._amodify(key, set_edit(entry))

    async def adelete(self, key: str) -> bool:
        """Async ``delete``: leased, like ``delete``; on the network without a thread."""
        result: bool = await self._amodify(key, delete_edit)
        return result

    async def aupdate(self, key: str, fn: Callable[[Any], Any]) -> Any:
        """Async ``update``: atomic across every client, like ``update``; on the network
        without a thread."""
        subject = self.codec.subject(key)
        edit = update_edit(subject, self.value_predicate, self.kv_graph, fn)
        return await self._amodify(key, edit)

    async def aclose(self) -> None:
        """Close the async client (on its own event loop)."""
        client, self._aclient = self._aclient, None
        if client is not None:
            await client.aclose()

    def close(self) -> None:
        """Close the async client when one is open (an event loop that ended closed it
        already: ``asyncio.run(main())`` then ``store.close()``)."""
        client, loop, self._aclient = self._aclient, self._aloop, None
        if client is not None and loop is not None and not loop.is_closed():
            if loop.is_running():
                self._closing = asyncio.ensure_future(client.aclose(), loop=loop)
            else:
                loop.run_until_complete(client.aclose())


def _parses(sparql: str) -> bool:
    """Whether Oxigraph runs ``sparql`` as an update (on an empty store in memory): only
    such an update is deferred, so that a malformed one fails where it is made."""
    if len(sparql) > _DEFERRED_MAX or sparql.rstrip().endswith(";"):
        return False
    try:
        Store().update(sparql)
    except (SyntaxError, OSError, ValueError, RuntimeError):
        return False
    return True


async def _closing_at_shutdown(client: httpx.AsyncClient) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await client.aclose()


def deferred_update(backend: SparqlBackend, sparql: str) -> bool:
    """Inside an ``exclusive`` block that took its own lease, queue ``sparql`` (which
    Oxigraph parses) to travel with the lease's release, in one request: sent when the
    block ends, or before any read in between. False when it cannot wait (send it now)."""
    if not backend.leases.deferring() or not _parses(sparql):
        return False
    refuse_network(sparql)
    parts = [sparql + "\n"]  # a trailing comment must not swallow what follows
    if backend.change_log:  # as ``backend.update`` logs it (its ``scope``, if declared)
        parts.append(backend.change_record(sparql))
    with backend.lock:  # counted as a write when it is sent (``Leases.on_write``)
        backend.leases.write([" ; ".join(parts)])
    return True


def clear_graph_request(backend: SparqlBackend, name: Any) -> None:
    """Empty one graph with one ``CLEAR`` request, under a lease on every subject, with
    the release and the change record in it.

    Raises:
        InvalidTerm: ``name`` is the lease graph.
    """
    wire = to_wire(name, backend.default_graph)
    if wire == backend.lease_graph:
        raise InvalidTerm("the lease graph is not cleared by clear_graph")
    if isinstance(wire, DefaultGraph):
        parts = ["CLEAR SILENT DEFAULT"]
        label = DEFAULT_GRAPH_LABEL
    else:
        parts = [f"CLEAR SILENT GRAPH {sparql_term(wire)}"]
        label = wire.value
    if backend.change_log:
        parts.append(log_change(backend.change_graph, uuid.uuid4().hex, [label]))
    with backend.exclusive([]), backend.lock:  # counted when sent (``Leases.on_write``)
        backend.leases.write([" ; ".join(parts)])
