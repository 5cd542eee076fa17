"""Run reads in child processes that can be stopped: killed at their time limit, capped in
memory, reused from one query to the next (issue 23, item 1).

pyoxigraph offers no way to stop a query once it runs, and a thread cannot be killed: a child
process can. Forking one per query costs 1-50 ms (more as the parent's memory grows), so the
children are kept: each is forked from the process that owns the store, sees the store as it
was at the fork (copy-on-write: an in-memory store, an on-disk store, an rdflib graph alike),
and answers query after query until the store's write ``generation`` moves, when it is
retired and a new one is forked at the next read. A child is killed at once (``SIGKILL``)
when its caller's deadline passes or the caller gives up: its CPU and memory are back
within milliseconds, and the slot it held is free. Each child's address space is capped
(``RLIMIT_AS``: what it had at the fork plus ``memory_cap``), so one query cannot take the
machine: an allocation past the cap ends that child, and the caller hears ``ChildFailed``.

A job is a module-level function (pickled by reference) called as ``fn(store, **kwargs)`` in
the child; its result is plain data (pickled back, at most ``max_bytes``). An exception the
job raises is sent back as ``QueryError``, ``HttpError`` … when it pickles, else as
``ChildFailed``. Children never return into the parent's code: they leave with ``os._exit``.
``run`` blocks its thread until the answer comes; ``run_async`` (and ``submit``) let an
asyncio event loop wait on the children's pipes instead (a server needs no thread per query
then), and send a busy child the reads queued behind its own, several in one write
(``batches.py``: one process hop for several short reads).

>>> from rdfmem import RdfStore
>>> store = RdfStore()
>>> store.assert_("urn:a", "urn:b", "c")
>>> with Sandbox(store) as sandbox:
...     sandbox.run(_count, {}, timeout=10)
1
"""

from __future__ import annotations

import asyncio
import os
import pickle
import select
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from rdfmem.core.errors import ChildFailed, TimedOut
from rdfmem.store.batches import Batches
from rdfmem.store.children import (
    HEADER,
    PIPE_ROOM,
    Child,
    ReadSource,
    close_sockets,
    fork_child,
    write_all,
)
from rdfmem.store.rdfstore import RdfStore

__all__ = ["DEFAULT_MEMORY_CAP", "Sandbox", "close_sockets"]

#: The most memory one query may take beyond what its process had when it was forked.
DEFAULT_MEMORY_CAP = 1 << 30
#: How often a waiting caller looks at its cancel flag.
_POLL = 0.05


def _count(store: RdfStore) -> int:
    """A job for the doctest: the triples of the default graph."""
    return len(list(store.match()))


class Sandbox:
    """A pool of forked children answering reads of ``store`` (see the module docstring).

    Args:
        store: the store the children read, as it was when each was forked (an
            ``RdfStore``, or a view of the backend a process took over: ``ReadSource``).
        size: children kept idle at most (callers of ``run`` beyond it get a child of their
            own, ended after their job); children working at once for an event loop.
        memory_cap: bytes a child may allocate beyond its size at the fork.
        max_waiting: reads from an event loop that may wait for a child when every child
            is busy with a slow read (more are refused: ``Busy``).
    """

    def __init__(
        self,
        store: ReadSource,
        *,
        size: int = 4,
        memory_cap: int = DEFAULT_MEMORY_CAP,
        max_waiting: int = 64,
    ) -> None:
        self.store = store
        self.size = size
        self.memory_cap = memory_cap
        self.max_waiting = max_waiting
        self._idle: list[Child] = []
        self._lock = threading.Lock()
        self._closed = False
        self._forks = 0
        self._batches: Batches | None = None

    @property
    def forks(self) -> int:
        """Children forked so far (tests, benchmarks)."""
        return self._forks + (self._batches.forks if self._batches is not None else 0)

    @property
    def out(self) -> int:
        """Reads from an event loop sent or waiting, not yet answered."""
        return self._batches.out if self._batches is not None else 0

    # -- the caller's side ----------------------------------------------------------------

    def run(
        self,
        fn: Callable[..., Any],
        kwargs: Mapping[str, Any],
        *,
        timeout: float | None = None,
        deadline: float | None = None,
        cancel: threading.Event | None = None,
        max_bytes: int = 256 << 20,
    ) -> Any:
        """``fn(store, **kwargs)`` evaluated in a child; its (picklable) result.

        ``deadline`` is a ``time.monotonic()`` instant (or ``timeout`` seconds from now).

        Raises:
            TimedOut: the deadline passed or ``cancel`` was set; the child was killed.
            ChildFailed: the child died (its memory cap, a crash) or its answer was larger
                than ``max_bytes``.
            RdfMemError: what ``fn`` raised (``QueryError`` …), when it could be sent back.
        """
        if deadline is None:
            deadline = time.monotonic() + (timeout if timeout is not None else 30.0)
        request = pickle.dumps((fn, dict(kwargs)), protocol=pickle.HIGHEST_PROTOCOL)
        child = self._take()
        kept = False
        try:
            write_all(child.requests, HEADER.pack(len(request)) + request)
            data = _read_answer(child.answers, deadline, cancel, max_bytes)
            kept = True
        except (OSError, EOFError) as exc:
            raise self._ended() from exc
        finally:
            self._give_back(child, kept)
        return unpacked(data)

    async def run_async(
        self,
        fn: Callable[..., Any],
        kwargs: Mapping[str, Any],
        *,
        deadline: float,
        max_bytes: int = 256 << 20,
    ) -> Any:
        """``run`` for an asyncio event loop, with no thread in between (``submit``).

        Raises:
            TimedOut, ChildFailed, RdfMemError: as ``run``; Busy: as ``submit``.
        """
        request = pickle.dumps((fn, dict(kwargs)), protocol=pickle.HIGHEST_PROTOCOL)
        if len(request) > PIPE_ROOM:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(
                None, lambda: self.run(fn, kwargs, deadline=deadline, max_bytes=max_bytes)
            )
        return unpacked(await self.submit(request, deadline=deadline, max_bytes=max_bytes))

    def submit(self, request: bytes, *, deadline: float, max_bytes: int) -> asyncio.Future[bytes]:
        """The future answer to ``request`` (``pickle.dumps((fn, kwargs))``, at most
        ``PIPE_ROOM`` bytes) from a kept child, sent from the running event loop (maybe in
        one write with other reads: ``batches.py``); ``unpacked`` makes it the result.
        Cancelling the future lets the child be stopped.

        The future's exception: ``TimedOut`` (``deadline`` passed; the child was killed),
        ``ChildFailed`` (as ``run``), ``Busy`` (every child busy with slow reads and
        ``max_waiting`` reads waiting).
        """
        loop = asyncio.get_running_loop()
        store = self.store
        if not isinstance(store, RdfStore):  # ``batches.py`` forks from a whole store
            raise ChildFailed("reads from an event loop need a sandbox over an RdfStore")
        batches = self._batches
        if batches is None or batches.loop is not loop:
            if batches is not None:
                batches.close()
                self._forks += batches.forks
            batches = self._batches = Batches(
                store,
                self.memory_cap,
                loop,
                size=self.size,
                max_waiting=self.max_waiting,
            )
            if self._closed:
                batches.close()
        return batches.submit(request, deadline, max_bytes)

    def _ended(self) -> ChildFailed:
        return ChildFailed(
            "the query's process ended without an answer (its memory cap of "
            f"{self.memory_cap >> 20} MiB, or a crash)"
        )

    def _take(self) -> Child:
        generation = self.store.generation
        with self._lock:
            if self._closed:
                raise ChildFailed("the sandbox is closed")
            while self._idle:
                child = self._idle.pop()
                if child.generation == generation:
                    return child
                child.kill()  # forked before the last write: its snapshot is old
        child = fork_child(self.store, self.memory_cap, generation)
        self._forks += 1
        return child

    def _give_back(self, child: Child, healthy: bool) -> None:
        if healthy and child.generation == self.store.generation:
            with self._lock:
                if not self._closed and len(self._idle) < self.size:
                    self._idle.append(child)
                    return
        child.kill()

    def close(self) -> None:
        """End every idle child, and those answering reads from an event loop (a child
        answering a caller of ``run`` ends when it gives it back)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for child in idle:
            child.kill()
        if self._batches is not None:
            self._batches.close()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def unpacked(data: bytes) -> Any:
    """The value a child answered with, or the exception it sent back raised.

    Raises:
        RdfMemError: the job's own (``QueryError`` …); ChildFailed: a broken answer.
    """
    try:
        status, value = pickle.loads(data)
    except Exception as exc:
        raise ChildFailed(f"the query's process sent a broken answer: {exc}") from exc
    if status == "ok":
        return value
    if isinstance(value, BaseException):
        raise value
    raise ChildFailed(str(value))


def _read_answer(fd: int, deadline: float, cancel: threading.Event | None, max_bytes: int) -> bytes:
    """One length-prefixed message from ``fd``, waited for until ``deadline``."""
    buffer = bytearray()
    need = HEADER.size
    header_read = False
    while True:
        if len(buffer) >= need:
            if header_read:
                return bytes(buffer[HEADER.size : need])
            (length,) = HEADER.unpack_from(buffer)
            if length > max_bytes:
                raise ChildFailed("the query's answer was larger than the server's limit")
            need, header_read = HEADER.size + length, True
            continue
        left = deadline - time.monotonic()
        if left <= 0 or (cancel is not None and cancel.is_set()):
            raise TimedOut("the query ran longer than its time limit and was stopped")
        ready, _, _ = select.select([fd], [], [], min(left, _POLL))
        if not ready:
            continue
        chunk = os.read(fd, max(need - len(buffer), 1 << 16))
        if not chunk:
            raise EOFError("the child closed its answer pipe")
        buffer += chunk
