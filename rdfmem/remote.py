"""``RemoteStore``: an ``RdfStore`` on a SPARQL 1.1 server, with leases and a health probe.

Several agents, processes or machines share one memory by connecting to one server::

    store = RdfStore.connect("http://127.0.0.1:7878/query", "http://127.0.0.1:7878/update")
    store.update("runs", lambda n: (n or 0) + 1)    # atomic across every client
    lease = store.acquire_lease("run-abc", ttl_ms=5_000, max_wait_ms=1_000)
    ...                                              # others' writes to "run-abc" wait
    store.release_lease(lease)

The asyncio twins of ``get``, ``has``, ``set``, ``update`` and ``delete`` run on an
``httpx.AsyncClient`` (over ``rdfmem.remote_http.LeanTransport`` for ``http://`` URLs, which
costs the client about half the CPU of httpx's default async transport): one event loop
drives hundreds of concurrent calls without a thread each, at most ``_CONNECTIONS``
requests in flight; the lease protocol is the same generator of steps, run by ``arun``
instead of ``run``. The other ``a*`` twins run the sync call on a thread.

Writes under leases: a write of one request made inside an ``exclusive`` block that took
its own lease (``Memories.save``'s update, a key/value write) travels with the lease's
release, in one request, or alone when the client keeps its claim for its next write there
(nobody else wanted it: two requests a write, ``rdfmem.leases.Leases``); the async twins
take a new claim each time and release it with the write. ``clear_graph`` is one
``CLEAR`` request under a lease on every subject; ``restore`` replaces the entries in one
request under the same lease (a write too large for one Virtuoso request is staged first:
``SparqlBackend``). A request is all or nothing on the server, also when the server is
killed while it runs.

Everything ``RdfStore`` offers works unchanged (see ``rdfmem.backends.sparql`` for what
"the default graph" and blank nodes mean on a server, and ``rdfmem.leases`` for why the
leases hold on a server that isolates nothing but single writes).
"""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from pyoxigraph import DefaultGraph, NamedNode, Quad, QuerySolutions, Store, Variable

from .backends.sparql import (
    LEASE_GRAPH_IRI,
    SparqlBackend,
    compile_match,
    edit_requests,
    retry_pause,
    to_wire,
    unreachable,
)
from .backends.sparql_text import DEFAULT_GRAPH_LABEL, log_change
from .errors import BackingError, InvalidTerm, InvalidValue
from .keys import decode_value, encode_value
from .leases import (
    Claim,
    Lease,
    Select,
    Sleep,
    Steps,
    T,
    Update,
    acquire,
    check,
    delete_claims,
    release,
)
from .remote_http import LeanTransport
from .store import RdfStore
from .terms import sparql_term, to_graph
from .triples import refuse_network

__all__ = ["Endpoint", "Lease", "RemoteStore"]

_CONNECTIONS = 16  # requests in flight at once from one event loop
_DEFERRED_MAX = 256 * 1024  # characters of an update that may wait for a lease's release


@dataclass(frozen=True)
class Endpoint:
    """Where a remote store lives: ``url`` (its query endpoint) and ``region`` (a placement
    hint, ``""`` when none applies)."""

    url: str
    region: str = ""


class RemoteStore(RdfStore):
    """An ``RdfStore`` on a remote SPARQL 1.1 server (``RdfStore.connect``).

    Every key/value read-modify-write (``set``, ``update``, ``update_many``, ``delete``)
    holds a lease on its keys for its duration, so ``update`` is atomic across every client
    of the server, and two racing ``set`` calls never leave two values for one key.
    """

    backend: SparqlBackend

    def __init__(self, backend: SparqlBackend, *, region: str = "", **options: Any) -> None:
        super().__init__(backend, **options)
        self.endpoint = Endpoint(backend.query_url, region)
        self._aclient: httpx.AsyncClient | None = None
        self._aloop: asyncio.AbstractEventLoop | None = None
        self._asem = asyncio.Semaphore(_CONNECTIONS)
        self._closing: asyncio.Future[None] | None = None
        self._keeper: AsyncIterator[None] | None = None
        self._alocks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    @classmethod
    def connect(
        cls,
        query_url: str,
        update_url: str | None = None,
        *,
        region: str = "",
        auth: httpx.Auth | tuple[str, str] | None = None,
        timeout: float = 30.0,
        namespace: str = "",
        headers: Mapping[str, str] | None = None,
        default_graph: str | None = None,
        lease_graph: str = LEASE_GRAPH_IRI,
        change_log: bool = False,
        hidden_graphs: Sequence[str] | None = None,
        lease_ttl_ms: int = 10_000,
        lease_wait_ms: int = 30_000,
        lease_linger_ms: int = 250,
        max_quads_per_request: int | None = None,
        snapshot_reads: bool | None = None,
        transport: httpx.BaseTransport | None = None,
        **options: Any,
    ) -> RemoteStore:
        """A store on the server at ``query_url`` (updates to ``update_url``, or to the same
        URL when None). No request is sent until the store is used.

        >>> store = RemoteStore.connect("http://127.0.0.1:9/query", region="eu-west")
        >>> store.endpoint
        Endpoint(url='http://127.0.0.1:9/query', region='eu-west')
        >>> store.health(200)
        False
        >>> store.close()

        ``options`` are ``RdfStore``'s (``subject_prefix``, ``value_predicate``, ``graph``);
        the others are ``SparqlBackend``'s.

        Raises:
            InvalidTerm: a URL or graph option that is not valid.
        """
        backend = SparqlBackend(
            query_url,
            update_url,
            auth=auth,
            timeout=timeout,
            headers=headers,
            default_graph=default_graph,
            lease_graph=lease_graph,
            change_log=change_log,
            hidden_graphs=hidden_graphs,
            lease_ttl_ms=lease_ttl_ms,
            lease_wait_ms=lease_wait_ms,
            lease_linger_ms=lease_linger_ms,
            max_quads_per_request=max_quads_per_request,
            snapshot_reads=snapshot_reads,
            transport=transport,
        )
        return cls(backend, region=region, namespace=namespace, **options)

    def acquire_lease(self, subject: str, ttl_ms: int, max_wait_ms: int) -> Lease:
        """Exclusive write authority over ``subject`` for ``ttl_ms`` milliseconds.

        A held lease makes every other client's ``acquire_lease`` and key/value writes to
        the key ``subject`` wait; this client's own writes go ahead under it. Past its ttl
        another client may take it over, and this client's writes to ``subject`` raise
        ``LeaseExpired`` until it is released.

        Raises:
            LeaseDenied: another client held it for longer than ``max_wait_ms`` (``holder``
                names it).
            InvalidKey: ``subject`` is empty or not a str.
            InvalidValue: ``ttl_ms`` is not a positive number.
            Unreachable: the server did not answer.
        """
        node = self._codec.subject(subject)
        if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, (int, float)) or ttl_ms <= 0:
            raise InvalidValue(f"ttl_ms must be a positive number of milliseconds: {ttl_ms!r}")
        claim = self.backend.leases.acquire([node], int(ttl_ms), int(max_wait_ms), subject)
        return claim.lease()

    def release_lease(self, lease: Lease) -> None:
        """Give ``lease`` up. Releasing it again is a no-op; a lease held by another client
        object (handed over) is released on the server all the same.

        Raises:
            LeaseExpired: this client held the lease and it had expired (it is released
                anyway; the error says that another client may have held it meanwhile).
            Unreachable: the server did not answer.
        """
        leases = self.backend.leases
        if lease.token in leases.held:
            leases.release(lease.token)
        else:
            leases.forget(lease.token)

    def health(self, timeout_ms: float) -> bool:
        """True when the server answers within ``timeout_ms``; never raises."""
        return self.backend.health(timeout_ms)

    def sparql_update(
        self, sparql: str, *, base_iri: str | None = None, allow_network: bool = False
    ) -> None:
        """``RdfStore.sparql_update``; inside an ``exclusive`` block that took its own lease,
        an update Oxigraph parses travels with the lease's release, in one request (a domain
        write, ``Memories.save``, then costs one request less): it is sent when the block
        ends, or before any read in between, and its errors are raised from there.

        Raises:
            NetworkAccessRefused, QueryError: as ``RdfStore.sparql_update``.
        """
        backend = self.backend
        if (
            base_iri is not None
            or allow_network
            or not backend.leases.deferring()
            or not _parses(sparql)
        ):
            super().sparql_update(sparql, base_iri=base_iri, allow_network=allow_network)
            return
        refuse_network(sparql)
        parts = [sparql + "\n"]  # a trailing comment must not swallow what follows
        if backend.change_log:  # as ``backend.update`` logs it (its ``scope``, if declared)
            parts.append(backend.change_record())
        with backend.lock:
            try:
                backend.leases.write([" ; ".join(parts)])
            finally:
                self._wrote()

    def clear_graph(self, graph: Any) -> None:
        """Remove every triple of one graph (``DefaultGraph()`` for the default graph): one
        ``CLEAR`` request, under a lease on every subject (so no key/value read-modify-write
        of any client runs across it), with the release and the change record in it.

        Raises:
            InvalidTerm: ``graph`` is not a graph, or is the lease graph.
            LeaseDenied: another client held a lease longer than ``lease_wait_ms``.
            Unreachable: the server did not answer.
        """
        name = to_graph(graph)
        if isinstance(name, Variable):
            raise InvalidTerm("clear_graph needs a graph, not a variable")
        backend = self.backend
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
        with backend.exclusive([]), backend.lock:
            try:
                backend.leases.write([" ; ".join(parts)])
            finally:
                self._wrote()

    async def aacquire_lease(self, subject: str, ttl_ms: int, max_wait_ms: int) -> Lease:
        """Async ``acquire_lease``."""
        lease: Lease = await self._run_async(self.acquire_lease, subject, ttl_ms, max_wait_ms)
        return lease

    async def arelease_lease(self, lease: Lease) -> None:
        """Async ``release_lease``."""
        await self._run_async(self.release_lease, lease)

    async def ahealth(self, timeout_ms: float) -> bool:
        """Async ``health``; never raises."""
        return bool(await self._run_async(self.health, timeout_ms))

    # -- async on the network --------------------------------------------------------------

    async def _apost(self, form: Mapping[str, Any], *, update: bool = False) -> httpx.Response:
        """POST on this event loop's ``httpx.AsyncClient``, with ``_post``'s retries and
        errors."""
        backend = self.backend
        if backend._closed:
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
            self._alocks = weakref.WeakValueDictionary()
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
        solutions = self.backend._results(await self._apost({"query": sparql}))
        try:  # no frame keeps pyoxigraph's unsendable solutions (see SparqlBackend._rows)
            if not isinstance(solutions, QuerySolutions):
                raise BackingError(f"expected SELECT results, got {type(solutions).__name__}")
            names = [v.value for v in solutions.variables]
            return [{n: s[i] for i, n in enumerate(names) if s[i] is not None} for s in solutions]
        finally:
            del solutions

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
            subject, self._value_predicate, None, self._kv_graph, default_graph=None
        )
        rows = await self._arows(sparql)
        return [Quad(subject, self._value_predicate, r["o"], self._kv_graph) for r in rows]

    async def _amodify(self, key: str, change: Callable[[list[Quad]], list[Quad] | None]) -> Any:
        """One leased read-modify-write of ``key``'s entry: ``change(old quads)`` gives the
        new quads (None: leave it); the write travels with the release, in one request."""
        await self._aknow_server()
        subject = self._codec.subject(key)
        # Tasks of this client take turns per key (as threads do), so that one claim at a
        # time waits on the server for it.
        lock = self._alocks.get(subject.value)
        if lock is None:
            lock = self._alocks[subject.value] = asyncio.Lock()
        async with lock:
            return await self._amodify_held(subject, change)

    async def _amodify_held(
        self, subject: NamedNode, change: Callable[[list[Quad]], list[Quad] | None]
    ) -> Any:
        backend, leases = self.backend, self.backend.leases
        covering = leases._covering(subject)
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
                    Quad(subject, self._value_predicate, r["po"], self._kv_graph)
                    for r in claim.prefetch
                    if r.get("ps") == subject
                    and r.get("pp") == self._value_predicate
                    and r.get("pg") == self._kv_graph
                ]
            else:
                old = await self._aentry(subject)
            new = change(old)
            parts: list[str] = []
            if new is not None:
                parts = edit_requests(old, new, default_graph=backend.default_graph)
                if parts and backend.change_log:
                    parts[-1] += " ; " + log_change(
                        backend.change_graph, uuid.uuid4().hex, [self._kv_graph.value], [subject]
                    )
                for fence in (claim, covering):
                    if fence is not None:
                        check(fence)
        except BaseException:
            if claim is not None:
                await self.arun(release(leases.graph, claim))
            raise
        if claim is not None:
            parts.append(delete_claims(leases.graph, [claim.node]))
        if parts:  # the write, its change record and the release: one request
            await self._apost({"update": " ; ".join(parts)}, update=True)
        self._wrote_entries()
        return old

    async def aget(self, key: str, default: Any = None) -> Any:
        """Async ``get``, on the network without a thread."""
        old = await self._aentry(self._codec.subject(key))
        return decode_value(old[0].object) if old else default

    async def ahas(self, key: str) -> bool:
        """Async ``has``, on the network without a thread."""
        return bool(await self._aentry(self._codec.subject(key)))

    async def aset(self, key: str, value: Any) -> None:
        """Async ``set``: leased, like ``set``; on the network without a thread."""
        entry = encode_value(value)
        subject = self._codec.subject(key)
        await self._amodify(
            key, lambda _: [Quad(subject, self._value_predicate, entry, self._kv_graph)]
        )

    async def adelete(self, key: str) -> bool:
        """Async ``delete``: leased, like ``delete``; on the network without a thread."""
        return bool(await self._amodify(key, lambda old: [] if old else None))

    async def aupdate(self, key: str, fn: Callable[[Any], Any]) -> Any:
        """Async ``update``: atomic across every client, like ``update``; on the network
        without a thread."""
        subject = self._codec.subject(key)
        result: list[Any] = []

        def change(old: list[Quad]) -> list[Quad]:
            value = fn(decode_value(old[0].object) if old else None)
            result.append(value)
            return [Quad(subject, self._value_predicate, encode_value(value), self._kv_graph)]

        await self._amodify(key, change)
        return result[0]

    async def aclose(self) -> None:
        """Close the store and its async client."""
        client, self._aclient = self._aclient, None
        if client is not None:
            await client.aclose()
        self.close()

    def close(self) -> None:
        """Close the store, and its async client when one is open (an event loop that
        ended closed it already: ``asyncio.run(main())`` then ``store.close()``)."""
        client, loop, self._aclient = self._aclient, self._aloop, None
        if client is not None and loop is not None and not loop.is_closed():
            if loop.is_running():
                self._closing = asyncio.ensure_future(client.aclose(), loop=loop)
            else:
                loop.run_until_complete(client.aclose())
        super().close()

    def __repr__(self) -> str:
        ns = f", namespace={self.namespace!r}" if self.namespace else ""
        region = f", region={self.endpoint.region!r}" if self.endpoint.region else ""
        return f"RemoteStore({self.endpoint.url!r}{region}{ns})"


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
