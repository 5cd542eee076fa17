"""An attached process's copy of the owner's recent journal notes.

The indexes of an attached process (memory vectors and keywords, the decision graph) each
ask ``changes_since(cursor)`` before a read: four such questions in an agent turn. They are
answered here, from the notes this process already holds, when the owner's published mark
(``rdfmem.backends.journal_mark``) says nothing was written since; the notes come with the
answers of this process's own writes (``rdfmem.backends.owner.SINCE_PARAM``), or from one
``GET /changes`` when another process wrote. So a process working alone asks no request to
learn what changed, and never answers from notes older than the owner's last write.

The answer to ``GET /subjects`` (``AttachedBackend.known_quads``) adds every subject of a
graph, listed after its notes were taken: a subject not in the list, and named by no note
adopted since, has no triples, so an existence check is answered here. A note naming a
subject puts it in the list (it may exist now: asked again, unless the note brought its
triples); a note changing the graph whole, or anything, drops the list.

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
#: Subjects, and triples, kept at most (all are forgotten past either).
MAX_VALUES = 10_000
MAX_QUADS = 500_000
#: Questions about a graph whose list a whole-graph note dropped before it is asked again.
RELIST = 64

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
        self._quads = 0  # in ``_values``
        #: Every subject of some graphs as of ``head`` (``listed``), plus the subjects a
        #: later note named: a subject of such a graph that is not in it has no triples.
        self._listed: dict[str, set[str]] = {}
        #: Graphs listed once in this epoch (or refused: too large), and the questions
        #: about each since its list was dropped (``to_list``).
        self._lists_asked: set[str] = set()
        self._misses: dict[str, int] = {}

    def since_param(self) -> str:
        """``epoch generation`` to send with a write (``""`` before the first notes: the
        answer then starts them)."""
        with self.lock:
            return f"{self.epoch} {self.head}" if self.epoch else ""

    def adopt(self, found: dict[str, Any], asked: str, listing: str | None = None) -> None:
        """Take the owner's answer to "what changed since ``asked``" (``since_param``).
        Dropped when the notes moved meanwhile (another thread). ``listing``: the graph
        whose subjects the answer lists (``GET /subjects``), as of its generation or later."""
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
                if epoch != self.epoch:
                    self._lists_asked.clear()
                self.epoch, self.base, self.head, self._chunks = epoch, now, now, []
                self._values.clear()
                self._quads = 0
                self._listed.clear()
            elif now > self.head:
                whole = frozenset(str(g) for g in found.get("whole", []))
                subjects = frozenset((str(g), str(s)) for g, s in found.get("subjects", []))
                self._chunks.append((self.head, now, whole, subjects))
                self.head = now
                if len(self._chunks) > KEEP:
                    del self._chunks[: len(self._chunks) - KEEP]
                    self.base = self._chunks[0][0]
                self._forget(whole, subjects)
                self._learn(found.get("values"))
            if listing is not None and now == self.head:
                listed = found.get("listed")
                if isinstance(listed, list):
                    self._listed[listing] = {str(x) for x in listed}

    def adopt_listing(self, graph: str, epoch: str, generation: int, listed: Any) -> None:
        """Take every subject of ``graph`` as listed at ``generation`` (or later) of
        ``epoch``, asked off the request path (``AttachedBackend``): the subjects the
        notes held name after ``generation`` are added (they may exist now), and a note
        changing the graph whole since then drops the list. A list older than the notes
        held reach back to is dropped; one newer than them is used once they reach it
        (``known`` answers only while the notes held are the latest)."""
        if not isinstance(listed, list):
            return
        with self.lock:
            if epoch != self.epoch or generation < self.base:
                return
            found = {str(x) for x in listed}
            for _, upto, whole, subjects in self._chunks:
                if upto > generation:
                    if graph in whole:
                        return
                    found.update(s for g, s in subjects if g == graph)
            self._listed[graph] = found

    def to_list(self, pairs: Sequence[Pair], mark: tuple[str, int] | None) -> str | None:
        """The graph whose subjects are worth asking for (``GET /subjects``) to answer a
        question about ``pairs`` here: one of theirs with no list yet while the notes held
        are the latest, asked once an epoch, or again after ``RELIST`` questions once a
        whole-graph note dropped its list; else None."""
        with self.lock:
            if mark is None or mark != (self.epoch, self.head):
                return None
            for graph, _ in pairs:
                if graph and graph not in self._listed:
                    misses = self._misses.get(graph, 0) + 1
                    self._misses[graph] = misses
                    if graph not in self._lists_asked or misses >= RELIST:
                        self._lists_asked.add(graph)  # asked once, whatever the answer
                        self._misses[graph] = 0
                        return graph
            return None

    def _forget(self, whole: frozenset[str], subjects: frozenset[Pair]) -> None:
        if whole:
            for pair in [p for p in self._values if p[0] in whole]:
                self._quads -= len(self._values.pop(pair))
            for graph in whole:
                if self._listed.pop(graph, None) is not None:
                    self._misses[graph] = 0
        for pair in subjects:
            self._quads -= len(self._values.pop(pair, ()))
            listed = self._listed.get(pair[0])
            if listed is not None:  # it may have triples now: no longer known absent
                listed.add(pair[1])
        if len(self._values) > MAX_VALUES or self._quads > MAX_QUADS:
            self._values.clear()
            self._quads = 0

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
                    self._quads += len(quads) - len(self._values.get(pair, ()))
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
                    listed = self._listed.get(pair[0])
                    if listed is None or pair[1] in listed:
                        return None
                    continue  # not in its graph's list, named by no note since: none
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
