"""History of writes: PROV-O activities and versions, written with the data they describe.

A store opened with ``history=True`` records, in the very write that changes its data
(the same ``backend.apply``, so the same SPARQL update request on a server):

* one activity per write (a ``prov:Activity`` by the range of ``prov:wasGeneratedBy``,
  not typed again): ``prov:endedAtTime``, ``prov:wasAssociatedWith`` (the ``by=`` of an
  ``attributed`` block, else the store's ``agent=``), ``rm:reason`` (the ``why=``, when
  given) and ``rm:hour`` (its UTC hour, ``"2026-11-23T23"``: the bucket that
  ``changes_since`` looks up instead of scanning);
* one version per changed resource: ``prov:specializationOf`` the resource,
  ``prov:generatedAtTime``, ``prov:wasGeneratedBy`` the activity, ``prov:wasRevisionOf``
  the previous version (which gains ``prov:invalidatedAtTime``), and the resource's state:
  its quads with the version as subject (``rdf:type`` written ``rm:hadType``, a key/value
  entry's value ``rm:entryValue`` as its JSON text, so that no current-state query
  matches a version), or ``a rm:Tombstone`` once the resource is deleted;
* ``<resource> rm:latestVersion <version>``: the head of the chain (replaced each write).

All of it lives in the history graph of the data graph (``history_graph``:
``urn:rdfmem:history:`` + the data graph's IRI), never in the data graph. A version's IRI
holds its time (``urn:rdfmem:version:20261123T231500.123456Z-<random>-<n>``), so order and
time are read from the IRI on every backend (Virtuoso rounds some ``xsd:dateTime``
literals). A key/value write adds 8 quads the first time, 10 afterwards (one more with a
reason), and moves the head (removes 1). See docs/history.md.
"""

from __future__ import annotations

import datetime as _dt
import random
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache

from pyoxigraph import Literal, NamedNode, Quad

from rdfmem.backends.base import Backend
from rdfmem.core.errors import HistoryUnavailable, InvalidTerm, InvalidValue
from rdfmem.core.ontology import RDFMEM

__all__ = [
    "ACTIVITY_PREFIX",
    "DEFAULT_AGENT",
    "HISTORY_PREFIX",
    "VERSION_PREFIX",
    "Attribution",
    "HistoryClock",
    "Recorder",
    "StateLines",
    "attributed",
    "current_attribution",
    "data_graph_of",
    "history_graph",
    "hour_bucket",
    "depth_of",
    "latest_versions",
    "require",
    "time_of_version",
    "time_token",
]

PROV = "http://www.w3.org/ns/prov#"
RDF_TYPE = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")
XSD_DATETIME = NamedNode("http://www.w3.org/2001/XMLSchema#dateTime")
ACTIVITY = NamedNode(PROV + "Activity")
ENDED = NamedNode(PROV + "endedAtTime")
ASSOCIATED = NamedNode(PROV + "wasAssociatedWith")
SPECIALIZES = NamedNode(PROV + "specializationOf")
GENERATED_AT = NamedNode(PROV + "generatedAtTime")
GENERATED_BY = NamedNode(PROV + "wasGeneratedBy")
INVALIDATED_AT = NamedNode(PROV + "invalidatedAtTime")
REVISION_OF = NamedNode(PROV + "wasRevisionOf")
REASON = NamedNode(RDFMEM + "reason")
HOUR = NamedNode(RDFMEM + "hour")
LATEST = NamedNode(RDFMEM + "latestVersion")
HAD_TYPE = NamedNode(RDFMEM + "hadType")
#: Myers jump pointers written by earlier versions of rdfmem: read as bookkeeping, removed
#: with the versions they point to; no longer written (the version index replaced them).
SKIP = NamedNode(RDFMEM + "skip")
VALUE = NamedNode(RDFMEM + "entryValue")
TOMBSTONE = NamedNode(RDFMEM + "Tombstone")
COMPACTION = NamedNode(RDFMEM + "Compaction")
COMPACTED_BEFORE = NamedNode(RDFMEM + "compactedBefore")
REMOVED_VERSIONS = NamedNode(RDFMEM + "removedVersions")

HISTORY_PREFIX = "urn:rdfmem:history:"
VERSION_PREFIX = "urn:rdfmem:version:"
ACTIVITY_PREFIX = "urn:rdfmem:activity:"
#: Who wrote, when neither ``attributed(by=...)`` nor the store's ``agent=`` says.
DEFAULT_AGENT = "urn:rdfmem:agent:unattributed"
_UTC = _dt.timezone.utc
_TOKEN_LEN = len("20261123T231500.123456Z")


def history_graph(graph: NamedNode | str) -> NamedNode:
    """The history graph beside the data graph ``graph``.

    >>> history_graph("urn:rdfmem:graph:store").value
    'urn:rdfmem:history:urn:rdfmem:graph:store'
    >>> data_graph_of("urn:rdfmem:history:urn:rdfmem:graph:store")
    'urn:rdfmem:graph:store'
    """
    return _history_node(graph.value if isinstance(graph, NamedNode) else graph)


@lru_cache(maxsize=1024)
def _history_node(iri: str) -> NamedNode:
    return NamedNode(HISTORY_PREFIX + iri)


def data_graph_of(history_iri: str) -> str | None:
    """The data graph whose history ``history_iri`` is, or None when it is none."""
    if not history_iri.startswith(HISTORY_PREFIX):
        return None
    return history_iri[len(HISTORY_PREFIX) :]


def time_token(moment: _dt.datetime) -> str:
    """A fixed-width UTC token of ``moment`` (tokens sort as the times do).

    >>> time_token(_dt.datetime(2026, 11, 23, 23, 15, 0, 12, tzinfo=_UTC))
    '20261123T231500.000012Z'
    """
    utc = moment if moment.tzinfo is _UTC else utc_time(moment)
    return (
        f"{utc.year:04d}{utc.month:02d}{utc.day:02d}T{utc.hour:02d}{utc.minute:02d}"
        f"{utc.second:02d}.{utc.microsecond:06d}Z"
    )


def _from_token(token: str) -> _dt.datetime:
    return _dt.datetime(
        int(token[0:4]),
        int(token[4:6]),
        int(token[6:8]),
        int(token[9:11]),
        int(token[11:13]),
        int(token[13:15]),
        int(token[16:22]),
        tzinfo=_UTC,
    )


def time_of_version(iri: str) -> _dt.datetime | None:
    """The time held by a version's (or an activity's) IRI; None for another IRI."""
    for prefix in (VERSION_PREFIX, ACTIVITY_PREFIX):
        if iri.startswith(prefix):
            token = iri[len(prefix) : len(prefix) + _TOKEN_LEN]
            try:
                return _from_token(token)
            except ValueError:
                return None
    return None


def token_of_version(iri: str) -> str:
    """The sortable time token of a version IRI ("" for another IRI)."""
    if iri.startswith(VERSION_PREFIX):
        return iri[len(VERSION_PREFIX) : len(VERSION_PREFIX) + _TOKEN_LEN]
    return ""


def depth_of(iri: str) -> int | None:
    """A version's place in its chain (1: the first), when its IRI says (versions written
    by ``Recorder.record`` do; those of ``versioning_update`` do not).

    >>> depth_of("urn:rdfmem:version:20260101T000000.000000Z-ab12cd34-0-d7"), depth_of("x")
    (7, None)
    """
    cut = iri.rfind("-d")
    if cut < 0 or not iri.startswith(VERSION_PREFIX):
        return None
    digits = iri[cut + 2 :]
    return int(digits) if digits.isdigit() else None


def utc_time(moment: object) -> _dt.datetime:
    """``moment`` in UTC (a naive datetime is taken as UTC).

    Raises:
        InvalidValue: ``moment`` is not a ``datetime``.
    """
    if not isinstance(moment, _dt.datetime):
        raise InvalidValue(
            f"a time must be a datetime (timezone-aware, or naive meaning UTC), not {moment!r}"
        )
    if moment.tzinfo is None:
        return moment.replace(tzinfo=_UTC)
    return moment.astimezone(_UTC)


def hour_bucket(moment: _dt.datetime) -> str:
    """The ``rm:hour`` bucket of ``moment``: its UTC hour as ``YYYY-MM-DDTHH``.

    >>> hour_bucket(_dt.datetime(2026, 11, 23, 23, 59, tzinfo=_UTC))
    '2026-11-23T23'
    """
    utc = utc_time(moment)
    return f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}"


def date_literal(moment: _dt.datetime) -> Literal:
    """An ``xsd:dateTime`` literal in UTC, to the microsecond."""
    text = utc_time(moment).isoformat(timespec="microseconds").replace("+00:00", "Z")
    return Literal(text, datatype=XSD_DATETIME)


def _token_literal(token: str) -> Literal:
    # ``date_literal`` of a time token's moment, from its text.
    t = token
    return Literal(
        f"{t[0:4]}-{t[4:6]}-{t[6:8]}T{t[9:11]}:{t[11:13]}:{t[13:22]}Z", datatype=XSD_DATETIME
    )


@lru_cache(maxsize=64)
def _hour_literal(compact: str) -> Literal:
    # ``hour_bucket`` of a time token's first 11 characters ("20261123T23").
    return Literal(f"{compact[0:4]}-{compact[4:6]}-{compact[6:8]}T{compact[9:11]}")


@lru_cache(maxsize=256)
def _agent_node(iri: str) -> NamedNode:
    return NamedNode(iri)


class HistoryClock:
    """UTC now, strictly later than the last time it gave, and than any ``after``.

    ``token`` gives the same times as ``time_token`` text, made from the integer time (a
    second's text once, then only its fraction: issue 24's write cost)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = -(1 << 62)  # microseconds since 1970 of the last time given
        self._second: tuple[int, str] = (-1, "")

    def _micros(self, after: int) -> int:
        with self._lock:
            now = time.time_ns() // 1000
            floor = self._last if after < self._last else after
            if now <= floor:
                now = floor + 1
            self._last = now
            return now

    def now(self, after: _dt.datetime | None = None) -> _dt.datetime:
        floor = -(1 << 62) if after is None else _micros_of(after)
        return _EPOCH + _dt.timedelta(microseconds=self._micros(floor))

    def token(self) -> str:
        """``time_token(self.now())``."""
        if type(self).now is not HistoryClock.now:  # a clock of other times (tests)
            return time_token(self.now())
        second, fraction = divmod(self._micros(-(1 << 62)), 1_000_000)
        known = self._second
        if known[0] != second:
            known = self._second = (second, time.strftime("%Y%m%dT%H%M%S", time.gmtime(second)))
        return f"{known[1]}.{fraction:06d}Z"


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _micros_of(moment: _dt.datetime) -> int:
    # ``moment`` as whole microseconds since 1970 (a naive one taken as UTC).
    delta = utc_time(moment) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


#: One clock for the process: every store of it hands out strictly increasing times.
CLOCK = HistoryClock()


@dataclass(frozen=True)
class Attribution:
    """Who writes (``by``, an IRI) and why (``why``, text), when an ``attributed`` block
    says; None where it does not."""

    by: str | None = None
    why: str | None = None


_NOBODY = Attribution()
_ATTRIBUTION: ContextVar[Attribution | None] = ContextVar("rdfmem_attribution", default=None)


def current_attribution() -> Attribution:
    """The attribution of the innermost ``attributed`` block of this thread or task."""
    return _ATTRIBUTION.get() or _NOBODY


def _check_agent(by: object) -> str:
    if isinstance(by, NamedNode):
        return by.value
    if not isinstance(by, str) or not by:
        raise InvalidTerm(f"by= / agent= must be an agent IRI such as 'urn:agent:planner': {by!r}")
    try:
        NamedNode(by)
    except ValueError as exc:
        raise InvalidTerm(
            f"by= / agent= must be an IRI such as 'urn:agent:planner', not {by!r}: {exc}"
        ) from exc
    return by


def check_agent(by: object) -> str:
    """``by`` as an IRI string.

    Raises:
        InvalidTerm: ``by`` is not an IRI.
    """
    return _check_agent(by)


@contextmanager
def attributed(by: str | NamedNode | None = None, why: str | None = None) -> Iterator[None]:
    """Attribute the writes made inside the block (this thread or task, and the async
    twins it awaits) to ``by`` with the reason ``why``. Blocks nest: an inner block
    keeps what it does not say from the outer one.

    Raises:
        InvalidTerm: ``by`` is not an IRI.
        InvalidValue: ``why`` is not a str.
    """
    outer = _ATTRIBUTION.get() or _NOBODY
    agent = outer.by if by is None else _check_agent(by)
    if why is not None and not isinstance(why, str):
        raise InvalidValue(f"why= must be a str, not {why!r}")
    if why is not None:
        why.encode("utf-8")
    token = _ATTRIBUTION.set(Attribution(agent, outer.why if why is None else why))
    try:
        yield
    finally:
        _ATTRIBUTION.reset(token)


@dataclass(frozen=True)
class StateLines:
    """A resource's quads after a write, as the N-Triples lines the write itself sent for
    them (one triple a line: ``<subject> <predicate> object .``). Given to
    ``versioning_update(states=...)``, the version copies this text (each line checked to
    be one triple about the resource), so a big literal such as an embedding is not
    written out a second time.

    ``sent``: the lines, joined by newlines, are the body of an ``INSERT DATA`` into the
    resource's graph in the very request the version is appended to (the caller checked:
    ``memory_history.versioned``). The version then adds no text the request does not
    already send as data of that graph, and its lines are checked for what the copy
    itself needs only (the resource, the end, no backslash, no line break, no blank node),
    not term by term; any line that fails is checked as usual."""

    lines: tuple[str, ...]
    sent: bool = False


@dataclass(frozen=True)
class Stamp:
    """One write's activity: its IRI, time, agent and reason."""

    activity: NamedNode
    at: _dt.datetime
    by: str
    why: str | None

    @property
    def token(self) -> str:
        return self.activity.value[len(ACTIVITY_PREFIX) :]

    def quads(self, history: NamedNode, when: Literal | None = None) -> list[Quad]:
        """The activity's quads (3, or 4 with a reason); ``when``: its time's literal. It is
        not typed ``prov:Activity``: ``prov:wasGeneratedBy``'s range says so."""
        a = self.activity
        token = self.token
        out = [
            Quad(a, ENDED, when or _token_literal(token), history),
            Quad(a, ASSOCIATED, _agent_node(self.by), history),
            Quad(a, HOUR, _hour_literal(token[:11]), history),
        ]
        if self.why is not None:
            out.append(Quad(a, REASON, Literal(self.why), history))
        return out

    def version(self, n: int, depth: int | None = None) -> NamedNode:
        """The ``n``-th version this activity makes; ``depth``: its place in its chain
        (the first version is 1), written last in the IRI (``depth_of``)."""
        tail = "" if depth is None else f"-d{depth}"
        return NamedNode(f"{VERSION_PREFIX}{self.token}-{n}{tail}")


class Recorder:
    """The history side of one store: its default agent, its clock and its retention.

    ``record`` turns a write's changes into the quads that record it, for the caller to
    apply with the data; ``sparql_versioning`` does it as SPARQL Update operations for a
    domain write made in SPARQL.
    """

    def __init__(
        self,
        agent: str | NamedNode | None = None,
        retention: _dt.timedelta | int | None = None,
        clock: HistoryClock = CLOCK,
    ) -> None:
        self.agent = DEFAULT_AGENT if agent is None else _check_agent(agent)
        age = isinstance(retention, _dt.timedelta) and retention > _dt.timedelta(0)
        count = type(retention) is int and retention >= 1
        if retention is not None and not (age or count):
            raise InvalidValue(
                "history_retention must be a positive timedelta (an age) or an int >= 1 "
                f"(versions kept per resource), not {retention!r}"
            )
        self.retention = retention
        self.clock = clock

    def stamp(self, after: _dt.datetime | None = None) -> Stamp:
        """A new activity, later than ``after`` and than any time this process gave."""
        attribution = _ATTRIBUTION.get() or _NOBODY
        at = self.clock.now(after)
        # Unique across processes writing at the same microsecond (``random`` is seeded
        # again in a forked child).
        token = f"{time_token(at)}-{random.getrandbits(32):08x}"
        return Stamp(
            NamedNode(ACTIVITY_PREFIX + token),
            at,
            attribution.by or self.agent,
            attribution.why,
        )

    def stamp_after(self, heads: Iterable[NamedNode]) -> Stamp:
        """A new activity later than each of ``heads`` (versions: a write is later than
        the version it replaces, also when another process or client made it)."""
        newest = max((token_of_version(h.value) for h in heads), default="")
        stamp = self.stamp()
        if newest and stamp.token[:_TOKEN_LEN] <= newest:
            # A head from a clock ahead of this process's (rare): its time is read.
            after = _from_token(newest)
            stamp = self.stamp(after)
        return stamp

    def record(
        self,
        graph: NamedNode,
        changes: Sequence[tuple[NamedNode, Sequence[Quad]]],
        heads: Mapping[NamedNode, NamedNode],
        *,
        rename: Mapping[NamedNode, NamedNode] | None = None,
        made: list[tuple[str, str, bool]] | None = None,
    ) -> tuple[list[Quad], list[Quad]]:
        """The quads to remove and add, with the data, to record ``changes``: each a
        resource and its quads after the write ([] once deleted). ``heads``: each
        resource's latest version now (``latest_versions``, or the store's
        ``VersionIndex``). ``rename`` maps predicates of the state (``rdf:type`` is always
        written ``rm:hadType``). ``made`` gets ``(resource, version, deleted)`` of each
        version (IRIs), for the store's ``VersionIndex``."""
        history = history_graph(graph)
        # Later than every head (a write is later than the version it replaces, also when
        # another process or client made it): IRIs sort by time, one is read.
        stamp = self.stamp_after(heads.values())
        when = _token_literal(stamp.token)
        activity = stamp.activity
        remove: list[Quad] = []
        add = stamp.quads(history, when)
        names = {RDF_TYPE: HAD_TYPE, **(rename or {})}
        for n, (subject, state) in enumerate(changes):
            prev = heads.get(subject)
            depth = 1 if prev is None else depth_of(prev.value)
            v = stamp.version(n, None if depth is None else depth + (prev is not None))
            add += (
                Quad(v, SPECIALIZES, subject, history),
                Quad(v, GENERATED_AT, when, history),
                Quad(v, GENERATED_BY, activity, history),
                Quad(subject, LATEST, v, history),
            )
            if prev is not None:
                remove.append(Quad(subject, LATEST, prev, history))
                add += (
                    Quad(prev, INVALIDATED_AT, when, history),
                    Quad(v, REVISION_OF, prev, history),
                )
            for q in state:
                p = q.predicate
                p = names.get(p, p)
                o = q.object
                if p == VALUE and isinstance(o, Literal):
                    # JSON text as a plain string: Virtuoso mishandles one typed literal
                    # written twice in a request (the entry's DELETE misses).
                    o = Literal(o.value)
                add.append(Quad(v, p, o, history))
            if not state:
                add.append(Quad(v, RDF_TYPE, TOMBSTONE, history))
            if made is not None:
                made.append((subject.value, v.value, not state))
        return remove, add


def require(recorder: Recorder | None) -> Recorder:
    """``recorder``, or ``HistoryUnavailable`` when the store keeps no history."""
    if recorder is None:
        raise HistoryUnavailable(
            "this store keeps no history: open it with history=True (RdfStore(history=True), "
            "RdfStore.open(path, history=True), RdfStore.connect(..., history=True))"
        )
    return recorder


def latest_versions(
    backend: Backend, graph: NamedNode, subjects: Sequence[NamedNode]
) -> dict[NamedNode, NamedNode]:
    """Each subject's latest version (``rm:latestVersion``), for those that have one."""
    history = history_graph(graph)
    heads: dict[NamedNode, NamedNode] = {}
    for subject in subjects:
        for quad in backend.match(subject, LATEST, None, history):
            if isinstance(quad.object, NamedNode):
                heads[subject] = quad.object
    return heads
