"""Where a request's work runs. A short text (``INLINE_TEXT``) is judged by the SPARQL guard
on the event loop, its judgement kept per text; then a bounded read (a point query) is
answered there too, and any other read on a backend evaluated in this process goes to one of
the sandbox's kept children, the event loop waiting on its pipe (no thread in between) and
killing it at the time limit. The rest (longer texts, updates, reads of a remote store, the
``fork`` sandbox) runs on a bounded pool of worker threads (``workers.py``), a read there in
a child process killed at the time limit. Whatever happens comes back as plain data, an
``Answer`` or a refusal, and a refusal is raised as ``HttpError`` on the event loop.
"""

from __future__ import annotations

import logging
import pickle
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rdfmem.core.errors import HttpError, QueryError
from rdfmem.core.guard import find_forbidden, query_form
from rdfmem.server.answers import Answer
from rdfmem.server.isolate import ChildFailed, run_forked
from rdfmem.server.settings import ServerSettings
from rdfmem.server.workers import Busy, TimedOut, WorkerPool, drop_locals
from rdfmem.store.children import PIPE_ROOM
from rdfmem.store.rdfstore import RdfStore
from rdfmem.store.sandbox import Sandbox, unpacked

__all__ = ["Runner"]

_log = logging.getLogger("rdfmem.server")
#: The cancel flag of work done in a child process (the parent kills it instead) or on the
#: event loop (bounded: it ends soon anyway).
_NEVER = threading.Event()
#: Texts up to this length are judged by the guard on the event loop (``Runner._judge``).
INLINE_TEXT = 4096
#: Judgements kept (``Runner._judge``); all are forgotten when full.
_JUDGED = 1024
_UNSEEN = object()


def _refuse_remote(sparql: str) -> None:
    """Refuse SPARQL that would make the server fetch a remote URL.

    Raises:
        HttpError: 403 ``SERVICE`` or ``LOAD``.
    """
    found = find_forbidden(sparql)
    if found is not None:
        raise HttpError(
            403,
            f"{found.keyword} is not allowed on this endpoint (line {found.line}, column "
            f"{found.column}): it would make the server fetch a remote URL",
        )


def _refuse_update(sparql: str) -> None:
    """Refuse text sent as a query that is not one (an update, or nothing that parses):
    judged by pyoxigraph's parser before any backend sees it, so a GET never changes data,
    whatever the backend runs when handed an update as a query.

    Raises:
        HttpError: 400, saying why.
    """
    try:
        query_form(sparql)
    except QueryError as exc:
        raise HttpError(400, str(exc)) from None


@dataclass(frozen=True)
class _Refusal:
    """An ``HttpError`` as plain data, to carry from a worker to the event loop."""

    status: int
    message: str
    headers: dict[str, str]


def _contained(
    job: Callable[[Any], Answer | _Refusal], *, log: bool = True
) -> Callable[[Any], Answer | _Refusal]:
    """``job``, answering with plain data only: an exception raised on a worker keeps
    pyoxigraph results alive in its frames, and those may only be freed on that worker
    (pyo3 raises otherwise), so no exception leaves it. ``log=False`` in a child process,
    where a lock held by another thread at the fork could block the logger."""

    def run(cancel: Any) -> Answer | _Refusal:
        try:
            return job(cancel)
        except HttpError as exc:
            refusal = _Refusal(exc.status, exc.message, exc.headers)
            drop_locals(exc)
            return refusal
        except TimedOut as exc:
            drop_locals(exc)
            return _Refusal(503, str(exc), {"Retry-After": "5"})
        except Exception as exc:
            if log:
                _log.exception("the store failed while answering")
            refusal = _Refusal(500, f"the server failed: {type(exc).__name__}: {exc}", {})
            drop_locals(exc)
            return refusal

    return run


class Runner:
    """Runs the jobs of one endpoint: one worker pool, sized for ``store``'s backend."""

    def __init__(self, store: RdfStore, settings: ServerSettings) -> None:
        self.store = store
        self.settings = settings
        caps = store.capabilities
        # rdflib evaluates one query at a time (its backend holds a lock), so one worker;
        # backends other than Oxigraph build their results in Python and leave garbage
        # cycles to collect.
        size = 1 if not caps.concurrent_reads else settings.max_concurrent
        collect = caps.kind != "oxigraph"
        self.pool = WorkerPool(size, max_waiting=settings.max_waiting, collect=collect)
        #: Reads evaluated in a killable child process: the backends that use this CPU
        #: (a remote store's queries run on its server, which enforces its own limits).
        self.isolate = settings.isolate and caps.embedded
        #: The children that answer isolated reads, kept from one read to the next until a
        #: write makes their snapshot old (``sandbox="fork"``: one child per read).
        self.sandbox: Sandbox | None = None
        if self.isolate and settings.sandbox == "pool":
            self.sandbox = Sandbox(
                store,
                size=size,
                memory_cap=settings.memory_cap,
                max_waiting=settings.max_waiting,
            )
        #: The guard's judgement of recent short texts (``_judge``).
        self._judged: dict[tuple[str, bool], _Refusal | None] = {}
        #: Writes (``read`` False) running on a worker now, counted there: one that outlived
        #: its caller's time limit still counts until it ends (``direct.py`` reads by this).
        self.writing = 0
        self._writing_lock = threading.Lock()

    async def run(
        self,
        fn: Callable[..., Answer],
        kwargs: dict[str, Any] | None = None,
        *,
        guard: str | None = None,
        read: bool = True,
        query: bool = False,
        bounded: bool = False,
    ) -> Answer:
        """``fn(store, cancel=…, **kwargs)`` on a worker, after the guard has judged
        ``guard`` there (off the event loop), and, with ``query``, found it to be a query;
        a read on a local backend in a child process killed at the time limit: one of the
        sandbox's kept children (``fn`` is then a module-level function and ``kwargs``
        plain data: both are pickled). Without ``kwargs``, ``fn`` is a job ``fn(cancel)``
        (a closure), evaluated in a child forked for it. ``bounded``: the caller proved the
        job a bounded amount of work (a point query, ``point.py``): with ``read`` False it
        is then answered on the event loop itself when its text is short.

        Raises:
            HttpError: the job's refusal, 403 from the guard, 400 an update sent as a query,
                500 the job or its child process failed, 503 time limit passed or every
                worker busy.
        """
        timeout = self.settings.timeout
        deadline = time.monotonic() + timeout
        isolate = read and self.isolate
        # What a child may send back: the capped result plus room for its envelope.
        room = self.settings.max_result_bytes + (1 << 16)
        store = self.store
        if kwargs is not None and (guard is None or len(guard) <= INLINE_TEXT):
            # A short text is judged here, on the event loop (linear time, a few µs; the
            # judgement kept per text), and no thread is needed: a bounded read is answered
            # here too, any other read by a sandbox child the loop waits on.
            if bounded and not isolate:
                return self.run_now(fn, kwargs, guard=guard, query=query)
            if isolate and self.sandbox is not None:
                self._judge(guard, query)
                return await self._sandboxed(fn, kwargs, deadline, room)

        def work(cancel: threading.Event) -> Answer | _Refusal:
            if guard is not None:
                _refuse_remote(guard)
                if query:
                    _refuse_update(guard)
            if not read:
                with self._writing_lock:
                    self.writing += 1
                try:
                    return fn(cancel) if kwargs is None else fn(store, cancel=cancel, **kwargs)
                finally:
                    with self._writing_lock:
                        self.writing -= 1
            if not isolate:
                if kwargs is None:
                    return fn(cancel)
                return fn(store, cancel=cancel, **kwargs)
            try:
                if kwargs is None:
                    outcome: Answer | _Refusal = run_forked(
                        lambda: _contained(fn, log=False)(_NEVER),
                        deadline=deadline,
                        cancel=cancel,
                        max_bytes=room,
                    )
                elif self.sandbox is not None:
                    outcome = self.sandbox.run(
                        in_child,
                        {"fn": fn, "kwargs": kwargs},
                        deadline=deadline,
                        cancel=cancel,
                        max_bytes=room,
                    )
                else:
                    outcome = run_forked(
                        lambda: in_child(store, fn, kwargs),
                        deadline=deadline,
                        cancel=cancel,
                        max_bytes=room,
                    )
            except ChildFailed as exc:
                raise HttpError(500, f"the query failed: {exc}") from exc
            return outcome

        try:
            outcome = await self.pool.run(_contained(work), timeout=timeout)
        except TimedOut as exc:
            raise HttpError(503, str(exc), {"Retry-After": "5"}) from exc
        except Busy as exc:
            raise HttpError(503, str(exc), {"Retry-After": "1"}) from exc
        return _settled(outcome)

    def run_now(
        self,
        fn: Callable[..., Answer],
        kwargs: dict[str, Any],
        *,
        guard: str | None = None,
        query: bool = False,
    ) -> Answer:
        """``fn(store, **kwargs)`` on the event loop itself, now: only for a job proven a
        bounded amount of work (a point query, ``point.py``) with a short ``guard`` text.

        Raises:
            HttpError: as ``run``.
        """
        if self.pool.closed:
            raise HttpError(
                503, "the server is stopping; no new queries are taken", {"Retry-After": "1"}
            )
        self._judge(guard, query)
        store = self.store
        return _settled(_contained(lambda cancel: fn(store, cancel=cancel, **kwargs))(_NEVER))

    async def _sandboxed(
        self, fn: Callable[..., Answer], kwargs: dict[str, Any], deadline: float, room: int
    ) -> Answer:
        """A read by one of the sandbox's children, waited for on the event loop, the child
        killed at ``deadline``. The sandbox admits reads itself: at most ``max_concurrent``
        children work at once, the reads beyond queued in them (``rdfmem.store.batches``)."""
        assert self.sandbox is not None
        if self.pool.closed:
            raise HttpError(
                503, "the server is stopping; no new queries are taken", {"Retry-After": "1"}
            )
        job = {"fn": fn, "kwargs": kwargs}
        request = pickle.dumps((in_child, job), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            if len(request) <= PIPE_ROOM:  # the common case, with one coroutine less
                sent = self.sandbox.submit(request, deadline=deadline, max_bytes=room)
                outcome = unpacked(await sent)
            else:
                outcome = await self.sandbox.run_async(
                    in_child, job, deadline=deadline, max_bytes=room
                )
        except TimedOut as exc:
            raise HttpError(503, str(exc), {"Retry-After": "5"}) from exc
        except Busy as exc:
            raise HttpError(503, str(exc), {"Retry-After": "1"}) from exc
        except ChildFailed as exc:
            raise HttpError(500, f"the query failed: {exc}") from exc
        return _settled(outcome)

    @property
    def sandboxed(self) -> int:
        """Reads out to the sandbox's children from the event loop, not yet answered."""
        return self.sandbox.out if self.sandbox is not None else 0

    def _judge(self, guard: str | None, query: bool) -> None:
        """The guard's judgement of ``guard`` (see ``run``), kept per text.

        Raises:
            HttpError: 403 SERVICE or LOAD, 400 not a query (with ``query``).
        """
        if guard is None:
            return
        key = (guard, query)
        refusal = self._judged.get(key, _UNSEEN)
        if refusal is _UNSEEN:
            refusal = None
            try:
                _refuse_remote(guard)
                if query:
                    _refuse_update(guard)
            except HttpError as exc:
                refusal = _Refusal(exc.status, exc.message, exc.headers)
            if len(self._judged) >= _JUDGED:
                self._judged.clear()
            self._judged[key] = refusal
        if isinstance(refusal, _Refusal):
            raise HttpError(refusal.status, refusal.message, dict(refusal.headers))

    def close(self) -> None:
        """End the worker threads once their jobs are done, and the idle children."""
        self.pool.close()
        if self.sandbox is not None:
            self.sandbox.close()


def _settled(outcome: Answer | _Refusal) -> Answer:
    """The answer, or the refusal raised as ``HttpError``."""
    if isinstance(outcome, _Refusal):
        raise HttpError(outcome.status, outcome.message, outcome.headers)
    return outcome


def in_child(
    store: RdfStore, fn: Callable[..., Answer], kwargs: dict[str, Any]
) -> Answer | _Refusal:
    """``fn(store, **kwargs)`` in a child process, answering with plain data only."""
    return _contained(lambda cancel: fn(store, cancel=cancel, **kwargs), log=False)(_NEVER)
