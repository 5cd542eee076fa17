"""The change log's SPARQL: what every rdfmem write records, in the same request, and how
a reader asks what changed (``SparqlBackend.changes_since``).

Pure functions, no I/O; every term is written with ``sparql_term``. (Pre-bound variables
are written into queries by ``rdfmem.backends.sparql.bind``.)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from pyoxigraph import DefaultGraph, NamedNode

from rdfmem.core.terms import sparql_term

__all__ = [
    "CHANGE_GRAPH_IRI",
    "STAMP",
    "Changes",
    "bucket_of",
    "buckets_between",
    "change_template",
    "log_change",
    "xsd_instant",
]

# -- the change log: what every rdfmem write records, in the same request -------------------

CHANGE_GRAPH_IRI = "urn:rdfmem:graph:changes"
#: The graph name the change log gives the server's default graph.
DEFAULT_GRAPH_LABEL = "urn:rdfmem:graph:default"
_LOG = "https://w3id.org/rdfmem#"
CHANGED_AT = f"<{_LOG}changedAt>"
CHANGED_GRAPH = f"<{_LOG}changedGraph>"
CHANGED_SUBJECT = f"<{_LOG}changedSubject>"
#: The second a record's date falls in (``bucket_of``): a look at the last seconds finds
#: their records by this value instead of reading the date of every record in the log (a
#: server compares dates only by reading them all: Oxigraph keeps no index by value range).
CHANGED_IN = f"<{_LOG}changedIn>"
#: How an operation that records a change binds ``?now`` (the server's ``NOW()``) and
#: ``?nowIn`` (its second: the first 19 characters of its text, as ``bucket_of``).
STAMP = "BIND(NOW() AS ?now) BIND(SUBSTR(STR(?now), 1, 19) AS ?nowIn)"
#: A write to one graph records its subjects when it has at most this many.
MAX_LOGGED_SUBJECTS = 64
CHANGED_UNKNOWN = f"<{_LOG}changedUnknown>"
PRUNED_BEFORE = f"<{_LOG}prunedBefore>"


def log_change(
    log: NamedNode,
    change: str,
    graphs: Sequence[str] | None,
    subjects: Sequence[NamedNode] = (),
) -> str:
    """The update operation recording one write: its id, the server's ``NOW()``, the
    graphs it touched (``None``: unknown, e.g. a raw update) and, for a write to one graph
    of at most ``MAX_LOGGED_SUBJECTS`` subjects, those subjects.

    >>> op = log_change(NamedNode("urn:log"), "c1", ["urn:g"]).replace(_LOG, "rm:")
    >>> op.startswith("INSERT { GRAPH <urn:log> { <urn:rdfmem:change:c1> <rm:changedAt> ?now")
    True
    >>> op.endswith("<rm:changedGraph> <urn:g> . } } WHERE { " + STAMP + " }")
    True
    """
    return f"INSERT {{ {change_template(log, change, graphs, subjects)} }} WHERE {{ {STAMP} }}"


def change_template(
    log: NamedNode,
    change: str,
    graphs: Sequence[str] | None,
    subjects: Sequence[NamedNode] = (),
) -> str:
    """``log_change``'s template alone (``?now`` and ``?nowIn``: bound by the operation it
    goes in, with ``STAMP``), for a write that records itself in its own operation."""
    node = sparql_term(NamedNode("urn:rdfmem:change:" + change))
    if graphs:
        what = f"{CHANGED_GRAPH} {', '.join(sparql_term(NamedNode(g)) for g in sorted(graphs))}"
        if len(graphs) == 1 and 0 < len(set(subjects)) <= MAX_LOGGED_SUBJECTS:
            listed = sorted({sparql_term(x) for x in subjects})
            what += f" ; {CHANGED_SUBJECT} {', '.join(listed)}"
    else:
        what = f"{CHANGED_UNKNOWN} true"
    dated = f"{CHANGED_AT} ?now ; {CHANGED_IN} ?nowIn"
    return f"GRAPH {sparql_term(log)} {{ {node} {dated} ; {what} . }}"


#: Rows one look at the change log reads at most. The log is input from every client of
#: the server (any SPARQL client may write it): past this many rows the look gives up on
#: details and reports that everything may have changed.
MAX_CHANGE_ROWS = 5_000


@dataclass(frozen=True)
class Changes:
    """What changed on the server since a reader last looked (``changes_since``).

    ``graphs`` are the graphs rdfmem writes touched (``DefaultGraph()`` for the default
    graph); of those, the graphs in ``whole`` changed in ways not listed subject by
    subject, and in the others only the ``(graph, subject)`` pairs of ``subjects`` changed
    (their quads are all a reader needs to fetch again); ``everything`` is true when the
    reader must assume any graph changed (its first look, a raw update, or a cursor older
    than the log's pruning horizon). ``cursor`` is what to pass next time.
    """

    cursor: tuple[float, frozenset[str]]
    graphs: frozenset[NamedNode | DefaultGraph]
    everything: bool
    subjects: frozenset[tuple[NamedNode | DefaultGraph, NamedNode]] = frozenset()
    whole: frozenset[NamedNode | DefaultGraph] = frozenset()
    #: The log held records no rdfmem client writes (malformed, dated in the future, or
    #: more rows than a look reads): they were read as "may have changed", and the log
    #: should be pruned of them now.
    suspect: bool = False


def xsd_instant(seconds: float) -> str:
    """``xsd:dateTime`` text (UTC, milliseconds) of seconds since the epoch.

    >>> xsd_instant(1.5)
    '1970-01-01T00:00:01.500Z'
    """
    seconds = max(seconds, 0.0)
    return f"{bucket_of(seconds)}.{int((seconds % 1) * 1000):03d}Z"


def bucket_of(seconds: float) -> str:
    """The second of an instant (UTC), as a record dated then is filed under it
    (``CHANGED_IN``: the server's ``NOW()`` as text, cut after the seconds).

    >>> bucket_of(1.5), bucket_of(3_599.999)
    ('1970-01-01T00:00:01', '1970-01-01T00:59:59')
    """
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(max(seconds, 0.0)))


def buckets_between(low: float, high: float) -> list[str]:
    """The buckets (``bucket_of``) of every instant in ``[low, high]``, oldest first.

    >>> buckets_between(9.5, 11.0)
    ['1970-01-01T00:00:09', '1970-01-01T00:00:10', '1970-01-01T00:00:11']
    """
    first, last = int(max(low, 0.0)), int(max(high, 0.0))
    return [bucket_of(k) for k in range(first, last + 1)]
