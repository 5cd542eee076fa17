"""``RdfStore``: a key/value Store and a TripleStore in one object, over any backend.

``RemoteStore`` is the same store on a SPARQL 1.1 server, with leases, a health probe and
async twins that use the network without a thread (``rdfmem.store.remote``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, ClassVar, TypeVar

import httpx
from pyoxigraph import BlankNode, DefaultGraph, NamedNode, Quad, Variable

from rdfmem.backends.base import Backend, Capabilities, RawResult
from rdfmem.backends.oxigraph import OxigraphBackend
from rdfmem.backends.sparql import SparqlBackend
from rdfmem.backends.sparql.client import LEASE_GRAPH_IRI
from rdfmem.backends.sparql.lease_steps import RANGE_DELIMITERS
from rdfmem.core.errors import InvalidTerm, InvalidValue
from rdfmem.core.keys import KeyCodec
from rdfmem.core.ontology import PREFIXES
from rdfmem.core.terms import to_graph, to_object, to_predicate, to_subject
from rdfmem.store.history import Recorder
from rdfmem.store.history_api import HistoryMethods
from rdfmem.store.indexes.follow import Follower, following, max_age
from rdfmem.store.indexes.hub import IndexHub
from rdfmem.store.kv import KeyValue
from rdfmem.store.remote import (
    Endpoint,
    Lease,
    NetworkEntries,
    clear_graph_request,
    deferred_update,
)
from rdfmem.store.triples import TripleStore, refuse_network
from rdfmem.store.twins import AsyncKeyValue

__all__ = [
    "RdfStore",
    "RemoteStore",
    "DEFAULT_GRAPH",
    "DEFAULT_SUBJECT_PREFIX",
    "DEFAULT_VALUE_PREDICATE",
]

DEFAULT_SUBJECT_PREFIX = "urn:rdfmem:store:"
DEFAULT_VALUE_PREDICATE = "urn:rdfmem:store:value"
DEFAULT_GRAPH = "urn:rdfmem:graph:store"
S = TypeVar("S", bound="RdfStore")
T = TypeVar("T")


class RdfStore(KeyValue, TripleStore, HistoryMethods, AsyncKeyValue):
    """A key/value Store and a TripleStore over one RDF dataset.

    >>> store = RdfStore()                      # embedded Oxigraph, in memory
    >>> store.set("tokenBudget", 4096)
    >>> store.update("tokenBudget", lambda n: (n or 0) - 100)
    3996
    >>> store.count(predicate="urn:rdfmem:store:value")
    1

    Args:
        backend: where the data lives; embedded in-memory Oxigraph when None.
        namespace: qualifies keys (``namespace:key``); stores with different namespaces
            on one backend never see each other's keys.
        subject_prefix: the IRI prefix of entry subjects.
        value_predicate: the predicate of entry triples.
        graph: the named graph holding the entries.
        history: record every key/value write (who, when, why, the value) in history
            graphs beside the data, in the same atomic write (``rdfmem.store.history``).
        agent: the agent IRI writes are attributed to outside ``attributed`` blocks.
        history_retention: keep, per resource, versions no older than a ``timedelta``
            or the newest ``int`` of them (applied in each key/value write).

    Raises:
        InvalidTerm: a prefix, predicate, graph or agent that is not an IRI.
        InvalidValue: a ``history_retention`` that is neither.
    """

    #: Called with each store ``open`` returns (``rdfmem.store.owner_reads`` adds one: an
    #: owner runs the queries other processes send with a time limit in its sandbox).
    opened_hooks: ClassVar[list[Callable[[RdfStore], None]]] = []

    def __init__(
        self,
        backend: Backend | None = None,
        *,
        namespace: str = "",
        subject_prefix: str = DEFAULT_SUBJECT_PREFIX,
        value_predicate: str = DEFAULT_VALUE_PREDICATE,
        graph: str = DEFAULT_GRAPH,
        history: bool = False,
        agent: str | None = None,
        history_retention: timedelta | int | None = None,
    ) -> None:
        self._history = Recorder(agent, history_retention) if history else None
        self.backend = backend if backend is not None else OxigraphBackend()
        self.namespace = namespace
        try:
            NamedNode(subject_prefix + "x")
            self._value_predicate = NamedNode(value_predicate)
            self._kv_graph = NamedNode(graph)
        except ValueError as exc:
            raise InvalidTerm(f"store options must be IRIs: {exc}") from exc
        self.subject_prefix = subject_prefix
        self.value_predicate = value_predicate
        self.graph = graph
        self._codec = KeyCodec(subject_prefix, namespace)
        self.prefixes = dict(PREFIXES)
        self._closed = False
        # Read-side indexes, shared by this store's namespace views: only where every
        # write passes through this backend object (``Capabilities.exclusive_writer``).
        self._hub = IndexHub(self.backend) if self.backend.exclusive_writer else None
        self._followers: dict[str, Follower] = {}
        self._followers_lock = threading.Lock()
        self._init_kv()

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], *, attach_wait_s: float = 5.0, **options: Any
    ) -> RdfStore:
        """An embedded Oxigraph store on disk at ``path`` (created when missing).

        Any number of processes may open one store. The first becomes its owner (it opens
        the files and serves the others on a Unix socket in the folder); the others attach
        to it, with the same API and guarantees: ``update`` is atomic across processes, an
        acknowledged write is durable, and when the owner exits another process takes over
        (``rdfmem.backends.owner``, ``rdfmem.backends.attached``; docs/processes.md).

        ``attach_wait_s``: how long an attaching process waits for the owner's socket.

        Raises:
            StoreAlreadyOpen: ``path`` is held by a process that does not serve it (another
                program, or another user's process).
        """
        from rdfmem.backends.attached import open_shared

        store = cls(open_shared(path, attach_wait_s), **options)
        for hook in RdfStore.opened_hooks:
            hook(store)
        return store

    @classmethod
    def connect(
        cls,
        query_url: str,
        update_url: str | None = None,
        **options: Any,
    ) -> RemoteStore:
        """A store on a remote SPARQL 1.1 server (see ``RemoteStore.connect``)."""
        return RemoteStore.connect(query_url, update_url, **options)

    def with_namespace(self: S, namespace: str) -> S:
        """Another view of the same backend under ``namespace``, sharing its lifetime."""
        view = type(self).__new__(type(self))
        view.__dict__.update(self.__dict__)
        view.namespace = namespace
        view._codec = KeyCodec(self.subject_prefix, namespace)
        view._init_kv()
        return view

    def exclusive(
        self, *subjects: str | NamedNode, within: str | None = None
    ) -> AbstractContextManager[Any]:
        """Hold the right to read-modify-write ``subjects`` (IRIs): on an embedded backend
        the process-wide write lock, on a SPARQL server a lease every client respects.

        >>> store = RdfStore()
        >>> with store.exclusive("urn:doc:1"):
        ...     if not store.ask(subject="urn:doc:1"):
        ...         store.assert_("urn:doc:1", "urn:rev", 1)

        ``within``: an IRI prefix (ending in ``:``, ``/`` or ``#``) of every subject; a
        client that keeps writing in it alone may then claim all of it at once, one request
        less per write (``rdfmem.leases.Leases``).

        Raises:
            InvalidTerm: a subject that is not an IRI, or one outside ``within``.
            LeaseDenied: (remote) another client kept the lease too long.
        """
        nodes = []
        for subject in subjects:
            try:
                nodes.append(subject if isinstance(subject, NamedNode) else NamedNode(subject))
            except (TypeError, ValueError) as exc:
                raise InvalidTerm(
                    f"not an IRI: {subject!r}; pass each subject as its own argument, "
                    "exclusive('urn:a', 'urn:b')"
                ) from exc
        if within is not None and (
            not within
            or within[-1] not in RANGE_DELIMITERS
            or any(not n.value.startswith(within) for n in nodes)
        ):
            raise InvalidTerm(
                f"within={within!r} must end in one of {RANGE_DELIMITERS!r} and begin every subject"
            )
        return self.backend.exclusive(nodes, within)

    # -- what the domain and the surfaces may ask of the store ------------------------------

    @property
    def capabilities(self) -> Capabilities:
        """What the backend is and can do (``kind``, ``exclusive_writer``, ``persistent`` …)."""
        return self.backend.capabilities

    @property
    def generation(self) -> int:
        """The backend's write counter: it moves on every write through the backend, made
        by this store or any other object over it. A cache keyed on it is fresh while it
        stands still (on an ``exclusive_writer`` backend; elsewhere others write too)."""
        return self.backend.generation

    @property
    def indexes(self) -> IndexHub | None:
        """The read-side index hub (``rdfmem.store.indexes``), or None where others write
        the data too (a SPARQL server, storage handed in): there every read goes to SPARQL.
        """
        return self._hub

    def follower(self, predicate: NamedNode) -> Follower | None:
        """The client-side copy of ``predicate``'s vectors on a remote store that keeps the
        change log (shared by this store's views); None on any other store."""
        backend = self.backend
        if not isinstance(backend, SparqlBackend) or not following(backend):
            return None
        with self._followers_lock:
            found = self._followers.get(predicate.value)
            if found is None:
                found = Follower(backend, predicate.value, max_age(backend))
                self._followers[predicate.value] = found
            return found

    def refresh(self) -> None:
        """Make the next search of a remote store read every vector again: for writes made
        by SPARQL clients other than rdfmem, which the change log does not see."""
        with self._followers_lock:
            followers = list(self._followers.values())
        for each in followers:
            each.forget()

    def declared(
        self, graph: NamedNode, subjects: Sequence[NamedNode] = ()
    ) -> AbstractContextManager[Any]:
        """A block whose raw updates change only ``subjects`` of ``graph`` (or, with no
        subjects, only ``graph``): on a remote store with the change log, the log records
        exactly that, and an owned on-disk store notes it in its journal, so followers (of
        other graphs) read nothing again. Elsewhere a no-op (``Backend.scope``)."""
        return self.backend.scope(graph, subjects)

    def match(
        self,
        subject: Any = None,
        predicate: Any = None,
        object: Any = None,
        graph: Any = None,
    ) -> list[Quad]:
        """The quads matching one pattern of terms (``None`` matches anything, every graph
        included), as a list any thread may read.

        >>> store = RdfStore()
        >>> store.assert_("urn:a", "urn:p", 1)
        >>> [q.object.value for q in store.match("urn:a")]
        ['1']

        Raises:
            InvalidTerm: a slot that is not a term of its position, or a variable.
        """
        s = None if subject is None else to_subject(subject)
        p = None if predicate is None else to_predicate(predicate)
        o = None if object is None else to_object(object)
        g = None if graph is None else to_graph(graph)
        if (
            isinstance(s, Variable)
            or isinstance(p, Variable)
            or isinstance(o, Variable)
            or isinstance(g, Variable)
        ):
            raise InvalidTerm("match takes terms, not variables: select binds variables")
        return list(self.backend.match(s, p, o, g))

    def stream(
        self,
        sparql: str,
        *,
        base_iri: str | None = None,
        default_graph: Sequence[NamedNode | BlankNode | DefaultGraph] | None = None,
        named_graphs: Sequence[NamedNode | BlankNode] | None = None,
    ) -> RawResult:
        """The backend's own lazy answer to a query, for streaming (``rdfmem serve``): a
        pyoxigraph result read as it is written out. Read it on this thread and before
        ``close()``; ``query`` returns results that any thread may hold.

        Raises:
            NetworkAccessRefused: ``SERVICE``; nothing ran.
            QueryError: the query does not parse or fails.
        """
        refuse_network(sparql)
        return self.backend.query(
            sparql, base_iri=base_iri, default_graph=default_graph, named_graphs=named_graphs
        )

    def stream_quads(self) -> Iterator[Quad]:
        """Every quad, read lazily (``rdfmem serve``'s whole-dataset export stops at its
        size cap); read it on this thread and before ``close()``."""
        return self.backend.match()

    def run_async(self, fn: Callable[..., T], *args: Any) -> Awaitable[T]:
        """Run a blocking call of this store without blocking the event loop (on a thread
        for an embedded backend)."""
        return self.backend.run_async(fn, *args)

    def close(self) -> None:
        """Close the backend (files, locks, connections). Idempotent."""
        if not self._closed:
            self._closed = True
            self.backend.close()

    def __enter__(self: S) -> S:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        ns = f", namespace={self.namespace!r}" if self.namespace else ""
        return f"RdfStore({self.backend!r}{ns})"


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
        self._network = NetworkEntries(
            backend,
            self._codec,
            self._value_predicate,
            self._kv_graph,
            backend.wrote,
            history=self._history,
        )

    def with_namespace(self, namespace: str) -> RemoteStore:
        view: RemoteStore = super().with_namespace(namespace)
        view._network = NetworkEntries(
            view.backend,
            view._codec,
            view._value_predicate,
            view._kv_graph,
            view.backend.wrote,
            history=view._history,
        )
        return view

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
        staging_idle_ms: int | None = None,
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
            staging_idle_ms=staging_idle_ms,
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
        if leases.holds(lease.token):
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
        if base_iri is None and not allow_network:
            refuse_network(sparql)
            if deferred_update(self.backend, sparql):
                return
        super().sparql_update(sparql, base_iri=base_iri, allow_network=allow_network)

    def clear_graph(self, graph: Any) -> None:
        """Remove every triple of one graph (``DefaultGraph()`` for the default graph): one
        ``CLEAR`` request, under a lease on every subject (so no key/value read-modify-write
        of any client runs across it), with the release and the change record in it. With
        history kept, the triples are deleted in one write with a tombstone version of each
        resource, as on an embedded store.

        Raises:
            InvalidTerm: ``graph`` is not a graph, or is the lease graph.
            LeaseDenied: another client held a lease longer than ``lease_wait_ms``.
            Unreachable: the server did not answer.
        """
        if self._history is not None:  # a tombstone for each resource, in the same write
            TripleStore.clear_graph(self, graph)
            return
        name = to_graph(graph)
        if isinstance(name, Variable):
            raise InvalidTerm("clear_graph needs a graph, not a variable")
        clear_graph_request(self.backend, name)

    async def aacquire_lease(self, subject: str, ttl_ms: int, max_wait_ms: int) -> Lease:
        """Async ``acquire_lease``."""
        lease: Lease = await self.run_async(self.acquire_lease, subject, ttl_ms, max_wait_ms)
        return lease

    async def arelease_lease(self, lease: Lease) -> None:
        """Async ``release_lease``."""
        await self.run_async(self.release_lease, lease)

    async def ahealth(self, timeout_ms: float) -> bool:
        """Async ``health``; never raises."""
        return bool(await self.run_async(self.health, timeout_ms))

    async def aget(self, key: str, default: Any = None, *, as_of: datetime | None = None) -> Any:
        """Async ``get``, on the network without a thread (``as_of``: on a thread)."""
        if as_of is not None:
            return await super().aget(key, default, as_of=as_of)
        return await self._network.aget(key, default)

    async def ahas(self, key: str) -> bool:
        """Async ``has``, on the network without a thread."""
        return await self._network.ahas(key)

    async def aset(self, key: str, value: Any) -> None:
        """Async ``set``: leased, like ``set``; on the network without a thread."""
        await self._network.aset(key, value)

    async def adelete(self, key: str) -> bool:
        """Async ``delete``: leased, like ``delete``; on the network without a thread."""
        return await self._network.adelete(key)

    async def aupdate(self, key: str, fn: Callable[[Any], Any]) -> Any:
        """Async ``update``: atomic across every client, like ``update``; on the network
        without a thread."""
        return await self._network.aupdate(key, fn)

    async def aclose(self) -> None:
        """Close the store and its async client."""
        await self._network.aclose()
        self.close()

    def close(self) -> None:
        """Close the store, and its async client when one is open."""
        self._network.close()
        super().close()

    def __repr__(self) -> str:
        ns = f", namespace={self.namespace!r}" if self.namespace else ""
        region = f", region={self.endpoint.region!r}" if self.endpoint.region else ""
        return f"RemoteStore({self.endpoint.url!r}{region}{ns})"
