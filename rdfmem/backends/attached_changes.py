"""An attached process's copy of the owner's recent journal notes.

The indexes of an attached process (memory vectors and keywords, the decision graph) each
ask ``changes_since(cursor)`` before a read: four such questions in an agent turn. They are
answered here, from the notes this process already holds, when the owner's published mark
(``rdfmem.backends.journal_mark``) says nothing was written since; the notes come with the
answers of this process's own writes (``rdfmem.backends.owner.SINCE_PARAM``), or from one
``GET /changes`` when another process wrote. So a process working alone asks no request to
learn what changed, and never answers from notes older than the owner's last write.

Notes are kept as chunks, each "what changed after generation a up to generation b"; the
answer for a cursor is the union of the chunks that end after it (a chunk that starts
before the cursor adds subjects read again for nothing, never misses one).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from pyoxigraph import DefaultGraph, NamedNode, Quad, RdfFormat, parse

from rdfmem.backends.sparql.text import Changes

__all__ = ["Replica"]

#: Chunks kept; a cursor older than the oldest is answered by the owner.
KEEP = 256
#: Subjects whose triples are kept at most (all are forgotten past it).
MAX_VALUES = 10_000

Pair = tuple[str, str]


class Replica:
    """The notes of one owner's journal (``epoch``) from ``base`` up to ``head``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.epoch = ""  # none yet
        self.base = -1
        self.head = -1
        self._chunks: list[tuple[int, int, frozenset[str], frozenset[Pair]]] = []
        #: The triples of some subjects as of ``head`` (``values_of`` in the owner's
        #: answers): forgotten when a later note names the subject, its graph whole, or
        #: everything.
        self._values: dict[Pair, list[Quad]] = {}

    def since_param(self) -> str:
        """``epoch generation`` to send with a write (``""`` before the first notes: the
        answer then starts them)."""
        with self.lock:
            return f"{self.epoch} {self.head}" if self.epoch else ""

    def adopt(self, found: dict[str, Any], asked: str) -> None:
        """Take the owner's answer to "what changed since ``asked``" (``since_param``).
        Dropped when the notes moved meanwhile (another thread)."""
        epoch = str(found.get("epoch", ""))
        try:
            now = int(found.get("generation", -1))
        except (TypeError, ValueError):
            return
        with self.lock:
            if asked != (f"{self.epoch} {self.head}" if self.epoch else ""):
                return
            if found.get("everything", True) or epoch != self.epoch:
                # From here on: a cursor before ``now`` (or of another epoch) asks the owner.
                self.epoch, self.base, self.head, self._chunks = epoch, now, now, []
                self._values.clear()
                return
            if now <= self.head:
                return
            whole = frozenset(str(g) for g in found.get("whole", []))
            subjects = frozenset((str(g), str(s)) for g, s in found.get("subjects", []))
            self._chunks.append((self.head, now, whole, subjects))
            self.head = now
            if len(self._chunks) > KEEP:
                del self._chunks[: len(self._chunks) - KEEP]
                self.base = self._chunks[0][0]
            self._forget(whole, subjects)
            self._learn(found.get("values"))

    def _forget(self, whole: frozenset[str], subjects: frozenset[Pair]) -> None:
        if whole:
            for pair in [p for p in self._values if p[0] in whole]:
                del self._values[pair]
        for pair in subjects:
            self._values.pop(pair, None)
        if len(self._values) > MAX_VALUES:
            self._values.clear()

    def _learn(self, values: Any) -> None:
        if not isinstance(values, dict):
            return
        for graph, by_subject in values.items():
            if not isinstance(by_subject, dict):
                continue
            for subject, text in by_subject.items():
                try:
                    quads = list(parse(str(text), format=RdfFormat.N_QUADS))
                except (SyntaxError, ValueError):
                    continue
                pair = (str(graph), str(subject))
                if all(q.subject.value == pair[1] and _name(q) == pair[0] for q in quads):
                    self._values[pair] = quads

    def known(self, pairs: Sequence[Pair], mark: tuple[str, int] | None) -> list[Quad] | None:
        """Every triple of ``pairs`` (graph, subject), when the notes held are the latest
        (``mark``) and know them all; else None (ask the owner)."""
        with self.lock:
            if mark is None or mark != (self.epoch, self.head):
                return None
            found: list[Quad] = []
            for pair in pairs:
                quads = self._values.get(pair)
                if quads is None:
                    return None
                found.extend(quads)
            return found

    def answer(self, epoch: str, since: int, mark: tuple[str, int] | None) -> Changes | None:
        """What changed after ``since`` of ``epoch``, when the notes held cover it and the
        owner's ``mark`` says they are the latest; else None (ask the owner)."""
        with self.lock:
            if mark is None or mark != (self.epoch, self.head) or epoch != self.epoch:
                return None
            if not self.base <= since <= self.head:
                return None
            whole: set[str] = set()
            subjects: set[Pair] = set()
            for _, upto, w, s in self._chunks:
                if upto > since:
                    whole |= w
                    subjects |= s
            head = self.head
        cursor = (float(head), frozenset({epoch}))
        return changes(cursor, whole, subjects)

    def current(self, mark: tuple[str, int] | None) -> tuple[str, int] | None:
        """``(epoch, head)`` when ``mark`` says the notes held are the latest, else None."""
        with self.lock:
            if self.epoch and mark is not None and mark == (self.epoch, self.head):
                return mark
            return None

    def stale(self, mark: tuple[str, int] | None) -> str | None:
        """``epoch generation`` to ask the owner from when ``mark`` is past the notes
        held (None when they are the latest)."""
        with self.lock:
            if mark is not None and mark == (self.epoch, self.head):
                return None
            return f"{self.epoch} {self.head}" if self.epoch else ""


def changes(cursor: tuple[float, frozenset[str]], whole: set[str], subjects: set[Pair]) -> Changes:
    """``Changes`` of some graphs whole and some subjects (graph IRIs, ``""``: default)."""
    graph: Callable[[str], NamedNode | DefaultGraph] = _graph
    whole_terms = frozenset(graph(g) for g in whole)
    pairs = frozenset((graph(g), NamedNode(s)) for g, s in subjects)
    graphs = frozenset(whole_terms | {g for g, _ in pairs})
    return Changes(cursor, graphs, False, pairs, whole_terms)


def _name(quad: Quad) -> str:
    graph = quad.graph_name
    return "" if isinstance(graph, DefaultGraph) else str(getattr(graph, "value", ""))


def _graph(name: str) -> NamedNode | DefaultGraph:
    return DefaultGraph() if name == "" else NamedNode(name)
