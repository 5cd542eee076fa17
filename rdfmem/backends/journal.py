"""What each write of an owned on-disk store changed, kept in memory by the owner.

Every write through the owner's backend (its own, and those its attached processes send)
is noted with its generation and its *scope*: the graph and subjects it changed, when the
writer declared them (``Backend.scope``, a domain write) or they follow from the write
(``apply``: quads), else nothing (a raw update: "anything may have changed"). Attached
processes ask for the notes since the generation they last saw (``GET /changes`` on the
owner's socket, ``rdfmem.backends.owner``), so they keep their read-side indexes (memory
vectors and keywords, the decision graph) as a remote client following the change log does,
and read only what changed. The owner's own index hub reads the notes too, so a write an
attached process sent costs the owner's indexes of that graph, not all of them.

The journal lives in the owner's memory only: its ``epoch`` is new with every owner, and a
reader whose epoch is not the owner's (a new owner took over), or whose generation is older
than the notes kept, is told that everything may have changed.
"""

from __future__ import annotations

import bisect
import os
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pyoxigraph import DefaultGraph, NamedNode, Quad

from rdfmem.backends.journal_mark import MarkWriter

__all__ = ["Declarations", "Journal", "Scope", "declared_scope", "scope_of_quads"]

#: ``(graph IRI, subject IRIs)``: what one write changed; no subjects: the whole graph
#: (``""`` is the default graph). None: unknown.
Scope = tuple[str, tuple[str, ...] | None]

#: At most this many subjects are noted for one write; a larger write notes its graph.
MAX_SUBJECTS = 64


def scope_of_quads(quads: Sequence[Quad]) -> Scope | None:
    """The scope of a write of ``quads``: one graph and its IRI subjects, else None."""
    graphs = {q.graph_name for q in quads}
    if len(graphs) != 1:
        return None
    graph = next(iter(graphs))
    name = "" if isinstance(graph, DefaultGraph) else getattr(graph, "value", None)
    if name is None:
        return None
    subjects = {q.subject.value for q in quads if isinstance(q.subject, NamedNode)}
    if len(subjects) != len({q.subject for q in quads}) or len(subjects) > MAX_SUBJECTS:
        return (name, None)  # blank-node subjects, or many: the whole graph
    return (name, tuple(sorted(subjects)))


def declared_scope(graph: NamedNode, subjects: Sequence[NamedNode]) -> Scope:
    """The scope a writer declares (``Backend.scope``): ``subjects`` of ``graph``, or the
    whole graph when there are none."""
    return (graph.value, tuple(sorted(s.value for s in subjects)) if subjects else None)


class Declarations:
    """The scope each thread declared for the writes it makes (``declared``)."""

    def __init__(self) -> None:
        self._local = threading.local()

    @contextmanager
    def declared(self, scope: Scope | None) -> Iterator[None]:
        """The writes this thread makes inside the block change only ``scope``."""
        before = getattr(self._local, "scope", None)
        self._local.scope = scope
        try:
            yield
        finally:
            self._local.scope = before

    def current(self) -> Scope | None:
        """The scope this thread declared (None: unknown)."""
        found: Scope | None = getattr(self._local, "scope", None)
        return found


class Journal(Declarations):
    """The notes of the last ``keep`` writes, and the scope the current thread declared."""

    def __init__(self, keep: int = 50_000) -> None:
        super().__init__()
        self.epoch = uuid.uuid4().hex
        self.keep = keep
        self._generations: list[int] = []  # ascending: noted under ``lock`` with the write
        self._scopes: list[Scope | None] = []
        self._oldest = 0  # notes cover every generation after this one
        #: Held while a write's generation is counted and noted (``OxigraphBackend.wrote``).
        self.lock = threading.Lock()
        self._mark: MarkWriter | None = None

    def publish(self, folder: str | os.PathLike[str]) -> None:
        """From now on, publish the last generation in the folder's ``rdfmem.changes``
        with every note (``rdfmem.backends.journal_mark``), starting with the current one.

        Raises:
            OSError: the file cannot be made.
        """
        mark = MarkWriter(folder)
        with self.lock:
            self._mark = mark
            mark.write(self.epoch, self._generations[-1] if self._generations else self._oldest)

    def unpublish(self) -> None:
        """Stop publishing (the owner stops serving)."""
        with self.lock:
            mark, self._mark = self._mark, None
        if mark is not None:
            mark.close()

    def note(self, generation: int, scope: Scope | None) -> None:
        """Note that the write that made ``generation`` changed ``scope`` (under ``lock``,
        with the count: notes stay in order)."""
        self._generations.append(generation)
        self._scopes.append(scope)
        if self._mark is not None:
            self._mark.write(self.epoch, generation)
        if len(self._generations) > 2 * self.keep:
            cut = len(self._generations) - self.keep
            self._oldest = self._generations[cut - 1]
            del self._generations[:cut], self._scopes[:cut]

    def _after(self, generation: int, upto: int) -> list[Scope | None]:
        start = bisect.bisect_right(self._generations, generation)
        stop = bisect.bisect_right(self._generations, upto)
        return self._scopes[start:stop]

    def since(self, epoch: str, generation: int) -> dict[str, Any]:
        """What changed after ``generation`` (up to the last write, whose generation is
        returned), as JSON data: ``everything`` when the notes do not reach back that far,
        or ``epoch`` is not this journal's."""
        with self.lock:
            now = self._generations[-1] if self._generations else self._oldest
            if epoch != self.epoch or generation < self._oldest or generation > now:
                return {"epoch": self.epoch, "generation": now, "everything": True}
            scopes = self._after(generation, now)
        if any(s is None for s in scopes):
            return {"epoch": self.epoch, "generation": now, "everything": True}
        whole = sorted({s[0] for s in scopes if s is not None and s[1] is None})
        subjects = sorted(
            {(s[0], x) for s in scopes if s is not None and s[1] is not None for x in s[1]}
        )
        return {
            "epoch": self.epoch,
            "generation": now,
            "everything": False,
            "whole": whole,
            "subjects": [list(pair) for pair in subjects],
        }

    def graphs_between(self, after: int, upto: int) -> set[str] | None:
        """The graphs the writes after ``after`` up to ``upto`` changed; None when one of
        them is unknown (or not noted)."""
        with self.lock:
            if after < self._oldest:
                return None
            scopes = self._after(after, upto)
        if len(scopes) != upto - after or any(s is None for s in scopes):
            return None
        return {s[0] for s in scopes if s is not None}

    def subjects_between(
        self, after: int, upto: int, graphs: set[str]
    ) -> set[tuple[str, str]] | None:
        """The ``(graph, subject)`` pairs of ``graphs`` the writes after ``after`` up to
        ``upto`` changed; None when one of them changed a graph of ``graphs`` whole, or
        is unknown (or not noted)."""
        with self.lock:
            if after < self._oldest:
                return None
            scopes = self._after(after, upto)
        if len(scopes) != upto - after:
            return None
        found: set[tuple[str, str]] = set()
        for scope in scopes:
            if scope is None:
                return None
            graph, subjects = scope
            if graph in graphs:
                if subjects is None:
                    return None
                found.update((graph, s) for s in subjects)
        return found
