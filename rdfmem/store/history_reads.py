"""Reading the history that ``rdfmem.store.history`` writes: versions, the past, changes.

Every read here uses only ``Backend.match`` and ``Backend.query``, so it runs the same on
every backend. Order and time come from version IRIs (``time_of_version``); a resource's
state at a moment is its latest version generated at or before it (each write makes a
version, a deletion a tombstone), so the past is read without comparing literals. An
embedded store passes its ``IndexHub``: the version in effect at a moment is then found in
its ``VersionIndex`` (``rdfmem.store.indexes.versions``), without reading the backend.
"""

from __future__ import annotations

import bisect
import datetime as _dt
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyoxigraph import Literal, NamedNode, Quad, QuerySolutions

from rdfmem.backends.base import Backend
from rdfmem.backends.oxigraph import OxigraphBackend
from rdfmem.backends.sparql.client import SparqlBackend
from rdfmem.core.errors import QueryError
from rdfmem.core.results import SelectResult
from rdfmem.core.terms import RDF_JSON, sparql_term
from rdfmem.store.history import (
    ACTIVITY_PREFIX,
    ASSOCIATED,
    GENERATED_AT,
    GENERATED_BY,
    HAD_TYPE,
    HISTORY_PREFIX,
    INVALIDATED_AT,
    LATEST,
    RDF_TYPE,
    REASON,
    REVISION_OF,
    SKIP,
    SPECIALIZES,
    TOMBSTONE,
    VALUE,
    VERSION_PREFIX,
    data_graph_of,
    history_graph,
    hour_bucket,
    time_of_version,
    time_token,
    token_of_version,
    utc_time,
)
from rdfmem.store.history_changelog import (
    history_graph_names,
    log_for,
    missed,
    read_later,
    worth_building,
)
from rdfmem.store.indexes.changelist import micros
from rdfmem.store.indexes.hub import IndexHub
from rdfmem.store.indexes.versions import fresh_index, token_key

__all__ = ["Change", "Version", "changes", "state_at", "version_at", "versions_of"]

_BOOKKEEPING = frozenset(
    {SPECIALIZES, GENERATED_AT, GENERATED_BY, INVALIDATED_AT, REVISION_OF, LATEST, SKIP}
)
#: The most ``rm:hour`` buckets a ``changes_since`` window is read by (a year); a longer
#: window is read by one scan of the activities between its ends.
_MAX_BUCKETS = 24 * 366


@dataclass(frozen=True)
class Version:
    """One version of a resource: what it was from ``at`` on, who wrote it and why.

    ``state``: the resource's quads as they were, in its data graph (empty once deleted);
    ``value``: for a key/value entry, its JSON value (None once deleted, and for other
    resources); ``iri``/``activity``: the version and the write that made it.
    """

    iri: str
    subject: str
    graph: str
    at: _dt.datetime
    by: str | None
    why: str | None
    deleted: bool
    activity: str | None = None
    revision_of: str | None = None
    invalidated_at: _dt.datetime | None = None
    state: tuple[Quad, ...] = field(default=(), repr=False)
    value: Any = None
    key: str | None = None


@dataclass(frozen=True, slots=True)
class Change:
    """A version made in a ``changes_since`` window: ``subject`` of data graph ``graph``
    changed at ``at`` by ``by`` (why: ``why``); ``deleted`` when it was removed."""

    at: _dt.datetime
    subject: str
    graph: str
    version: str
    activity: str
    by: str | None
    why: str | None
    deleted: bool
    key: str | None = None


def _rows(backend: Backend, sparql: str) -> SelectResult:
    raw = backend.query(sparql)
    if not isinstance(raw, QuerySolutions):
        raise QueryError(f"expected the rows of a SELECT, got {type(raw).__name__}")
    result = SelectResult(raw)
    del raw
    result.rows  # noqa: B018 - reads the rows here, on this thread
    return result


def _state(
    subject: NamedNode,
    graph: NamedNode,
    pairs: list[tuple[NamedNode, Any]],
    rename: Mapping[NamedNode, NamedNode],
) -> tuple[Quad, ...]:
    back = {HAD_TYPE: RDF_TYPE, **{v: k for k, v in rename.items()}}
    out = []
    for p, o in pairs:
        if p == VALUE and p in back and isinstance(o, Literal):
            o = Literal(o.value, datatype=RDF_JSON)
        out.append(Quad(subject, back.get(p, p), o, graph))
    return tuple(out)


def versions_of(
    backend: Backend,
    graph: NamedNode,
    subject: NamedNode,
    rename: Mapping[NamedNode, NamedNode] | None = None,
) -> list[Version]:
    """Every version of ``subject`` kept in ``graph``'s history, oldest first (one query).
    ``rename``: the predicates the writer renamed in the state (``Recorder.record``)."""
    history = history_graph(graph)
    h, s = sparql_term(history), sparql_term(subject)
    rows = _rows(
        backend,
        f"SELECT ?v ?p ?o ?by ?why WHERE {{ GRAPH {h} {{ ?v <{SPECIALIZES.value}> {s} . "
        f"?v ?p ?o . OPTIONAL {{ ?v <{GENERATED_BY.value}> ?a . "
        f"OPTIONAL {{ ?a <{ASSOCIATED.value}> ?by }} "
        f"OPTIONAL {{ ?a <{REASON.value}> ?why }} }} }} }}",
    )
    found: dict[str, dict[str, Any]] = {}
    for row in rows:
        v = row["v"].value
        item = found.setdefault(v, {"pairs": [], "meta": {}})
        p, o = row["p"], row["o"]
        if "by" in row:
            item["meta"]["by"] = row["by"].value
        if "why" in row:
            item["meta"]["why"] = row["why"].value
        if p in _BOOKKEEPING:
            item["meta"][p.value] = o.value
        elif p == RDF_TYPE and o == TOMBSTONE:
            item["meta"]["deleted"] = True
        else:
            item["pairs"].append((p, o))
    out = []
    for v in sorted(found, key=token_of_version):
        meta, pairs = found[v]["meta"], found[v]["pairs"]
        at = time_of_version(v)
        if at is None:
            continue
        invalidated = meta.get(INVALIDATED_AT.value)
        out.append(
            Version(
                iri=v,
                subject=subject.value,
                graph=graph.value,
                at=at,
                by=meta.get("by"),
                why=meta.get("why"),
                deleted=bool(meta.get("deleted")),
                activity=meta.get(GENERATED_BY.value),
                revision_of=meta.get(REVISION_OF.value),
                invalidated_at=_parse_time(invalidated) if invalidated else None,
                state=_state(subject, graph, pairs, rename or {}),
            )
        )
    return out


def _parse_time(text: str) -> _dt.datetime | None:
    try:
        return utc_time(_dt.datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError:
        return None


def version_at(
    backend: Backend,
    graph: NamedNode,
    subject: NamedNode,
    moment: _dt.datetime,
    hub: IndexHub | None = None,
) -> NamedNode | None:
    """The version of ``subject`` in effect at ``moment`` (generated at or before it), or
    None when none was (then, or in the history kept). With the store's index ``hub`` (an
    embedded store): a dict lookup and a bisect of its ``VersionIndex``; on a server, one
    query; elsewhere, one ``match`` of the resource's versions."""
    bound = time_token(moment)
    history = history_graph(graph)
    if hub is not None:
        with hub.reading():
            index = fresh_index(hub, graph.value, history.value)
            index.chain(backend, subject.value)
            found = index.at(subject.value, bound)
        return None if found is None else NamedNode(found)
    if isinstance(backend, SparqlBackend):
        last = sparql_term(Literal(VERSION_PREFIX + bound + "~"))
        rows = _rows(
            backend,
            f"SELECT ?v WHERE {{ GRAPH {sparql_term(history)} {{ ?v "
            f"<{SPECIALIZES.value}> {sparql_term(subject)} }} FILTER (STR(?v) <= {last}) }} "
            "ORDER BY DESC(STR(?v)) LIMIT 1",
        )
        for row in rows:
            v = row.get("v")
            if isinstance(v, NamedNode) and token_of_version(v.value) <= bound:
                return v
        return None
    return _scan_at(backend, history, subject, bound)


def _scan_at(
    backend: Backend, history: NamedNode, subject: NamedNode, bound: str
) -> NamedNode | None:
    # Every version of the resource read, the latest at or before ``bound`` kept.
    best: NamedNode | None = None
    best_token = ""
    for quad in backend.match(None, SPECIALIZES, subject, history):
        v = quad.subject
        if isinstance(v, NamedNode):
            token = token_of_version(v.value)
            if best_token < token <= bound:
                best, best_token = v, token
    return best


def state_at(
    backend: Backend,
    graph: NamedNode,
    subject: NamedNode,
    moment: _dt.datetime,
    rename: Mapping[NamedNode, NamedNode] | None = None,
    hub: IndexHub | None = None,
) -> tuple[Quad, ...] | None:
    """``subject``'s quads in ``graph`` as they were at ``moment``: () when it did not
    exist then (deleted), None when the history kept says nothing of that moment."""
    v = version_at(backend, graph, subject, moment, hub)
    if v is None:
        return None
    pairs: list[tuple[NamedNode, Any]] = []
    for quad in backend.match(v, None, None, history_graph(graph)):
        p, o = quad.predicate, quad.object
        if p == RDF_TYPE and o == TOMBSTONE:
            return ()
        if p not in _BOOKKEEPING:
            pairs.append((p, o))
    return _state(subject, graph, pairs, rename or {})


def subjects_at(
    backend: Backend, graph: NamedNode, moment: _dt.datetime, hub: IndexHub | None = None
) -> dict[NamedNode, NamedNode]:
    """Every resource of ``graph`` that existed at ``moment``, with its version then: from
    the store's ``VersionIndex`` with its index ``hub`` (a bisect a resource), else in two
    reads of every version of the graph."""
    history = history_graph(graph)
    bound = time_token(moment)
    if hub is not None:
        alive: dict[NamedNode, NamedNode] = {}
        with hub.reading():
            index = fresh_index(hub, graph.value, history.value)
            dead = index.tombstones(backend)
            for resource, chain in index.everything(backend):
                cut = bisect.bisect_right(chain, bound, key=token_key)
                if cut and chain[cut - 1] not in dead:
                    alive[NamedNode(resource)] = NamedNode(chain[cut - 1])
        return alive
    best: dict[NamedNode, tuple[str, NamedNode]] = {}
    for quad in backend.match(None, SPECIALIZES, None, history):
        v, s = quad.subject, quad.object
        if not isinstance(v, NamedNode) or not isinstance(s, NamedNode):
            continue
        token = token_of_version(v.value)
        if token and token <= bound:
            held = best.get(s)
            if held is None or held[0] < token:
                best[s] = (token, v)
    dead = {str(q.subject) for q in backend.match(None, RDF_TYPE, TOMBSTONE, history)}
    return {s: v for s, (_, v) in best.items() if str(v) not in dead}


def _buckets(since: _dt.datetime, until: _dt.datetime) -> list[str | None]:
    # The ``rm:hour`` buckets of the window, or ``[None]`` (every bucket, one scan) when
    # it spans more than ``_MAX_BUCKETS`` hours.
    hour = utc_time(since).replace(minute=0, second=0, microsecond=0)
    if (until - hour) // _HOUR >= _MAX_BUCKETS:
        return [None]
    found: list[str | None] = []
    while hour <= until:
        found.append(hour_bucket(hour))
        hour += _HOUR
    return found


_Keys = tuple[str, Callable[[str], "str | None"]]
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_HOUR = _dt.timedelta(hours=1)


def changes(
    backend: Backend,
    since: _dt.datetime,
    until: _dt.datetime | None = None,
    graph: NamedNode | None = None,
    keys: _Keys | None = None,
    hub: IndexHub | None = None,
) -> list[Change]:
    """The versions made from ``since`` to ``until`` (now when None), oldest first (by
    version IRI, then data graph), in ``graph``'s history or every history graph. With the
    index ``hub`` of an embedded Oxigraph store: a bisect and a slice of each history
    graph's change log (``rdfmem.store.history_changelog``), else (and for a graph whose
    log is not known whole) read through the ``rm:hour`` buckets of the window (one query
    a day of buckets), so the cost follows the window, not the history. ``keys``: a
    key/value graph's IRI and its ``key_of``, to fill ``Change.key``.

    Raises:
        InvalidValue: a time that is not a datetime.
    """
    start = utc_time(since)
    end = utc_time(until) if until is not None else _dt.datetime.now(_dt.timezone.utc)
    if end < start:
        return []
    if hub is not None and isinstance(backend, OxigraphBackend):
        found = _logged(backend, hub, start, end, graph, keys)
        if found is not None:
            return found
    return _bucketed(backend, start, end, graph, keys)


def _logged(
    backend: OxigraphBackend,
    hub: IndexHub,
    start: _dt.datetime,
    end: _dt.datetime,
    graph: NamedNode | None,
    keys: _Keys | None,
) -> list[Change] | None:
    # ``changes`` from the change logs, a graph whose log is missing from its buckets;
    # None: every graph from the buckets (a history graph naming no data graph).
    low, high = micros(start), micros(end)
    kv_graph, key_of = keys if keys is not None else ("", None)
    out: list[Change] = []
    stale: list[str] = []  # the history graphs whose log is missing: read by buckets
    with hub.reading():
        if graph is None:
            names = history_graph_names(backend)
            if names is None:
                return None
        else:
            names = [history_graph(graph).value]
        pairs = [(h, data_graph_of(h) or "") for h in names]
        if any(not data for _, data in pairs):
            return None
        # Read whole on a thread of its own (no call waits; writers go on): this call and
        # those until it is in place read the buckets.
        wanted = [(h, data) for h, data in pairs if worth_building(hub, data, h)]
        if wanted:
            read_later(backend, hub, wanted)
        for h, data in pairs:
            log = log_for(hub, data, h)
            if log is None:
                stale.append(h)
                continue
            keyed = key_of if key_of is not None and data == kv_graph else None
            for version, activity, subject, by, why, deleted, at in log.window(low, high):
                out.append(
                    Change(
                        at=_EPOCH + _dt.timedelta(microseconds=at),
                        subject=subject,
                        graph=data,
                        version=version,
                        activity=activity,
                        by=by,
                        why=why,
                        deleted=deleted,
                        key=None if keyed is None else keyed(subject),
                    )
                )
        if stale:
            started = time.perf_counter()
            alone = data_graph_of(stale[0]) if len(stale) == 1 else None
            if alone is not None:
                out += _bucketed(backend, start, end, NamedNode(alone), keys)
            else:
                out += _bucketed(backend, start, end, None, keys, stale)
            took = (time.perf_counter() - started) / len(stale)
            for h in stale:
                missed(hub, h, took)
    out.sort(key=_order)
    return out


def _order(change: Change) -> tuple[str, str]:
    return change.version, change.graph


def _bucketed(
    backend: Backend,
    start: _dt.datetime,
    end: _dt.datetime,
    graph: NamedNode | None,
    keys: _Keys | None,
    within: Sequence[str] = (),
) -> list[Change]:
    # ``changes`` read through the ``rm:hour`` buckets of the window (``within``: only
    # these history graphs, when ``graph`` is None).
    low, high = time_token(start), time_token(end)
    buckets = _buckets(start, end)
    only = " ".join(sparql_term(NamedNode(h)) for h in within)
    blocks = [
        _bucket_block(
            graph, bucket, low if i == 0 else None, high if i == len(buckets) - 1 else None, only
        )
        for i, bucket in enumerate(buckets)
    ]
    fixed = "" if graph is None else history_graph(graph).value
    kv_graph, key_of = keys if keys is not None else ("", None)
    out: list[Change] = []
    for i in range(0, len(blocks), 24):  # a day of buckets a query
        sparql = (
            f"SELECT ?h ?a ?v ?s ?by ?why ?dead WHERE {{ {' UNION '.join(blocks[i : i + 24])} }}"
        )
        for h, a, v, s, by, why, dead in _solutions(backend, sparql):
            version = v.value
            token = token_of_version(version)
            at = time_of_version(version)
            data = data_graph_of(h.value if h is not None else fixed)
            if at is None or data is None or not low <= token <= high:
                continue
            subject = s.value
            out.append(
                Change(
                    at=at,
                    subject=subject,
                    graph=data,
                    version=version,
                    activity=a.value,
                    by=None if by is None else by.value,
                    why=None if why is None else why.value,
                    deleted=dead == TOMBSTONE,
                    key=key_of(subject) if key_of is not None and data == kv_graph else None,
                )
            )
    out.sort(key=_order)
    return out


def _bucket_block(
    graph: NamedNode | None, bucket: str | None, low: str | None, high: str | None, only: str = ""
) -> str:
    # One bucket's versions: the bucket is one index lookup; in the window's first and last
    # buckets, the activities outside the window are dropped before their versions are
    # joined (an activity's IRI begins with its time, as its versions' do). ``only``: the
    # history graphs ``?h`` may be (SPARQL terms), when ``graph`` is None. ``bucket`` None:
    # the activities of every bucket between ``low`` and ``high`` (a window over a year).
    where = f"GRAPH {sparql_term(history_graph(graph))}" if graph is not None else "GRAPH ?h"
    if graph is None and only:
        where = f"VALUES ?h {{ {only} }} {where}"
    bounds = []
    if low is not None:
        bounds.append(f"STR(?a) >= {sparql_term(Literal(ACTIVITY_PREFIX + low))}")
    if high is not None:
        bounds.append(f"STR(?a) <= {sparql_term(Literal(ACTIVITY_PREFIX + high + '~'))}")
    cut = f"FILTER ({' && '.join(bounds)}) " if bounds else ""
    hour = "?hour" if bucket is None else sparql_term(Literal(bucket))
    return (
        f"{{ {where} {{ ?a <{HOUR_IRI}> {hour} . {cut}"
        f"?v <{GENERATED_BY.value}> ?a ; <{SPECIALIZES.value}> ?s . "
        f"OPTIONAL {{ ?a <{ASSOCIATED.value}> ?by }} OPTIONAL {{ ?a <{REASON.value}> ?why }} "
        f"OPTIONAL {{ ?v a ?dead }} }} }}"
    )


def _solutions(backend: Backend, sparql: str) -> list[tuple[Any, ...]]:
    # The rows of a SELECT as tuples of its variables' terms (None: unbound), read here,
    # on this thread (pyoxigraph's solutions are not sendable).
    raw = backend.query(sparql)
    if not isinstance(raw, QuerySolutions):
        raise QueryError(f"expected the rows of a SELECT, got {type(raw).__name__}")
    width = len(raw.variables)
    try:
        return [tuple(solution[i] for i in range(width)) for solution in raw]
    except (OSError, RuntimeError, ValueError) as exc:
        del raw
        raise QueryError(f"SPARQL query failed: {exc}") from exc


HOUR_IRI = "https://w3id.org/rdfmem#hour"


def history_graphs(backend: Backend) -> list[NamedNode]:
    """The history graphs of the dataset (those holding at least one version)."""
    rows = _rows(
        backend,
        f"SELECT DISTINCT ?h WHERE {{ GRAPH ?h {{ ?s <{LATEST.value}> ?v }} "
        f'FILTER (STRSTARTS(STR(?h), "{HISTORY_PREFIX}")) }}',
    )
    found: list[NamedNode] = []
    for row in rows:
        h = row.get("h")
        if isinstance(h, NamedNode):
            found.append(h)
    return found
