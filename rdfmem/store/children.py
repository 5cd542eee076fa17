"""The sandbox's child processes (``sandbox.py``): forked from the process that owns the
store, each answers the requests written to its pipe, in order, until that pipe closes.

A request is a length-prefixed pickle of ``(fn, kwargs)``; its answer a length-prefixed pickle
of ``("ok", value)`` or ``("error", exception or message)``. Several requests may wait in the
pipe at once (``batches.py`` sends a child the reads queued behind the one it runs): the child
reads all that is there in one ``read`` and writes each answer as soon as it has it, so an
answer never waits for a later request (which may be a runaway, killed with its child).
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import resource
import signal
import stat
import struct
import threading
import warnings
from dataclasses import dataclass
from typing import Any, Protocol

from rdfmem.backends.base import Backend
from rdfmem.core.errors import RdfMemError

__all__ = [
    "HEADER",
    "PIPE_ROOM",
    "Child",
    "ReadSource",
    "close_sockets",
    "fork_child",
    "write_all",
]

#: The length prefix of every request and answer.
HEADER = struct.Struct("!Q")
#: Requests waiting in a child's pipe add up to at most this many bytes, so writing them
#: never blocks (Linux's pipe buffer holds 64 KiB).
PIPE_ROOM = 60 << 10
#: Held from creating a child's pipes to closing their child ends in the parent: a child
#: forked by another thread in between would hold them open.
_FORKING = threading.Lock()


class ReadSource(Protocol):
    """What the children read: an ``RdfStore``, or a view of one backend (the store a
    process took over: ``rdfmem.store.owner_reads``). A job is called with it."""

    @property
    def backend(self) -> Backend:
        """Where a job reads (in the child, as it was at the fork)."""

    @property
    def generation(self) -> int:
        """The write counter of everything the children read: a child forked before it
        moved is retired."""


@dataclass
class Child:
    """A forked child, seen from the parent."""

    pid: int
    requests: int  # the parent's write end
    answers: int  # the parent's read end
    generation: int  # the store's write generation at the fork

    def kill(self) -> None:
        """Close its pipes, end it (``SIGKILL``) and collect it (idempotent)."""
        for fd in (self.requests, self.answers):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.requests = self.answers = -1
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)


def fork_child(store: ReadSource, memory_cap: int, generation: int) -> Child:
    """A new child answering reads of ``store`` (as it is now), its address space capped at
    its size now plus ``memory_cap``."""
    with _FORKING:
        req_read, req_write = os.pipe()
        ans_read, ans_write = os.pipe()
        with warnings.catch_warnings():
            # Forking a threaded process: this child only answers and exits; one that
            # hangs on a lock held at the fork is killed at its caller's deadline.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # pragma: no cover - the child; coverage does not follow it
            _child_main(store, memory_cap, req_read, ans_write, (req_write, ans_read))
        os.close(req_read)
        os.close(ans_write)
    return Child(pid, req_write, ans_read, generation)


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (blocking)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# -- the child's side ------------------------------------------------------------------------


class _Requests:  # pragma: no cover - runs in the child
    """The length-prefixed requests read from a pipe, several per ``read`` when queued."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()

    def next(self) -> bytes | None:
        """The next request, waited for; None once the parent closed the pipe."""
        buffer = self.buffer
        while True:
            if len(buffer) >= HEADER.size:
                (length,) = HEADER.unpack_from(buffer)
                end = HEADER.size + length
                if len(buffer) >= end:
                    request = bytes(buffer[HEADER.size : end])
                    del buffer[:end]
                    return request
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                return None
            buffer += chunk


def _child_main(
    store: ReadSource, cap: int, requests: int, answers: int, parent_ends: tuple[int, int]
) -> None:  # pragma: no cover - runs in the child
    code = 1
    try:
        for fd in parent_ends:
            os.close(fd)
        close_sockets(keep=(requests, answers))
        # Objects inherited from the parent are never collected here: a collection would
        # touch (and so copy) every page of the parent's heap.
        gc.freeze()
        # What goes wrong here is answered on the pipe (or seen by the parent as a dead
        # child, named in its own error); the engine's own last words past the memory cap
        # ("memory allocation of N bytes failed") would reach the terminal or the log.
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, 2)
        os.close(quiet)
        _cap_memory(cap)
        waiting = _Requests(requests)
        while True:
            request = waiting.next()
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
            write_all(answers, HEADER.pack(len(data)) + data)
            del reply, data
    except BaseException:  # nothing may escape into the parent's code
        code = 1
    finally:
        os._exit(code)


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
