"""A versioned write on a SPARQL server: the data and its history in one request.

The write removes from two graphs (the old entry, and the history graph's
``rm:latestVersion``) and, with the change log, records **one change record per graph**:
a record naming one graph lists its subjects, so the data's followers read those subjects
only. How it travels depends on the server:

* a server that applies a request whole (Oxigraph server: ``whole_requests``) gets the
  inserts, then one ``DELETE DATA`` per graph, then the records, as one request of several
  operations (plain data: the fastest for it to apply);
* any other (Virtuoso keeps the operations of a request before one that failed, e.g. on a
  deadlock between writers) gets the write as **one** operation
  (``oneop.write_operation``), its records in the same ``INSERT`` template: the data,
  its version and its records land together or not at all. Virtuoso does not remove a
  literal of a datatype it does not know (an entry's ``rdf:JSON`` value) that an operation
  over several graphs names to delete, so that operation deletes such a literal by a
  pattern binding the stored one (``oneop.by_text``).

A write with blank nodes, or too large for one operation, goes through ``apply`` (staged
on Virtuoso, one guarded operation, one record naming both graphs).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from pyoxigraph import DefaultGraph, NamedNode, Quad

from rdfmem.backends.base import Backend
from rdfmem.backends.sparql.client import SparqlBackend
from rdfmem.backends.sparql.oneop import write_operation
from rdfmem.backends.sparql.text import DEFAULT_GRAPH_LABEL, change_template, log_change
from rdfmem.backends.sparql.wire import edit_requests, has_blank, to_wire

__all__ = ["apply_versioned", "change_records", "versioned_request", "versioned_write"]

_ONE_REQUEST = 1000  # quads: beyond this the backend may stage the write
#: Quads of a versioned write sent as one operation to a server that does not apply a
#: request whole (Virtuoso refuses an update of ~1,500 quads; ``apply`` stages above 500).
_ONE_OPERATION = 500


def versioned_request(
    remove: Sequence[Quad], add: Sequence[Quad], default_graph: NamedNode | None
) -> list[str]:
    """The operations of one request: the inserts, then one ``DELETE DATA`` per graph.

    >>> a = Quad(NamedNode("urn:s"), NamedNode("urn:p"), NamedNode("urn:o"), NamedNode("urn:g"))
    >>> b = Quad(NamedNode("urn:s"), NamedNode("urn:q"), NamedNode("urn:o"), NamedNode("urn:h"))
    >>> [op.split(" {")[0] for op in versioned_request([a, b], [], None)]
    ['DELETE DATA', 'DELETE DATA']
    """
    remove, add = _net(remove, add)
    ops = edit_requests([], add, default_graph=default_graph) if add else []
    graphs: dict[str, list[Quad]] = {}
    for quad in remove:
        graphs.setdefault(str(quad.graph_name), []).append(quad)
    for quads in graphs.values():
        ops.extend(edit_requests(quads, [], default_graph=default_graph))
    return ops


def _net(remove: Sequence[Quad], add: Sequence[Quad]) -> tuple[list[Quad], list[Quad]]:
    # What a write changes: a quad both removed and added stays as it is.
    kept = set(remove) & set(add)
    return [q for q in remove if q not in kept], [q for q in add if q not in kept]


def change_records(
    log: NamedNode, quads: Sequence[Quad], name: Callable[[], str] | None = None
) -> list[str]:
    """One change-log record per graph written, each naming that graph's subjects (the
    log lists subjects only for a write to one graph: one record for the data graph and
    one for its history graph keeps the data's followers reading those subjects only);
    ``name`` makes each record's name (``SparqlBackend.record_name``: known as this
    client's own)."""
    fresh = name or (lambda: uuid.uuid4().hex)
    return [log_change(log, fresh(), [g], subjects) for g, subjects in _per_graph(quads)]


def _per_graph(quads: Sequence[Quad]) -> list[tuple[str, list[NamedNode]]]:
    # Each graph written (its label in the log) with the named subjects written in it.
    per_graph: dict[str, list[NamedNode]] = {}
    for q in quads:
        graph = q.graph_name
        label = DEFAULT_GRAPH_LABEL if isinstance(graph, DefaultGraph) else graph.value
        subject = to_wire(q.subject)
        listed = per_graph.setdefault(label, [])
        if isinstance(subject, NamedNode):
            listed.append(subject)
    return [(g, list(dict.fromkeys(subjects))) for g, subjects in sorted(per_graph.items())]


def versioned_write(
    remove: Sequence[Quad],
    add: Sequence[Quad],
    default_graph: NamedNode | None,
    *,
    whole: bool,
    log: NamedNode | None = None,
    name: Callable[[], str] | None = None,
) -> str:
    """The request of a versioned write without blank nodes, with its change records in
    ``log`` (None: no change log), one per graph, named by ``name``; ``""`` when it
    changes nothing. ``whole``: the server applies a request whole, so several operations
    may go; else one operation (see the module's docstring).

    >>> g, h = NamedNode("urn:g"), NamedNode("urn:h")
    >>> a = Quad(NamedNode("urn:s"), NamedNode("urn:p"), NamedNode("urn:o"), g)
    >>> b = Quad(NamedNode("urn:s"), NamedNode("urn:q"), NamedNode("urn:o"), h)
    >>> versioned_write([a], [b], None, whole=True).count(" ; ")
    1
    >>> print(versioned_write([a], [b], None, whole=False))  # doctest: +NORMALIZE_WHITESPACE
    DELETE { GRAPH <urn:g> { <urn:s> <urn:p> <urn:o> . } }
    INSERT { GRAPH <urn:h> { <urn:s> <urn:q> <urn:o> . } } WHERE {}
    >>> one = versioned_write([a], [b], None, whole=False, log=NamedNode("urn:log"))
    >>> one.count("WHERE"), one.count("GRAPH <urn:log>")  # one operation, two records
    (1, 2)
    """
    if whole:
        ops = versioned_request(remove, add, default_graph)
        if ops and log is not None:
            ops.extend(change_records(log, [*remove, *add], name))
        return " ; ".join(ops)
    plain, added = _net(remove, add)
    if not plain and not added:
        return ""
    change = ""
    if log is not None:
        fresh = name or (lambda: uuid.uuid4().hex)
        per_graph = _per_graph([*remove, *add])
        change = " ".join(change_template(log, fresh(), [g], subs) for g, subs in per_graph)
    return write_operation(plain, added, default_graph=default_graph, change=change)


def apply_versioned(backend: Backend, remove: Sequence[Quad], add: Sequence[Quad]) -> None:
    """``backend.apply(remove, add)``; on a SPARQL server, in one request whose change
    records name one graph each (``versioned_write``)."""
    if (
        not isinstance(backend, SparqlBackend)
        or len(remove) + len(add) > _ONE_REQUEST
        or any(has_blank(q) for q in (*remove, *add))
    ):
        backend.apply(remove, add)
        return
    whole = backend.whole_requests()
    limit = min(_ONE_OPERATION, backend.max_quads_per_request or _ONE_OPERATION)
    if not whole and len(remove) + len(add) > limit:
        backend.apply(remove, add)  # staged, then one guarded operation
        return
    log = backend.change_graph if backend.change_log else None
    request = versioned_write(
        remove, add, backend.default_graph, whole=whole, log=log, name=backend.record_name
    )
    if request:
        backend.leases.write([request])
