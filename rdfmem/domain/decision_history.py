"""The past of a decision graph, on a store keeping history: ``DecisionGraph.history``,
``get_node(id, as_of=)`` and ``query(name, as_of=..., ...)``.

Every write of ``DecisionGraph`` appends, to its own SPARQL update, the operations of
``RdfStore.versioning_update`` for the resources it changed: the node (its own fields and
the direct edge triples leaving it, ``<from> rm:leadsTo <to>``), each edge resource, and
on a deletion every node and edge that named the deleted node. So a version of a node
holds its fields and its outgoing links as they were.

* ``history(node_id)``: the node's versions, oldest first, ``.value`` the ``Node`` it was
  (None once deleted);
* ``get_node(id, as_of=t)``: the node's version in effect at ``t``;
* ``query(name, as_of=t, ...)``: the named query run over the whole decision graph as it
  was at ``t``, rebuilt in a fresh in-memory store (``rdfmem.domain.past.snapshot``), by
  the same code as a current query (its index, or its SPARQL): the simplest way that is
  right for every query, its cost following the graph's size (one lookup per resource).

>>> import datetime as dt
>>> from rdfmem import RdfStore
>>> from rdfmem.domain.decisions import DecisionGraph, Node
>>> graph = DecisionGraph(RdfStore(history=True))
>>> _ = graph.add_node(Node(id="ship", type="goal", label="Ship v1"))
>>> before = dt.datetime.now(dt.timezone.utc)
>>> _ = graph.update_node("ship", status="completed")
>>> [v.value.status for v in graph.history("ship")]
['active', 'completed']
>>> graph.get_node("ship", as_of=before).status, [n.id for n in graph.query("active_goals")]
('active', [])
>>> [n.id for n in graph.query("active_goals", as_of=before)]
['ship']
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from pyoxigraph import NamedNode, Quad

from rdfmem.core.errors import DecisionGraphError
from rdfmem.domain import decision_queries as q
from rdfmem.domain.decision_models import Node, node_from_row
from rdfmem.domain.past import moment_of, require_history, snapshot
from rdfmem.store.history_reads import Version
from rdfmem.store.rdfstore import RdfStore

__all__ = ["node_as_of", "node_from_quads", "node_versions", "past_store", "versioned"]

#: A node's predicate -> the column of the shipped node queries that carries it.
_COLUMN = {
    p[1:-1]: name
    for p, name in (
        (q.DCT_ID, "id"),
        (q.RDF_TYPE, "type"),
        (q.RDFS_LABEL, "label"),
        (q.RM_STATUS, "status"),
        (q.RM_CONFIDENCE, "confidence"),
        (q.RM_RATIONALE, "rationale"),
        (q.RM_METADATA, "metadata"),
        (q.DCT_CREATED, "created"),
        (q.DCT_MODIFIED, "updated"),
    )
}
_CLASSES = frozenset(q.CLASS_OF_TYPE.values())


def versioned(store: RdfStore, graph: NamedNode, update: str, subjects: Iterable[str]) -> str:
    """``update`` followed by the operations recording a version of each of ``subjects``
    (IRIs), when the store keeps history (call inside the write's ``exclusive``)."""
    if not store.keeps_history:
        return update
    return update + " ;\n" + store.versioning_update(graph, list(dict.fromkeys(subjects)))


def node_from_quads(quads: Iterable[Quad]) -> Node | None:
    """The node a subject's quads make, or None when they make none (no quads: deleted or
    not yet written; or not a node: an edge resource)."""
    row: dict[str, Any] = {}
    for quad in quads:
        name = _COLUMN.get(quad.predicate.value)
        if name == "type" and not (
            isinstance(quad.object, NamedNode) and quad.object.value in _CLASSES
        ):
            continue
        if name is not None:
            row.setdefault(name, quad.object)
            row.setdefault("node", quad.subject)
    if "status" not in row or "id" not in row:
        return None
    try:
        return node_from_row(row)
    except DecisionGraphError:
        return None  # an incomplete version (a writer outside rdfmem): not a node


def node_versions(store: RdfStore, graph: NamedNode, iri: str) -> list[Version]:
    """Every version of the node at ``iri``, oldest first, ``.value`` the ``Node`` it was
    (None once deleted).

    Raises:
        HistoryUnavailable: the store keeps no history.
    """
    require_history(store)
    return [
        replace(v, value=None if v.deleted else node_from_quads(v.state))
        for v in store.history_of(graph, iri)
    ]


def node_as_of(store: RdfStore, graph: NamedNode, iri: str, moment: object) -> Node | None:
    """The node at ``iri`` as it was at ``moment``; None when there was none then.

    Raises:
        HistoryUnavailable: the store keeps no history.
        InvalidValue: ``moment`` is not a datetime.
    """
    t = moment_of(store, moment)
    return node_from_quads(store.as_of_quads(graph, iri, t) or ())


def past_store(store: RdfStore, graph: NamedNode, moment: object) -> RdfStore:
    """A new in-memory store holding the decision graph as it was at ``moment``.

    Raises:
        HistoryUnavailable: the store keeps no history.
        InvalidValue: ``moment`` is not a datetime.
    """
    return snapshot(store, [graph], moment_of(store, moment))
