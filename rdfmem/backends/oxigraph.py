"""Embedded Oxigraph: in memory, or on disk (RocksDB) at a path. The default backend."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from pyoxigraph import (
    BlankNode,
    DefaultGraph,
    NamedNode,
    Quad,
    RdfFormat,
    Store,
    Variable,
    parse,
)

from rdfmem.backends import indexfile
from rdfmem.backends.base import Backend, Graph, Object, RawResult, Subject
from rdfmem.backends.filelocks import SubjectFileLocks
from rdfmem.backends.journal import Journal, declared_scope, scope_of_quads
from rdfmem.backends.owner import Guarded, OwnerServer
from rdfmem.core.errors import BackingError, FormatError, QueryError, StoreAlreadyOpen
from rdfmem.core.formats import check_rdf
from rdfmem.core.outline import check_bindings

__all__ = ["OxigraphBackend"]

_log = logging.getLogger(__name__)


def _always() -> bool:
    return True


class OxigraphBackend(Backend):
    """A pyoxigraph ``Store``: in memory when ``path`` is None, else on disk.

    On disk, this backend is the store's **owner**: it serves the other processes that
    open the store on a Unix socket in its folder (``rdfmem.backends.owner``; ``serve=False``
    does not), and its ``exclusive`` sections exclude theirs (``rdfmem.backends.filelocks``).

    >>> backend = OxigraphBackend()
    >>> backend.persistent
    False

    Raises:
        StoreAlreadyOpen: ``path`` is already open by another store (this or another process).
        BackingError: the path cannot be opened for another reason.
    """

    kind = "oxigraph"

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        store: Store | None = None,
        serve: bool = True,
    ):
        # A Store handed in may be written around this object: nothing above caches.
        super().__init__(exclusive_writer=store is None)
        #: Writes begun and not yet counted by ``wrote()``: with ``generation``, what lets a
        #: reader of several index ranges know that they all saw one state
        #: (``unchanged_since``).
        self.writes_under_way = 0
        self._under_way_lock = threading.Lock()
        #: Called first by ``close`` (the store still open): work on threads of its own that
        #: reads the store stops there, so that nothing holds the files past ``close``.
        self.before_close: list[Callable[[], None]] = []
        self.path = None if path is None else Path(path)
        self.persistent = path is not None
        self._locks: SubjectFileLocks | None = None
        self._owner: OwnerServer | None = None
        #: What each write changed, for the processes attached to an on-disk store and for
        #: this store's index hub (``rdfmem.backends.journal``); None in memory.
        self.journal: Journal | None = None
        #: The indexes saved by the last owner, taken from the folder at open (the store's
        #: index hub loads them; ``rdfmem.backends.indexfile``) …
        self.saved_indexes: dict[str, Any] | None = None
        #: … and what gives this session's indexes back at ``close`` (set by the hub).
        self.keep_indexes: Callable[[], dict[str, Any] | None] | None = None
        if store is not None:
            self.store = store
            return
        files = indexfile.fingerprint(self.path) if self.path is not None else ""
        try:
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.store = Store(str(self.path)) if self.path is not None else Store()
        except OSError as exc:
            if "lock" in str(exc).lower():
                raise StoreAlreadyOpen(
                    f"the store at {self.path} is already open; close it first "
                    "(an on-disk Oxigraph store can be opened by one RdfStore at a time)",
                    cause=exc,
                ) from exc
            raise BackingError(f"cannot open the store at {self.path}: {exc}", cause=exc) from exc
        if self.path is not None:
            self.journal = Journal()
            # Taken before anything can write: a file left after this would be stale.
            self.saved_indexes = indexfile.unpack(indexfile.take(self.path), files)
            self._locks = SubjectFileLocks.of(self.path)
            if serve:
                owner = OwnerServer(self, self.path)
                try:
                    owner.start()
                    self._owner = owner
                except OSError as exc:  # the store works; other processes cannot attach
                    _log.warning("rdfmem: cannot serve %s to other processes: %s", self.path, exc)

    def wrote(self) -> None:
        journal = self.journal
        if journal is None:
            super().wrote()
            return
        with journal.lock:  # counted and noted together: the notes stay in order
            super().wrote()
            journal.note(self.generation, journal.current())

    def _begin(self) -> None:
        """A write of this object's begins (``_ended`` ends it)."""
        with self._under_way_lock:
            self.writes_under_way += 1

    def _ended(self) -> None:
        """The write begun by ``_begin`` is over (or failed): count it."""
        try:
            self.wrote()
        finally:
            with self._under_way_lock:
                self.writes_under_way -= 1

    def unchanged_since(self) -> Callable[[], bool] | None:
        """A check that no write began or ended from now until it is called: reads of
        several index ranges made in between saw one state (always, on a ``read_only``
        backend). None when a write is under way now, or when the store may be written
        around this object (storage handed in)."""
        if self.read_only:
            return _always
        if not self.exclusive_writer or self.writes_under_way:
            return None
        generation = self.generation
        return lambda: not self.writes_under_way and self.generation == generation

    def scope(self, graph: NamedNode, subjects: Sequence[NamedNode]) -> AbstractContextManager[Any]:
        """On disk: note this thread's writes inside the block as changing only
        ``subjects`` of ``graph`` (``rdfmem.backends.journal``)."""
        if self.journal is None:
            return contextlib.nullcontext()
        return self.journal.declared(declared_scope(graph, subjects))

    def exclusive(
        self, subjects: Sequence[NamedNode], within: str | None = None
    ) -> AbstractContextManager[Any]:
        """The process-wide write lock; on disk, first the subjects' locks shared with the
        processes attached to this store (taken before the write lock, which their writes
        need, so that nobody waits in a circle)."""
        if self._locks is None:
            return self.lock
        return self._shared_section(subjects)

    @contextmanager
    def _shared_section(self, subjects: Sequence[NamedNode]) -> Iterator[None]:
        assert self._locks is not None
        with self._locks.exclusive(subjects), self.lock:
            yield

    def query(
        self,
        sparql: str,
        *,
        base_iri: str | None = None,
        default_graph: Sequence[Graph] | None = None,
        named_graphs: Sequence[NamedNode | BlankNode] | None = None,
        substitutions: Mapping[str, Object] | None = None,
    ) -> RawResult:
        if substitutions:  # the one rule of every backend (rdfmem.core.outline)
            check_bindings(sparql, substitutions)
        subs: dict[Variable, Any] | None = (
            {Variable(k): v for k, v in substitutions.items()} if substitutions else None
        )
        try:
            return self.store.query(
                sparql,
                base_iri=base_iri,
                default_graph=list(default_graph) if default_graph is not None else None,
                named_graphs=list(named_graphs) if named_graphs is not None else None,
                substitutions=subs,
            )
        except SyntaxError as exc:
            raise QueryError(f"SPARQL syntax error: {exc}") from exc
        except (OSError, ValueError, RuntimeError) as exc:
            raise QueryError(f"SPARQL query failed: {exc}") from exc

    def update(self, sparql: str, *, base_iri: str | None = None) -> None:
        self._begin()
        try:
            self.store.update(sparql, base_iri=base_iri)
        except SyntaxError as exc:
            raise QueryError(f"SPARQL Update syntax error: {exc}") from exc
        except (OSError, ValueError, RuntimeError) as exc:
            raise QueryError(f"SPARQL Update failed: {exc}") from exc
        finally:
            self._ended()

    def match(
        self,
        subject: Subject | None = None,
        predicate: NamedNode | None = None,
        object: Object | None = None,
        graph: Graph | None = None,
    ) -> Iterator[Quad]:
        return iter(self.store.quads_for_pattern(subject, predicate, object, graph))

    def apply(self, remove: Sequence[Quad], add: Sequence[Quad]) -> None:
        if self.journal is not None:
            with self.journal.declared(scope_of_quads([*remove, *add])):
                self._apply(remove, add)
            return
        self._apply(remove, add)

    def _apply(self, remove: Sequence[Quad], add: Sequence[Quad]) -> None:
        store = self.store
        self._begin()
        try:
            if not remove:
                store.extend(add)  # one transaction
            elif not self.persistent and len(remove) == 1 and len(add) <= 1:
                # In memory, a crash loses everything anyway; add first so that a concurrent
                # reader sees the old or the new value, never neither.
                if add:
                    store.add(add[0])
                if not add or add[0] != remove[0]:
                    store.remove(remove[0])
            elif _has_blank_node(remove) or _has_blank_node(add):
                # SPARQL DATA blocks cannot name existing blank nodes: two transactions.
                store.extend(add)
                for quad in remove:
                    store.remove(quad)
            else:
                store.update(_edit_request(remove, add))  # one transaction
        except OSError as exc:
            raise BackingError(f"write failed: {exc}", cause=exc) from exc
        finally:
            self._ended()

    def apply_text(
        self, remove: Sequence[Quad], add: Sequence[Quad], removed: str, added: str
    ) -> None:
        """``apply(remove, add)`` together with the SPARQL DATA blocks ``removed`` and
        ``added`` (``GRAPH <g> { ... }`` text, "" for none: a versioned write's history,
        ``Recorder.record_text``), in one transaction. ``remove`` and ``add`` must hold no
        blank node."""
        request = ""
        if remove or removed:
            request = f"DELETE DATA {{ {_data_block(remove)} {removed} }} ; "
        request += f"INSERT DATA {{ {_data_block(add)} {added} }}"
        if self.journal is None:
            self._write_data(request)
            return
        with self.journal.declared(None):  # two graphs: a write of unknown scope
            self._write_data(request)

    def _write_data(self, request: str) -> None:
        self._begin()
        try:
            self.store.update(request)
        except OSError as exc:
            raise BackingError(f"write failed: {exc}", cause=exc) from exc
        finally:
            self._ended()

    def load(
        self,
        data: bytes,
        format: RdfFormat,
        *,
        base_iri: str | None = None,
        to_graph: NamedNode | BlankNode | None = None,
        observe: Callable[[Quad], None] | None = None,
    ) -> int:
        # pyoxigraph parses while one transaction adds: as fast as Store.load, and the
        # count comes for free (Store.load says nothing, and len(store) scans it).
        check_rdf(data, format)
        count = 0

        def quads() -> Iterator[Quad]:
            nonlocal count
            for quad in parse(data, format, base_iri=base_iri, rename_blank_nodes=True):
                count += 1
                if to_graph is not None and isinstance(quad.graph_name, DefaultGraph):
                    quad = Quad(quad.subject, quad.predicate, quad.object, to_graph)
                if observe is not None:
                    observe(quad)
                yield quad

        self._begin()
        try:
            self.store.extend(quads())
        except (SyntaxError, ValueError) as exc:
            raise FormatError(f"cannot parse {format.name}: {exc}") from exc
        except OSError as exc:
            raise BackingError(f"load failed: {exc}", cause=exc) from exc
        finally:
            self._ended()
        return count

    def dump(
        self,
        format: RdfFormat,
        *,
        from_graph: Graph | None = None,
        prefixes: Mapping[str, str] | None = None,
    ) -> bytes:
        if format.supports_datasets:
            out = self.store.dump(format=format, prefixes=dict(prefixes or {}))
        else:
            out = self.store.dump(
                format=format,
                from_graph=from_graph if from_graph is not None else DefaultGraph(),
                prefixes=dict(prefixes or {}),
            )
        return bytes(out or b"")

    def guard_reads(self, guarded: Guarded) -> None:
        """Queries other processes send with a time limit (``rdfmem query`` on an
        attached store) run through ``guarded``; nothing changes when this process does
        not serve the store."""
        if self._owner is not None:
            self._owner.guarded = guarded

    def close(self) -> None:
        if "store" not in self.__dict__:
            return
        for hook in list(self.before_close):
            with contextlib.suppress(Exception):  # never a reason not to close
                hook()
        if self._owner is not None:
            self._owner.stop()
            self._owner = None
        kept = None
        with self.lock:
            if self.keep_indexes is not None and self.path is not None:
                with contextlib.suppress(Exception):  # never a reason not to close
                    kept = self.keep_indexes()
            if self.persistent:
                with contextlib.suppress(OSError):
                    self.store.flush()
            # pyoxigraph releases the RocksDB lock when the Store is collected.
            self.__dict__.pop("store", None)
        if self._locks is not None:
            self._locks.close()
            self._locks = None
        if kept and self.path is not None:
            with contextlib.suppress(OSError):
                indexfile.keep(self.path, kept)

    def __getattr__(self, name: str) -> object:
        if name == "store":
            raise BackingError("this backend is closed", cause=None)
        raise AttributeError(name)

    def __len__(self) -> int:
        return len(self.store)

    def __repr__(self) -> str:
        where = str(self.path) if self.path is not None else "memory"
        return f"OxigraphBackend({where!r})"


def _has_blank_node(quads: Sequence[Quad]) -> bool:
    return any(
        isinstance(q.subject, BlankNode)
        or isinstance(q.object, BlankNode)
        or isinstance(q.graph_name, BlankNode)
        for q in quads
    )


def _data_block(quads: Sequence[Quad]) -> str:
    """The quads as the inside of a DATA block, one ``GRAPH`` group per graph."""
    graphs: dict[str, list[str]] = {}
    for q in quads:
        name = q.graph_name
        label = "" if isinstance(name, DefaultGraph) else str(name)
        graphs.setdefault(label, []).append(f"{q.subject} {q.predicate} {q.object} .")
    return " ".join(
        " ".join(triples) if not label else f"GRAPH {label} {{ {' '.join(triples)} }}"
        for label, triples in graphs.items()
    )


def _edit_request(remove: Sequence[Quad], add: Sequence[Quad]) -> str:
    """``DELETE DATA {…} ; INSERT DATA {…}``: terms in N-Triples syntax, escaped by pyoxigraph."""
    request = f"DELETE DATA {{ {_data_block(remove)} }}"
    if add:
        request += f" ; INSERT DATA {{ {_data_block(add)} }}"
    return request
