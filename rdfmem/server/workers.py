"""A bounded pool of worker threads for queries that cannot be cancelled.

pyoxigraph evaluates a query with the GIL released but offers no way to stop it. So every
query runs on one of ``size`` daemon threads: the event loop stays free, a caller gets its
answer (or a timeout) on time, and a query still running after its caller gave up keeps its
worker until it ends. Runaway queries therefore use up at most ``size`` threads: further
requests wait for a free worker (at most ``max_waiting`` of them, each no longer than its
time limit) and are then turned away, while everything that needs no worker keeps answering.

Everything a job makes stays on its worker: pyoxigraph's result objects may only be used
and dropped on the thread that made them, so a job returns plain data (bytes).

A job receives a ``threading.Event`` that is set when its caller stops waiting; jobs that
produce rows one by one check it and stop early.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import queue
import sys
import threading
import traceback
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

from rdfmem.core.errors import Busy, TimedOut

__all__ = ["Busy", "TimedOut", "WorkerPool", "drop_locals"]

T = TypeVar("T")


class _Job(Generic[T]):
    __slots__ = ("cancel", "fn", "future", "loop", "timeout")

    def __init__(
        self,
        fn: Callable[[threading.Event], T],
        future: asyncio.Future[T],
        loop: asyncio.AbstractEventLoop,
        timeout: float,
    ) -> None:
        self.fn = fn
        self.future = future
        self.loop = loop
        self.timeout = timeout
        self.cancel = threading.Event()


class WorkerPool:
    """At most ``size`` jobs at once on daemon threads; see the module docstring.

    >>> async def main() -> int:
    ...     pool = WorkerPool(size=2)
    ...     return await pool.run(lambda cancel: 6 * 7, timeout=5)
    >>> asyncio.run(main())
    42
    """

    def __init__(self, size: int = 4, *, max_waiting: int = 64, collect: bool = False) -> None:
        if size < 1:
            raise ValueError("a worker pool needs at least one worker")
        self.size = size
        self.max_waiting = max_waiting
        self.collect = collect
        self._jobs: queue.SimpleQueue[_Job[Any] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._slots: asyncio.Semaphore | None = None
        self._waiting = 0
        self._closed = False
        #: Jobs holding a worker right now (including ones whose caller gave up).
        self.running = 0

    def _semaphore(self) -> asyncio.Semaphore:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.size)
        return self._slots

    async def run(self, fn: Callable[[threading.Event], T], *, timeout: float) -> T:
        """Run ``fn(cancel)`` on a worker; its result, or its exception re-raised.

        Raises:
            Busy: no worker free and too many waiting, or none came free within ``timeout``.
            TimedOut: the job took longer than ``timeout`` (counted from the call).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        await self.admit(timeout)
        future: asyncio.Future[T] = loop.create_future()
        job = _Job(fn, future, loop, timeout)
        self._jobs.put(job)
        if len(self._threads) < self.size:
            self._start_worker()
        expiry = loop.call_at(deadline, _expire, job)
        try:
            return await future
        except asyncio.CancelledError:
            job.cancel.set()  # the caller went away: let the job stop early
            raise
        finally:
            expiry.cancel()

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called: no new job is taken."""
        return self._closed

    @property
    def threads(self) -> int:
        """Worker threads started so far (each is started by the first job that needs it)."""
        return len(self._threads)

    async def admit(self, timeout: float) -> None:
        """Take one of the ``size`` slots (counted in ``running``), waiting at most
        ``timeout`` seconds behind at most ``max_waiting`` others; give it back with
        ``release``. ``run`` takes one for its job; work that needs no thread (the
        sandbox's children answered from the event loop) takes one the same way.

        Raises:
            Busy: no slot free and too many waiting, or none came free within ``timeout``.
        """
        if self._closed:
            raise Busy("the server is stopping; no new queries are taken")
        slots = self._semaphore()
        if slots.locked():
            if self._waiting >= self.max_waiting:
                raise Busy(f"all {self.size} query workers are busy; try again shortly")
            self._waiting += 1
            try:
                await _within(slots.acquire(), timeout)
            except asyncio.TimeoutError:
                raise Busy(
                    f"all {self.size} query workers stayed busy for {timeout:g} s; "
                    "try again shortly"
                ) from None
            finally:
                self._waiting -= 1
        else:
            await slots.acquire()
        self.running += 1

    def release(self) -> None:
        """Give back a slot taken by ``admit``."""
        self.running -= 1
        self._semaphore().release()

    def _start_worker(self) -> None:
        thread = threading.Thread(
            target=self._work, name=f"rdfmem-query-{len(self._threads)}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def close(self) -> None:
        """Let every worker thread end once its current job is done (idempotent); the
        pool takes no new job after this."""
        if self._closed:
            return
        self._closed = True
        for _ in self._threads:
            self._jobs.put(None)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:  # close(): this worker ends
                return
            try:
                outcome: tuple[bool, Any] = (True, job.fn(job.cancel))
            except BaseException as exc:  # handed to the caller, whatever it is
                drop_locals(exc)
                outcome = (False, exc)
            if self.collect:
                # Reference cycles made by the job (rdflib's parser leaves hundreds) may hold
                # pyoxigraph results: free them here rather than on whichever thread the
                # garbage collector happens to run next. Young generations only: ~0.2 ms.
                gc.collect(1)
            # A closed event loop means the server has stopped: nobody is waiting.
            with contextlib.suppress(RuntimeError):
                job.loop.call_soon_threadsafe(self._settle, job, outcome)

    def _settle(self, job: _Job[Any], outcome: tuple[bool, Any]) -> None:
        self.release()
        if job.future.done():  # the caller gave up (timed out)
            return
        ok, value = outcome
        if ok:
            job.future.set_result(value)
        else:
            job.future.set_exception(value)


def _expire(job: _Job[Any]) -> None:
    if not job.future.done():
        job.cancel.set()
        limit = job.timeout
        job.future.set_exception(
            TimedOut(f"the query ran longer than the time limit of {limit:g} s")
        )


def drop_locals(exc: BaseException) -> None:
    """Free the locals of the exception's frames here, on the worker.

    pyoxigraph's results may only be dropped on the thread that made them; an exception
    carried to the event loop would otherwise drop them there (a RuntimeError from pyo3).
    """
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if current.__traceback__ is not None:
            traceback.clear_frames(current.__traceback__)
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)


async def _within(waiting: Coroutine[Any, Any, Any], timeout: float) -> None:
    """``await waiting`` for at most ``timeout`` seconds: on Python 3.11+ with
    ``asyncio.timeout``, which needs no task of its own (``wait_for`` makes one per call,
    and a read waits here whenever every slot is taken).

    Raises:
        asyncio.TimeoutError: the time passed.
    """
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(timeout):
            await waiting
    else:  # pragma: no cover - Python 3.10
        await asyncio.wait_for(waiting, timeout)
