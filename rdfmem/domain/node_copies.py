"""The copies of an index's nodes that a reader hands out, made again only when needed.

A query answered from a graph index (``DecisionReader``) gives the caller copies, so that
changing one never changes the node the index keeps. ``active_goals`` on a graph of 10,000
nodes hands out about 2,000 of them each call, and making them is most of the call: the
objects themselves, and the collector's passes over them (a full pass over a large
process every few calls took 100 ms and more).

``NodeCopies`` keeps the copy it last handed out for each node and gives the same object
again when nobody holds it any more and it still equals the index's node: every object of
it that a caller could change (the node, its ``__dict__``, its set of fields, its metadata)
has no reference left but the ones this keeper and the copy itself hold (CPython's
reference counts, measured against a copy nobody else holds, so the count is right on any
version), and its fields are equal to the original's. A copy held anywhere else, changed,
or with metadata holding containers (a caller may hold a list inside it) is never given
again: a fresh copy is made, as before. So no two answers alive at once share an object,
and the index's nodes are never handed out.

>>> from rdfmem.domain.decision_models import Node
>>> keeper, node = NodeCopies(), Node(id="g", type="goal", label="Ship")
>>> first = keeper.copies([("urn:g", node)])
>>> first[0] is node, first[0] == node
(False, True)
>>> again = keeper.copies([("urn:g", node)])  # ``first`` is still held: a new copy
>>> again[0] is first[0]
False
>>> first[0].label = "changed"; del first, again
>>> keeper.copies([("urn:g", node)])[0].label  # changed, then dropped: copied again
'Ship'
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable
from typing import Any

from rdfmem.domain.decision_models import Node, copy_node

__all__ = ["NodeCopies"]

_ATOMS = (str, int, float, bool, type(None))
_counts = getattr(sys, "getrefcount", None)  # None off CPython: always copy


def _refs(kept: dict[str, Node], key: str) -> tuple[int, int, int, int]:
    # The references to a kept copy and to what a caller could change in it. Measured the
    # same way for the baseline below and for every check, so the interpreter's own
    # temporary references cancel out.
    assert _counts is not None
    node = kept[key]
    fields = node.__dict__
    return (
        _counts(node),
        _counts(fields),
        _counts(node.__pydantic_fields_set__),
        _counts(fields["metadata"]),
    )


def _baseline() -> tuple[int, int, int, int] | None:
    if _counts is None:
        return None
    sample = Node(id="x", type="goal", label="x")
    kept = {"x": copy_node(sample)}
    return _refs(kept, "x")


_FREE = _baseline()


class NodeCopies:
    """The copies one reader handed out last, by node IRI (at most ``limit``)."""

    def __init__(self, limit: int = 50_000) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._kept: dict[str, Node] = {}
        #: How many copies were given again (not made).
        self.reused = 0

    def copies(self, nodes: Iterable[tuple[str, Node]]) -> list[Node]:
        """A copy of each ``(iri, node)``'s node, in order, none held by anyone else."""
        with self._lock:
            kept, reused = self._kept, 0
            out: list[Node] = []
            free, append = _FREE, out.append
            for iri, node in nodes:
                if free is not None and iri in kept and _refs(kept, iri) == free:
                    copy = kept[iri]
                    fields = copy.__dict__
                    metadata: dict[str, Any] = fields["metadata"]
                    if (
                        fields == node.__dict__
                        and (not metadata or all(type(v) in _ATOMS for v in metadata.values()))
                        and copy.__pydantic_fields_set__ == _ALL
                        and copy.__pydantic_extra__ is None
                        and copy.__pydantic_private__ is None
                    ):
                        append(copy)
                        reused += 1
                        continue
                copy = copy_node(node)
                if len(kept) >= self.limit and iri not in kept:
                    kept.clear()
                kept[iri] = copy
                append(copy)
            self.reused += reused
            return out


_ALL = frozenset(Node.model_fields)
