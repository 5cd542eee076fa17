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
``run`` blocks its thread until the answer comes; ``run_async`` lets an asyncio event loop
wait on the child's pipe instead (a server needs no thread per query then).

>>> from rdfmem import RdfStore
>>> store = RdfStore()
>>> store.assert_("urn:a", "urn:b", "c")
>>> with Sandbox(store) as sandbox:
...     sandbox.run(_count, {}, timeout=10)
1
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import pickle
import resource
import select
import signal
import stat
import struct
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from rdfmem.core.errors import ChildFailed, RdfMemError, TimedOut
from rdfmem.store.rdfstore import RdfStore

__all__ = ["DEFAULT_MEMORY_CAP", "Sandbox", "close_sockets"]

#: The most memory one query may take beyond what its process had when it was forked.
DEFAULT_MEMORY_CAP = 1 << 30
_HEADER = struct.Struct("!Q")
#: Requests up to this size are written to an idle child's empty pipe without blocking
#: (Linux's pipe buffer holds 64 KiB).
_PIPE_ROOM = 60 << 10
#: How often a waiting caller looks at its cancel flag.
_POLL = 0.05
#: Held from creating a child's pipes to closing their child ends in the parent: a child
#: forked by another thread in between would hold them open.
_FORKING = threading.Lock()


def _count(store: RdfStore) -> int:
    """A job for the doctest: the triples of the default graph."""
    return len(list(store.match()))


@dataclass
class _Child:
    pid: int
    requests: int  # the parent's write end
    answers: int  # the parent's read end
    generation: int

    def kill(self) -> None:
        for fd in (self.requests, self.answers):
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)


class Sandbox:
    """A pool of forked children answering reads of ``store`` (see the module docstring).

    Args:
        store: the store the children read, as it was when each was forked.
        size: children kept idle at most (callers beyond it get a child of their own,
            ended after their job).
        memory_cap: bytes a child may allocate beyond its size at the fork.
    """

    def __init__(
        self, store: RdfStore, *, size: int = 4, memory_cap: int = DEFAULT_MEMORY_CAP
    ) -> None:
        self.store = store
        self.size = size
        self.memory_cap = memory_cap
        self._idle: list[_Child] = []
        self._lock = threading.Lock()
        self._closed = False
        self.forks = 0  # children forked so far (tests, benchmarks)

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
            _write_all(child.requests, _HEADER.pack(len(request)) + request)
            data = _read_answer(child.answers, deadline, cancel, max_bytes)
            kept = True
        except (OSError, EOFError) as exc:
            raise self._ended() from exc
        finally:
            self._give_back(child, kept)
        return _unpacked(data)

    async def run_async(
        self,
        fn: Callable[..., Any],
        kwargs: Mapping[str, Any],
        *,
        deadline: float,
        max_bytes: int = 256 << 20,
    ) -> Any:
        """``run`` for an asyncio event loop, with no thread in between: the request is
        written to a kept child's pipe and its answer read when the loop sees it arrive.
        A child is forked off the loop (on its default executor) when none is idle, and
        one killed (at ``deadline``, or when the caller is cancelled) is reaped there too.
        Requests too large for the pipe's buffer go through ``run`` on the executor.

        Raises:
            TimedOut, ChildFailed, RdfMemError: as ``run``.
        """
        loop = asyncio.get_running_loop()
        request = pickle.dumps((fn, dict(kwargs)), protocol=pickle.HIGHEST_PROTOCOL)
        if len(request) > _PIPE_ROOM:
            return await loop.run_in_executor(
                None, lambda: self.run(fn, kwargs, deadline=deadline, max_bytes=max_bytes)
            )
        child = self._take_idle()
        if child is None:
            child = await loop.run_in_executor(None, self._take)
        kept = False
        answer = _AsyncAnswer(loop, child.answers, max_bytes)
        expiry = loop.call_later(max(0.0, deadline - time.monotonic()), answer.expire)
        try:
            # The pipe is empty (the child waits for a request): this write cannot block.
            _write_all(child.requests, _HEADER.pack(len(request)) + request)
            data = await answer.future
            kept = True
        except (OSError, EOFError) as exc:
            raise self._ended() from exc
        finally:
            expiry.cancel()
            answer.stop()
            if kept:
                self._give_back(child, True)
            else:  # killed off the loop: a child that took much memory takes time to end
                loop.run_in_executor(None, child.kill)
        return _unpacked(data)

    def _ended(self) -> ChildFailed:
        return ChildFailed(
            "the query's process ended without an answer (its memory cap of "
            f"{self.memory_cap >> 20} MiB, or a crash)"
        )

    def _take_idle(self) -> _Child | None:
        """An idle child forked at the store's current generation, or None."""
        generation = self.store.generation
        with self._lock:
            if self._closed or not self._idle or self._idle[-1].generation != generation:
                return None  # ``_take``, off the loop, ends old children and forks
            return self._idle.pop()

    def _take(self) -> _Child:
        generation = self.store.generation
        with self._lock:
            if self._closed:
                raise ChildFailed("the sandbox is closed")
            while self._idle:
                child = self._idle.pop()
                if child.generation == generation:
                    return child
                child.kill()  # forked before the last write: its snapshot is old
        return self._fork(generation)

    def _give_back(self, child: _Child, healthy: bool) -> None:
        if healthy and child.generation == self.store.generation:
            with self._lock:
                if not self._closed and len(self._idle) < self.size:
                    self._idle.append(child)
                    return
        child.kill()

    def close(self) -> None:
        """End every idle child (a child answering a caller ends when it gives it back)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for child in idle:
            child.kill()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the fork -------------------------------------------------------------------------

    def _fork(self, generation: int) -> _Child:
        with _FORKING:
            req_read, req_write = os.pipe()
            ans_read, ans_write = os.pipe()
            with warnings.catch_warnings():
                # Forking a threaded process: this child only answers and exits; one that
                # hangs on a lock held at the fork is killed at its caller's deadline.
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
            if pid == 0:  # pragma: no cover - the child; coverage does not follow it
                _child_main(self.store, self.memory_cap, req_read, ans_write, (req_write, ans_read))
            os.close(req_read)
            os.close(ans_write)
        self.forks += 1
        return _Child(pid, req_write, ans_read, generation)


def _unpacked(data: bytes) -> Any:
    """The value a child answered with, or the exception it sent back raised."""
    try:
        status, value = pickle.loads(data)
    except Exception as exc:
        raise ChildFailed(f"the query's process sent a broken answer: {exc}") from exc
    if status == "ok":
        return value
    if isinstance(value, BaseException):
        raise value
    raise ChildFailed(str(value))


class _AsyncAnswer:
    """One length-prefixed answer read from ``fd`` as the event loop sees it arrive."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, max_bytes: int) -> None:
        self.loop = loop
        self.fd = fd
        self.max_bytes = max_bytes
        self.future: asyncio.Future[bytes] = loop.create_future()
        self._buffer = bytearray()
        self._need = _HEADER.size
        self._header_read = False
        loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        try:
            chunk = os.read(self.fd, max(self._need - len(self._buffer), 1 << 16))
        except OSError as exc:
            self._fail(exc)
            return
        if not chunk:
            self._fail(EOFError("the child closed its answer pipe"))
            return
        self._buffer += chunk
        while len(self._buffer) >= self._need:
            if self._header_read:
                self._done(bytes(self._buffer[_HEADER.size : self._need]))
                return
            (length,) = _HEADER.unpack_from(self._buffer)
            if length > self.max_bytes:
                self._fail(ChildFailed("the query's answer was larger than the server's limit"))
                return
            self._need, self._header_read = _HEADER.size + length, True

    def _done(self, data: bytes) -> None:
        self.stop()
        if not self.future.done():
            self.future.set_result(data)

    def _fail(self, exc: BaseException) -> None:
        self.stop()
        if not self.future.done():
            self.future.set_exception(exc)

    def expire(self) -> None:
        """The deadline passed: the caller hears ``TimedOut`` (its child is then killed)."""
        self._fail(TimedOut("the query ran longer than its time limit and was stopped"))

    def stop(self) -> None:
        """Stop watching the pipe (idempotent)."""
        if self.fd >= 0:
            self.loop.remove_reader(self.fd)
            self.fd = -1


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_answer(fd: int, deadline: float, cancel: threading.Event | None, max_bytes: int) -> bytes:
    """One length-prefixed message from ``fd``, waited for until ``deadline``."""
    buffer = bytearray()
    need = _HEADER.size
    header_read = False
    while True:
        if len(buffer) >= need:
            if header_read:
                return bytes(buffer[_HEADER.size : need])
            (length,) = _HEADER.unpack_from(buffer)
            if length > max_bytes:
                raise ChildFailed("the query's answer was larger than the server's limit")
            need, header_read = _HEADER.size + length, True
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


# -- the child's side ------------------------------------------------------------------------


def _child_main(
    store: RdfStore, cap: int, requests: int, answers: int, parent_ends: tuple[int, int]
) -> None:  # pragma: no cover - runs in the child
    code = 1
    try:
        for fd in parent_ends:
            os.close(fd)
        close_sockets(keep=(requests, answers))
        # Objects inherited from the parent are never collected here: a collection would
        # touch (and so copy) every page of the parent's heap.
        gc.freeze()
        _cap_memory(cap)
        while True:
            request = _read_request(requests)
            if request is None:
                code = 0
                return
            fn, kwargs = pickle.loads(request)
            try:
                reply: tuple[str, Any] = ("ok", fn(store, **kwargs))
            except RdfMemError as exc:
                reply = ("error", exc)
            except MemoryError:
                reply = ("error", f"the query took more than the memory cap of {cap >> 20} MiB")
            except Exception as exc:
                reply = ("error", f"the query failed: {type(exc).__name__}: {exc}")
            try:
                data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:
                data = pickle.dumps(("error", f"the query failed: {reply[1]}"))
            _write_all(answers, _HEADER.pack(len(data)) + data)
            del reply, data
    except BaseException:  # nothing may escape into the parent's code
        code = 1
    finally:
        os._exit(code)


def _read_request(fd: int) -> bytes | None:  # pragma: no cover - runs in the child
    buffer = bytearray()
    need = _HEADER.size
    header_read = False
    while True:
        if len(buffer) >= need:
            if header_read:
                return bytes(buffer[_HEADER.size : need])
            (length,) = _HEADER.unpack_from(buffer)
            need, header_read = _HEADER.size + length, True
            continue
        chunk = os.read(fd, max(need - len(buffer), 1 << 16))
        if not chunk:
            return None
        buffer += chunk


def _cap_memory(cap: int) -> None:  # pragma: no cover - runs in the child
    """Limit this process's address space to what it has now plus ``cap``."""
    size = 0
    with contextlib.suppress(OSError, ValueError):
        for line in open("/proc/self/status", encoding="ascii"):  # noqa: SIM115
            if line.startswith("VmSize:"):
                size = int(line.split()[1]) * 1024
                break
    if size:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (size + cap, size + cap))


def close_sockets(keep: tuple[int, ...]) -> None:  # pragma: no cover - runs in the child
    """Close the sockets inherited from the server (its listener, its clients' connections):
    a child that kept them would hold a closed connection open until it ended."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            fd = int(name)
            if fd in keep:
                continue
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    os.close(fd)
            except OSError:
                pass
        return
