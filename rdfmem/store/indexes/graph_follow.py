"""The node and link index of a remote decision graph, kept in this process and fresh by
the server's change log, as ``follow.Follower`` keeps memory vectors.

A ``GraphFollower`` holds one ``GraphIndex`` per named graph of a remote store whose
clients keep the change log. Before each read it asks the server what changed since it
last looked (one small query); a graph changed subject by subject has only those subjects
read again (their node fields and the links leaving them), a graph changed in a way not
listed subject by subject is read again whole, and a change of unknown scope (a raw
``sparql_update`` through rdfmem, a pruned log, the first look) reads every graph again.

**Its own writes** are not read back where the log counts writes one by one (a process
attached to an on-disk store: the owner's journal gives each write one generation).
``DecisionGraph`` writes with the index brought up to date first (``held``/``fresh``), applies
its change to it, and then calls ``wrote``: when the look after the write finds exactly one
write since the look before it, that write was its own and the subjects it names are
already applied; when any other write came between (another process, even on the same
node), they are read again as before. On a server's change log (times, not counts) every
named subject is read again.

**The rule** is the vector follower's (``follow.py``): a read never misses an rdfmem write
that returned before it began. Writes by other SPARQL clients are not in the log: a read
sees them once ``max_age_s`` has passed since its graph was last read whole, or at once
after ``forget()``.

>>> from rdfmem import RdfStore
>>> graph_follower(RdfStore()) is None    # an embedded store keeps its own index
True
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from rdfmem.backends.sparql.client import SparqlBackend
from rdfmem.store.indexes.follow import Following, following, max_age
from rdfmem.store.indexes.graph import GraphIndex

__all__ = ["patch_subjects", "GraphFollower", "NodeRow", "graph_follower"]

#: ``(iri, kind, status, key, value)`` of a node, as ``GraphIndex.put_node`` takes it.
NodeRow = tuple[str, str, str, Any, Any]
#: ``(nodes, links)`` of a whole graph; links are ``(source, target, mask)``.
Whole = tuple[Iterable[NodeRow], Iterable[tuple[str, str, int]]]
#: The same for some subjects: their nodes (absent ones are gone) and the links leaving them.
Some = tuple[Iterable[NodeRow], Iterable[tuple[str, str, int]]]

_followers: weakref.WeakKeyDictionary[Any, GraphFollower] = weakref.WeakKeyDictionary()
_registry_lock = threading.Lock()


def graph_follower(store: Any) -> GraphFollower | None:
    """The graph follower of an ``RdfStore`` on a remote backend that keeps the change log
    (one per backend object, shared by every view and reader of it); None for any other."""
    backend = store.backend
    if not isinstance(backend, SparqlBackend) or not following(backend):
        return None
    with _registry_lock:
        found = _followers.get(backend)
        if found is None:
            found = _followers[backend] = GraphFollower(backend, max_age(backend))
        return found


def patch_subjects(
    index: GraphIndex, subjects: Sequence[str], read_some: Callable[[Sequence[str]], Some]
) -> None:
    """Read ``subjects`` (nodes and edges) of ``index``'s graph again into it: a node
    gone is removed, a node found replaces its old self and its links out."""
    nodes, links = read_some(subjects)
    found = {row[0]: row for row in nodes}
    for subject in subjects:
        row = found.get(subject)
        if row is None:
            index.remove_node(subject)
            continue
        for target in list(index.out.get(subject, ())):
            index.unlink(subject, target)
        index.put_node(*row)
    for source, target, mask in links:
        index.link(source, target, mask)


class GraphFollower(Following):
    """Graph indexes of one remote store with the change-log cursor that keeps them fresh.

    Thread-safe: ``lock`` is held while an index is brought up to date and read."""

    def __init__(self, backend: Any, max_age_s: float | None = 60.0) -> None:
        super().__init__(backend, max_age_s)

    def fresh(
        self,
        graph: str,
        read_whole: Callable[[], Whole],
        read_some: Callable[[Sequence[str]], Some],
    ) -> GraphIndex:
        """The index of ``graph``, after following the change log; call with ``lock``
        held, and read the index before releasing it."""
        self._follow()
        now = time.monotonic()
        index: GraphIndex | None = self.sets.get(graph)
        if index is None or self._old(graph, now):
            index = GraphIndex(graph)
            nodes, links = read_whole()
            index.rebuild(nodes, links)
            self.sets[graph] = index
            self.read_at[graph] = now
            self.pending.pop(graph, None)
            return index
        wanted = self.pending.pop(graph, None)
        if wanted:
            patch_subjects(index, sorted(wanted), read_some)
        return index

    def _journaled(self) -> bool:
        return bool(getattr(self.backend, "journaled", False))

    def held(self, graph: str) -> bool:
        """True when this process keeps an index of ``graph`` (read at least once) that
        the log keeps exact, and counts writes one by one (``wrote`` can tell its own)."""
        return graph in self.sets and self._journaled() and _counted(self.cursor)

    def applied(self) -> AbstractContextManager[Any]:
        """A block whose writes their writer applies to this follower's index itself
        (``DecisionGraph``): a process attached to an on-disk store then asks the owner
        not to send back the triples of the subjects they change
        (``AttachedBackend.applied_here``); nothing changes elsewhere."""
        applied = getattr(self.backend, "applied_here", None)
        return applied() if applied is not None else nullcontext()

    def wrote(self, graph: str, before: Any) -> None:
        """This process's write to ``graph`` succeeded and its change is applied to the
        index (call with ``lock`` held, the index made ``fresh`` before the write, when the
        cursor was ``before``): look at the log, and drop the subjects to read again when
        the only write since ``before`` is this one. Else they stay, and are read again."""
        self._follow()
        if self._journaled() and _one_write(before, self.cursor):
            self.pending.pop(graph, None)


def _counted(cursor: Any) -> bool:
    # A journal's cursor: ``(generation, {epoch})``, the generation counting every write.
    return (
        isinstance(cursor, tuple)
        and len(cursor) == 2
        and isinstance(cursor[0], float)
        and isinstance(cursor[1], frozenset)
        and len(cursor[1]) == 1
    )


def _one_write(before: Any, after: Any) -> bool:
    """True when exactly one write was noted from cursor ``before`` to ``after`` of one
    journal (same epoch, generation one more)."""
    return (
        _counted(before) and _counted(after) and before[1] == after[1] and after[0] == before[0] + 1
    )
