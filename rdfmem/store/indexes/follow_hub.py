"""One change-log cursor per backend, shared by every follower of it (memory vectors,
texts, the decision graph), and one look per public call.

Each follower (``follow.Following``) used to keep a cursor of its own and ask the server
what changed before each of its reads: a hybrid search sent two looks (vectors, then
texts). Here the followers of one backend join one ``LogHub``; a look made for any of them
is handed to all (each merges the changes in an inbox it drains before its next read).

**One look a call.** Inside ``one_look(store)`` (``Memories.search`` opens it) a follower
needing to be fresh sends no look when one *began* after the block began: that look saw
every write that returned before the block began, which is all the rule asks of a read
(``SparqlBackend.changes_since``). Outside a block every read looks, as before. A
follower's inbox naming more than ``MAX_PENDING`` subjects becomes "everything changed"
(it reads its graphs whole again, never answers from a stale set).
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

__all__ = ["MAX_PENDING", "Inbox", "LogHub", "hub_of", "one_look"]

#: Subjects a follower keeps to read again; past it, it reads everything again.
MAX_PENDING = 50_000

_hubs: weakref.WeakKeyDictionary[Any, LogHub] = weakref.WeakKeyDictionary()
_hubs_lock = threading.Lock()


def hub_of(backend: Any) -> LogHub:
    """The one ``LogHub`` of ``backend`` (made on first use)."""
    with _hubs_lock:
        found = _hubs.get(backend)
        if found is None:
            found = _hubs[backend] = LogHub(backend)
        return found


@contextlib.contextmanager
def one_look(store: Any) -> Iterator[None]:
    """A block in which the followers of ``store``'s backend send at most one look between
    them (more only when a look fails). A no-op on a store that tells nothing of changes;
    nested blocks are one block."""
    backend = getattr(store, "backend", None)
    if backend is None or not hasattr(backend, "changes_since"):
        yield
        return
    with hub_of(backend).call():
        yield


class Inbox:
    """What a follower has not yet applied of the looks, merged: every graph and subject
    named, or "everything" (the follower applies it at once, before its next read, so the
    order of the looks does not matter)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.everything = False
        self.whole: set[Any] = set()
        self.subjects: set[tuple[Any, Any]] = set()

    def put(self, changes: Any) -> None:
        with self.lock:
            if self.everything:
                return
            if changes.everything or len(self.subjects) + len(changes.subjects) > MAX_PENDING:
                self.everything = True
                self.whole, self.subjects = set(), set()
                return
            self.whole.update(changes.whole)
            self.subjects.update(changes.subjects)

    def drain(self) -> tuple[bool, set[Any], set[tuple[Any, Any]]]:
        """``(everything, whole, subjects)`` put since the last drain."""
        with self.lock:
            found = (self.everything, self.whole, self.subjects)
            self.everything, self.whole, self.subjects = False, set(), set()
            return found


class LogHub:
    """The change-log cursor of one backend and the inboxes of its followers."""

    def __init__(self, backend: Any) -> None:
        # Held weakly: the hub is the value of a weak map keyed by its backend.
        self._backend = weakref.ref(backend)
        self.lock = threading.Lock()
        self.cursor: Any = None
        self.looks = 0  # looks sent (for tests and benchmarks)
        self._looked_at = float("-inf")  # monotonic time the latest look began
        self._inboxes: weakref.WeakValueDictionary[int, Inbox] = weakref.WeakValueDictionary()
        self._calls = threading.local()

    def join(self, inbox: Inbox) -> None:
        """Deliver every look from now on to ``inbox`` (held weakly: a follower gone
        leaves)."""
        with self.lock:
            self._inboxes[id(inbox)] = inbox

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        """This thread's block of one look (``one_look``)."""
        if getattr(self._calls, "start", None) is not None:
            yield
            return
        self._calls.start = time.monotonic()
        try:
            yield
        finally:
            self._calls.start = None

    def sync(self) -> None:
        """Look at the change log and hand the changes to every inbox, unless this
        thread's block (``call``) already saw a look that began inside it.

        Raises:
            Unreachable, BackingError: as ``changes_since`` (the cursor stays).
        """
        start = getattr(self._calls, "start", None)
        with self.lock:
            if start is not None and self._looked_at >= start:
                return
            began = time.monotonic()
            backend = self._backend()
            if backend is None:  # (a follower keeps its backend alive while it reads)
                return
            changes = backend.changes_since(self.cursor)
            self.cursor = changes.cursor
            self._looked_at = began
            self.looks += 1
            # Handed out under the lock: a thread that finds this look made (above) finds
            # its changes in its inbox.
            for inbox in list(self._inboxes.values()):
                inbox.put(changes)
