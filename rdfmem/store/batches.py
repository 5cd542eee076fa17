"""The sandbox's reads sent from an asyncio event loop, several to a child at once.

A read handed to a child costs two process hops (the request's pipe wakes the child, the
answer's pipe wakes the loop), and on a busy machine the hop costs more than a short query's
work. So reads are not given one child each: a read that arrives while a child is busy with
a read it began moments ago is queued behind it, in the same pipe, and the reads that
arrive in one turn of the loop leave in one ``write``. The child reads all that waits in its
pipe in one ``read`` and writes each answer as soon as it has it (``children.py``).

Nothing waits behind a slow read for long: the reads queued behind one that has run longer
than ``PATIENCE`` are sent again to another child (whichever answer comes first is taken;
the slow child is ended once it answers its own read, so it does not redo theirs), and the
read itself is stopped with its child at its deadline, or soon after its caller gave up.
A child whose read ran past its deadline, that died (its memory cap) or whose answer was
larger than allowed is killed and collected off the loop; the reads behind it go to another.

At most ``size`` children are kept; reads that find every one of them busy with a slow read
wait (at most ``max_waiting`` of them, each until its deadline) for one to be free. One timer
(``TICK``) watches the deadlines while reads are out: no timer is set per read.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import deque

from rdfmem.core.errors import Busy, ChildFailed, TimedOut
from rdfmem.store.children import HEADER, PIPE_ROOM, Child, fork_child
from rdfmem.store.rdfstore import RdfStore

__all__ = ["FRESH", "PATIENCE", "TICK", "Batches"]

#: A read is queued behind another only while that one has run less than this (seconds).
FRESH = 0.005
#: The reads queued behind one that has run longer than this are sent to another child.
PATIENCE = 0.05
#: How often the deadlines of the reads out are looked at.
TICK = 0.02
#: Reads queued in one child at most.
_DEPTH = 16


class _Read:
    __slots__ = ("deadline", "future", "max_bytes", "owner", "request")

    def __init__(
        self, request: bytes, deadline: float, max_bytes: int, future: asyncio.Future[bytes]
    ) -> None:
        self.request = request  # with its length prefix
        self.deadline = deadline
        self.max_bytes = max_bytes
        self.future = future
        self.owner: _Worker | None = None  # the child it was last sent to


class _Worker:
    """A kept child as the loop sees it: the reads written to it, answered in order."""

    __slots__ = ("buffer", "child", "closing", "queue", "queued_bytes", "started", "unsent")

    def __init__(self, child: Child) -> None:
        self.child = child
        self.queue: deque[_Read] = deque()  # written (or about to be), not yet answered
        self.queued_bytes = 0  # their requests' bytes: what may still sit in the pipe
        self.unsent: list[bytes] = []  # requests to write at the end of this turn
        self.buffer = bytearray()  # answer bytes read, not yet a whole answer
        self.started = 0.0  # when the read at the head of the queue began
        self.closing = False  # takes no more reads: ended once its head is answered


def _fail(read: _Read, exc: BaseException) -> None:
    if not read.future.done():
        read.future.set_exception(exc)


class Batches:
    """The children of one sandbox that answer reads sent from ``loop`` (see the module
    docstring); each is forked off the loop, on its default executor."""

    def __init__(
        self,
        store: RdfStore,
        memory_cap: int,
        loop: asyncio.AbstractEventLoop,
        *,
        size: int,
        max_waiting: int = 64,
        spread: int = 1,
    ) -> None:
        self.store = store
        self.memory_cap = memory_cap
        self.loop = loop
        self.size = size
        self.max_waiting = max_waiting
        #: Children given a read each before reads are queued behind others.
        self.spread = spread
        self.workers: list[_Worker] = []
        self.waiting: deque[_Read] = deque()  # no child could take them yet
        self.forks = 0  # children forked so far
        self._forking = 0  # forks under way
        self._flush_due = False
        self._ticker: asyncio.TimerHandle | None = None
        self._closed = False

    @property
    def out(self) -> int:
        """Reads sent or waiting, not yet answered."""
        return len(self.waiting) + sum(
            1 for w in self.workers for r in w.queue if r.owner is w and not r.future.done()
        )

    def submit(self, request: bytes, deadline: float, max_bytes: int) -> asyncio.Future[bytes]:
        """The future answer (its pickled bytes) to ``request`` (a pickled job, at most
        ``PIPE_ROOM`` bytes), read by ``deadline`` (a ``time.monotonic()`` instant).

        The future's exception: ``TimedOut`` (the deadline passed), ``ChildFailed`` (the
        child died: its memory cap; the answer was larger than ``max_bytes``), ``Busy``
        (every child busy with slow reads and too many reads waiting)."""
        future: asyncio.Future[bytes] = self.loop.create_future()
        read = _Read(HEADER.pack(len(request)) + request, deadline, max_bytes, future)
        if self._closed:
            _fail(read, ChildFailed("the sandbox is closed"))
            return future
        if (
            len(self.waiting) >= self.max_waiting
            and self._choose(len(read.request)) is None
            and len(self.workers) + self._forking >= self.size
        ):
            _fail(read, Busy(f"all {self.size} query processes are busy; try again shortly"))
            return future
        self._place(read, time.monotonic())
        if self._ticker is None:
            self._ticker = self.loop.call_later(TICK, self._tick)
        return future

    # -- placing reads ------------------------------------------------------------------

    def _choose(self, size: int, now: float | None = None) -> _Worker | None:
        """The child that takes a read of ``size`` bytes: an idle one while fewer than
        ``spread`` are busy, else the busy one with the shortest queue whose head began
        less than ``FRESH`` ago (and whose pipe has room), else an idle one."""
        if now is None:
            now = time.monotonic()
        generation = self.store.generation
        idle = best = None
        busy = 0
        stale: list[_Worker] = []
        for worker in self.workers:
            queued = len(worker.queue)
            if worker.closing or worker.child.generation != generation:
                if not queued:
                    stale.append(worker)  # forked before the last write: its snapshot is old
                continue
            if not queued:
                idle = idle or worker
                continue
            busy += 1
            if (
                queued < _DEPTH
                and now - worker.started < FRESH
                and worker.queued_bytes + size <= PIPE_ROOM
                and (best is None or queued < len(best.queue))
            ):
                best = worker
        for worker in stale:
            self._end(worker)
        if idle is not None and (best is None or busy < self.spread):
            return idle
        return best

    def _place(self, read: _Read, now: float) -> None:
        if read.future.done():
            return
        if now >= read.deadline:
            _fail(read, TimedOut("the query ran longer than its time limit and was stopped"))
            return
        worker = self._choose(len(read.request), now)
        if worker is None:
            read.owner = None
            self.waiting.append(read)
            self._grow()
            return
        if not worker.queue:
            worker.started = now
        read.owner = worker
        worker.queue.append(read)
        worker.queued_bytes += len(read.request)
        worker.unsent.append(read.request)
        if not self._flush_due:
            self._flush_due = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        """Write each child's requests of this turn in one ``write`` (the pipe has room:
        ``PIPE_ROOM``)."""
        self._flush_due = False
        for worker in list(self.workers):  # one that fails is ended here
            if worker.unsent:
                data = b"".join(worker.unsent) if len(worker.unsent) > 1 else worker.unsent[0]
                worker.unsent.clear()
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(worker.child.requests, view) :]
                except OSError:
                    self._lost(worker, self._ended())

    def _place_waiting(self) -> None:
        now = time.monotonic()
        for _ in range(len(self.waiting)):
            read = self.waiting.popleft()
            if read.future.done():
                continue
            if now >= read.deadline or self._choose(len(read.request), now) is not None:
                self._place(read, now)
            else:
                self.waiting.append(read)
        if self.waiting:
            self._grow()

    def _grow(self) -> None:
        """Fork a child off the loop when reads wait and fewer than ``size`` children are
        kept (counting those still busy with a slow read whose queue went elsewhere)."""
        if self._closed or self._forking or len(self.workers) >= self.size:
            return
        generation = self.store.generation
        self._forking += 1
        forked = self.loop.run_in_executor(
            None, fork_child, self.store, self.memory_cap, generation
        )
        forked.add_done_callback(self._forked)

    def _forked(self, forked: asyncio.Future[Child]) -> None:
        self._forking -= 1
        if forked.cancelled():  # the loop is stopping
            return
        exc = forked.exception()
        if exc is not None:
            for read in self.waiting:
                _fail(read, ChildFailed(f"no process could be started for the query: {exc}"))
            self.waiting.clear()
            return
        child = forked.result()
        self.forks += 1
        if self._closed:
            self.loop.run_in_executor(None, child.kill)
            return
        worker = _Worker(child)
        self.workers.append(worker)
        self.loop.add_reader(child.answers, self._readable, worker)
        self._place_waiting()

    # -- answers ------------------------------------------------------------------------

    def _readable(self, worker: _Worker) -> None:
        try:
            chunk = os.read(worker.child.answers, 1 << 18)
        except OSError:
            chunk = b""
        if not chunk:
            self._lost(worker, self._ended())
            return
        buffer = worker.buffer
        buffer += chunk
        answered = False
        while len(buffer) >= HEADER.size and worker.queue:
            (length,) = HEADER.unpack_from(buffer)
            head = worker.queue[0]
            if length > head.max_bytes:
                self._lost(
                    worker, ChildFailed("the query's answer was larger than the server's limit")
                )
                return
            end = HEADER.size + length
            if len(buffer) < end:
                break
            data = bytes(buffer[HEADER.size : end])
            del buffer[:end]
            worker.queue.popleft()
            worker.queued_bytes -= len(head.request)
            worker.started = now = time.monotonic()
            answered = True
            if now > head.deadline:  # too late: as if the watch had seen it first
                _fail(head, TimedOut("the query ran longer than its time limit and was stopped"))
            elif not head.future.done():
                head.future.set_result(data)
        if not answered:
            return
        if worker.closing:  # what is left was sent again elsewhere, or it is old
            self._end(worker)
        elif not worker.queue:
            self._trim(worker)
        if self.waiting:
            self._place_waiting()

    def _trim(self, worker: _Worker) -> None:
        """End an idle child forked before the last write, or one beyond ``size``."""
        idle = [w for w in self.workers if not w.queue and not w.closing]
        if worker.child.generation != self.store.generation or len(idle) > self.size:
            self._end(worker)

    def _ended(self) -> ChildFailed:
        return ChildFailed(
            "the query's process ended without an answer (its memory cap of "
            f"{self.memory_cap >> 20} MiB, or a crash)"
        )

    def _lost(self, worker: _Worker, exc: BaseException) -> None:
        """The child's head read fails with ``exc``; the child is ended and the reads
        queued behind it go to another."""
        if worker.queue:
            head = worker.queue.popleft()
            if head.owner is worker:
                _fail(head, exc)
        self._end(worker)
        self._replace(worker)

    def _replace(self, worker: _Worker) -> None:
        now = time.monotonic()
        # Reads sent again to another child already are left to it.
        rest = [r for r in worker.queue if not r.future.done() and r.owner is worker]
        worker.queue.clear()
        for read in rest:
            self._place(read, now)

    def _end(self, worker: _Worker) -> None:
        """Stop watching the child and end it off the loop (a child that took much memory
        takes time to end)."""
        if worker in self.workers:
            self.workers.remove(worker)
            self.loop.remove_reader(worker.child.answers)
            self.loop.run_in_executor(None, worker.child.kill)
        if self.waiting:
            self._grow()

    # -- the watch ------------------------------------------------------------------------

    def _tick(self) -> None:
        """Stop reads past their deadline (with their child), send reads queued behind a
        slow one to another child, and refuse the waiting ones whose deadline passed."""
        self._ticker = None
        now = time.monotonic()
        for worker in list(self.workers):
            if not worker.queue:
                continue
            head = worker.queue[0]
            running = now - worker.started
            if now >= head.deadline or (head.future.done() and running > PATIENCE):
                self._lost(
                    worker, TimedOut("the query ran longer than its time limit and was stopped")
                )
            elif running > PATIENCE and len(worker.queue) > 1 and not worker.closing:
                worker.closing = True
                for read in list(worker.queue)[1:]:
                    if read.owner is worker:
                        self._place(read, now)
        for read in list(self.waiting):
            if now >= read.deadline:
                _fail(read, Busy(f"all {self.size} query processes stayed busy; try again"))
        if self.waiting:
            self.waiting = deque(r for r in self.waiting if not r.future.done())
            self._grow()
        if self._closed:
            return
        if self.waiting or any(w.queue for w in self.workers):
            self._ticker = self.loop.call_later(TICK, self._tick)

    def close(self) -> None:
        """End every child; the reads still out fail (``ChildFailed``). From another
        thread while the loop runs, this is done on the loop."""
        try:
            on_loop = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            on_loop = False
        if not on_loop and self.loop.is_running():
            try:
                self.loop.call_soon_threadsafe(self.close)
                return
            except RuntimeError:  # the loop closed meanwhile
                pass
        self._closed = True
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        for worker in list(self.workers):
            for read in worker.queue:
                _fail(read, ChildFailed("the sandbox is closed"))
            worker.queue.clear()
            self.workers.remove(worker)
            with contextlib.suppress(RuntimeError, ValueError, OSError):  # a closed loop
                self.loop.remove_reader(worker.child.answers)
            worker.child.kill()
        for read in self.waiting:
            _fail(read, ChildFailed("the sandbox is closed"))
        self.waiting.clear()
