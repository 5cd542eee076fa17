"""Which writes touched which graphs, and the read-side indexes kept fresh by those writes.

The backend counts every write that goes through it (``Backend.generation``). An
``RdfStore`` on a backend that no one writes around (``exclusive_writer``) keeps one
``IndexHub``, shared by its namespace views, and tells it the graphs of each write it makes
(``IndexHub.writing(graphs)``, or ``tracking`` around a key/value write). The hub
classifies every generation:

* a write made inside ``writing(graphs)`` records ``graph_generation[g] = generation``;
* any other generation (raw ``sparql_update``, ``load``, ``clear_graph``, ``assert_``, a
  write by another ``RdfStore`` object over the same backend, or straight through the
  backend) is of *unknown scope*: the hub notices the counter moved without being told,
  and records ``unknown = generation``.

An index remembers ``seen``, the generation it was last consistent with. **A bypass is
detected** when ``unknown`` or the generation of one of its graphs is later than ``seen``:
the index is rebuilt from SPARQL before the next read. A domain write made inside
``writing`` updates the indexes covering its graphs in the same critical section
(``backend.lock``) and moves their ``seen`` forward, so they stay fresh; indexes of other
graphs are untouched by it.

>>> from rdfmem import RdfStore
>>> store = RdfStore()
>>> hub = store.indexes
>>> seen = hub.generation
>>> store.set("counter", 1)                # a key/value write: only its graph moves
>>> hub.fresh(seen, ("urn:rdfmem:memories:global",))
True
>>> store.sparql_update("INSERT DATA { <urn:a> <urn:b> <urn:c> }")   # unknown scope
>>> hub.fresh(seen, ("urn:rdfmem:memories:global",))
False
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rdfmem.backends.base import Backend
from rdfmem.backends.owner_indexes import offer
from rdfmem.store.history import data_graph_of
from rdfmem.store.indexes.graph import GraphIndex
from rdfmem.store.indexes.keywords import KeywordSet
from rdfmem.store.indexes.loading import Loaded, Watcher
from rdfmem.store.indexes.saved import Section, Sections, code_digest
from rdfmem.store.indexes.vectors import VectorSet
from rdfmem.store.indexes.versions import kept_indexes

__all__ = ["IndexHub"]

#: The kinds of index a process attached to the store follows (and may be handed).
SHARED = ("vectors", "keywords", "graphs")


class IndexHub:
    """The write log and the indexes of one embedded backend, for the ``RdfStore`` that
    made it (and its namespace views). ``fresh``, ``vectors``, ``graph_index`` … expect
    ``backend.lock`` to be held by the caller (``reading``); ``writing`` takes it."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        #: The generation of the last write whose graphs are unknown (everything before the
        #: hub existed counts as one).
        self.unknown = backend.generation
        #: The generation up to which every write was classified.
        self._told = backend.generation
        self._scopes: list[tuple[str, ...]] = []
        #: Called when the innermost ``writing`` block ends without raising, under the lock
        #: (an index learning what the block's request wrote, ``after_domain_write``).
        self.after_writes: list[Callable[[], None]] = []
        self._writer = 0  # the thread in the ``writing`` blocks (they hold the lock)
        #: Graph IRI -> the generation of the last write to it.
        self.graph_generation: dict[str, int] = {}
        self._vectors: dict[tuple[tuple[str, ...], str], VectorSet] = {}
        self._graphs: dict[str, GraphIndex] = {}
        self._keywords: dict[tuple[tuple[str, ...], str], KeywordSet] = {}
        #: Who keeps which index from a bulk load: a key (one per kind of index) -> the
        #: watched predicates and the watcher (held weakly: a gone ``Memories`` is no one).
        self._watchers: dict[str, tuple[frozenset[str], weakref.WeakMethod[Watcher]]] = {}
        saved, backend.saved_indexes = backend.saved_indexes, None
        usable = saved if backend.exclusive_writer else None
        self._saved = Sections(usable, backend.generation)
        if backend.persistent and backend.exclusive_writer:
            backend.keep_indexes = self.export
            offer(backend, self)  # to the processes that attach to its store

    # -- kept across restarts (``rdfmem.store.indexes.saved``) ------------------------------

    def export(self) -> dict[str, Any] | None:
        """The indexes that are fresh now, one section each (the backend saves them beside
        its files when it closes; call under ``backend.lock``)."""
        self._settle()
        fresh = self.fresh
        sections = self._saved.still_fresh(fresh)
        sections += [
            Section.of("vectors", k, v.graphs, v)
            for k, v in self._vectors.items()
            if fresh(v.seen, v.graphs)
        ]
        sections += [
            Section.of("keywords", k, v.graphs, v)
            for k, v in self._keywords.items()
            if fresh(v.seen, v.graphs)
        ]
        sections += [
            Section.of("graphs", k, (k,), g) for k, g in self._graphs.items() if fresh(g.seen, (k,))
        ]
        for index in kept_indexes(self):  # a history graph's, with the data graph it follows
            data = data_graph_of(index.graph)
            if data is not None and fresh(index.seen, (data, index.graph)):
                sections.append(Section.of("versions", index.graph, (data, index.graph), index))
        return {"code": code_digest(), "sections": sections} if sections else None

    def shared_keys(self) -> list[tuple[str, str]]:
        """The kind and predicate (or name) of each index of one graph this hub holds or
        was saved with, as a process attached to the store follows them
        (``rdfmem.backends.owner_indexes``)."""
        keys = [("vectors", k) for k in self._vectors]
        keys += [("keywords", k) for k in self._keywords]
        keys += [("graphs", ((k,), "")) for k in self._graphs]
        keys += [(kind, key) for kind, key in self._saved.pending if kind in SHARED]
        found: dict[tuple[str, str], None] = {}
        for kind, key in keys:
            if kind == "graphs":
                found[(kind, "")] = None
            elif kind in SHARED and len(key[0]) == 1:
                found[(kind, str(key[1]))] = None
        return list(found)

    def share(self, behind: int) -> tuple[int, dict[str, Any] | None]:
        """The indexes of one graph another process of the store may start from (call under
        ``backend.lock``), and the generation ``G`` they are all consistent with or ahead
        of: each is fresh, or (``behind`` >= 0) the writes to its graphs since it was last
        brought up to date, at most ``behind`` subjects, are named in the journal. Whoever
        takes them reads again what the journal names after ``G``."""
        self._settle()
        now = self.generation

        def at(seen: int, graphs: Sequence[str]) -> int | None:
            if self.fresh(seen, graphs):
                return now
            changed = self.changed(seen, graphs) if behind >= 0 else None
            return seen if changed is not None and len(changed) <= behind else None

        picked: list[tuple[int, Section]] = []
        for kind, sets in (("vectors", self._vectors), ("keywords", self._keywords)):
            for key, index in sets.items():
                when = at(index.seen, index.graphs) if len(index.graphs) == 1 else None
                if when is not None:
                    picked.append((when, Section.of(kind, key, index.graphs, index)))
        for graph, found in self._graphs.items():
            when = at(found.seen, (graph,))
            if when is not None:
                picked.append((when, Section.of("graphs", graph, (graph,), found)))
        for section in self._saved.pending.values():
            if section.kind in SHARED and len(section.graphs) == 1:
                when = at(self._saved.seen, section.graphs)
                if when is not None:
                    picked.append((when, section))
        if not picked:
            return now, None
        sections = [s for _, s in picked]
        return min(w for w, _ in picked), {"code": code_digest(), "sections": sections}

    def saved_index(self, kind: str, key: Any) -> Any | None:
        """The index of ``kind`` at ``key`` saved beside the store at its last close and
        still fresh (loaded now; None when none was)."""
        return self._saved.take(kind, key)

    # -- the write log ---------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """The backend's write counter: what an index records as ``seen`` after a write
        or a rebuild."""
        return self.backend.generation

    def _record(self, graphs: Sequence[str] | None) -> None:
        # Classify the writes since the last look: to ``graphs``, or (None) of unknown scope.
        generation = self.backend.generation
        if generation == self._told:
            return
        told, self._told = self._told, generation
        if graphs is None:
            # Not told: an owned store's journal may know (the writes its attached
            # processes send declare their graphs), else unknown.
            journal = getattr(self.backend, "journal", None)
            noted = None if journal is None else journal.graphs_between(told, generation)
            if noted is None:
                self.unknown = generation
            else:
                for graph in noted:
                    self.graph_generation[graph] = generation
        else:
            for graph in graphs:
                self.graph_generation[graph] = generation

    def _settle(self) -> None:
        # The writes so far belong to the innermost ``writing`` block, or to no known graph.
        self._record(self._scopes[-1] if self._scopes else None)

    def before_write(self) -> None:
        """Classify the writes so far; call under ``backend.lock`` right before a write
        whose graphs ``after_write`` will name (the key/value path: two calls, no block)."""
        self._settle()

    def after_write(self, graphs: Sequence[str]) -> None:
        """Record the writes since ``before_write`` as writes to ``graphs`` only."""
        self._record(graphs)

    def fresh(self, seen: int, graphs: Sequence[str]) -> bool:
        """True when no write since generation ``seen`` may have changed ``graphs``."""
        self._settle()
        if seen < self.unknown:
            return False
        get = self.graph_generation.get
        return all(get(g, -1) <= seen for g in graphs)

    def changed(self, seen: int, graphs: Sequence[str]) -> set[tuple[str, str]] | None:
        """The ``(graph, subject)`` pairs of ``graphs`` written since generation ``seen``
        (empty when the index is fresh), when an owned store's journal knows them (writes
        its attached processes sent); None when the index must be read again whole."""
        if self.fresh(seen, graphs):
            return set()
        journal = getattr(self.backend, "journal", None)
        if seen < 0 or seen < self.unknown or journal is None:
            return None
        found: set[tuple[str, str]] | None = journal.subjects_between(
            seen, self.generation, set(graphs)
        )
        return found

    @contextmanager
    def reading(self) -> Iterator[IndexHub]:
        """Hold the write lock while indexes are read (no write is half applied)."""
        with self.backend.lock:
            yield self

    @contextmanager
    def writing(self, graphs: Sequence[str]) -> Iterator[None]:
        """Hold the write lock while a write to ``graphs`` runs: the writes made inside
        are recorded as writes to ``graphs`` only (not of unknown scope), also when the
        block raises (a write may have happened)."""
        with self.backend.lock:
            self._settle()
            self._scopes.append(tuple(graphs))
            self._writer = threading.get_ident()
            try:
                yield
            finally:
                self._settle()
                self._scopes.pop()
                hooks, self.after_writes = self.after_writes, []
            for hook in hooks:  # not reached when the block raised
                hook()

    @property
    def in_write(self) -> bool:
        """True inside a ``writing`` block (of this thread: it holds the lock)."""
        return bool(self._scopes) and self._writer == threading.get_ident()

    # -- bulk loads -------------------------------------------------------------------------

    def watch(self, key: str, predicates: Iterable[str], watcher: Watcher) -> None:
        """Have ``watcher`` (a bound method) keep its index sets from each bulk load that
        adds triples of ``predicates``; one watcher a ``key`` (the latest one)."""
        self._watchers[key] = (frozenset(predicates), weakref.WeakMethod(watcher))

    def load(self, run: Callable[[Callable[[Any], None]], int]) -> int:
        """Run a bulk load (``run(see)``, where the backend calls ``see(quad)`` for each
        quad it adds) as a write to the named graphs it touches, then let the watchers put
        what it added into their sets, under ``backend.lock``. A load that also writes the
        default graph, or that fails part-way, is of unknown scope (every index is read
        again before its next read)."""
        with self.backend.lock:
            self._settle()
            watchers = [(p, w) for p, ref in self._watchers.values() if (w := ref()) is not None]
            loaded = Loaded(frozenset().union(*(p for p, _ in watchers)))
            sets: list[Any] = [*self._vectors.values(), *self._keywords.values()]
            before = {id(s) for s in sets if self.fresh(s.seen, s.graphs)}
            done = False
            try:
                count = run(loaded.see)
                done = True
            finally:
                named = done and not loaded.unnamed
                self._record(tuple(sorted(loaded.graphs)) if named else None)
            if done:
                for _, watcher in watchers:
                    watcher(loaded, before)
            return count

    # -- the indexes -----------------------------------------------------------------------

    def vectors(self, graphs: Sequence[str], predicate: str) -> VectorSet:
        """The vector set of ``predicate`` over ``graphs`` (made empty and stale)."""
        key = (tuple(graphs), predicate)
        found = self._vectors.get(key)
        if found is None:
            found = self._saved.take("vectors", key)
            if found is None:
                found = VectorSet(key[0], predicate)
            self._vectors[key] = found
        return found

    def vector_sets(self, graph: str, predicate: str) -> list[VectorSet]:
        """The vector sets of ``predicate`` that cover ``graph``."""
        for key in self._saved.covering("vectors", graph):
            self.vectors(key[0], key[1])
        return [v for (gs, p), v in self._vectors.items() if p == predicate and graph in gs]

    def keywords(self, graphs: Sequence[str], name: str) -> KeywordSet:
        """The keyword set of the texts called ``name`` over ``graphs`` (made empty and
        stale)."""
        key = (tuple(graphs), name)
        found = self._keywords.get(key)
        if found is None:
            found = self._saved.take("keywords", key)
            if found is None:
                found = KeywordSet(key[0], name)
            self._keywords[key] = found
        return found

    def keyword_sets(self, graph: str, name: str) -> list[KeywordSet]:
        """The keyword sets of the texts called ``name`` that cover ``graph``."""
        for key in self._saved.covering("keywords", graph):
            self.keywords(key[0], key[1])
        return [k for (gs, n), k in self._keywords.items() if n == name and graph in gs]

    def graph_index(self, graph: str) -> GraphIndex:
        """The node and adjacency index of one graph (made empty and stale)."""
        found = self._graphs.get(graph)
        if found is None:
            found = self._saved.take("graphs", graph)
            if found is None:
                found = GraphIndex(graph)
            self._graphs[graph] = found
        return found

    def __repr__(self) -> str:
        return (
            f"IndexHub(vector_sets={len(self._vectors)}, keyword_sets={len(self._keywords)}, "
            f"graph_indexes={len(self._graphs)}, "
            f"generation={self.backend.generation})"
        )
