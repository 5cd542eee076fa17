"""Which writes touched which graphs, and the read-side indexes kept fresh by those writes.

Every write of an embedded store (``exclusive_writer``) passes through rdfmem and bumps
``backend.generation`` under ``backend.lock``. ``IndexHub`` classifies each bump:

* a write whose graphs rdfmem knows (a key/value write: its entry graph; a domain write made
  inside ``IndexHub.writing(graphs)``) records ``graph_generation[g] = generation``;
* any other write (raw ``sparql_update``, ``load``, ``clear_graph``, ``assert_``, another
  namespace's code path) is of *unknown scope* and records ``unknown = generation``.

An index remembers ``seen``, the generation it was last consistent with. **A bypass is
detected** when ``unknown`` or the generation of one of its graphs is later than ``seen``: a
write happened that did not update the index, so the index is rebuilt from SPARQL before the
next read. A domain write made inside ``writing`` updates the indexes covering its graphs in
the same critical section (``backend.lock``) and moves their ``seen`` forward, so they stay
fresh; indexes of other graphs are untouched by it (their graphs' generations did not move).

>>> from rdfmem import RdfStore
>>> store = RdfStore()
>>> hub = indexes(store)
>>> seen = store.backend.generation
>>> store.set("counter", 1)                # a key/value write: only its graph moves
>>> hub.fresh(seen, ("urn:rdfmem:memories:global",))
True
>>> store.sparql_update("INSERT DATA { <urn:a> <urn:b> <urn:c> }")   # unknown scope
>>> hub.fresh(seen, ("urn:rdfmem:memories:global",))
False
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .graph import GraphIndex
from .vectors import VectorSet

if TYPE_CHECKING:
    from ..backends.base import Backend
    from ..store import RdfStore

__all__ = ["IndexHub", "hub_of", "indexes"]

_ATTRIBUTE = "_rdfmem_index_hub"
_make_lock = threading.Lock()


class IndexHub:
    """The write log and the indexes of one embedded backend (shared by every ``RdfStore``
    view of it). Every method expects ``backend.lock`` to be held by the caller, except
    ``writing``, which takes it."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        #: The generation of the last write whose graphs are unknown (everything before the
        #: hub existed counts as one).
        self.unknown = backend.generation
        #: Graph IRI -> the generation of the last write to it.
        self.graph_generation: dict[str, int] = {}
        self._scope: tuple[str, ...] | None = None
        self._vectors: dict[tuple[tuple[str, ...], str], VectorSet] = {}
        self._graphs: dict[str, GraphIndex] = {}

    # -- the write log ---------------------------------------------------------------------

    def wrote(self, graphs: Sequence[str] | None = None) -> None:
        """Record the write that just bumped ``backend.generation``: to ``graphs``, or to
        those of the enclosing ``writing`` block, or else of unknown scope."""
        generation = self.backend.generation
        scope = tuple(graphs) if graphs is not None else self._scope
        if scope is None:
            self.unknown = generation
            return
        for graph in scope:
            self.graph_generation[graph] = generation

    def fresh(self, seen: int, graphs: Sequence[str]) -> bool:
        """True when no write since generation ``seen`` may have changed ``graphs``."""
        if seen < self.unknown:
            return False
        get = self.graph_generation.get
        return all(get(g, -1) <= seen for g in graphs)

    @contextmanager
    def writing(self, graphs: Sequence[str]) -> Iterator[None]:
        """Hold the write lock while a domain write to ``graphs`` runs: the writes inside
        are recorded as writes to ``graphs`` (not of unknown scope)."""
        with self.backend.lock:
            outer = self._scope
            self._scope = tuple(graphs)
            try:
                yield
            finally:
                self._scope = outer

    # -- the indexes -----------------------------------------------------------------------

    def vectors(self, graphs: Sequence[str], predicate: str) -> VectorSet:
        """The vector set of ``predicate`` over ``graphs`` (made empty and stale)."""
        key = (tuple(graphs), predicate)
        found = self._vectors.get(key)
        if found is None:
            found = self._vectors[key] = VectorSet(key[0], predicate)
        return found

    def vector_sets(self, graph: str, predicate: str) -> list[VectorSet]:
        """The vector sets of ``predicate`` that cover ``graph``."""
        return [v for (gs, p), v in self._vectors.items() if p == predicate and graph in gs]

    def graph_index(self, graph: str) -> GraphIndex:
        """The node and adjacency index of one graph (made empty and stale)."""
        found = self._graphs.get(graph)
        if found is None:
            found = self._graphs[graph] = GraphIndex(graph)
        return found

    def known_graph_index(self, graph: str) -> GraphIndex | None:
        return self._graphs.get(graph)

    def __repr__(self) -> str:
        return (
            f"IndexHub(vector_sets={len(self._vectors)}, graph_indexes={len(self._graphs)}, "
            f"generation={self.backend.generation})"
        )


def hub_of(backend: Backend) -> IndexHub | None:
    """The hub of ``backend`` when one was made (writes report to it), else None."""
    hub: Any = getattr(backend, _ATTRIBUTE, None)
    return hub if isinstance(hub, IndexHub) else None


def indexes(store: RdfStore) -> IndexHub | None:
    """The index hub of ``store``'s backend, made on first use; None on a backend that other
    clients write too (``exclusive_writer`` false, a remote server): there every read goes
    to SPARQL, fresh."""
    backend = store.backend
    if not backend.exclusive_writer:
        return None
    hub = hub_of(backend)
    if hub is None:
        # Not under backend.lock (a writer holding it may be asking too): a write running
        # meanwhile is recorded by the new hub as of unknown scope, which is only cautious.
        with _make_lock:
            hub = hub_of(backend)
            if hub is None:
                hub = IndexHub(backend)
                setattr(backend, _ATTRIBUTE, hub)
    return hub
