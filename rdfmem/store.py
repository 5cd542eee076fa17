"""``RdfStore``: a key/value Store and a TripleStore in one object, over any backend."""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from pyoxigraph import NamedNode

from .backends.base import Backend
from .backends.oxigraph import OxigraphBackend
from .errors import InvalidTerm
from .keys import KeyCodec
from .kv import KeyValue
from .lease_steps import RANGE_DELIMITERS
from .ontology import PREFIXES
from .triples import TripleStore

if TYPE_CHECKING:
    from .remote import RemoteStore

__all__ = [
    "AsyncKeyValue",
    "RdfStore",
    "DEFAULT_GRAPH",
    "DEFAULT_SUBJECT_PREFIX",
    "DEFAULT_VALUE_PREDICATE",
]

DEFAULT_SUBJECT_PREFIX = "urn:rdfmem:store:"
DEFAULT_VALUE_PREDICATE = "urn:rdfmem:store:value"
DEFAULT_GRAPH = "urn:rdfmem:graph:store"
S = TypeVar("S", bound="RdfStore")


class AsyncKeyValue:
    """The asyncio twin of every key/value method, run off the event loop by the backend."""

    def _run_async(self, fn: Callable[..., Any], *args: Any) -> Any:
        raise NotImplementedError  # pragma: no cover - supplied by the concrete class

    async def aget(self, key: str, default: Any = None) -> Any:
        """Async ``get``."""
        return await self._run_async(self.get, key, default)  # type: ignore[attr-defined]

    async def aset(self, key: str, value: Any) -> None:
        """Async ``set``."""
        await self._run_async(self.set, key, value)  # type: ignore[attr-defined]

    async def ahas(self, key: str) -> bool:
        """Async ``has``."""
        return bool(await self._run_async(self.has, key))  # type: ignore[attr-defined]

    async def adelete(self, key: str) -> bool:
        """Async ``delete``."""
        return bool(await self._run_async(self.delete, key))  # type: ignore[attr-defined]

    async def aupdate(self, key: str, fn: Callable[[Any], Any]) -> Any:
        """Async ``update``: still atomic against every other writer."""
        return await self._run_async(self.update, key, fn)  # type: ignore[attr-defined]

    async def aupdate_many(
        self, keys: list[str], fn: Callable[[dict[str, Any]], Any]
    ) -> dict[str, Any]:
        """Async ``update_many``."""
        return dict(await self._run_async(self.update_many, keys, fn))  # type: ignore[attr-defined]

    async def akeys(self, prefix: str = "") -> list[str]:
        """Async ``keys``."""
        return list(await self._run_async(self.keys, prefix))  # type: ignore[attr-defined]

    async def asnapshot(self) -> dict[str, Any]:
        """Async ``snapshot``."""
        return dict(await self._run_async(self.snapshot))  # type: ignore[attr-defined]

    async def arestore(self, snapshot: dict[str, Any]) -> None:
        """Async ``restore``."""
        await self._run_async(self.restore, snapshot)  # type: ignore[attr-defined]

    async def aclose(self) -> None:
        """Async ``close``."""
        await self._run_async(self.close)  # type: ignore[attr-defined]


class RdfStore(KeyValue, TripleStore, AsyncKeyValue):
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

    Raises:
        InvalidTerm: a prefix, predicate or graph that is not an IRI.
    """

    def __init__(
        self,
        backend: Backend | None = None,
        *,
        namespace: str = "",
        subject_prefix: str = DEFAULT_SUBJECT_PREFIX,
        value_predicate: str = DEFAULT_VALUE_PREDICATE,
        graph: str = DEFAULT_GRAPH,
    ) -> None:
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
        self._init_kv()

    @classmethod
    def open(cls, path: str | os.PathLike[str], **options: Any) -> RdfStore:
        """An embedded Oxigraph store on disk at ``path`` (created when missing).

        Raises:
            StoreAlreadyOpen: another open store holds ``path``.
        """
        return cls(OxigraphBackend(path), **options)

    @classmethod
    def connect(
        cls,
        query_url: str,
        update_url: str | None = None,
        **options: Any,
    ) -> RemoteStore:
        """A store on a remote SPARQL 1.1 server (see ``rdfmem.remote.RemoteStore``)."""
        from .remote import RemoteStore

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
            except ValueError as exc:
                raise InvalidTerm(f"not an IRI: {subject!r}") from exc
        if within is not None and (
            not within
            or within[-1] not in RANGE_DELIMITERS
            or any(not n.value.startswith(within) for n in nodes)
        ):
            raise InvalidTerm(
                f"within={within!r} must end in one of {RANGE_DELIMITERS!r} and begin every subject"
            )
        return self.backend.exclusive(nodes, within)

    def _run_async(self, fn: Callable[..., Any], *args: Any) -> Any:
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
