"""The key/value half of ``RdfStore`` (the Dagonizer Store contract), over any backend."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from typing import Any, TypeAlias

from pyoxigraph import Literal, NamedNode, Quad

from rdfmem.backends.base import Backend
from rdfmem.backends.oxigraph import OxigraphBackend
from rdfmem.backends.sparql.lease_steps import RANGE_DELIMITERS
from rdfmem.core.errors import IncompatibleSnapshot, InvalidKey, Unreachable
from rdfmem.core.keys import KeyCodec, decode_value, encode_value, loads
from rdfmem.store.history import (
    SPECIALIZES,
    VALUE,
    Recorder,
    current_attribution,
    history_graph,
    latest_versions,
    require,
)
from rdfmem.store.history_compact import retained
from rdfmem.store.history_entry import EntryTexts, entry_request
from rdfmem.store.history_reads import subjects_at, version_at
from rdfmem.store.history_text import record_text
from rdfmem.store.history_wire import apply_versioned
from rdfmem.store.indexes.hub import IndexHub
from rdfmem.store.indexes.versions import VersionIndex, fresh_index

__all__ = [
    "Edit",
    "KeyValue",
    "SNAPSHOT_TYPE",
    "SNAPSHOT_VERSION",
    "delete_edit",
    "set_edit",
    "update_edit",
]

SNAPSHOT_TYPE = "rdfmem-store-v1"
SNAPSHOT_VERSION = 1
_ABSENT = ""  # never valid JSON text, so it can mark "no entry" in the cache
_CACHE_LIMIT = 100_000


def _text(quad: Quad) -> str:
    term = quad.object
    return term.value if isinstance(term, Literal) else ""


def _iri(quad: Quad) -> str:
    term = quad.subject
    return term.value if isinstance(term, NamedNode) else ""


class _ReadCache:
    """JSON text of recently read or written entries, forgotten whenever the backend is
    written by anyone (``backend.generation`` moves). Only used on backends whose every
    write passes through rdfmem (``exclusive_writer``)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.generation = -1
        self.data: dict[str, str] = {}

    def get(self, key: str) -> str | None:
        if self.generation != self.backend.generation:
            return None
        return self.data.get(key)

    def put(self, key: str, text: str, generation: int) -> None:
        # Only a value read (or written) at the backend's current generation is kept.
        if generation != self.backend.generation:
            return
        if self.generation != generation or len(self.data) >= _CACHE_LIMIT:
            self.data = {}
            self.generation = generation
        self.data[key] = text


#: A read-modify-write of one entry, as data: given the entry's quads now, the quads it
#: should hold (None: leave it as it is) and what the call returns. ``KeyValue``'s sync
#: methods and ``RemoteStore``'s network twins run the same edits, so the key/value logic
#: is written once; only where it runs (a lock and the backend, or a lease over HTTP) differs.
Edit: TypeAlias = Callable[[list[Quad]], tuple[list[Quad] | None, Any]]


def set_edit(entry: Quad) -> Edit:
    """Store ``entry``, whatever was there; returns None."""
    return lambda old: ([entry], None)


def delete_edit(old: list[Quad]) -> tuple[list[Quad] | None, bool]:
    """Remove the entry; returns whether there was one."""
    return ([] if old else None), bool(old)


def update_edit(
    subject: NamedNode, predicate: NamedNode, graph: NamedNode, fn: Callable[[Any], Any]
) -> Edit:
    """Store ``fn(current value or None)``; returns the new value.

    >>> from pyoxigraph import NamedNode as N
    >>> edit = update_edit(N("urn:k"), N("urn:v"), N("urn:g"), lambda n: (n or 0) + 1)
    >>> new, value = edit([])
    >>> value, new[0].object.value
    (1, '1')
    >>> delete_edit([]), delete_edit(new)[1]
    ((None, False), True)
    """

    def edit(old: list[Quad]) -> tuple[list[Quad], Any]:
        value = fn(decode_value(old[0].object) if old else None)
        return [Quad(subject, predicate, encode_value(value), graph)], value

    return edit


class KeyValue:
    """get / set / has / delete / update / keys / snapshot / restore, reified as triples."""

    backend: Backend
    namespace: str
    _codec: KeyCodec
    _kv_graph: NamedNode
    _value_predicate: NamedNode
    _cache: _ReadCache | None
    _hub: IndexHub | None
    _history: Recorder | None

    def _init_kv(self) -> None:
        self._cache = _ReadCache(self.backend) if self.backend.exclusive_writer else None
        # This namespace's subject prefix as a lease range (``exclusive``'s ``within``).
        self._kv_graphs: tuple[str, ...] = (self._kv_graph.value,)
        if self._history is not None:
            self._kv_graphs += (history_graph(self._kv_graph).value,)
        #: The version index and the versions of the write in progress (an embedded store's
        #: writes hold ``backend.lock``), for ``_apply`` to note.
        self._pending: tuple[VersionIndex, list[tuple[str, str, bool]]] | None = None
        #: The history of the write in progress as SPARQL DATA text (an embedded Oxigraph
        #: store without retention: ``history_text.record_text``), for ``_apply`` to send.
        self._pending_text: tuple[str, str] | None = None
        prefix = self._codec.ns_prefix
        self._range = prefix if prefix[-1:] and prefix[-1] in RANGE_DELIMITERS else None
        #: One entry's versioned write as one request made from strings (``_entry_written``):
        #: an embedded Oxigraph store keeping history without retention.
        backend = self.backend
        self._entry_texts: EntryTexts | None = None
        if (
            self._history is not None
            and self._history.retention is None
            and self._hub is not None
            and isinstance(backend, OxigraphBackend)
        ):
            self._entry_texts = EntryTexts(self._kv_graph.value, self._value_predicate.value)

    def _entry_write(self) -> AbstractContextManager[Any]:
        # An entry write touches only the entry graph: the index hub leaves the indexes of
        # other graphs (vectors, decisions) fresh. Inside the lease or lock of the write.
        hub = self._hub
        return nullcontext() if hub is None else hub.writing(self._kv_graphs)

    def _entry_quads(self, subject: NamedNode) -> list[Quad]:
        return list(self.backend.match(subject, self._value_predicate, None, self._kv_graph))

    def _entry(self, subject: NamedNode, value: Any) -> Quad:
        return Quad(subject, self._value_predicate, encode_value(value), self._kv_graph)

    def get(self, key: str, default: Any = None, *, as_of: datetime | None = None) -> Any:
        """The value stored under ``key``, or ``default``; with ``as_of``, the value it held
        at that moment (a store with ``history=True``).

        >>> from rdfmem import RdfStore
        >>> store = RdfStore()
        >>> store.set("budget", 4096)
        >>> store.get("budget"), store.get("missing", 0)
        (4096, 0)

        Raises:
            InvalidKey: the key is empty or not a str.
            HistoryUnavailable: ``as_of`` on a store that keeps no history.
        """
        subject = self._codec.subject(key)
        if as_of is not None:
            return self._get_as_of(subject, as_of, default)
        cache = self._cache
        text = cache.get(key) if cache is not None else None
        if text is None:
            generation = self.backend.generation
            quads = self._entry_quads(subject)
            text = _text(quads[0]) if quads else _ABSENT
            if cache is not None:
                cache.put(key, text, generation)
        return loads(text) if text else default

    def _get_as_of(self, subject: NamedNode, moment: datetime, default: Any) -> Any:
        require(self._history)
        version = version_at(self.backend, self._kv_graph, subject, moment, self._hub)
        if version is None:
            return default
        # An entry's version holds its value; a tombstone holds none.
        for quad in self.backend.match(version, VALUE, None, history_graph(self._kv_graph)):
            return decode_value(quad.object)
        return default

    @property
    def _renames(self) -> dict[NamedNode, NamedNode]:
        return {self._value_predicate: VALUE}

    def _versions(self) -> VersionIndex | None:
        # The version index of this store's history graph, fresh (under the write's lock).
        hub = self._hub
        if hub is None or self._history is None:
            return None
        return fresh_index(hub, *self._kv_graphs)

    def _versioned(
        self, changes: list[tuple[NamedNode, list[Quad]]]
    ) -> tuple[list[Quad], list[Quad]]:
        # The history quads of a write (none without history), under its lock or lease:
        # the heads from the version index of an embedded store, else from the backend.
        recorder = self._history
        self._pending = self._pending_text = None
        if recorder is None or not changes:
            return [], []
        backend = self.backend
        index = self._versions()
        made: list[tuple[str, str, bool]] | None = None
        if index is None:
            heads = latest_versions(backend, self._kv_graph, [s for s, _ in changes])
        else:
            heads = {}
            for subject, _ in changes:
                chain = index.chain(backend, subject.value)
                if chain:
                    heads[subject] = NamedNode(chain[-1])
            made = []
            self._pending = (index, made)
            if recorder.retention is None and isinstance(backend, OxigraphBackend):
                # Straight to text: no ``Quad`` objects for the history (the state is
                # the entries' quads: IRIs and literals, no blank node).
                self._pending_text = record_text(
                    recorder, self._kv_graph, changes, heads, rename=self._renames, made=made
                )
                return [], []
        gone, added = recorder.record(
            self._kv_graph, changes, heads, rename=self._renames, made=made
        )
        if recorder.retention is not None:
            return retained(self.backend, self._kv_graph, gone, added, recorder.retention)
        return gone, added

    def _apply(self, remove: list[Quad], add: list[Quad]) -> None:
        if self._history is None:
            self.backend.apply(remove, add)
            return
        pending, self._pending = self._pending, None
        text, self._pending_text = self._pending_text, None
        backend = self.backend
        if text is not None and isinstance(backend, OxigraphBackend):
            backend.apply_text(remove, add, *text)
        else:
            apply_versioned(backend, remove, add)
        if pending is None:
            return
        # Recorded: the version index learns the new versions (and forgets the chains
        # whose versions the retention removed), as of this write.
        index, made = pending
        if self._history.retention is not None:
            gone = [q for q in remove if q.predicate == SPECIALIZES]
            index.drop(o.value for q in gone if isinstance(o := q.object, NamedNode))
            index.removed({v.value for q in gone if isinstance(v := q.subject, NamedNode)})
        # Who and why: as ``Recorder.stamp`` read them for this write (same thread or task).
        said = current_attribution()
        by, why = said.by or self._history.agent, said.why
        for subject, version, deleted in made:
            index.note(subject, version, deleted=deleted, by=by, why=why)
        index.seen = self.backend.generation

    def set(self, key: str, value: Any) -> None:
        """Store a JSON value under ``key``; the last write wins.

        Raises:
            InvalidKey: the key is empty or not a str.
            InvalidValue: the value is not JSON; nothing is written.
        """
        subject = self._codec.subject(key)
        self._modify(key, subject, set_edit(self._entry(subject, value)))

    def has(self, key: str) -> bool:
        """True when ``key`` has an entry (even one holding ``None``)."""
        subject = self._codec.subject(key)
        cache = self._cache
        text = cache.get(key) if cache is not None else None
        if text is not None:
            return text != _ABSENT
        return bool(self._entry_quads(subject))

    def delete(self, key: str) -> bool:
        """Remove ``key``'s entry; True when there was one."""
        result: bool = self._modify(key, self._codec.subject(key), delete_edit)
        return result

    def update(self, key: str, fn: Callable[[Any], Any]) -> Any:
        """Atomic read-modify-write: store ``fn(current or None)`` and return it.

        N threads (or tasks, or clients of one server) each calling
        ``update(k, lambda n: (n or 0) + 1)`` leave exactly N.

        >>> from rdfmem import RdfStore
        >>> store = RdfStore()
        >>> store.update("hits", lambda n: (n or 0) + 1)
        1

        Raises:
            InvalidKey, InvalidValue: nothing is written; whatever ``fn`` raises propagates,
            and nothing is written either.
        """
        subject = self._codec.subject(key)
        edit = update_edit(subject, self._value_predicate, self._kv_graph, fn)
        return self._modify(key, subject, edit)

    def _modify(self, key: str, subject: NamedNode, edit: Edit) -> Any:
        # One entry's read-modify-write under the write lock (a lease on a server); the
        # index hub learns that only the entry graph moved, and the cache the new text.
        hub = self._hub
        with self.backend.exclusive([subject], self._range):
            old = self._entry_quads(subject)
            new, result = edit(old)
            if new is None:
                return result
            if hub is not None:
                hub.before_write()
            if not self._entry_written(subject, old, new):
                gone, added = self._versioned([(subject, new)])
                try:
                    self._apply(old + gone, new + added)
                except Unreachable:
                    if not getattr(self.backend, "journaled", False) or gone or added:
                        raise
                    self._settled(subject, old, new)
            if hub is not None:
                hub.after_write(self._kv_graphs)
            cache = self._cache
            if cache is not None:
                cache.put(key, _text(new[0]) if new else _ABSENT, self.backend.generation)
        return result

    def _entry_written(self, subject: NamedNode, old: list[Quad], new: list[Quad]) -> bool:
        # One entry's write and its version as one request made from strings
        # (``history_entry``), on an embedded Oxigraph store keeping history without
        # retention; False (nothing written) elsewhere, or for an entry written around
        # rdfmem whose value is not a literal.
        texts = self._entry_texts
        if texts is None:
            return False
        before, after = _values(old), _values(new)
        if before is None or after is None:
            return False
        backend = self.backend
        assert isinstance(backend, OxigraphBackend) and self._history is not None
        index = self._versions()
        assert index is not None
        chain = index.chain(backend, subject.value)
        write = entry_request(
            self._history,
            texts,
            subject.value,
            chain[-1] if chain else None,
            before,
            after,
        )
        backend.apply_text((), (), write.removed, write.added)
        # Recorded: the version index learns the new version, as of this write.
        index.note(subject.value, write.version, deleted=write.deleted, by=write.by, why=write.why)
        index.seen = backend.generation
        return True

    def _settled(self, subject: NamedNode, old: list[Quad], new: list[Quad]) -> None:
        """A process attached to an on-disk store whose owner went away with the answer to
        this write: the section still holds the subject (no other process wrote it), so
        the entry, read again from the next owner, says whether the write landed; when it
        did not, it is sent once more (``rdfmem.backends.attached``)."""
        now = set(self._entry_quads(subject))
        if now == set(new):
            return
        if now != set(old):
            raise Unreachable(
                f"the owner of this store went away during a write of {subject.value}, and "
                "what it holds now is neither the old nor the new entry",
                endpoint="the store's owner",
                cause=None,
            )
        self._apply(old, new)

    def update_many(
        self, keys: Iterable[str], fn: Callable[[dict[str, Any]], Mapping[str, Any]]
    ) -> dict[str, Any]:
        """Atomic read-modify-write of several keys in one step.

        ``fn`` gets ``{key: value}`` for the named keys that exist and returns the new
        mapping for them: a key it leaves out is deleted. Every change lands together, or
        (when ``fn`` raises or returns a value that is not JSON) none does.

        Raises:
            InvalidKey: ``fn`` returned a key it was not given.
        """
        if isinstance(keys, str):
            raise InvalidKey("update_many takes an iterable of keys, not one str")
        names = list(dict.fromkeys(keys))
        subjects = {key: self._codec.subject(key) for key in names}
        with self.backend.exclusive(list(subjects.values())), self._entry_write():
            old: dict[str, list[Quad]] = {k: self._entry_quads(s) for k, s in subjects.items()}
            current = {k: decode_value(q[0].object) for k, q in old.items() if q}
            result = dict(fn(dict(current)))
            stray = [k for k in result if k not in subjects]
            if stray:
                raise InvalidKey(f"update_many returned keys it was not given: {stray!r}")
            adds = [self._entry(subjects[k], v) for k, v in result.items()]
            removes = [q for quads in old.values() for q in quads]
            changed = [
                (s, [a for a in adds if a.subject == s])
                for k, s in subjects.items()
                if old[k] or k in result
            ]
            gone, added = self._versioned(changed)
            self._apply(removes + gone, adds + added)
        return result

    def keys(self, prefix: str = "", *, as_of: datetime | None = None) -> list[str]:
        """This namespace's keys that start with ``prefix``, unqualified, sorted; with
        ``as_of``, those that had an entry at that moment.

        Raises:
            HistoryUnavailable: ``as_of`` on a store that keeps no history.
        """
        key_of = self._codec.key_of
        if as_of is not None:
            require(self._history)
            alive = subjects_at(self.backend, self._kv_graph, as_of, self._hub)
            found = {key_of(s.value) for s in alive}
        else:
            found = {key_of(_iri(q)) for q in self._own_entries()}
        return sorted(k for k in found if k is not None and k.startswith(prefix))

    def _own_entries(self) -> list[Quad]:
        key_of = self._codec.key_of
        # Under the write lock: an in-memory set adds the new value before it removes the
        # old one, and a reader must not see both.
        with self.backend.lock:
            return [
                q
                for q in self.backend.match(None, self._value_predicate, None, self._kv_graph)
                if key_of(_iri(q)) is not None
            ]

    def snapshot(self) -> dict[str, Any]:
        """``{"version": 1, "type": "rdfmem-store-v1", "entries": [{"key", "value"}]}``,
        entries sorted by key."""
        key_of = self._codec.key_of
        values = {key_of(_iri(quad)): decode_value(quad.object) for quad in self._own_entries()}
        entries = [{"key": k, "value": values[k]} for k in sorted(values)]  # type: ignore[type-var]
        return {"version": SNAPSHOT_VERSION, "type": SNAPSHOT_TYPE, "entries": entries}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Replace this namespace's entries with the snapshot's, in one step.

        Asserted triples and other namespaces' entries stay as they are.

        Raises:
            IncompatibleSnapshot: wrong ``type`` or ``version``, or entries that are not
                ``{"key": str, "value": JSON}``; nothing is changed.
        """
        actual_type = snapshot.get("type") if isinstance(snapshot, Mapping) else None
        actual_version = snapshot.get("version") if isinstance(snapshot, Mapping) else None

        def incompatible(why: str) -> IncompatibleSnapshot:
            return IncompatibleSnapshot(
                f"cannot restore: {why}",
                expected_type=SNAPSHOT_TYPE,
                expected_version=SNAPSHOT_VERSION,
                actual_type=actual_type,
                actual_version=actual_version,
            )

        if (
            actual_type != SNAPSHOT_TYPE
            or type(actual_version) is not int
            or actual_version != SNAPSHOT_VERSION
        ):
            raise incompatible(
                f"snapshot is type {actual_type!r} version {actual_version!r}, "
                f"this store reads type {SNAPSHOT_TYPE!r} version {SNAPSHOT_VERSION}"
            )
        entries = snapshot.get("entries")
        if not isinstance(entries, list):
            raise incompatible("'entries' is not a list")
        adds: dict[str, Quad] = {}
        for i, entry in enumerate(entries):
            if not isinstance(entry, Mapping) or "key" not in entry or "value" not in entry:
                raise incompatible(f"entry {i} is not an object with 'key' and 'value'")
            try:
                adds[entry["key"]] = self._entry(self._codec.subject(entry["key"]), entry["value"])
            except (InvalidKey, ValueError) as exc:
                raise incompatible(f"entry {i}: {exc}") from exc
        with self.backend.exclusive([]), self._entry_write():
            old = self._own_entries()
            new = list(adds.values())
            gone, added = self._versioned(_differences(old, new))
            self._apply(old + gone, new + added)


def _values(quads: list[Quad]) -> list[Literal] | None:
    """The entries' values, when each is a literal (those rdfmem writes are)."""
    out = []
    for q in quads:
        value = q.object
        if not isinstance(value, Literal):
            return None
        out.append(value)
    return out


def _differences(old: list[Quad], new: list[Quad]) -> list[tuple[NamedNode, list[Quad]]]:
    """The entries whose quads differ between ``old`` and ``new``, with their new quads."""
    before: dict[NamedNode, set[Quad]] = {}
    after: dict[NamedNode, list[Quad]] = {}
    for q in old:
        if isinstance(q.subject, NamedNode):
            before.setdefault(q.subject, set()).add(q)
    for q in new:
        if isinstance(q.subject, NamedNode):
            after.setdefault(q.subject, []).append(q)
    return [
        (s, after.get(s, []))
        for s in sorted(set(before) | set(after), key=lambda n: n.value)
        if before.get(s, set()) != set(after.get(s, []))
    ]
