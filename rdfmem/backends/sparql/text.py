"""The change log's SPARQL: what every rdfmem write records, in the same request, and how
a reader asks what changed (``SparqlBackend.changes_since``).

Pure functions, no I/O; every term is written with ``sparql_term``. (Pre-bound variables
are written into queries by ``rdfmem.backends.sparql.bind``.)
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyoxigraph import DefaultGraph, Literal, NamedNode

from rdfmem.backends.sparql.lease_steps import instant
from rdfmem.core.errors import BackingError
from rdfmem.core.terms import sparql_term

__all__ = [
    "CHANGE_GRAPH_IRI",
    "Changes",
    "interpret_changes",
    "log_change",
    "prune_changes",
    "read_changes",
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
#: A write to one graph records its subjects when it has at most this many.
MAX_LOGGED_SUBJECTS = 64
CHANGED_UNKNOWN = f"<{_LOG}changedUnknown>"
PRUNED_BEFORE = f"<{_LOG}prunedBefore>"
_LOG_NODE = "<urn:rdfmem:changes>"
_XSD_DATETIME = "<http://www.w3.org/2001/XMLSchema#dateTime>"


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
    >>> op.endswith("<rm:changedGraph> <urn:g> . } } WHERE { BIND(NOW() AS ?now) }")
    True
    """
    node = sparql_term(NamedNode("urn:rdfmem:change:" + change))
    if graphs:
        what = f"{CHANGED_GRAPH} {', '.join(sparql_term(NamedNode(g)) for g in sorted(graphs))}"
        if len(graphs) == 1 and 0 < len(set(subjects)) <= MAX_LOGGED_SUBJECTS:
            listed = sorted({sparql_term(x) for x in subjects})
            what += f" ; {CHANGED_SUBJECT} {', '.join(listed)}"
    else:
        what = f"{CHANGED_UNKNOWN} true"
    return (
        f"INSERT {{ GRAPH {sparql_term(log)} {{ {node} {CHANGED_AT} ?now ; {what} . }} }} "
        "WHERE { BIND(NOW() AS ?now) }"
    )


#: Rows one look at the change log reads at most. The log is input from every client of
#: the server (any SPARQL client may write it): past this many rows the look gives up on
#: details and reports that everything may have changed.
MAX_CHANGE_ROWS = 5_000


def read_changes(log: NamedNode, since: str, limit: int = MAX_CHANGE_ROWS) -> str:
    """The query for the changes recorded at or after ``since`` (an ``xsd:dateTime``
    text), the log's pruning horizon and the server's ``NOW()``: one small request, of at
    most ``limit + 1`` rows (one more than the cap: the reader can tell it was cut)."""
    g = sparql_term(log)
    # The cap sits in a sub-select: a client that pages a long answer (Virtuoso's) appends
    # its own ORDER BY / LIMIT / OFFSET after the outer query.
    variables = "?c ?at ?g ?x ?u ?pruned ?now"
    return (
        f"SELECT {variables} WHERE {{ {{ SELECT {variables} WHERE {{ BIND(NOW() AS ?now) "
        f"OPTIONAL {{ GRAPH {g} {{ ?c {CHANGED_AT} ?at "
        f'FILTER(?at >= "{since}"^^{_XSD_DATETIME}) '
        f"OPTIONAL {{ ?c {CHANGED_GRAPH} ?g }} OPTIONAL {{ ?c {CHANGED_SUBJECT} ?x }} "
        f"OPTIONAL {{ ?c {CHANGED_UNKNOWN} ?u }} }} }} "
        f"OPTIONAL {{ GRAPH {g} {{ {_LOG_NODE} {PRUNED_BEFORE} ?pruned }} }} }} "
        f"LIMIT {limit + 1} }} }}"
    )


def prune_changes(log: NamedNode, before: str, after: str | None = None) -> str:
    """The update forgetting the changes recorded before ``before`` and noting that
    horizon (a reader whose cursor is older must read everything again); with ``after``,
    also the records dated after it (the future: no rdfmem client wrote them) and those
    whose date is not an ``xsd:dateTime``.

    >>> "FILTER(?at <" in prune_changes(NamedNode("urn:log"), "2026-01-01T00:00:00.000Z")
    True
    """
    g = sparql_term(log)
    cutoff = f'"{before}"^^{_XSD_DATETIME}'
    bad = f"?at < {cutoff}"
    if after is not None:
        bad += (
            f' || ?at > "{after}"^^{_XSD_DATETIME} || !isLiteral(?at) '
            f"|| datatype(?at) != {_XSD_DATETIME}"
        )
    return (
        f"DELETE {{ GRAPH {g} {{ ?c ?p ?o }} }} WHERE {{ GRAPH {g} {{ ?c {CHANGED_AT} ?at ; "
        f"?p ?o FILTER({bad}) }} }} ; "
        f"DELETE WHERE {{ GRAPH {g} {{ {_LOG_NODE} {PRUNED_BEFORE} ?x }} }} ; "
        f"INSERT DATA {{ GRAPH {g} {{ {_LOG_NODE} {PRUNED_BEFORE} {cutoff} }} }}"
    )


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


def _instant_of(term: Any) -> float | None:
    """Seconds since the epoch of an ``xsd:dateTime`` literal; None for anything else
    (the log is written by other clients too: a bad date is input, not a failure)."""
    if not isinstance(term, Literal):
        return None
    try:
        return instant(term.value)
    except (BackingError, ValueError, OverflowError):
        return None


def xsd_instant(seconds: float) -> str:
    """``xsd:dateTime`` text (UTC, milliseconds) of seconds since the epoch.

    >>> xsd_instant(1.5)
    '1970-01-01T00:00:01.500Z'
    """
    seconds = max(seconds, 0.0)
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{whole}.{int((seconds % 1) * 1000):03d}Z"


def interpret_changes(
    rows: Sequence[Mapping[str, Any]],
    cursor: tuple[float, frozenset[str]] | None,
    slack_s: float,
    server_default: bool,
) -> Changes:
    """The answer of ``read_changes`` as ``Changes``: records not seen before, the next
    cursor (``slack_s`` before the server's ``NOW()``, with the records since then)."""
    since = 0.0 if cursor is None else cursor[0]
    seen = frozenset() if cursor is None else cursor[1]
    clocks = [_instant_of(r["now"]) for r in rows if "now" in r]
    now = max((c for c in clocks if c is not None), default=time.time())
    everything = cursor is None
    suspect = len(rows) > MAX_CHANGE_ROWS
    if suspect:  # cut at the cap: the details are not all here
        everything = True
        rows = rows[:MAX_CHANGE_ROWS]
    graphs: set[NamedNode | DefaultGraph] = set()
    listed: dict[str, set[NamedNode]] = {}  # change -> its subjects
    graph_of: dict[str, set[NamedNode | DefaultGraph]] = {}  # change -> its graphs
    untrusted: set[str] = set()  # changes whose graphs may have changed in any way
    recent: set[str] = set()
    horizon = since
    for row in rows:
        if "pruned" in row:
            pruned = _instant_of(row["pruned"])
            if pruned is None:  # a horizon nobody can read: assume records were lost
                suspect = everything = True
            else:
                horizon = max(horizon, pruned)
        change, at = row.get("c"), row.get("at")
        if not isinstance(change, NamedNode) or at is None:
            continue
        moment = _instant_of(at)
        if moment is None or moment > now + slack_s:  # malformed, or from the future
            suspect = True
            untrusted.add(change.value)
        if moment is None or moment >= now - slack_s:
            recent.add(change.value)
        if change.value in seen:
            continue
        if "u" in row:
            everything = True
        graph = row.get("g")
        if isinstance(graph, NamedNode):
            default = server_default and graph.value == DEFAULT_GRAPH_LABEL
            named: NamedNode | DefaultGraph = DefaultGraph() if default else graph
            graphs.add(named)
            graph_of.setdefault(change.value, set()).add(named)
        subject = row.get("x")
        listed.setdefault(change.value, set())
        if isinstance(subject, NamedNode):
            listed[change.value].add(subject)
    if cursor is not None and horizon > since:
        everything = True  # records the cursor needed were pruned
    pairs: set[tuple[NamedNode | DefaultGraph, NamedNode]] = set()
    whole: set[NamedNode | DefaultGraph] = set()
    if any(c not in graph_of and c not in seen for c in untrusted):
        everything = True  # an untrusted record naming no graph: any graph may have changed
    for change, touched in graph_of.items():
        if len(touched) == 1 and listed.get(change) and change not in untrusted:
            (only,) = touched
            pairs.update((only, subject) for subject in listed[change])
        else:
            whole.update(touched)
    return Changes(
        (now - slack_s, frozenset(recent)),
        frozenset(graphs),
        everything,
        frozenset(p for p in pairs if p[0] not in whole),
        frozenset(whole),
        suspect,
    )
