"""History of triple-level writes (``assert_``, ``assert_many``, ``retract``,
``clear_graph``) on a store keeping history (issue 24: every write through rdfmem).

A triple-level write changes some resources of some graphs; each resource it changes gets
a version of what it holds after the write (its quads in that graph), as a key/value write
does (``Recorder.record``), in the same ``backend.apply``. What is not versioned: writes to
the default graph (it has no IRI to name a history graph after), resources named by a
blank node, and writes into a history graph itself (``urn:rdfmem:history:…``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pyoxigraph import NamedNode, Quad

from rdfmem.backends.base import Backend
from rdfmem.store.history import HISTORY_PREFIX, Recorder, latest_versions
from rdfmem.store.history_compact import retained

__all__ = ["triple_history"]

Place = tuple[NamedNode, NamedNode]  # (graph, subject)


def _places(quads: Sequence[Quad]) -> dict[Place, list[Quad]]:
    out: dict[Place, list[Quad]] = {}
    for q in quads:
        g, s = q.graph_name, q.subject
        if not isinstance(g, NamedNode) or not isinstance(s, NamedNode):
            continue
        if not g.value.startswith(HISTORY_PREFIX):
            out.setdefault((g, s), []).append(q)
    return out


def triple_history(
    backend: Backend,
    recorder: Recorder,
    remove: Sequence[Quad],
    add: Sequence[Quad],
    renames: Callable[[NamedNode], Mapping[NamedNode, NamedNode]],
) -> tuple[list[Quad], list[Quad]]:
    """The history quads to remove and add with the write ``remove`` / ``add``: one
    version of each resource whose quads the write changes (a tombstone when it leaves
    none), one activity per graph written. Call inside the write's section.

    >>> from rdfmem.backends.oxigraph import OxigraphBackend
    >>> g, s, p = NamedNode("urn:g"), NamedNode("urn:s"), NamedNode("urn:p")
    >>> gone, added = triple_history(
    ...     OxigraphBackend(), Recorder(), [], [Quad(s, p, NamedNode("urn:o"), g)], lambda g: {}
    ... )
    >>> gone, sorted({q.predicate.value.split("#")[-1] for q in added})[:3]
    ([], ['endedAtTime', 'generatedAtTime', 'hour'])
    """
    removed, added = _places(remove), _places(add)
    by_graph: dict[NamedNode, list[tuple[NamedNode, list[Quad]]]] = {}
    for graph, subject in dict.fromkeys([*removed, *added]):
        before = set(backend.match(subject, None, None, graph))
        after = (before - set(removed.get((graph, subject), ()))) | set(
            added.get((graph, subject), ())
        )
        if after != before:
            state = sorted(after, key=str)
            by_graph.setdefault(graph, []).append((subject, state))
    gone: list[Quad] = []
    made: list[Quad] = []
    for graph, changes in by_graph.items():
        heads = latest_versions(backend, graph, [s for s, _ in changes])
        r, a = recorder.record(graph, changes, heads, rename=renames(graph))
        if recorder.retention is not None:
            r, a = retained(backend, graph, r, a, recorder.retention)
        gone += r
        made += a
    return gone, made
