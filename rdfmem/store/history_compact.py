"""Forgetting old history: ``compact_history(before=t)`` and the ``history_retention`` option.

A version may go once a later version was in effect at the cut (it was replaced at or
before it): the state at the cut and after it stays readable, and the current state (the
data graphs, and each resource's latest version) is never touched. The activities left
with no version go with them; the version after a removed one loses its
``prov:wasRevisionOf`` link to it. A compaction is itself recorded, as an activity typed
``rm:Compaction`` with ``rm:compactedBefore`` and ``rm:removedVersions``.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Sequence

from pyoxigraph import Literal, NamedNode, Quad

from rdfmem.backends.base import Backend
from rdfmem.store.history import (
    COMPACTED_BEFORE,
    COMPACTION,
    GENERATED_BY,
    RDF_TYPE,
    REMOVED_VERSIONS,
    REVISION_OF,
    SKIP,
    SPECIALIZES,
    Recorder,
    date_literal,
    history_graph,
    time_of_version,
    time_token,
    token_of_version,
)

__all__ = ["compact", "dropped_versions", "removal_quads", "retained"]

_INTEGER = NamedNode("http://www.w3.org/2001/XMLSchema#integer")


def dropped_versions(
    chain: Sequence[NamedNode],
    *,
    before: _dt.datetime | None = None,
    keep: int | None = None,
) -> list[NamedNode]:
    """Of one resource's versions (oldest first), those to remove: each replaced at or
    before ``before``, and all but the newest ``keep``. The newest is always kept.

    >>> from pyoxigraph import NamedNode as N
    >>> chain = [N(f"urn:rdfmem:version:2026010{d}T000000.000000Z-x-0") for d in (1, 2, 3)]
    >>> [v.value[19:27] for v in dropped_versions(chain, keep=1)]
    ['20260101', '20260102']
    >>> cut = _dt.datetime(2026, 1, 2, tzinfo=_dt.timezone.utc)
    >>> [v.value[19:27] for v in dropped_versions(chain, before=cut)]
    ['20260101']
    """
    drop: set[int] = set()
    if before is not None:
        bound = time_token(before)
        for i in range(len(chain) - 1):
            if token_of_version(chain[i + 1].value) <= bound:
                drop.add(i)
    if keep is not None and len(chain) > keep:
        drop.update(range(len(chain) - max(keep, 1)))
    return [chain[i] for i in sorted(drop)]


def removal_quads(
    backend: Backend, history: NamedNode, versions: Iterable[NamedNode]
) -> tuple[list[Quad], int]:
    """The quads that go with ``versions``: theirs, the successors' links to them and the
    activities they leave empty. Returns them and how many versions they are."""
    gone = set(versions)
    remove: list[Quad] = []
    activities: set[NamedNode] = set()
    for v in gone:
        for quad in backend.match(v, None, None, history):
            remove.append(quad)
            if quad.predicate == GENERATED_BY and isinstance(quad.object, NamedNode):
                activities.add(quad.object)
        for link in (REVISION_OF, SKIP):
            for quad in backend.match(None, link, v, history):
                if quad.subject not in gone:
                    remove.append(quad)
    for activity in activities:
        made = {q.subject for q in backend.match(None, GENERATED_BY, activity, history)}
        if made <= gone:
            remove.extend(backend.match(activity, None, None, history))
    return remove, len(gone)


def chains(backend: Backend, history: NamedNode) -> dict[NamedNode, list[NamedNode]]:
    """Every resource's versions in ``history``, oldest first."""
    found: dict[NamedNode, list[NamedNode]] = {}
    for quad in backend.match(None, SPECIALIZES, None, history):
        if isinstance(quad.subject, NamedNode) and isinstance(quad.object, NamedNode):
            found.setdefault(quad.object, []).append(quad.subject)
    for chain in found.values():
        chain.sort(key=lambda v: token_of_version(v.value))
    return found


def compact(
    backend: Backend,
    recorder: Recorder,
    graphs: Sequence[NamedNode],
    *,
    before: _dt.datetime | None = None,
    keep: int | None = None,
) -> int:
    """Remove the versions of ``graphs`` (data graphs) that ``dropped_versions`` picks, in
    one write per graph that also records the compaction; returns how many went."""
    total = 0
    for graph in graphs:
        history = history_graph(graph)
        with backend.exclusive([]), backend.lock:
            doomed: list[NamedNode] = []
            for chain in chains(backend, history).values():
                doomed.extend(dropped_versions(chain, before=before, keep=keep))
            if not doomed:
                continue
            remove, count = removal_quads(backend, history, doomed)
            stamp = recorder.stamp()
            add = stamp.quads(history)
            a = stamp.activity
            add.append(Quad(a, RDF_TYPE, COMPACTION, history))
            if before is not None:
                add.append(Quad(a, COMPACTED_BEFORE, date_literal(before), history))
            add.append(Quad(a, REMOVED_VERSIONS, Literal(str(count), datatype=_INTEGER), history))
            backend.apply(remove, add)
            total += count
    return total


def retained(
    backend: Backend,
    graph: NamedNode,
    remove: list[Quad],
    add: list[Quad],
    retention: _dt.timedelta | int,
) -> tuple[list[Quad], list[Quad]]:
    """A write's history quads (``Recorder.record``) with the ``history_retention`` of
    the resources it versions applied: the versions it lets go are removed in the same
    write, and its activity says how many (``rm:removedVersions``)."""
    history = history_graph(graph)
    made = {q.object: q.subject for q in add if q.predicate == SPECIALIZES}
    doomed: list[NamedNode] = []
    for subject, version in made.items():
        if not isinstance(version, NamedNode) or not isinstance(subject, NamedNode):
            continue
        chain = [
            q.subject
            for q in backend.match(None, SPECIALIZES, subject, history)
            if isinstance(q.subject, NamedNode)
        ]
        chain.sort(key=lambda v: token_of_version(v.value))
        chain.append(version)
        if isinstance(retention, int):
            doomed.extend(dropped_versions(chain, keep=retention))
        else:
            now = time_of_version(version.value)
            if now is not None:
                doomed.extend(dropped_versions(chain, before=now - retention))
    if not doomed:
        return remove, add
    gone, count = removal_quads(backend, history, doomed)
    dead = set(doomed)
    kept = [q for q in add if q.subject not in dead and q.object not in dead]
    activities = {q.object for q in add if q.predicate == GENERATED_BY}
    for activity in activities:
        if isinstance(activity, NamedNode):
            count_literal = Literal(str(count), datatype=_INTEGER)
            kept.append(Quad(activity, REMOVED_VERSIONS, count_literal, history))
    return list(dict.fromkeys([*remove, *gone])), kept
