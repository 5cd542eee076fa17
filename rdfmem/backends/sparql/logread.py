"""Reading the change log as input from strangers (issue 22, item 6): the query a look
sends, the update that prunes what no rdfmem client writes, and what a look's rows mean.

Any SPARQL client of a shared server may write the change log. So a look reads one row per
*triple* of the records in its window (never graphs x subjects), at most ``MAX_CHANGE_ROWS``
of them, and leaves out the large records this client has already read (``skip``: the
parsed position it keeps). A record is *trusted* when it is shaped as ``log_change`` writes
it: an ``urn:rdfmem:change:`` IRI, one ``xsd:dateTime`` no later than the server's clock
(plus the slack), and either ``changedUnknown true`` or IRIs of graphs (with IRIs of at most
``MAX_LOGGED_SUBJECTS`` subjects when it names one graph). Any other record is read as "the
graphs it names (IRIs) changed in any way", "every graph may have changed" when it says
``changedUnknown`` in any spelling, and nothing when it names neither; nothing in the log
makes a reader raise. A record that cannot be an rdfmem client's (a blank node or foreign
IRI for its name, no readable date in the window) is pruned, and so are the unreadable
dates of the others; a record that could be an rdfmem record tampered with is left until it
ages out, since another reader may not have seen it yet.

No request over the log is heavy for the server, which goes on with a request its client
gave up on (Oxigraph server does): a look chooses each record once before reading its
triples (a record with many dates no longer multiplies its rows), and each operation of a
prune deletes at most ``PRUNE_ROWS`` triples; what one prune leaves, the next look that
meets it prunes again.

Pure functions, no I/O; every term is written with ``sparql_term``.
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyoxigraph import DefaultGraph, Literal, NamedNode

from rdfmem.backends.sparql.lease_steps import instant
from rdfmem.backends.sparql.text import (
    CHANGED_AT,
    CHANGED_GRAPH,
    CHANGED_IN,
    CHANGED_SUBJECT,
    CHANGED_UNKNOWN,
    DEFAULT_GRAPH_LABEL,
    MAX_CHANGE_ROWS,
    MAX_LOGGED_SUBJECTS,
    PRUNED_BEFORE,
    Changes,
    bucket_of,
)
from rdfmem.core.errors import BackingError
from rdfmem.core.terms import sparql_term

__all__ = [
    "MAX_FRESH_SKIPPED",
    "MAX_SKIPPED",
    "PRUNE_ROWS",
    "Look",
    "Record",
    "bounded_query",
    "clock_of",
    "counted",
    "exact_us",
    "look_query",
    "prune_query",
    "read_look",
]

_XSD_DATETIME = "<http://www.w3.org/2001/XMLSchema#dateTime>"
_XSD_BOOLEAN = "http://www.w3.org/2001/XMLSchema#boolean"
_LOG_NODE = "urn:rdfmem:changes"
_CHANGE_PREFIX = "urn:rdfmem:change:"
#: At most this many records already read are left out of a look by name, the largest
#: first (the query stays small).
MAX_SKIPPED = 256
#: A bounded look (``bounded_query``) leaves out by name at most this many records it has
#: read already since ``fresh`` (a few seconds of writes).
MAX_FRESH_SKIPPED = 1024
#: At most this many triples are deleted by one operation of a prune (``prune_query``).
PRUNE_ROWS = 10_000


def _instant_of(term: Any) -> float | None:
    """Seconds since the epoch of an ``xsd:dateTime`` literal; None for anything else."""
    if not isinstance(term, Literal) or term.datatype.value != _XSD_DATETIME[1:-1]:
        return None
    try:
        return instant(term.value)
    except (BackingError, ValueError, OverflowError):
        return None


#: The ``xsd:dateTime`` forms whose order a client tells exactly as the server does: UTC
#: (``NOW()`` on Oxigraph server, ``xsd_instant``), any number of decimals.
_UTC = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:Z|[+-]00:00)\Z")


def exact_us(text: str) -> int | None:
    """Microseconds since the epoch of a UTC ``xsd:dateTime`` text, decimals beyond the
    sixth dropped (so that its order against any whole millisecond is the server's); None
    for any other form (a time zone, no time zone, an invalid date).

    >>> exact_us("1970-01-01T00:00:01.5Z"), exact_us("1970-01-01T00:00:01.5000009+00:00")
    (1500000, 1500000)
    >>> exact_us("1970-01-01T00:00:01.5+01:00") is None, exact_us("1970-02-30T00:00:00Z")
    (True, None)
    """
    match = _UTC.match(text)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    if not (1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1]):
        return None
    if hour > 23 or minute > 59 or second > 59 or year < 1970:
        return None
    whole = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    return whole * 1_000_000 + int((match.group(7) or "")[:6].ljust(6, "0"))


#: The form of ``NOW()`` whose text a client can file as the server files it (``bucket_of``):
#: UTC, written with a ``Z`` (Oxigraph server's).
_FILED_FORM = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z\Z")


def clock_of(rows: Iterable[Mapping[str, Any]]) -> tuple[float, bool] | None:
    """The server's ``NOW()`` of a look's answer (its ``?now`` row), and whether its text
    has the form a client files buckets by (``bucket_of``); None when it has no readable
    one.

    >>> from pyoxigraph import Literal, NamedNode
    >>> xsd = NamedNode("http://www.w3.org/2001/XMLSchema#dateTime")
    >>> clock_of([{"now": Literal("1970-01-01T00:00:01.25Z", datatype=xsd)}])
    (1.25, True)
    >>> clock_of([{"now": Literal("1970-01-01T00:00:01.25", datatype=xsd)}])[1]
    False
    """
    for row in rows:
        term = row.get("now")
        moment = _instant_of(term)
        if moment is not None and isinstance(term, Literal):
            return moment, bool(_FILED_FORM.match(term.value))
    return None


def _exact_dates(dates: Sequence[Any]) -> tuple[int, ...] | None:
    """The dates of a record in microseconds (``exact_us``); None when one of them is not
    an ``xsd:dateTime`` in UTC."""
    found = []
    for term in dates:
        if not isinstance(term, Literal) or term.datatype.value != _XSD_DATETIME[1:-1]:
            return None
        moment = exact_us(term.value)
        if moment is None:
            return None
        found.append(moment)
    return tuple(found) or None


def _iri(angled: str) -> str:
    return angled[1:-1]


def look_query(
    log: NamedNode,
    since: str,
    skip: Sequence[str] = (),
    limit: int = MAX_CHANGE_ROWS,
    *,
    count_from: str | None = None,
    max_skipped: int = MAX_SKIPPED,
    within: Sequence[str] = (),
    count_within: tuple[Sequence[str], Sequence[str]] | None = None,
) -> str:
    """The query for every triple of the records dated at or after ``since`` (an
    ``xsd:dateTime`` text), except those named in ``skip``; the log's horizon; the server's
    ``NOW()``. At most ``limit + 1`` rows: a reader can tell the answer was cut. With
    ``count_from``, one more row (``?n``): the number of records with a date in
    ``[count_from, since)`` (``bounded_query``). With ``within``, only the records filed
    under those buckets (``CHANGED_IN``) are read: the server finds them by value, without
    reading the date of every record. With ``count_within`` (buckets wholly inside the
    span, and the span's first and last), the records filed in the first are counted
    whole, and those of the others by their dates.

    >>> q = look_query(NamedNode("urn:log"), "2026-01-01T00:00:00.000Z", ["urn:rdfmem:change:a"])
    >>> "NOT IN (<urn:rdfmem:change:a>)" in q and "LIMIT 5001" in q
    True
    """
    g = sparql_term(log)
    names = list(skip)[:max_skipped]
    left_out = (
        f" && ?c NOT IN ({', '.join(sparql_term(NamedNode(n)) for n in names)})" if names else ""
    )
    # The cap sits in a sub-select: a client that pages a long answer (Virtuoso's) appends
    # its own ORDER BY / LIMIT / OFFSET after the outer query.
    # The server's clock is a row of its own (not a column of every row).
    # Each record is chosen once (a sub-select of distinct names, itself capped) before its
    # triples are read: joining dates to triples made a record with D dates and T triples
    # cost the server D x T rows (1,000 dates, 4,000 triples: 4 million, 1.8 s a look).
    chosen = (
        f"{{ SELECT DISTINCT ?c WHERE {{ {_filed(within)}GRAPH {g} {{ {_dated(within)} "
        f'FILTER(?at >= "{since}"^^{_XSD_DATETIME}{left_out}) }} }} LIMIT {limit + 1} }}'
    )
    counted = ""
    if count_from is not None:
        span = f'FILTER(?at >= "{count_from}"^^{_XSD_DATETIME} && ?at < "{since}"^^{_XSD_DATETIME})'
        if count_within is None:
            counted = (
                f"{{ SELECT (COUNT(DISTINCT ?c) AS ?n) WHERE {{ GRAPH {g} {{ "
                f"?c {CHANGED_AT} ?at {span} }} }} }} UNION "
            )
        else:  # (a record filed twice is counted twice: the counts differ, a full look)
            inside, edges = count_within
            whole = (
                f"{{ {_filed(inside)}GRAPH {g} {{ ?c {CHANGED_IN} ?in }} }} UNION "
                if inside
                else ""
            )
            counted = (
                f"{{ SELECT (COUNT(?c) AS ?n) WHERE {{ {whole}{{ {_filed(edges)}"
                f"GRAPH {g} {{ {_dated(edges)} {span} }} }} }} }} UNION "
            )
    return (
        f"SELECT ?c ?p ?o ?now{' ?n' if counted else ''} WHERE {{ {{ BIND(NOW() AS ?now) }} "
        f"UNION {counted}"
        f"{{ SELECT ?c ?p ?o WHERE {{ {{ {chosen} GRAPH {g} {{ ?c ?p ?o }} }} "
        f"UNION {{ GRAPH {g} {{ <{_LOG_NODE}> {PRUNED_BEFORE} ?o BIND(<{_LOG_NODE}> AS ?c) "
        f"BIND({PRUNED_BEFORE} AS ?p) }} }} }} LIMIT {limit + 1} }} }}"
    )


def _filed(buckets: Sequence[str]) -> str:
    """The buckets to read, as inline data (none: every record)."""
    if not buckets:
        return ""
    return f"VALUES ?in {{ {' '.join(sparql_term(Literal(b)) for b in buckets)} }} "


def _dated(buckets: Sequence[str]) -> str:
    """A record's date (``?at``), of the records filed under ``?in`` when buckets are given."""
    return f"?c {CHANGED_IN} ?in . ?c {CHANGED_AT} ?at" if buckets else f"?c {CHANGED_AT} ?at"


def bounded_query(
    log: NamedNode,
    since: str,
    fresh: str,
    skip: Sequence[str] = (),
    buckets: tuple[Sequence[str], Sequence[str], Sequence[str]] | None = None,
) -> str:
    """A look bounded by what is new: every triple of the records dated at or after
    ``fresh``, except those named in ``skip``, as ``look_query`` reads them, and the number
    of records with a date in ``[since, fresh)`` (the row with ``?n``), in one request.

    A reader that has read as many records of ``[since, fresh)`` as the server counts
    there has read them all (no record dated there committed after its last look), and
    needs nothing more; otherwise it looks as ``look_query`` does. With ``buckets`` (those
    of ``[fresh, now]``; those wholly inside ``[since, fresh)``; the first and the last of
    that span), the server reads and counts only the records filed there (``CHANGED_IN``).

    >>> q = bounded_query(NamedNode("urn:log"), "2026-01-01T00:00:00.000Z",
    ...                   "2026-01-01T00:01:00.000Z")
    >>> "COUNT(DISTINCT ?c)" in q and '?at < "2026-01-01T00:01:00.000Z"' in q
    True
    """
    within: Sequence[str] = ()
    count_within: tuple[Sequence[str], Sequence[str]] | None = None
    if buckets is not None:
        within, count_within = buckets[0], (buckets[1], buckets[2])
    return look_query(
        log,
        fresh,
        skip,
        count_from=since,
        max_skipped=MAX_FRESH_SKIPPED,
        within=within,
        count_within=count_within,
    )


def prune_query(log: NamedNode, before: str, after: str, limit: int = PRUNE_ROWS) -> str:
    """The update forgetting what no rdfmem client wrote or needs: records named by a blank
    node or a foreign IRI, records with no readable date between ``before`` and ``after``
    (too old, from the future, or not a date), and the unreadable dates of the others; and
    noting ``before`` as the log's horizon (a reader whose cursor is older reads everything).

    Each operation deletes at most ``limit`` triples, so that no prune is heavy for the
    server (which may go on with a request its client gave up on): a bad record loses its
    other triples first, then its dates once nothing else is left, so that a record pruned
    over several requests is never left as triples no prune can find. What one prune leaves,
    the next look meets and prunes again.

    >>> day = "2026-01-01T00:00:00Z"
    >>> q = prune_query(NamedNode("urn:log"), day, day)
    >>> "COALESCE" in q and f"LIMIT {PRUNE_ROWS}" in q
    True
    """
    g = sparql_term(log)
    low, high = f'"{before}"^^{_XSD_DATETIME}', f'"{after}"^^{_XSD_DATETIME}'

    def readable(var: str) -> str:  # a date in [low, high]; false for anything else
        return f"COALESCE({var} >= {low} && {var} <= {high}, false)"

    foreign = f'isBlank(?c) || !STRSTARTS(STR(?c), "{_CHANGE_PREFIX}")'
    unreadable = f"GROUP BY ?c HAVING(SUM(IF({readable('?at')}, 1, 0)) = 0)"
    bad = (  # the records to forget: a foreign name, or no readable date
        f"{{ SELECT DISTINCT ?c WHERE {{ GRAPH {g} {{ ?c {CHANGED_AT} ?at "
        f"FILTER({foreign}) }} }} }} UNION "
        f"{{ SELECT ?c WHERE {{ GRAPH {g} {{ ?c {CHANGED_AT} ?at }} }} {unreadable} }}"
    )
    # Their triples other than dates, ``limit`` at a time.
    others = (
        f"DELETE {{ GRAPH {g} {{ ?c ?p ?o }} }} WHERE {{ {{ SELECT ?c ?p ?o WHERE {{ {bad} "
        f"GRAPH {g} {{ ?c ?p ?o FILTER(?p != {CHANGED_AT}) }} }} LIMIT {limit} }} }} ; "
    )
    # Then the dates of those left with nothing else (counted, not negated: Virtuoso).
    bare = (
        f"{{ SELECT ?c WHERE {{ {{ SELECT DISTINCT ?c WHERE {{ {bad} }} }} "
        f"GRAPH {g} {{ ?c ?p ?o }} }} "
        f"GROUP BY ?c HAVING(SUM(IF(?p = {CHANGED_AT}, 0, 1)) = 0) }}"
    )
    dates = (
        f"DELETE {{ GRAPH {g} {{ ?c {CHANGED_AT} ?at }} }} WHERE {{ {{ SELECT ?c ?at WHERE {{ "
        f"{bare} GRAPH {g} {{ ?c {CHANGED_AT} ?at }} }} LIMIT {limit} }} }} ; "
    )
    dated = (  # the records that have a readable date
        f"{{ SELECT ?c WHERE {{ GRAPH {g} {{ ?c {CHANGED_AT} ?at }} }} "
        f"GROUP BY ?c HAVING(SUM(IF({readable('?at')}, 1, 0)) > 0) }}"
    )
    stale = (  # their unreadable dates (those of the others go last, above)
        f"DELETE {{ GRAPH {g} {{ ?c {CHANGED_AT} ?at }} }} WHERE {{ {{ SELECT ?c ?at WHERE {{ "
        f"{dated} GRAPH {g} {{ ?c {CHANGED_AT} ?at FILTER(!{readable('?at')}) }} }} "
        f"LIMIT {limit} }} }} ; "
    )
    return (
        others
        + dates
        + stale
        + f"DELETE WHERE {{ GRAPH {g} {{ <{_LOG_NODE}> {PRUNED_BEFORE} ?x }} }} ; "
        f"INSERT DATA {{ GRAPH {g} {{ <{_LOG_NODE}> {PRUNED_BEFORE} {low} }} }}"
    )


@dataclass
class Record:
    """The triples of one record, as a look read them."""

    dates: list[Any] = field(default_factory=list)
    graphs: list[Any] = field(default_factory=list)
    subjects: list[Any] = field(default_factory=list)
    unknown: list[Any] = field(default_factory=list)
    filed: list[Any] = field(default_factory=list)
    rows: int = 0
    chars: int = 0

    def trusted(self, name: Any, now: float, slack_s: float) -> bool:
        """Shaped as ``log_change`` writes it, dated no later than ``now + slack_s``."""
        if not isinstance(name, NamedNode) or not name.value.startswith(_CHANGE_PREFIX):
            return False
        if len(self.dates) != 1:
            return False
        moment = _instant_of(self.dates[0])
        if moment is None or moment > now + slack_s:
            return False
        if self.unknown:
            return not self.graphs and not self.subjects and all(_true(u) for u in self.unknown)
        if not self.graphs or not all(isinstance(t, NamedNode) for t in self.graphs):
            return False
        if not self.subjects:
            return True
        return (
            len(self.graphs) == 1
            and len(self.subjects) <= MAX_LOGGED_SUBJECTS
            and all(isinstance(t, NamedNode) for t in self.subjects)
        )

    def prunable(self, name: Any, now: float, slack_s: float) -> bool:
        """What ``prune_query`` removes: a foreign name, or a date that is not readable or
        lies in the future."""
        if not isinstance(name, NamedNode) or not name.value.startswith(_CHANGE_PREFIX):
            return True
        moments = [_instant_of(d) for d in self.dates]
        return any(m is None or m > now + slack_s for m in moments)

    def filed_by_date(self, dates: tuple[int, ...] | None) -> bool:
        """Filed under the second of its one date (``bucket_of``), as a server counts it
        in a bounded look's buckets."""
        if dates is None or len(dates) != 1 or len(self.filed) != 1:
            return False
        bucket = self.filed[0]
        return isinstance(bucket, Literal) and bucket.value == bucket_of(dates[0] // 1_000_000)

    def latest(self) -> float | None:
        moments = [m for m in (_instant_of(d) for d in self.dates) if m is not None]
        return max(moments, default=None)


def _true(term: Any) -> bool:
    return (
        isinstance(term, Literal)
        and term.datatype.value == _XSD_BOOLEAN
        and term.value in ("true", "1")
    )


_FIELDS = {
    _iri(CHANGED_AT): "dates",
    _iri(CHANGED_GRAPH): "graphs",
    _iri(CHANGED_SUBJECT): "subjects",
    _iri(CHANGED_UNKNOWN): "unknown",
    _iri(CHANGED_IN): "filed",
}


@dataclass(frozen=True)
class Look:
    """A look's reading: the changes, the records it read (``read``: name -> latest date
    and size, to leave them out of the next looks; ``dated``: name -> its dates in
    microseconds, None when one is not in UTC, to count them in a bounded look), and
    whether the log holds what ``prune_query`` removes (``prune``)."""

    changes: Changes
    read: dict[str, tuple[float, int]]
    prune: bool
    dated: dict[str, tuple[int, ...] | None] = field(default_factory=dict)
    #: The records new to the cursor, and the ``(graph, subject)`` IRIs each trusted one
    #: names (``own_writes``: a subject this client's own record alone names is known).
    new: tuple[str, ...] = ()
    pairs_of: dict[str, frozenset[tuple[str, str]]] = field(default_factory=dict)


def counted(rows: Sequence[Mapping[str, Any]]) -> tuple[int | None, list[Mapping[str, Any]]]:
    """The count of a ``bounded_query`` answer (None: no readable count) and its other rows."""
    found: int | None = None
    rest: list[Mapping[str, Any]] = []
    for row in rows:
        if "n" not in row:
            rest.append(row)
            continue
        value = row["n"]
        try:
            found = int(value.value) if isinstance(value, Literal) else None
        except ValueError:
            found = None
    return found, rest


def _records(rows: Iterable[Mapping[str, Any]]) -> tuple[dict[Any, Record], list[Any]]:
    records: dict[Any, Record] = {}
    horizons: list[Any] = []
    for row in rows:
        name, predicate, value = row.get("c"), row.get("p"), row.get("o")
        if name is None or not isinstance(predicate, NamedNode) or value is None:
            continue
        if predicate.value == _iri(PRUNED_BEFORE) and getattr(name, "value", "") == _LOG_NODE:
            horizons.append(value)
            continue
        record = records.setdefault(name, Record())
        record.rows += 1
        record.chars += len(getattr(value, "value", ""))
        kind = _FIELDS.get(predicate.value)
        if kind is not None:
            getattr(record, kind).append(value)
    return records, horizons


def read_look(
    rows: Sequence[Mapping[str, Any]],
    cursor: tuple[float, frozenset[str]] | None,
    slack_s: float,
    server_default: bool,
    limit: int = MAX_CHANGE_ROWS,
) -> Look:
    """The answer of ``look_query`` as ``Changes`` (records not seen before; the next
    cursor ``slack_s`` before the server's ``NOW()``, with the records since then)."""
    since = 0.0 if cursor is None else cursor[0]
    seen = frozenset() if cursor is None else cursor[1]
    clocks = [_instant_of(r["now"]) for r in rows if "now" in r]
    now = max((c for c in clocks if c is not None), default=None) or time.time()
    everything = cursor is None
    prune = cut = len(rows) > limit
    if cut:  # cut at the cap: the details are not all here
        everything = True
        rows = rows[:limit]
    records, horizons = _records(rows)
    horizon = since
    for value in horizons:
        moment = _instant_of(value)
        if moment is None or moment > now + slack_s:  # a horizon nobody can use
            prune = everything = True
        else:
            horizon = max(horizon, moment)
    if len(horizons) > 1:
        prune = True  # one horizon, written by prune_query, is all the log should hold
    if cursor is not None and horizon > since:
        everything = True  # records the cursor needed were pruned
    graphs: set[NamedNode | DefaultGraph] = set()
    pairs: set[tuple[NamedNode | DefaultGraph, NamedNode]] = set()
    whole: set[NamedNode | DefaultGraph] = set()
    recent: set[str] = set()
    read: dict[str, tuple[float, int]] = {}
    dated: dict[str, tuple[int, ...] | None] = {}
    new: list[str] = []
    pairs_of: dict[str, frozenset[tuple[str, str]]] = {}

    def named(graph: NamedNode) -> NamedNode | DefaultGraph:
        default = server_default and graph.value == DEFAULT_GRAPH_LABEL
        return DefaultGraph() if default else graph

    for name, record in records.items():
        prune = prune or record.prunable(name, now, slack_s)
        key = name.value if isinstance(name, NamedNode) else f"_:{getattr(name, 'value', '')}"
        latest = record.latest()
        if latest is None or latest >= now - slack_s:
            recent.add(key)
        if isinstance(name, NamedNode):  # (a blank node cannot be left out by name)
            read[key] = (now if latest is None else latest, 100 * record.rows + record.chars)
            # A record a prune may remove is never counted: the server's count would drop.
            # So is one not filed under its date: a bounded look counts by filing.
            dates = None if record.prunable(name, now, slack_s) else _exact_dates(record.dates)
            dated[key] = dates if record.filed_by_date(dates) else None
        if key in seen:
            continue
        new.append(key)
        iris = [named(g) for g in record.graphs if isinstance(g, NamedNode)]
        graphs.update(iris)
        if record.trusted(name, now, slack_s):
            if record.unknown:
                everything = True
            elif record.subjects:
                pairs.update((iris[0], s) for s in record.subjects)
                label = record.graphs[0].value
                pairs_of[key] = frozenset((label, s.value) for s in record.subjects)
            else:
                whole.update(iris)
            continue
        # Not an rdfmem client's record: what it names may have changed in any way.
        if record.unknown:
            everything = True
        whole.update(iris)
    changes = Changes(
        (now - slack_s, frozenset(recent)),
        frozenset(graphs),
        everything,
        frozenset(p for p in pairs if p[0] not in whole),
        frozenset(whole),
        prune,
    )
    return Look(changes, read, prune, dated, tuple(new), pairs_of)
