"""Evaluate a job in a forked child process that can be killed at its deadline.

pyoxigraph offers no way to stop a query once it runs, and a thread cannot be killed. A forked
child can: it sees the parent's store as it was at the fork (copy-on-write, for an in-memory
store, an on-disk RocksDB store and an rdflib graph alike), evaluates, writes its answer (plain
pickled data, capped in size) to a pipe and exits. The worker thread that forked it waits on
the pipe, not on the CPU; when the deadline passes or the caller goes away it sends SIGKILL, so
a runaway query stops using the CPU at its time limit and its memory is returned at once.

Only reads are isolated: an update must change the parent's store, so it runs in the parent.
The child never returns into the parent's code: it leaves with ``os._exit`` whatever happens.
"""

from __future__ import annotations

import gc
import os
import pickle
import select
import signal
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

from rdfmem.core.errors import ChildFailed
from rdfmem.server.workers import TimedOut
from rdfmem.store.sandbox import close_sockets

__all__ = ["ChildFailed", "run_forked"]

#: How often the waiting thread looks at the cancel flag.
_POLL = 0.05
#: Held from creating a child's pipe to closing its write end in the parent.
_FORKING = threading.Lock()


def run_forked(
    fn: Callable[[], Any], *, deadline: float, cancel: threading.Event, max_bytes: int
) -> Any:
    """``fn()`` evaluated in a forked child; its (picklable) result.

    ``deadline`` is a ``time.monotonic()`` instant. An answer larger than ``max_bytes`` once
    pickled is cut and reported as ``ChildFailed``: callers cap their own output below it.

    Raises:
        TimedOut: the deadline passed or ``cancel`` was set; the child was killed.
        ChildFailed: the child exited without a complete answer.
    """
    # One fork at a time, the pipe's write end closed in the parent before the next: a child
    # forked by another thread in between would hold this pipe open, and this answer would
    # then wait for that child to end (a runaway: its time limit) instead of its own.
    with _FORKING:
        read_end, write_end = os.pipe()
        with warnings.catch_warnings():
            # Python 3.12+ warns that forking a threaded process may deadlock the child:
            # this child only evaluates and exits, and one that hangs is killed at the deadline.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # pragma: no cover - the child; coverage does not follow it
            _child(fn, read_end, write_end)
        os.close(write_end)
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or cancel.is_set():
                raise TimedOut("the query ran longer than its time limit and was stopped")
            ready, _, _ = select.select([read_end], [], [], min(left, _POLL))
            if not ready:
                continue
            chunk = os.read(read_end, 1 << 20)
            if not chunk:
                break
            size += len(chunk)
            if size > max_bytes:
                raise ChildFailed("the query's answer was larger than the server's limit")
            chunks.append(chunk)
    finally:
        os.close(read_end)
        _reap(pid)
    if not chunks:
        raise ChildFailed("the query's process ended without an answer (out of memory?)")
    try:
        return pickle.loads(b"".join(chunks))
    except Exception as exc:
        raise ChildFailed(f"the query's process sent a broken answer: {exc}") from exc


def _child(fn: Callable[[], Any], read_end: int, write_end: int) -> None:  # pragma: no cover
    code = 1
    gc.disable()  # a collection would touch (and so copy) every page of the parent's heap
    try:
        os.close(read_end)
        close_sockets(keep=(write_end,))
        data = pickle.dumps(fn(), protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(data)
        while view:
            view = view[os.write(write_end, view) :]
        code = 0
    except BaseException:  # nothing may escape into the parent's code
        code = 1
    finally:
        os._exit(code)


def _reap(pid: int) -> None:
    """Kill the child if it still runs, and collect it (no zombie stays behind)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    except ChildProcessError:
        pass
