"""The backend contract: the only code in rdfmem that does I/O.

A backend is a handful of methods (``query``, ``update``, ``match``, ``apply``, ``close``,
with ``load``/``dump`` defaulting to pyoxigraph's parsers and serialisers over ``match`` and
``apply``). Everything ``RdfStore`` offers is written once on top of them, so a new backend
is a small class. Capabilities are declared (``Backend.capabilities``), not exceptions to catch.

The write counter belongs to the backend: ``generation`` moves on every write that goes
through it (an implementation calls ``wrote()`` after each ``apply``, ``update`` and
``load``, also one that failed partway), so a cache keyed on it is never stale for writes
made through this object, whichever ``RdfStore`` made them. Writes made *around* it (to a
pyoxigraph ``Store`` or an rdflib ``Dataset`` that the caller also holds) cannot be seen:
a backend built over storage it was handed is therefore not an ``exclusive_writer``, and
nothing above it caches.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias, TypeVar

from pyoxigraph import (
    BlankNode,
    DefaultGraph,
    Literal,
    NamedNode,
    Quad,
    QueryBoolean,
    QuerySolutions,
    QueryTriples,
    RdfFormat,
    Triple,
    parse,
    serialize,
)

from rdfmem.core.errors import FormatError
from rdfmem.core.formats import check_rdf

__all__ = ["Backend", "Capabilities", "RawResult"]

T = TypeVar("T")
Subject: TypeAlias = NamedNode | BlankNode
Object: TypeAlias = NamedNode | BlankNode | Literal
Graph: TypeAlias = NamedNode | BlankNode | DefaultGraph
#: What ``Backend.query`` returns: pyoxigraph's own result types, whichever the backend.
RawResult: TypeAlias = QuerySolutions | QueryBoolean | QueryTriples | bool | list[Triple]


@dataclass(frozen=True)
class Capabilities:
    """What a backend is and can do, declared by the backend.

    >>> from rdfmem import RdfStore
    >>> RdfStore().capabilities.kind
    'oxigraph'
    """

    #: ``"oxigraph"``, ``"rdflib"``, ``"sparql"`` (a remote server), or a third party's name.
    kind: str
    #: Every write passes through this backend object, so what was read may be cached
    #: until ``generation`` moves. False for a shared server and for storage handed in.
    exclusive_writer: bool
    #: The data outlives the process.
    persistent: bool
    #: SPARQL Update is available.
    supports_update: bool = True
    #: Every write raises.
    read_only: bool = False
    #: Queries are evaluated in this process (so ``rdfmem serve`` may isolate them).
    embedded: bool = True
    #: Several threads may read at once (rdflib's stores: one at a time).
    concurrent_reads: bool = True


class Backend(ABC):
    """Storage and SPARQL evaluation for an ``RdfStore``.

    Flags (also gathered in ``capabilities``):
        supports_update: SPARQL Update is available.
        read_only: every write raises.
        exclusive_writer: every write passes through this object (storage it made itself,
            in this process), so ``RdfStore`` may cache what it read; a shared remote
            server, or a pyoxigraph ``Store`` / rdflib ``Dataset`` handed in, is not.
        persistent: the data outlives the process.
    """

    kind: ClassVar[str] = "custom"
    supports_update: ClassVar[bool] = True
    read_only: ClassVar[bool] = False
    embedded: ClassVar[bool] = True
    concurrent_reads: ClassVar[bool] = True
    persistent: bool = False
    #: Read-side indexes a persistent backend found saved beside its data when it opened
    #: (taken by the store's index hub), and the hub's way to give them back at ``close``
    #: (``rdfmem.backends.indexfile``). None where nothing is saved.
    saved_indexes: dict[str, Any] | None = None
    keep_indexes: Callable[[], dict[str, Any] | None] | None = None

    def __init__(self, *, exclusive_writer: bool = True) -> None:
        #: Serialises read-modify-write cycles of the stores sharing this backend.
        self.lock = threading.RLock()
        self.exclusive_writer = exclusive_writer
        #: How many writes went through this backend: caches keyed on it know when to
        #: forget. Read it; only ``wrote()`` moves it. (A plain attribute, not a property:
        #: every cached ``get`` reads it, and a property costs a third of such a read.)
        self.generation = 0
        #: Called with the new generation after each write (``rdfmem serve --workers``
        #: publishes it to its reader processes: ``rdfmem.store.readonly.on_writes``).
        self.write_hooks: list[Callable[[int], None]] = []

    def wrote(self) -> None:
        """Count a write; implementations call it after every write (in ``finally``). The
        ``write_hooks`` hear the new generation before the write returns to its caller."""
        self.generation += 1
        for hook in self.write_hooks:
            hook(self.generation)

    @property
    def capabilities(self) -> Capabilities:
        """What this backend is and can do."""
        return Capabilities(
            kind=self.kind,
            exclusive_writer=self.exclusive_writer,
            persistent=self.persistent,
            supports_update=self.supports_update,
            read_only=self.read_only,
            embedded=self.embedded,
            concurrent_reads=self.concurrent_reads,
        )

    # -- the contract -------------------------------------------------------------------

    @abstractmethod
    def query(
        self,
        sparql: str,
        *,
        base_iri: str | None = None,
        default_graph: Sequence[Graph] | None = None,
        named_graphs: Sequence[NamedNode | BlankNode] | None = None,
        substitutions: Mapping[str, Object] | None = None,
    ) -> RawResult:
        """Evaluate a SPARQL 1.1 query; ``substitutions`` pre-bind variables (SEP-0007).

        Raises:
            QueryError: the query does not parse or fails.
        """

    @abstractmethod
    def update(self, sparql: str, *, base_iri: str | None = None) -> None:
        """Run a SPARQL 1.1 Update request, all of it or none of it.

        Raises:
            QueryError: the update does not parse or fails.
        """

    @abstractmethod
    def match(
        self,
        subject: Subject | None = None,
        predicate: NamedNode | None = None,
        object: Object | None = None,
        graph: Graph | None = None,
    ) -> Iterator[Quad]:
        """The quads matching a pattern; ``None`` matches anything, every graph included."""

    @abstractmethod
    def apply(self, remove: Sequence[Quad], add: Sequence[Quad]) -> None:
        """Remove then add quads in one atomic step (all or nothing, as the backend allows)."""

    @abstractmethod
    def close(self) -> None:
        """Release files, locks and connections; idempotent."""

    # -- defaults written once over the contract ------------------------------------------

    def load(
        self,
        data: bytes,
        format: RdfFormat,
        *,
        base_iri: str | None = None,
        to_graph: NamedNode | BlankNode | None = None,
        observe: Callable[[Quad], None] | None = None,
    ) -> int:
        """Parse ``data`` and add its quads in one step; returns how many were read.
        Blank nodes are renamed apart: ``_:x`` in two documents (or two loads of one) are
        two nodes, as in pyoxigraph's ``Store.load``. ``observe`` is shown each quad added
        (the index hub keeps its indexes from the load: ``rdfmem.store.indexes.loading``).

        Raises:
            FormatError: the data does not parse as ``format``.
        """
        quads = parse_rdf(data, format, base_iri=base_iri, to_graph=to_graph)
        self.apply([], quads)  # counted by apply
        if observe is not None:
            for quad in quads:
                observe(quad)
        return len(quads)

    def dump(
        self,
        format: RdfFormat,
        *,
        from_graph: Graph | None = None,
        prefixes: Mapping[str, str] | None = None,
    ) -> bytes:
        """Serialise one graph (triple formats) or every graph (dataset formats)."""
        items: list[Quad] | list[Triple]
        if format.supports_datasets:
            items = list(self.match())
        else:
            graph = DefaultGraph() if from_graph is None else from_graph
            items = [q.triple for q in self.match(None, None, None, graph)]
        return bytes(serialize(items, None, format, prefixes=dict(prefixes or {})) or b"")

    def exclusive(
        self, subjects: Sequence[NamedNode], within: str | None = None
    ) -> AbstractContextManager[Any]:
        """Hold the right to read-modify-write ``subjects`` (here: the process-wide lock).

        A remote backend overrides this with a lease shared by every client of the server
        (``within``: an IRI prefix of every subject, which it may claim instead).
        """
        return self.lock

    def scope(self, graph: NamedNode, subjects: Sequence[NamedNode]) -> AbstractContextManager[Any]:
        """Declare that this thread's writes inside the block change only ``subjects`` of
        ``graph`` (all of it when empty): backends that tell readers what changed (a
        server's change log, an owned store's journal) record exactly that. A no-op here."""
        return contextlib.nullcontext()

    async def run_async(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking call for an ``a*`` twin without blocking the event loop."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def parse_rdf(
    data: bytes,
    format: RdfFormat,
    *,
    base_iri: str | None = None,
    to_graph: NamedNode | BlankNode | None = None,
) -> list[Quad]:
    """Parse RDF with pyoxigraph into quads; triples land in ``to_graph`` (default graph).
    Blank nodes get fresh labels, unique to this call.

    Raises:
        FormatError: the data does not parse, with the parser's message, or is refused
            (``rdfmem.core.formats.check_rdf``).
    """
    check_rdf(data, format)
    try:
        parsed = list(parse(data, format, base_iri=base_iri, rename_blank_nodes=True))
    except (SyntaxError, ValueError) as exc:
        raise FormatError(f"cannot parse {format.name}: {exc}") from exc
    graph: Graph = DefaultGraph() if to_graph is None else to_graph
    quads: list[Quad] = []
    for item in parsed:
        if isinstance(item, Quad) and not (
            to_graph is not None and isinstance(item.graph_name, DefaultGraph)
        ):
            quads.append(item)
        else:
            quads.append(Quad(item.subject, item.predicate, item.object, graph))
    return quads
