"""Each resource's chain of versions, in process: ``get(key, as_of=t)`` as a dict lookup and a
bisect instead of backend reads (``rdfmem.store.history``).

An embedded store (one with an ``IndexHub``) keeps one ``VersionIndex`` per history graph.
The key/value writes feed it in the critical section of the write (``note``), and a read
or a write first asks the hub whether the history graph was written around it (a raw
update, ``compact_history``, a domain write, another process): then the index forgets
everything (``clear``, O(1)) and reads each resource's chain again when it is next asked
for it (one query of its versions), so a write elsewhere costs the resources read after
it, not a rebuild of the whole history. It holds at most ``MAX_VERSIONS`` versions.

A chain is the resource's version IRIs sorted by time (a version IRI begins with its time
token, ``time_token``); the version in effect at a moment is the last one whose token is
at or before the moment's.

>>> index = VersionIndex("urn:rdfmem:history:urn:g")
>>> v1 = "urn:rdfmem:version:20260101T000000.000000Z-aa-0-d1"
>>> v2 = "urn:rdfmem:version:20260102T000000.000000Z-bb-0-d2"
>>> index.chains["urn:s"] = [v1]
>>> index.note("urn:s", v2, deleted=True)
>>> index.at("urn:s", "20260101T120000.000000Z") == v1, index.head("urn:s") == v2
(True, True)
>>> index.at("urn:s", "20251231T000000.000000Z") is None
True
"""

from __future__ import annotations

import bisect
import weakref
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

from pyoxigraph import Literal, NamedNode, QuerySolutions

from rdfmem.backends.base import Backend
from rdfmem.core.errors import QueryError
from rdfmem.core.results import SelectResult
from rdfmem.core.terms import sparql_term
from rdfmem.store.indexes.changelist import ChangeLog


class _Hub(Protocol):
    """What ``fresh_index`` asks of a store's ``IndexHub`` (which saves these indexes, so
    this module does not import it)."""

    backend: Backend

    @property
    def generation(self) -> int: ...

    def fresh(self, seen: int, graphs: Sequence[str]) -> bool: ...


__all__ = [
    "MAX_CHANGES",
    "MAX_VERSIONS",
    "VersionIndex",
    "fresh_index",
    "kept_indexes",
    "token_key",
    "version_index",
]

#: The versions an index holds at most (~100 bytes each) before a write makes it forget.
MAX_VERSIONS = 1_000_000
#: The versions a change log holds at most (~65 bytes each) before it is let go.
MAX_CHANGES = 20_000_000
_PREFIX_LEN = len("urn:rdfmem:version:")
_TOKEN_END = _PREFIX_LEN + len("20261123T231500.123456Z")
_SPECIALIZES = NamedNode("http://www.w3.org/ns/prov#specializationOf")
_TOMBSTONE = NamedNode("https://w3id.org/rdfmem#Tombstone")


def token_key(iri: str) -> str:
    """The time token of a version IRI: what a chain is sorted by."""
    return iri[_PREFIX_LEN:_TOKEN_END]


class VersionIndex:
    """The version chains of one history graph (``graph``), as read or written since
    ``seen`` (the backend generation it was last consistent with).

    ``chains``: resource IRI -> its version IRIs, oldest first (a resource missing here
    is read on demand); ``complete``: every resource of the graph is in ``chains``;
    ``dead``: the tombstones, when read (``tombstones``); ``log``: every version in time
    order with what ``changes_since`` reports (``rdfmem.store.indexes.changelist``), when
    known whole; ``built``/``missed``: the seconds its last build took, and those that
    reads of the SPARQL buckets took since it went (``history_reads`` builds it again when
    they reach the build's).
    """

    __slots__ = (
        "__weakref__",
        "built",
        "chains",
        "complete",
        "dead",
        "graph",
        "log",
        "missed",
        "pending",
        "seen",
        "size",
    )

    def __init__(self, graph: str) -> None:
        self.graph = graph
        self.seen = -1
        self.chains: dict[str, list[str]] = {}
        self.complete = False
        self.dead: set[str] | None = None
        #: Versions held (about): past ``MAX_VERSIONS`` a write forgets them all.
        self.size = 0
        self.log: ChangeLog | None = None
        self.built = 0.0
        self.missed = 0.0
        #: While the log is read whole on a thread of its own: what this store's writes
        #: did meanwhile (``("add", version, subject, by, why, deleted)`` or
        #: ``("removed", versions)``), to be laid over what that read found.
        self.pending: list[tuple[Any, ...]] | None = None

    def clear(self, generation: int) -> None:
        """Forget everything: the next reads go to the backend (as of ``generation``)."""
        self.chains = {}
        self.complete = False
        self.dead = None
        self.size = 0
        self.seen = generation
        self.log = None
        self.missed = 0.0
        self.pending = None  # a write of unknown effect: a log read meanwhile is let go

    def chain(self, backend: Backend, subject: str) -> list[str]:
        """``subject``'s versions, oldest first (read from the backend the first time)."""
        found = self.chains.get(subject)
        if found is None:
            if self.complete:
                return []
            found = sorted(
                _iris(backend, f"?v <{_SPECIALIZES.value}> {_iri(subject)}", self.graph),
                key=token_key,
            )
            self.chains[subject] = found
            self.size += len(found)
        return found

    def head(self, subject: str) -> str | None:
        """The latest version of a resource whose chain is loaded (None: no version)."""
        found = self.chains.get(subject)
        return found[-1] if found else None

    def at(self, subject: str, token: str) -> str | None:
        """The version of a loaded chain in effect at the time ``token`` (None: none yet)."""
        found = self.chains.get(subject)
        if not found:
            return None
        cut = bisect.bisect_right(found, token, key=token_key)
        return found[cut - 1] if cut else None

    def note(
        self,
        subject: str,
        version: str,
        *,
        deleted: bool,
        by: str | None = None,
        why: str | None = None,
    ) -> None:
        """A write made ``version`` of ``subject`` (after every version it has), by the
        agent ``by`` for the reason ``why`` (its activity: the one its IRI names)."""
        log = self.log
        if log is not None:
            log.add(version, subject, by, why, deleted=deleted, activity=None)
            if len(log) > MAX_CHANGES:
                self.log = None
        elif self.pending is not None:
            self.pending.append(("add", version, subject, by, why, deleted))
        if self.size >= MAX_VERSIONS:
            # Memory bounded: chains are read again when asked for (the log stays).
            self.chains, self.complete, self.dead, self.size = {}, False, None, 0
            return
        self.size += 1
        found = self.chains.get(subject)
        if found is not None:
            if found and token_key(found[-1]) > token_key(version):
                bisect.insort(found, version, key=token_key)
            else:
                found.append(version)
        elif self.complete:
            self.chains[subject] = [version]
        if deleted and self.dead is not None:
            self.dead.add(version)

    def drop(self, subjects: Iterable[str]) -> None:
        """Read these resources' chains again when next asked (a write removed versions)."""
        for subject in subjects:
            if self.chains.pop(subject, None) is not None:
                self.complete = False

    def removed(self, versions: set[str]) -> None:
        """These versions were removed (a retention): the log no longer reports them."""
        if self.log is not None and versions:
            self.log.remove(versions)
        elif self.pending is not None and versions:
            self.pending.append(("removed", set(versions)))

    def everything(self, backend: Backend) -> Iterator[tuple[str, list[str]]]:
        """Every resource's chain (the whole graph read once, then kept)."""
        if not self.complete:
            chains: dict[str, list[str]] = {}
            # No FILTER: one in this query doubles its cost in Oxigraph. A blank-node
            # resource is skipped here; a resource with a blank-node "version" (not one
            # rdfmem writes) gets no concatenation (STR fails), and is read on its own.
            for row in _select(
                backend,
                f"SELECT ?s ({_CONCAT}) WHERE {{ GRAPH {_iri(self.graph)} "
                f"{{ ?v <{_SPECIALIZES.value}> ?s }} }} GROUP BY ?s",
            ):
                resource, listed = row.get("s"), row.get("all")
                if not isinstance(resource, NamedNode):
                    continue
                if isinstance(listed, Literal):
                    chains[resource.value] = sorted(listed.value.split(), key=token_key)
                else:
                    chains[resource.value] = sorted(
                        _iris(
                            backend, f"?v <{_SPECIALIZES.value}> {_iri(resource.value)}", self.graph
                        ),
                        key=token_key,
                    )
            self.chains = chains
            self.complete = True
            self.size = sum(len(found) for found in chains.values())
        return iter(self.chains.items())

    def tombstones(self, backend: Backend) -> set[str]:
        """The versions that record a deletion (read once, then kept)."""
        if self.dead is None:
            self.dead = set(_iris(backend, f"?v a <{_TOMBSTONE.value}>", self.graph))
        return self.dead


#: Version IRIs hold no spaces: a resource's versions come back as one string, so that
#: Python builds one object per resource rather than a quad (four terms) per version.
_CONCAT = "GROUP_CONCAT(STR(?v); separator=' ') AS ?all"


def _iri(value: str) -> str:
    return sparql_term(NamedNode(value))


def _select(backend: Backend, sparql: str) -> SelectResult:
    raw = backend.query(sparql)
    if not isinstance(raw, QuerySolutions):
        raise QueryError(f"expected the rows of a SELECT, got {type(raw).__name__}")
    result = SelectResult(raw)
    del raw
    result.rows  # noqa: B018 - read here, on this thread (pyoxigraph's rows are unsendable)
    return result


def _iris(backend: Backend, pattern: str, graph: str) -> list[str]:
    # The IRIs ``?v`` matching ``pattern`` in ``graph``: as rows, the IRIs kept in Python
    # (as fast as one GROUP_CONCAT row; a FILTER (isIRI(?v)) in the query doubles its cost).
    rows = _select(backend, f"SELECT ?v WHERE {{ GRAPH {_iri(graph)} {{ {pattern} }} }}")
    return [v.value for row in rows if isinstance(v := row.get("v"), NamedNode)]


_INDEXES: weakref.WeakKeyDictionary[object, dict[str, VersionIndex]] = weakref.WeakKeyDictionary()


def version_index(owner: object, graph: str) -> VersionIndex:
    """The version index of the history graph ``graph`` kept for ``owner`` (a store's
    ``IndexHub``: its freshness is the hub's to say), taken from the index file the store
    opened with when it saved one."""
    kept = _INDEXES.get(owner)
    if kept is None:
        kept = _INDEXES.setdefault(owner, {})
    found = kept.get(graph)
    if found is None:
        take = getattr(owner, "saved_index", None)
        saved = take("versions", graph) if take is not None else None
        found = saved if isinstance(saved, VersionIndex) else VersionIndex(graph)
        kept[graph] = found
    return found


def kept_indexes(owner: object) -> list[VersionIndex]:
    """The version indexes kept for ``owner`` (to save beside an on-disk store)."""
    return list(_INDEXES.get(owner, {}).values())


def fresh_index(hub: _Hub, data_graph: str, history: str) -> VersionIndex:
    """``version_index(hub, history)``, forgotten first when the hub says that the history
    graph ``history`` or its data graph ``data_graph`` was written around it (a domain
    write versions its resources in the request that writes their data graph, and names
    only that one to the hub). Call under ``backend.lock`` (``hub.reading``, or in a
    write's section)."""
    index = version_index(hub, history)
    if not hub.fresh(index.seen, (data_graph, history)):
        index.clear(hub.generation)
        # No version at all yet: every chain is the writes' own, kept from the first one
        # (and saved at close), so no later first read of a resource asks the backend.
        if next(hub.backend.match(None, _SPECIALIZES, None, NamedNode(history)), None) is None:
            index.complete = True
            index.log = ChangeLog()
    return index
