"""The change logs of an embedded store's history graphs: found, read whole once, kept.

``changes_since`` on an embedded Oxigraph store (one with an ``IndexHub``) asks each
history graph's ``VersionIndex`` for its ``ChangeLog`` (``rdfmem.store.indexes.changelist``)
instead of reading the SPARQL buckets. A log is known whole when the store's own writes
made it from an empty history graph (key/value writes note their versions; a domain
write's ``versioning_update`` inside a ``writing`` block has them noted when the block
ends: ``after_domain_write``), or when it was read whole from the backend (``build``,
without the lock, so writers go on; ``install`` keeps it only when nothing wrote the
graph meanwhile). A write around the store (a raw update, a compaction, another process)
makes the index forget it. It is read again whole when the bucket reads made since it
went took as long as its last build (so a graph written around on every call costs at
most about twice what the buckets alone would), and saved with the version index beside
an on-disk store at close.

``build`` reads six predicate ranges of the history graph (each one contiguous in
Oxigraph's indexes: ~3.5 µs a row) and keeps only what the SPARQL read would report, the
same way: a version with its activity, the activity with its ``rm:hour``, at most one
agent and one reason, no type but ``rm:Tombstone``. Anything else (a version or activity
of another shape) makes the log unusable: the buckets are read instead.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyoxigraph import Literal, NamedNode, QuerySolutions

from rdfmem.backends.base import Backend
from rdfmem.backends.oxigraph import OxigraphBackend
from rdfmem.core.errors import QueryError
from rdfmem.store.history import (
    ASSOCIATED,
    GENERATED_BY,
    HISTORY_PREFIX,
    HOUR,
    RDF_TYPE,
    REASON,
    SPECIALIZES,
    TOMBSTONE,
    VERSION_PREFIX,
)
from rdfmem.store.indexes.changelist import ChangeLog
from rdfmem.store.indexes.hub import IndexHub
from rdfmem.store.indexes.versions import VersionIndex, fresh_index, version_index

__all__ = [
    "after_domain_write",
    "build",
    "history_graph_names",
    "install",
    "log_for",
    "missed",
    "worth_building",
]

_XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
_TOKEN = len("20261123T231500.123456Z")
_NOT_KEPT = object()


def history_graph_names(backend: OxigraphBackend) -> list[str] | None:
    """The store's history graphs (named graphs under ``urn:rdfmem:history:``); None when
    one names no data graph (the buckets are read then)."""
    found = []
    for graph in backend.store.named_graphs():
        if isinstance(graph, NamedNode) and graph.value.startswith(HISTORY_PREFIX):
            if graph.value == HISTORY_PREFIX:
                return None
            found.append(graph.value)
    return sorted(found)


def log_for(hub: IndexHub, data: str, history: str) -> ChangeLog | None:
    """The change log of ``history`` (the history graph of ``data``) when it is known
    whole; None: read its buckets (then tell ``missed`` how long that took), or build it
    first when ``worth_building``. Call under ``hub.reading()``."""
    log = fresh_index(hub, data, history).log
    return log if log is not None and log.usable else None


def worth_building(hub: IndexHub, data: str, history: str) -> bool:
    """True when ``history``'s log is missing and should be read whole now: never built
    in this process, or the bucket reads since it went took as long as its last build.
    Call under ``hub.reading()``."""
    index = fresh_index(hub, data, history)
    if index.log is not None and index.log.usable:
        return False
    return not index.built or index.missed >= index.built


def install(
    hub: IndexHub, data: str, history: str, log: ChangeLog, generation: int, took: float
) -> None:
    """Keep ``log``, read whole by ``build`` from generation ``generation`` on without the
    lock, if no write may have changed ``history`` or ``data`` since (else it is let go:
    its time counts as a build's, so the next one waits for as much time of bucket
    reads). Call under ``hub.reading()``."""
    index = fresh_index(hub, data, history)
    index.built, index.missed = max(took, 1e-6), 0.0
    if hub.fresh(generation, (data, history)):
        index.log = log


def missed(hub: IndexHub, history: str, seconds: float) -> None:
    """A read of ``history``'s buckets took ``seconds`` (counted towards its next build)."""
    version_index(hub, history).missed += seconds


_Made = list[tuple[str, str, str, "str | None"]]


@dataclass
class _Pending:
    """The versions ``versioning_update`` made inside one ``writing`` block for one history
    graph: its index, the generation then and the index's ``seen`` then, the versions,
    and which are tombstones when the caller said (``states``)."""

    index: VersionIndex
    generation: int
    seen: int
    made: _Made
    dead: dict[str, bool]
    learn: Callable[[], None] | None = None


_PENDING: weakref.WeakKeyDictionary[IndexHub, dict[str, _Pending]] = weakref.WeakKeyDictionary()


def after_domain_write(
    hub: IndexHub, data: str, made: _Made, states: Mapping[NamedNode, list[Any]] | None
) -> None:
    """Have the version index of ``data``'s history learn ``made`` (``(subject, version,
    agent, reason)``, from ``versioning_update`` inside a ``hub.writing`` block) once the
    block ends, when its one request wrote them: the block's only write since now, each
    version found in the store (a tombstone when ``states`` says so or the store holds
    one). Anything else leaves the index stale, to be forgotten. Under the lock."""
    history = HISTORY_PREFIX + data
    index = fresh_index(hub, data, history)
    dead = {s.value: not q for s, q in (states or {}).items()}
    pending = _PENDING.setdefault(hub, {})
    found = pending.get(history)
    if (
        found is not None
        and found.index is index
        and found.generation == hub.generation
        and found.learn in hub.after_writes  # the same block, still to end
    ):
        found.made.extend(made)  # another call for the same request
        found.dead.update(dead)
        return
    entry = pending[history] = _Pending(index, hub.generation, index.seen, list(made), dead)

    def learn() -> None:
        if pending.get(history) is entry:
            del pending[history]
        try:
            _learn(hub, history, entry)
        except (OSError, RuntimeError, ValueError):
            return  # the write was made: the index stays stale (forgotten), not the write

    entry.learn = learn
    hub.after_writes.append(learn)


def _learn(hub: IndexHub, history: str, entry: _Pending) -> None:
    index = entry.index
    if (
        hub.generation != entry.generation + 1
        or hub.unknown > entry.generation
        or index.seen != entry.seen
        or version_index(hub, history) is not index
    ):
        return  # not the block's one request: the hub calls the index stale
    backend, h = hub.backend, NamedNode(history)
    notes = []
    for subject, version, by, why in entry.made:
        v = NamedNode(version)
        if next(backend.match(v, SPECIALIZES, NamedNode(subject), h), None) is None:
            return
        deleted = entry.dead.get(subject)
        if deleted is None:
            deleted = next(backend.match(v, RDF_TYPE, TOMBSTONE, h), None) is not None
        notes.append((subject, version, by, why, deleted))
    for subject, version, by, why, deleted in notes:
        index.note(subject, version, deleted=deleted, by=by, why=why)
    index.seen = hub.generation


def _pairs(backend: Backend, history: str, predicate: NamedNode) -> Iterator[Any]:
    raw = backend.query(
        f"SELECT ?x ?y WHERE {{ GRAPH <{history}> {{ ?x <{predicate.value}> ?y }} }}"
    )
    if not isinstance(raw, QuerySolutions):
        raise QueryError(f"expected the rows of a SELECT, got {type(raw).__name__}")
    try:
        for solution in raw:
            yield solution[0], solution[1]
    except (OSError, RuntimeError, ValueError) as exc:
        raise QueryError(f"SPARQL query failed: {exc}") from exc


def _single(backend: Backend, history: str, predicate: NamedNode, log: ChangeLog) -> dict[str, Any]:
    # Each subject's one object of ``predicate`` (its term's value); a subject with two
    # makes the log unusable (the SPARQL read would give a row for each).
    out: dict[str, Any] = {}
    for x, y in _pairs(backend, history, predicate):
        key = x.value if isinstance(x, NamedNode) else None
        if key is None:
            continue  # a blank node: not a version nor an activity rdfmem reports
        if key in out:
            log.usable = False
        out[key] = y
    return out


def build(backend: Backend, history: str) -> ChangeLog:
    """The change log of the history graph ``history``, read whole from the backend."""
    log = ChangeLog()
    subjects = _single(backend, history, SPECIALIZES, log)
    activities = _single(backend, history, GENERATED_BY, log)
    hours = _single(backend, history, HOUR, log)
    agents = _single(backend, history, ASSOCIATED, log)
    reasons = _single(backend, history, REASON, log)
    types: dict[str, Any] = {}
    for x, y in _pairs(backend, history, RDF_TYPE):
        if isinstance(x, NamedNode) and x.value.startswith(VERSION_PREFIX):
            if y != TOMBSTONE or x.value in types:
                log.usable = False
            types[x.value] = y
    if not log.usable:
        return log
    kept = []
    for version, activity in activities.items():
        subject = subjects.get(version)
        if subject is None:
            continue  # no row in the SPARQL read either (the join needs both)
        if not isinstance(activity, NamedNode):
            log.usable = False
            return log
        if not version.startswith(VERSION_PREFIX):
            continue  # the SPARQL read skips it too (no time in its IRI)
        hour = hours.get(activity.value)
        if hour is None:
            continue  # in no bucket
        token = version[len(VERSION_PREFIX) : len(VERSION_PREFIX) + _TOKEN]
        bucket = f"{token[0:4]}-{token[4:6]}-{token[6:8]}T{token[9:11]}"
        if (
            not isinstance(hour, Literal)
            or hour.value != bucket
            or hour.datatype.value != _XSD_STRING
            or hour.language is not None
            or not isinstance(subject, NamedNode)
        ):
            log.usable = False
            return log
        kept.append((version, subject.value, activity.value))
    kept.sort()
    for version, subject, activity in kept:
        by, why = agents.get(activity), reasons.get(activity)
        log.add(
            version,
            subject,
            None if by is None else by.value,
            None if why is None else why.value,
            deleted=version in types,
            activity=activity,
        )
    return log
