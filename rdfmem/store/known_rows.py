"""Rows of a query about a few subjects, answered from their triples when the backend
knows them.

A process attached to an on-disk store learns, with the owner's journal answers, the
triples of the subjects written lately (``AttachedBackend.known_quads``: a node it added, a
key/value entry it wrote), as long as no later write named them. A follower that must read
those subjects again (the decision graph, memory vectors and texts) then evaluates its
query on those triples here, in a small in-memory store, instead of sending it: the same
rows, since the query reads nothing but the triples of those subjects in that graph.

On a SPARQL server, the triples a lease claim's read brought with it (``Leases.prefetched``,
asked for with ``prefetching``: ``rdfmem.backends.prefetch``) are known the same way, while
the claim's section has written nothing: the decision graph's existence checks are answered
from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pyoxigraph import NamedNode, Quad, QuerySolutions, Store

from rdfmem.backends.prefetch import prefetching
from rdfmem.core.results import SelectResult

if TYPE_CHECKING:
    from rdfmem.store.rdfstore import RdfStore

__all__ = ["prefetching", "subject_rows"]


def subject_rows(
    store: RdfStore, graph: NamedNode, subjects: Sequence[NamedNode], sparql: str
) -> list[dict[str, Any]]:
    """The rows of ``sparql``, a SELECT that reads only the triples of ``subjects`` in
    ``graph``: from the triples the backend knows, when it knows them all; else from the
    store (one query)."""
    known = getattr(store.backend, "known_quads", None)
    quads = _prefetched(store.backend, graph, subjects) if known is None else known(graph, subjects)
    if quads is None:
        result = store.query(sparql)
        assert isinstance(result, SelectResult)
        return [dict(row) for row in result]
    local = Store()
    local.extend(quads)
    solutions = local.query(sparql)
    assert isinstance(solutions, QuerySolutions)
    names = [v.value for v in solutions.variables]
    return [
        {n: t for n, t in zip(names, solution, strict=True) if t is not None}
        for solution in solutions
    ]


def _prefetched(backend: Any, graph: NamedNode, subjects: Sequence[NamedNode]) -> list[Quad] | None:
    """The quads of ``subjects`` in ``graph`` that this thread's lease claim read before
    its section wrote anything (a SPARQL server's ``Leases.prefetched``); None unless it
    read them all, or for the graph that stands for rdfmem's default graph there."""
    look = getattr(getattr(backend, "leases", None), "prefetched", None)
    if look is None or graph == getattr(backend, "default_graph", None):
        return None
    quads: list[Quad] = []
    for subject in subjects:
        rows = look(subject)
        if rows is None:
            return None
        quads.extend(Quad(subject, r["pp"], r["po"], graph) for r in rows if r["pg"] == graph)
    return quads
