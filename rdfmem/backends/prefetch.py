"""What the next lease section of a thread reads along with its claim (``Leases.exclusive``'s
``prefetch``), for callers that reach ``exclusive`` through layers that do not pass it on
(``RdfStore.exclusive``).

A caller that holds a claim on a whole range (the decision graph claims its graph's IRI)
and checks a few subjects inside it before writing (does this node id exist? are the edge's
ends stored?) names them here: the claim's own read brings their quads, the check is answered
from them (``Leases.prefetched``) and costs no request of its own. The quads are those of the
moment the claim was held, and are trusted only until the section writes.

>>> from pyoxigraph import NamedNode
>>> with prefetching([NamedNode("urn:n1")]):
...     taken()
(<NamedNode value=urn:n1>,)
>>> taken()
()
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from pyoxigraph import NamedNode

__all__ = ["contained", "prefetching", "self_contained", "taken"]

_next = threading.local()
_contained = threading.local()


@contextmanager
def prefetching(subjects: Sequence[NamedNode]) -> Iterator[None]:
    """The first lease section this thread enters inside the block also brings the quads
    of ``subjects`` with its claim's read (none when it makes no claim of its own)."""
    before = getattr(_next, "subjects", ())
    _next.subjects = tuple(subjects)
    try:
        yield
    finally:
        _next.subjects = before


def taken() -> tuple[NamedNode, ...]:
    """The subjects named by this thread's ``prefetching`` block, once: the section that
    takes them is the block's first."""
    subjects: tuple[NamedNode, ...] = getattr(_next, "subjects", ())
    _next.subjects = ()
    return subjects


@contextmanager
def self_contained() -> Iterator[None]:
    """A block whose updates read no triple but those of the subjects their lease claim's
    read brought (rdfmem's own domain writes): on a SPARQL server, what such an update
    leaves is computed on those triples, and the client's followers do not read it back
    (``rdfmem.backends.sparql.own_writes``). Never wrap a caller's update text in it."""
    before = getattr(_contained, "on", False)
    _contained.on = True
    try:
        yield
    finally:
        _contained.on = before


def contained() -> bool:
    """True inside this thread's ``self_contained`` block."""
    return bool(getattr(_contained, "on", False))
