"""``RemoteStore``: an ``RdfStore`` on a SPARQL 1.1 server, with leases and a health probe.

Several agents, processes or machines share one memory by connecting to one server::

    store = RdfStore.connect("http://127.0.0.1:7878/query", "http://127.0.0.1:7878/update")
    store.update("runs", lambda n: (n or 0) + 1)    # atomic across every client
    lease = store.acquire_lease("run-abc", ttl_ms=5_000, max_wait_ms=1_000)
    ...                                              # others' writes to "run-abc" wait
    store.release_lease(lease)

Everything ``RdfStore`` offers works unchanged (see ``rdfmem.backends.sparql`` for what
"the default graph" and blank nodes mean on a server, and ``rdfmem.leases`` for why the
leases hold on a server that isolates nothing but single writes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from .backends.sparql import LEASE_GRAPH_IRI, SparqlBackend
from .errors import InvalidValue
from .leases import Lease
from .store import RdfStore

__all__ = ["Endpoint", "Lease", "RemoteStore"]


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
        hidden_graphs: Sequence[str] | None = None,
        lease_ttl_ms: int = 10_000,
        lease_wait_ms: int = 30_000,
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
            hidden_graphs=hidden_graphs,
            lease_ttl_ms=lease_ttl_ms,
            lease_wait_ms=lease_wait_ms,
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

    def __repr__(self) -> str:
        ns = f", namespace={self.namespace!r}" if self.namespace else ""
        region = f", region={self.endpoint.region!r}" if self.endpoint.region else ""
        return f"RemoteStore({self.endpoint.url!r}{region}{ns})"
