"""What a bulk ``load`` added, as the indexes that watch some predicates need to see it.

A load (``RdfStore.load``: N-Triples, Turtle, TriG … read by the backend) is a write like
any other, so the read-side indexes are kept from it, not rebuilt on the next read. The
backend shows each quad it adds to a ``Loaded`` as it parses (no second parse): the graphs
written, and, for the predicates some index watches (a memory's vector, its texts), the
objects by graph and subject. After the load, ``IndexHub.load`` hands it to each watcher
(``rdfmem.domain.embeddings.VectorIndex``, ``rdfmem.domain.hybrid.TextIndex``), which adds
the subjects new to its sets straight from these objects and reads the others again.

>>> from pyoxigraph import Literal, NamedNode, Quad
>>> loaded = Loaded(frozenset({"urn:p"}))
>>> loaded.see(Quad(NamedNode("urn:s"), NamedNode("urn:p"), Literal("x"), NamedNode("urn:g")))
>>> loaded.see(Quad(NamedNode("urn:s"), NamedNode("urn:q"), Literal("y"), NamedNode("urn:g")))
>>> sorted(loaded.graphs), loaded.pairs("urn:p")["urn:g"]["urn:s"][0][1].value
(['urn:g'], 'x')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyoxigraph import NamedNode, Quad

__all__ = ["Loaded", "Watcher"]

#: Called after a load with what it added and the ids of the index sets that were fresh
#: right before it (a set fresh before can take the load's rows; another must be read whole).
Watcher = Callable[["Loaded", "set[int]"], None]


class Loaded:
    """The graphs a load wrote, and the watched predicates' objects by graph and subject
    (named subjects in named graphs only: no later query can read a blank node back)."""

    def __init__(self, predicates: frozenset[str]) -> None:
        self.predicates = predicates
        #: Named graphs written.
        self.graphs: set[str] = set()
        #: True when a quad went to the default graph or to a blank-node graph: the write's
        #: scope is then unknown to the hub.
        self.unnamed = False
        self._rows: dict[str, dict[str, list[tuple[str, Any]]]] = {}

    def see(self, quad: Quad) -> None:
        """Note one quad the load adds."""
        graph = quad.graph_name
        if not isinstance(graph, NamedNode):
            self.unnamed = True
            return
        name = graph.value
        self.graphs.add(name)
        predicate = quad.predicate.value
        if predicate in self.predicates and isinstance(quad.subject, NamedNode):
            by_subject = self._rows.setdefault(name, {})
            by_subject.setdefault(quad.subject.value, []).append((predicate, quad.object))

    def pairs(self, *predicates: str) -> dict[str, dict[str, list[tuple[str, Any]]]]:
        """Graph -> subject -> ``(predicate, object)`` loaded for ``predicates``."""
        wanted = set(predicates)
        out: dict[str, dict[str, list[tuple[str, Any]]]] = {}
        for graph, subjects in self._rows.items():
            for subject, pairs in subjects.items():
                found = [(p, o) for p, o in pairs if p in wanted]
                if found:
                    out.setdefault(graph, {})[subject] = found
        return out
