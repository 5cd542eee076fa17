"""The vectors of a remote store, kept in this process and fresh by the server's change log.

A remote store is shared: other clients write to the server. With the change log on
(``RdfStore.connect(..., change_log=True)`` on every client that writes), every rdfmem
write records, in the same request, the graph and the subjects it changed; a memory write
names its one subject. A ``Follower`` keeps one ``VectorSet`` per graph and, before each
search, asks the server what changed since it last looked (one small query, shared by every
follower of the backend: ``follow_hub``), then fetches only the vectors of the subjects
named there (no request for a subject this client wrote last: ``SparqlBackend.known_quads``).
A graph changed in a way not listed subject by subject (a large write, ``clear_graph``) is
read again whole; a change of unknown scope (a raw ``sparql_update`` through rdfmem, a
pruned log, the first look) reads every graph again.

**The rule.** A search never misses an rdfmem write that returned before the search began
(``SparqlBackend.changes_since`` says why). Writes by other SPARQL clients are not in the
log: a search sees them once ``max_age_s`` has passed since its graphs were last read
whole (every graph is then read again), or at once after ``store.refresh()``.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from numpy.typing import NDArray

from rdfmem.store.background import started
from rdfmem.store.indexes.follow_hub import Inbox, hub_of, one_look
from rdfmem.store.indexes.keywords import KeywordSet
from rdfmem.store.indexes.vectors import VectorSet

__all__ = [
    "Follower",
    "Following",
    "following",
    "one_look",
    "text_follower",
    "text_followers",
]

#: ``(graph, subject, vector)`` of stored vectors (or ``(graph, subject, text)`` of texts).
Entries = Iterator[tuple[str, str, Any]]


def following(backend: Any) -> bool:
    """True when ``backend`` tells its readers what changed: a remote store keeping the
    change log, or a process attached to an on-disk store (the owner's journal)."""
    return bool(getattr(backend, "change_log", False) or getattr(backend, "journaled", False))


def max_age(backend: Any) -> float | None:
    """How long a follower trusts a graph it read whole: forever where every write is
    noted (the journal of an owned store), else 60 s (writes by other SPARQL clients are
    not in a server's change log)."""
    return None if getattr(backend, "journaled", False) else 60.0


_texts: weakref.WeakKeyDictionary[Any, dict[str, Follower]] = weakref.WeakKeyDictionary()
_texts_lock = threading.Lock()


def text_follower(store: Any, name: str) -> Follower | None:
    """The client-side copy of the texts called ``name`` (``rdfmem.domain.hybrid``) of a
    store whose backend tells what changed (``following``); None on any other store."""
    backend = store.backend
    if store.indexes is not None or not following(backend):
        return None
    with _texts_lock:
        found = _texts.setdefault(backend, {}).get(name)
        if found is None:
            found = _texts[backend][name] = Follower(
                backend, name, max_age(backend), make=lambda g: KeywordSet((g,), name)
            )
        return found


def text_followers(store: Any) -> list[Follower]:
    """Every text follower (``text_follower``) of ``store``'s backend made so far."""
    with _texts_lock:
        return list(_texts.get(store.backend, {}).values())


class Following:
    """What every follower keeps: its sets by graph, the cursor of what changed, when each
    graph was read whole, and the subjects to read again. ``lock`` is held while a set is
    brought up to date and read."""

    def __init__(self, backend: Any, max_age_s: float | None = 60.0) -> None:
        self.backend = backend
        self.max_age_s = max_age_s
        self.lock = threading.RLock()
        # One cursor for every follower of the backend (``follow_hub``): a look made for
        # one is handed to all, and a call (``one_look``) sends one.
        self.hub = hub_of(backend)
        self._inbox = Inbox()
        self.hub.join(self._inbox)
        self.sets: dict[str, Any] = {}
        self.read_at: dict[str, float] = {}  # when each graph was last read whole
        self.pending: dict[str, set[str]] = {}  # subjects to read again, by graph
        # A whole read started early (``start_whole``): its graphs, when it began, its rows.
        self.early: tuple[tuple[str, ...], float, Callable[[], list[Any]]] | None = None

    def forget(self) -> None:
        """Read every graph again at the next read."""
        with self.lock:
            self.sets.clear()
            self.read_at.clear()
            self.pending.clear()
            self.early = None

    def _old(self, graph: str, now: float) -> bool:
        return self.max_age_s is not None and now - self.read_at[graph] > self.max_age_s

    @property
    def cursor(self) -> Any:
        """The change-log cursor shared by the backend's followers."""
        return self.hub.cursor

    def _follow(self) -> None:
        self.hub.sync()
        everything, whole, subjects = self._inbox.drain()
        if everything:
            self.sets.clear()
            self.pending.clear()
            self.early = None
            return
        for graph in whole:
            label = getattr(graph, "value", None)
            if label is not None:
                self.sets.pop(label, None)
                self.pending.pop(label, None)
                if self.early is not None and label in self.early[0]:
                    self.early = None
        reading = () if self.early is None else self.early[0]
        for graph, subject in subjects:
            label = getattr(graph, "value", None)
            if label is not None and (label in self.sets or label in reading):
                self.pending.setdefault(label, set()).add(subject.value)


class Follower(Following):
    """The vectors of one predicate on a remote store, graph by graph, with the change-log
    cursor that keeps them fresh. Thread-safe: one search at a time refreshes and reads."""

    def __init__(
        self,
        backend: Any,
        predicate: str,
        max_age_s: float | None = 60.0,
        make: Callable[[str], Any] | None = None,
    ) -> None:
        super().__init__(backend, max_age_s)
        self.predicate = predicate
        #: Makes the empty set of one graph (vectors of ``predicate`` by default).
        self.make: Callable[[str], Any] = make or (lambda g: VectorSet((g,), predicate))

    def search(
        self,
        graphs: Sequence[str],
        query: NDArray[Any] | str,
        limit: int,
        read_graphs: Callable[[Sequence[str]], Entries],
        read_subjects: Callable[[str, Sequence[str]], Entries],
    ) -> list[tuple[str, str, float]]:
        """``(graph, subject, score)`` of the best ``limit`` vectors of ``graphs``, after
        following the change log. ``read_graphs`` reads every vector of some graphs,
        ``read_subjects`` those of some subjects of one graph."""
        with self.lock:
            self._follow()
            now = time.monotonic()
            stale = [g for g in graphs if g not in self.sets or self._old(g, now)]
            early, self.early = self.early, None
            if stale and early is not None and set(stale) <= set(early[0]):
                # Read since it began; what changed after that is pending (``_follow``).
                self._read_whole(stale, iter(early[2]()), early[1], keep_pending=True)
            elif stale:
                self._read_whole(stale, read_graphs(stale), now)
            for graph in graphs:
                wanted = self.pending.pop(graph, None)
                if wanted:
                    self._read_some(graph, sorted(wanted), read_subjects)
            hits = [h for g in dict.fromkeys(graphs) for h in self.sets[g].search(query, limit)]
        return sorted(hits, key=lambda h: (-h[2], h[1], h[0]))[:limit]

    def start_whole(
        self, graphs: Sequence[str], read_graphs: Callable[[Sequence[str]], Entries]
    ) -> None:
        """Start reading on a thread, now, what the next ``search`` of ``graphs`` would read
        whole (a remote store's first search: the texts' read beside the vectors'). The
        read counts as made when it began: the changes looks report after that are read
        again on top of it, and a change of a whole graph or of everything drops it."""
        with self.lock:
            self._follow()
            now = time.monotonic()
            stale = tuple(g for g in graphs if g not in self.sets or self._old(g, now))
            if stale and self.early is None:
                for graph in stale:
                    self.pending.pop(graph, None)
                self.early = (stale, now, started(lambda: list(read_graphs(stale))))

    def _read_whole(
        self, graphs: Sequence[str], entries: Entries, now: float, *, keep_pending: bool = False
    ) -> None:
        by_graph: dict[str, list[tuple[str, str, NDArray[Any]]]] = {g: [] for g in graphs}
        for entry in entries:  # (kept as read: no tuple made again a row)
            rows = by_graph.get(entry[0])
            if rows is not None:
                rows.append(entry)
        for graph, rows in by_graph.items():
            vectors = self.make(graph)
            vectors.rebuild(rows)
            self.sets[graph] = vectors
            self.read_at[graph] = now
            if not keep_pending:
                self.pending.pop(graph, None)

    def _read_some(
        self,
        graph: str,
        subjects: Sequence[str],
        read_subjects: Callable[[str, Sequence[str]], Entries],
    ) -> None:
        vectors = self.sets[graph]
        found = {s: v for g, s, v in read_subjects(graph, subjects) if g == graph}
        for subject in subjects:
            vector = found.get(subject)
            if vector is None:
                vectors.remove(graph, subject)
            else:
                vectors.put(graph, subject, vector)
