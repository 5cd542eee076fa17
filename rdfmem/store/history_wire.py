"""A versioned write on a SPARQL server: the data and its history in one request.

``SparqlBackend.apply`` writes ``INSERT DATA`` then one ``DELETE DATA`` naming every graph.
Virtuoso 7 leaves a typed literal (an entry's ``rdf:JSON`` value) in place when a
``DELETE DATA`` after an ``INSERT DATA`` of the same request names two graphs, and a
versioned write removes from two (the old entry, and the history graph's
``rm:latestVersion``). So a versioned write that fits one request is written here as one
``DELETE DATA`` per graph, in the same request; larger ones (staged) go through ``apply``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from pyoxigraph import DefaultGraph, NamedNode, Quad

from rdfmem.backends.base import Backend
from rdfmem.backends.sparql.client import SparqlBackend
from rdfmem.backends.sparql.text import DEFAULT_GRAPH_LABEL, log_change
from rdfmem.backends.sparql.wire import edit_requests, has_blank, to_wire

__all__ = ["apply_versioned", "change_records", "versioned_request"]

_ONE_REQUEST = 1000  # quads: beyond this the backend may stage the write


def versioned_request(
    remove: Sequence[Quad], add: Sequence[Quad], default_graph: NamedNode | None
) -> list[str]:
    """The operations of one request: the inserts, then one ``DELETE DATA`` per graph.

    >>> a = Quad(NamedNode("urn:s"), NamedNode("urn:p"), NamedNode("urn:o"), NamedNode("urn:g"))
    >>> b = Quad(NamedNode("urn:s"), NamedNode("urn:q"), NamedNode("urn:o"), NamedNode("urn:h"))
    >>> [op.split(" {")[0] for op in versioned_request([a, b], [], None)]
    ['DELETE DATA', 'DELETE DATA']
    """
    kept = set(remove) & set(add)
    remove = [q for q in remove if q not in kept]
    add = [q for q in add if q not in kept]
    ops = edit_requests([], add, default_graph=default_graph) if add else []
    graphs: dict[str, list[Quad]] = {}
    for quad in remove:
        graphs.setdefault(str(quad.graph_name), []).append(quad)
    for quads in graphs.values():
        ops.extend(edit_requests(quads, [], default_graph=default_graph))
    return ops


def change_records(log: NamedNode, quads: Sequence[Quad]) -> list[str]:
    """One change-log record per graph written, each naming that graph's subjects (the
    log lists subjects only for a write to one graph: one record for the data graph and
    one for its history graph keeps the data's followers reading those subjects only)."""
    per_graph: dict[str, list[NamedNode]] = {}
    for q in quads:
        name = q.graph_name
        label = DEFAULT_GRAPH_LABEL if isinstance(name, DefaultGraph) else name.value
        subject = to_wire(q.subject)
        listed = per_graph.setdefault(label, [])
        if isinstance(subject, NamedNode):
            listed.append(subject)
    return [
        log_change(log, uuid.uuid4().hex, [graph], list(dict.fromkeys(subjects)))
        for graph, subjects in sorted(per_graph.items())
    ]


def apply_versioned(backend: Backend, remove: Sequence[Quad], add: Sequence[Quad]) -> None:
    """``backend.apply(remove, add)``; on a SPARQL server, in one request whose deletes
    name one graph each (see the module's docstring)."""
    if (
        not isinstance(backend, SparqlBackend)
        or len(remove) + len(add) > _ONE_REQUEST
        or any(has_blank(q) for q in (*remove, *add))
    ):
        backend.apply(remove, add)
        return
    ops = versioned_request(remove, add, backend.default_graph)
    if not ops:
        return
    if backend.change_log:
        ops.extend(change_records(backend.change_graph, [*remove, *add]))
    backend.leases.write([" ; ".join(ops)])
