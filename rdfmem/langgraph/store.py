"""``RdfBaseStore``: a LangGraph ``BaseStore`` whose items are RDF in an ``RdfStore``."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Iterable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from types import TracebackType
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)
from pyoxigraph import NamedNode

from rdfmem.core.errors import InvalidTerm, InvalidValue
from rdfmem.core.keys import dumps, loads
from rdfmem.langgraph.ranking import rank, rank_keywords, rank_rows
from rdfmem.langgraph.records import Record, namespace_matches
from rdfmem.langgraph.requests import ItemWrite, delete_request, put_request, refresh_request
from rdfmem.langgraph.sources import Mirror, Remote, Source
from rdfmem.langgraph.vectors import as_vector, vector_literal
from rdfmem.langgraph.vocab import DEFAULT_GRAPH, item_iri
from rdfmem.store.rdfstore import RdfStore

__all__ = ["RdfBaseStore"]

logger = logging.getLogger(__name__)
_Key = tuple[tuple[str, ...], str]


class _Clock:
    """UTC now, strictly increasing within the process (creation times order items)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = datetime.min.replace(tzinfo=timezone.utc)

    def now(self) -> datetime:
        with self._lock:
            now = datetime.now(timezone.utc)
            if now <= self._last:
                now = self._last + timedelta(microseconds=1)
            self._last = now
            return now


_CLOCK = _Clock()


@dataclass
class _Plan:
    """A batch, checked, before anything is embedded or written."""

    ops: list[Op]
    puts: dict[_Key, tuple[PutOp, str | None]] = field(default_factory=dict)
    texts: dict[str, list[tuple[_Key, str]]] = field(default_factory=dict)
    queries: list[str] = field(default_factory=list)


class RdfBaseStore(BaseStore):
    """A LangGraph store over any ``RdfStore``, behaving like LangGraph's ``InMemoryStore``.

    >>> store = RdfBaseStore()
    >>> store.put(("users", "123"), "prefs", {"theme": "dark"})
    >>> store.get(("users", "123"), "prefs").value
    {'theme': 'dark'}
    >>> store.search(("users",), filter={"theme": "dark"})[0].key
    'prefs'
    >>> store.list_namespaces()
    [('users', '123')]
    >>> store.delete_namespace(("users",))
    1

    Args:
        store: where the items live (an in-memory ``RdfStore`` when None).
        index: semantic search: ``dims``, ``embed`` (LangChain ``Embeddings``, a sync or an
            async function of a list of texts, or a provider string) and ``fields``.
        ttl: ``default_ttl`` (minutes), ``refresh_on_read``, ``omit_expired`` and
            ``sweep_interval_minutes`` (for ``start_ttl_sweeper``).
        graph: the named graph that holds the items.

    Raises:
        InvalidTerm: ``graph`` is not an IRI.
        InvalidValue: ``index`` has no positive ``dims``.
    """

    supports_ttl: bool = True

    def __init__(
        self,
        store: RdfStore | None = None,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        graph: str = DEFAULT_GRAPH,
    ) -> None:
        self.store = store if store is not None else RdfStore()
        self._owns_store = store is None
        try:
            self.graph = NamedNode(graph)
        except ValueError as exc:
            raise InvalidTerm(f"the graph of a LangGraph store is an IRI, not {graph!r}") from exc
        self.ttl_config = ttl
        self.index_config: dict[str, Any] | None = None
        self.embeddings: Embeddings | None = None
        dims: int | None = None
        if index:
            config: dict[str, Any] = dict(index)
            dims = config.get("dims")
            if type(dims) is not int or dims <= 0:
                raise InvalidValue(f"index 'dims' must be a positive int, not {dims!r}")
            self.embeddings = ensure_embeddings(config.get("embed"))
            config["__tokenized_fields"] = [
                (p, tokenize_path(p)) if p != "$" else (p, p)
                for p in (config.get("fields") or ["$"])
            ]
            self.index_config = config
        self._dims = dims
        self._mirror = Mirror(dims) if self.store.capabilities.exclusive_writer else None
        self._hub = self.store.indexes  # None on a remote store
        self._remote = None if self._mirror else Remote(self.store, self.graph, dims)
        self._sweeper: threading.Thread | None = None
        self._stop = threading.Event()

    # -- LangGraph's two methods ---------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run get, search, put and list-namespaces operations; reads see the store as it
        was before the batch's puts, as in ``InMemoryStore``. All the batch's writes are one
        atomic request.

        Raises:
            InvalidNamespaceError: a label LangGraph does not allow (nothing is run).
            InvalidValue: a value that is not a JSON object, an unknown operation or filter
                operator, or an embedding whose length is not ``dims``; nothing is written.
        """
        plan = self._plan(ops)
        texts = list(plan.texts)
        vectors: list[list[float]] = []
        queries: dict[str, list[float]] = {}
        if self.embeddings is not None:
            if texts:
                vectors = self.embeddings.embed_documents(texts)
            queries = {q: self.embeddings.embed_query(q) for q in plan.queries}
        return self._execute(plan, vectors, queries)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` for asyncio: embeddings through the embedder's async methods, store work
        in a worker thread (``asyncio.to_thread``), so the event loop never waits on I/O or
        the store's lock. On a remote store that thread makes the HTTP requests.

        Raises:
            InvalidNamespaceError, InvalidValue: as ``batch``.
        """
        plan = self._plan(ops)
        texts = list(plan.texts)
        vectors: list[list[float]] = []
        queries: dict[str, list[float]] = {}
        if self.embeddings is not None:
            if texts:
                vectors = await self.embeddings.aembed_documents(texts)
            answers = await asyncio.gather(*(self.embeddings.aembed_query(q) for q in plan.queries))
            queries = dict(zip(plan.queries, answers, strict=True))
        return await asyncio.to_thread(self._execute, plan, vectors, queries)

    # -- more than LangGraph asks -----------------------------------------------------------

    def delete_namespace(self, prefix: tuple[str, ...]) -> int:
        """Delete every item whose namespace is ``prefix`` or starts with it; returns how
        many were deleted.

        Raises:
            InvalidNamespaceError: an empty prefix, or a label LangGraph does not allow.
        """
        if not isinstance(prefix, tuple) or not prefix:
            raise InvalidNamespaceError(
                f"delete_namespace needs a non-empty tuple of labels, not {prefix!r}"
            )
        validate_op_namespace(SearchOp(prefix))
        with self._critical():
            return self._delete(list(self._source().under(prefix, vectors=False)[0]))

    async def adelete_namespace(self, prefix: tuple[str, ...]) -> int:
        """Async ``delete_namespace``."""
        return await asyncio.to_thread(self.delete_namespace, prefix)

    def sweep_ttl(self) -> int:
        """Delete the items whose TTL has run out; returns how many."""
        with self._critical():
            now = _CLOCK.now()
            records = self._source().under((), vectors=False)[0]
            expired = [r for r in records if r.expires is not None and r.expires < now]
            return self._delete(expired, expired_before=now)

    async def asweep_ttl(self) -> int:
        """Async ``sweep_ttl``."""
        return await asyncio.to_thread(self.sweep_ttl)

    def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Sweep expired items every ``sweep_interval_minutes`` (the TTL config's, else 5)
        in a daemon thread until ``stop_ttl_sweeper``; the future completes when it stops."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        if self._sweeper is not None and self._sweeper.is_alive():
            done.add_done_callback(lambda f: self._stop.set() if f.cancelled() else None)
            return done
        config = self.ttl_config or {}
        interval = float(sweep_interval_minutes or config.get("sweep_interval_minutes") or 5)
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(interval * 60):
                try:
                    swept = self.sweep_ttl()
                    if swept:
                        logger.info("swept %d expired items", swept)
                except Exception:  # the sweeper must outlive one failed sweep
                    logger.exception("TTL sweep failed")
            # Cancelling the future is how LangGraph stops a sweeper: it is done already.
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                done.set_result(None)

        self._sweeper = threading.Thread(target=loop, daemon=True, name="rdfmem-ttl-sweeper")
        self._sweeper.start()
        done.add_done_callback(lambda f: self._stop.set() if f.cancelled() else None)
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; False when it did not stop within ``timeout`` seconds."""
        if self._sweeper is None or not self._sweeper.is_alive():
            return True
        self._stop.set()
        self._sweeper.join(timeout)
        stopped = not self._sweeper.is_alive()
        if stopped:
            self._sweeper = None
        return stopped

    def close(self) -> None:
        """Stop the sweeper, and close the ``RdfStore`` when this object made it."""
        self.stop_ttl_sweeper()
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> RdfBaseStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RdfBaseStore({self.store!r}, graph={self.graph.value!r})"

    # -- planning (pure) ---------------------------------------------------------------------

    def _plan(self, ops: Iterable[Op]) -> _Plan:
        plan = _Plan(list(ops))
        queries: dict[str, None] = {}
        for op in plan.ops:
            if not isinstance(op, (GetOp, SearchOp, PutOp, ListNamespacesOp)):
                raise InvalidValue(f"unknown store operation {type(op).__name__}")
            validate_op_namespace(op)
            if isinstance(op, SearchOp) and op.query and self.embeddings is not None:
                queries[op.query] = None
            elif isinstance(op, PutOp):
                text = None
                if op.value is not None:
                    if not isinstance(op.value, Mapping):
                        raise InvalidValue(f"an item's value is a mapping, not {op.value!r}")
                    text = dumps(dict(op.value))
                plan.puts[(op.namespace, op.key)] = (op, text)
        plan.queries = list(queries)
        if self.index_config is not None:
            for key, (op, text) in plan.puts.items():
                if text is None or op.index is False:
                    continue
                if op.index is None:
                    paths = self.index_config["__tokenized_fields"]
                else:
                    paths = [(p, tokenize_path(p)) for p in op.index]
                for path, tokens in paths:
                    found = get_text_at_path(op.value, tokens)
                    for i, piece in enumerate(found):
                        name = f"{path}.{i}" if len(found) > 1 else path
                        plan.texts.setdefault(piece, []).append((key, name))
        return plan

    # -- execution (blocking) ------------------------------------------------------------------

    def _critical(self) -> Any:
        """The section in which the mirror and the store change together (embedded only):
        the backend's write lock, with every write in it recorded by the index hub as a
        write to this store's graph alone."""
        if self._hub is None:
            return nullcontext()
        return self._hub.writing((self.graph.value,))

    def _source(self) -> Source:
        if self._mirror is None or self._hub is None:
            assert self._remote is not None
            return self._remote
        # A bypass: a write to this graph that did not go through this object (another
        # RdfBaseStore, raw SPARQL, load, clear_graph). Writes known to touch only other
        # graphs (key/value entries, memories, decisions) leave the mirror as it is.
        if self._mirror.generation < 0 or not self._hub.fresh(
            self._mirror.generation, (self.graph.value,)
        ):
            self._mirror.load(self.store.triples(self.graph))
            self._mirror.generation = self.store.generation
        return self._mirror

    def _write(self, request: str) -> None:
        self.store.sparql_update(request)
        if self._mirror is not None:
            self._mirror.generation = self.store.generation

    def _delete(self, records: list[Record], *, expired_before: datetime | None = None) -> int:
        if records:
            subjects = [item_iri(r.namespace, r.key) for r in records]
            self._write(delete_request(self.graph, subjects, expired_before=expired_before))
            if self._mirror is not None:
                for r in records:
                    self._mirror.delete(r.namespace, r.key)
        return len(records)

    def _vector(self, values: Any) -> Any:
        vector = as_vector(values)
        if vector.shape[0] != self._dims:
            raise InvalidValue(
                f"the embedder returned a vector of {vector.shape[0]} numbers, "
                f"but the index has dims={self._dims}"
            )
        return vector

    def _hidden(self, record: Record, now: datetime) -> bool:
        return bool(
            self.ttl_config
            and self.ttl_config.get("omit_expired")
            and record.expires is not None
            and record.expires <= now
        )

    def _execute(
        self, plan: _Plan, vectors: list[list[float]], queries: dict[str, list[float]]
    ) -> list[Result]:
        if len(vectors) != len(plan.texts):
            raise InvalidValue(
                f"the embedder gave {len(vectors)} vectors for {len(plan.texts)} texts"
            )
        per_item: dict[_Key, list[tuple[str, Any]]] = {}
        for targets, values in zip(plan.texts.values(), vectors, strict=True):
            vector = self._vector(values)
            for key, path in targets:
                per_item.setdefault(key, []).append((path, vector))
        query_vectors = {q: self._vector(v) for q, v in queries.items()}
        results: list[Result] = []
        with self._critical():
            now = _CLOCK.now()
            source = self._source()
            refresh: dict[_Key, tuple[NamedNode, datetime]] = {}

            def touch(record: Record, wanted: bool) -> None:
                if wanted and record.ttl is not None:
                    expires = now + timedelta(minutes=record.ttl)
                    key = (record.namespace, record.key)
                    refresh[key] = (item_iri(*key), expires)

            for op in plan.ops:
                if isinstance(op, GetOp):
                    record = source.get(op.namespace, op.key)
                    if record is None or self._hidden(record, now):
                        results.append(None)
                        continue
                    touch(record, op.refresh_ttl)
                    results.append(_item(record))
                elif isinstance(op, SearchOp):
                    query = query_vectors.get(op.query) if op.query else None
                    ranked = self._search(source, op, query, now)
                    for record, _ in ranked:
                        touch(record, op.refresh_ttl)
                    results.append([_search_item(r, score) for r, score in ranked])
                elif isinstance(op, ListNamespacesOp):
                    results.append(self._namespaces(source, op, now))
                else:
                    results.append(None)
            self._apply(plan, per_item, refresh, now)
        return results

    def _search(
        self, source: Source, op: SearchOp, query: Any, now: datetime
    ) -> list[tuple[Record, float | None]]:
        prefix = op.namespace_prefix
        mirror = self._mirror
        if query is not None and not op.filter and mirror is not None and mirror.rows:
            names = mirror.matching(prefix)
            if mirror.count(names) * 8 >= len(mirror.rows):  # most rows are candidates
                wanted = set(names)
                return rank_rows(
                    mirror.rows,
                    query,
                    accept=lambda r: r.namespace in wanted and not self._hidden(r, now),
                    limit=op.limit,
                    offset=op.offset,
                    unscored=lambda: source.under(prefix, vectors=False)[0],
                )
        if query is None and op.query and self.index_config is None:  # no index: BM25
            found, _ = source.under(prefix, vectors=False)
            return rank_keywords(
                (r for r in found if not self._hidden(r, now)),
                filter=op.filter,
                limit=op.limit,
                offset=op.offset,
                query=op.query,
            )
        records, rows = source.under(prefix, vectors=query is not None)
        return rank(
            (r for r in records if not self._hidden(r, now)),
            filter=op.filter,
            limit=op.limit,
            offset=op.offset,
            query=query,
            rows=rows,
        )

    def _apply(
        self,
        plan: _Plan,
        per_item: dict[_Key, list[tuple[str, Any]]],
        refresh: dict[_Key, tuple[NamedNode, datetime]],
        now: datetime,
    ) -> None:
        writes: list[ItemWrite] = []
        deletes: list[_Key] = []
        for key, (op, text) in plan.puts.items():
            if text is None:
                deletes.append(key)
                continue
            vectors = [(path, vector_literal(v)) for path, v in per_item.get(key, [])]
            created, replaces = None, True
            if self._mirror is not None:  # it knows exactly what the graph holds
                old = self._mirror.get(*key)
                created, replaces = (now, False) if old is None else (old.created, True)
            writes.append(
                ItemWrite.of(
                    key[0],
                    key[1],
                    text,
                    now,
                    ttl=op.ttl,
                    vectors=vectors,
                    created=created,
                    replaces=replaces,
                )
            )
        expiries = [value for key, value in refresh.items() if key not in plan.puts]
        parts = []
        if writes or deletes:
            parts.append(put_request(self.graph, writes, [item_iri(*k) for k in deletes]))
        if expiries:
            parts.append(refresh_request(self.graph, expiries))
        if not parts:
            return
        self._write(" ;\n".join(parts))
        mirror = self._mirror
        if mirror is None:
            return
        for ns, name in deletes:
            mirror.delete(ns, name)
        for w in writes:
            old = mirror.get(w.namespace, w.key)
            record = Record(
                namespace=w.namespace,
                key=w.key,
                text=w.text,
                value=loads(w.text),
                created=old.created if old is not None else now,
                updated=now,
                expires=w.expires,
                ttl=w.ttl,
            )
            mirror.put(record, per_item.get((w.namespace, w.key), []))
        for (ns, name), (_, expires) in refresh.items():
            kept = mirror.get(ns, name)
            if kept is not None and (ns, name) not in plan.puts:
                kept.expires = expires

    def _namespaces(
        self, source: Source, op: ListNamespacesOp, now: datetime
    ) -> list[tuple[str, ...]]:
        if self.ttl_config and self.ttl_config.get("omit_expired"):
            records = source.under((), vectors=False)[0]
            names = list({r.namespace: None for r in records if not self._hidden(r, now)})
        else:
            names = source.namespaces()
        for condition in op.match_conditions or ():
            names = [
                ns for ns in names if namespace_matches(ns, condition.match_type, condition.path)
            ]
        if op.max_depth is not None:
            names = sorted({ns[: op.max_depth] for ns in names})
        else:
            names = sorted(names)
        return names[op.offset : op.offset + op.limit]


def _item(record: Record) -> Item:
    return Item(
        value=loads(record.text),
        key=record.key,
        namespace=record.namespace,
        created_at=record.created,
        updated_at=record.updated,
    )


def _search_item(record: Record, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=record.namespace,
        key=record.key,
        value=loads(record.text),
        created_at=record.created,
        updated_at=record.updated,
        score=score,
    )
