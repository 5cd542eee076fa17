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

import heapq
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyoxigraph import Literal, NamedNode, Quad, QuerySolutions

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
from rdfmem.store.indexes.changelist import ChangeLog, micros_of
from rdfmem.store.indexes.hub import IndexHub
from rdfmem.store.indexes.versions import VersionIndex, fresh_index, version_index

__all__ = [
    "after_domain_write",
    "build",
    "history_graph_names",
    "install",
    "log_for",
    "missed",
    "read_later",
    "settle",
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


def install(hub: IndexHub, data: str, history: str, log: ChangeLog, took: float) -> None:
    """Keep ``log``, read whole by ``build`` while the index noted this store's writes
    (``read_later``), with those writes laid over its end; let it go when a write of
    unknown effect came meanwhile (the index was forgotten). Its time counts as a build's
    either way, so the next one waits for as much time of bucket reads. Call under
    ``hub.reading()``."""
    index = fresh_index(hub, data, history)
    index.built, index.missed = max(took, 1e-6), 0.0
    pending, index.pending = index.pending, None
    if pending is None or (index.log is not None and index.log.usable):
        return
    if pending and log.usable:
        _lay_over(log, pending)
    index.log = log


def _lay_over(log: ChangeLog, pending: list[tuple[Any, ...]]) -> None:
    # The store's own writes made while ``log`` was read (six reads, six states): the
    # versions from the first of them on are taken off its end and written again, each as
    # its write noted it (a version a read saw too is kept once).
    added = {entry[1]: entry for entry in pending if entry[0] == "add"}
    removed = set().union(*(entry[1] for entry in pending if entry[0] == "removed"))
    if added:
        first = min(micros_of(version) for version in added)
        rows = {row[0]: row for row in log.cut(first) if row[0] not in added}
        again = [(v, s, by, why, dead) for v, _, s, by, why, dead, _ in rows.values()]
        again += [(v, s, by, why, dead) for _, v, s, by, why, dead in added.values()]
        for version, subject, by, why, deleted in sorted(again):
            log.add(version, subject, by, why, deleted=deleted, activity=None)
    if removed:
        log.remove(removed)


class _Reader:
    """The logs of one store being read whole on a thread of their own (``read_later``),
    stopped when the store closes (``OxigraphBackend.before_close``)."""

    def __init__(self, backend: OxigraphBackend) -> None:
        self.lock = threading.Lock()
        self.busy: set[str] = set()
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        backend.before_close.append(self.close)

    def close(self) -> None:
        self.stop.set()
        for thread in list(self.threads):
            thread.join()


_READERS: weakref.WeakKeyDictionary[IndexHub, _Reader] = weakref.WeakKeyDictionary()


def read_later(backend: OxigraphBackend, hub: IndexHub, wanted: list[tuple[str, str]]) -> None:
    """Read the logs of ``wanted`` (history graph, data graph) whole on a thread of their
    own, so that no call waits for it (~25 µs a version): the calls meanwhile read the
    buckets. The store's writes meanwhile are noted by the index (``pending``) and laid
    over what was read. Call under ``hub.reading()``."""
    reader = _READERS.get(hub)
    if reader is None:
        reader = _READERS[hub] = _Reader(backend)
    with reader.lock:
        todo = [(h, d) for h, d in wanted if h not in reader.busy]
        if not todo or reader.stop.is_set():
            return
        reader.busy.update(h for h, _ in todo)
    for h, d in todo:
        fresh_index(hub, d, h).pending = []

    def run() -> None:
        try:
            for h, d in todo:
                started = time.perf_counter()
                try:
                    whole = build(backend, h, reader.stop)
                except Exception:  # stopped, closed, or the read failed: buckets go on
                    with hub.reading():
                        fresh_index(hub, d, h).pending = None
                    continue
                with hub.reading():
                    install(hub, d, h, whole, time.perf_counter() - started)
        finally:
            with reader.lock:
                reader.busy.difference_update(h for h, _ in todo)
                reader.threads.remove(thread)

    thread = threading.Thread(target=run, name="rdfmem-change-log", daemon=True)
    with reader.lock:
        reader.threads.append(thread)
    thread.start()


def settle(hub: IndexHub, timeout: float | None = None) -> bool:
    """Wait for the logs being read whole for ``hub`` (``read_later``); False when some
    still were after ``timeout`` seconds."""
    reader = _READERS.get(hub)
    deadline = None if timeout is None else time.monotonic() + timeout
    for thread in [] if reader is None else list(reader.threads):
        thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            return False
    return True


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
    hub: IndexHub,
    data: str,
    made: _Made,
    states: Mapping[NamedNode, list[Any]] | None,
    index: VersionIndex | None = None,
) -> None:
    """Have the version index of ``data``'s history learn ``made`` (``(subject, version,
    agent, reason)``, from ``versioning_update`` inside a ``hub.writing`` block) once the
    block ends, when its one request wrote them: the block's only write since now, each
    version found in the store (a tombstone when ``states`` says so or the store holds
    one). Anything else leaves the index stale, to be forgotten. Under the lock;
    ``index``: ``fresh_index`` of ``data``'s history, when taken in the same section."""
    history = HISTORY_PREFIX + data
    if index is None:
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
        if not _holds(backend, v, SPECIALIZES, NamedNode(subject), h):
            return
        deleted = entry.dead.get(subject)
        if deleted is None:
            deleted = _holds(backend, v, RDF_TYPE, TOMBSTONE, h)
        notes.append((subject, version, by, why, deleted))
    for subject, version, by, why, deleted in notes:
        index.note(subject, version, deleted=deleted, by=by, why=why)
    index.seen = hub.generation


def _holds(backend: Backend, s: NamedNode, p: NamedNode, o: NamedNode, g: NamedNode) -> bool:
    # Whether the store holds the quad: in Oxigraph one lookup of its key (~1 µs on disk,
    # where ``match`` opens an iterator: ~9 µs).
    if isinstance(backend, OxigraphBackend):
        return Quad(s, p, o, g) in backend.store
    return next(backend.match(s, p, o, g), None) is not None


_RUN = 20_000


def _order(keys: list[str]) -> Iterator[int]:
    # The positions of ``keys`` in sorted order, as runs of ``_RUN`` sorted one by one and
    # merged: one sort of a million would hold the interpreter for a second from the calls
    # answered on other threads while the log is read (``read_later``). Positions, not
    # tuples: a million tuples kept would make the collector walk them again and again.
    runs = []
    for i in range(0, len(keys), _RUN):
        runs.append(sorted(range(i, min(i + _RUN, len(keys))), key=keys.__getitem__))
        time.sleep(0)
    return heapq.merge(*runs, key=keys.__getitem__)


class _Stopped(Exception):
    """The store is closing: a log read whole on a thread stops."""


class _Pace:
    """How a log read on a thread of its own shares the interpreter: it works at most half
    the time (after 2 ms of work it sleeps as long), and stops once ``stop`` is set.
    pyoxigraph lets the interpreter go at each row it reads; a thread that also wants it
    back waits up to the switch interval (5 ms) each time while another one works without
    pause, so a call iterating 1,000 rows beside an unpaced read took 5 s."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.since = time.perf_counter()

    def __call__(self) -> None:
        if self.stop.is_set():
            raise _Stopped("the store is closing")
        now = time.perf_counter()
        if now - self.since >= 0.002:
            time.sleep(now - self.since)
            self.since = time.perf_counter()


def _pairs(
    backend: Backend, history: str, predicate: NamedNode, pace: _Pace | None
) -> Iterator[Any]:
    raw = backend.query(
        f"SELECT ?x ?y WHERE {{ GRAPH <{history}> {{ ?x <{predicate.value}> ?y }} }}"
    )
    if not isinstance(raw, QuerySolutions):
        raise QueryError(f"expected the rows of a SELECT, got {type(raw).__name__}")
    try:
        for i, solution in enumerate(raw):
            if pace is not None and not i % 256:
                pace()
            yield solution[0], solution[1]
    except (OSError, RuntimeError, ValueError) as exc:
        raise QueryError(f"SPARQL query failed: {exc}") from exc


#: What ``_single`` keeps for an object that is not what rdfmem writes there (no IRI, no
#: time token, no hour bucket has it).
_OTHER = "\x00"


def _iri(term: Any) -> str:
    return term.value if isinstance(term, NamedNode) else _OTHER


def _plain(term: Any) -> str:
    plain = (
        isinstance(term, Literal) and term.language is None and term.datatype.value == _XSD_STRING
    )
    return term.value if plain else _OTHER


def _value(term: Any) -> str:
    return str(term.value)


def _single(
    backend: Backend,
    history: str,
    predicate: NamedNode,
    log: ChangeLog,
    pace: _Pace | None,
    text: Callable[[Any], str],
) -> dict[str, str]:
    # Each subject's one object of ``predicate``, as ``text`` gives it (a string: terms
    # kept by the million would make the collector walk them again and again); a subject
    # with two makes the log unusable (the SPARQL read would give a row for each).
    out: dict[str, str] = {}
    for x, y in _pairs(backend, history, predicate, pace):
        key = x.value if isinstance(x, NamedNode) else None
        if key is None:
            continue  # a blank node: not a version nor an activity rdfmem reports
        if key in out:
            log.usable = False
        out[key] = text(y)
    return out


def build(backend: Backend, history: str, stop: threading.Event | None = None) -> ChangeLog:
    """The change log of the history graph ``history``, read whole from the backend; with
    ``stop`` (on a thread of its own), paced (``_Pace``) and stopped (``_Stopped``) once
    ``stop`` is set."""
    pace = None if stop is None else _Pace(stop)
    log = ChangeLog()
    subjects = _single(backend, history, SPECIALIZES, log, pace, _iri)
    activities = _single(backend, history, GENERATED_BY, log, pace, _iri)
    hours = _single(backend, history, HOUR, log, pace, _plain)
    agents = _single(backend, history, ASSOCIATED, log, pace, _value)
    reasons = _single(backend, history, REASON, log, pace, _value)
    types: set[str] = set()
    for x, y in _pairs(backend, history, RDF_TYPE, pace):
        if isinstance(x, NamedNode) and x.value.startswith(VERSION_PREFIX):
            if y != TOMBSTONE or x.value in types:
                log.usable = False
            types.add(x.value)
    if not log.usable:
        return log
    versions: list[str] = []
    resources: list[str] = []
    acts: list[str] = []
    for i, (version, activity) in enumerate(activities.items()):
        if pace is not None and not i % 256:
            pace()
        subject = subjects.get(version)
        if subject is None:
            continue  # no row in the SPARQL read either (the join needs both)
        if activity == _OTHER:
            log.usable = False
            return log
        if not version.startswith(VERSION_PREFIX):
            continue  # the SPARQL read skips it too (no time in its IRI)
        hour = hours.get(activity)
        if hour is None:
            continue  # in no bucket
        token = version[len(VERSION_PREFIX) : len(VERSION_PREFIX) + _TOKEN]
        bucket = f"{token[0:4]}-{token[4:6]}-{token[6:8]}T{token[9:11]}"
        if hour != bucket or subject == _OTHER:  # _OTHER: not a plain literal, not an IRI
            log.usable = False
            return log
        versions.append(version)
        resources.append(subject)
        acts.append(activity)
    for i, at in enumerate(_order(versions)):
        if pace is not None and not i % 256:
            pace()
        version, subject, activity = versions[at], resources[at], acts[at]
        log.add(
            version,
            subject,
            agents.get(activity),
            reasons.get(activity),
            deleted=version in types,
            activity=activity,
        )
    return log
