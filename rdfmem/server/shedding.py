"""How many connections the server keeps open, and which one goes when a new one arrives.

A connection is a descriptor. A server whose clients hold every descriptor the process may
open can accept nobody else (``accept`` fails with ``EMFILE``): 300 clients that send headers
and a few body bytes then keep ``/health`` unanswered until their body timeout, and again on
their next wave. So the cap on open connections is derived from the descriptor limit
(``RLIMIT_NOFILE``): what the process already holds (the store's files, the listener) and a
spare for the files, pipes and children it will open are set aside, and of what is left half
may be connections and half stays free for clients arriving faster than the server can shed.

When the cap is reached, a new connection is admitted by closing the *slowest waiting* one:
of the connections that are idle (keep-alive, no request) or still sending a request (its
line, headers or body), the one that has been waiting longest. A connection whose request
has arrived whole is busy (its answer is being made or sent) and is never shed. When every
connection is busy, the new one is closed instead.
"""

from __future__ import annotations

import contextlib
import os
import resource
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Room", "Shedder", "connection_room", "open_descriptors"]

#: Descriptors set aside for files, pipes and children, at least (an eighth of the limit
#: when that is more): a query child holds two pipes, RocksDB opens its tables lazily.
SPARE = 64
#: Connections accepted at most in one go when the event loop lets us say (asyncio's own).
MAX_BURST = 128


def open_descriptors() -> int:
    """Descriptors this process holds now (0 when the system does not say)."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        with contextlib.suppress(OSError):
            return max(0, len(os.listdir(folder)) - 1)  # less the listing's own
    return 0


@dataclass(frozen=True)
class Room:
    """Connections the server keeps open (``cap``), and the descriptors left free for clients
    arriving before slower ones are shed (``spare_for_arrivals``)."""

    cap: int
    spare_for_arrivals: int
    limit: int | None

    @property
    def burst(self) -> int:
        """Connections to accept in one go: a quarter of the room for arrivals."""
        return max(1, min(MAX_BURST, self.spare_for_arrivals // 4))


def connection_room(
    requested: int | None = None, *, limit: int | None = None, in_use: int | None = None
) -> Room:
    """The connection cap for this process's descriptor limit (its soft ``RLIMIT_NOFILE``
    unless ``limit`` is given), at most ``requested``.

    >>> connection_room(limit=1024, in_use=30)
    Room(cap=433, spare_for_arrivals=433, limit=1024)
    >>> connection_room(256, limit=1024, in_use=30).cap
    256
    >>> connection_room(limit=256, in_use=30).cap
    81
    """
    if limit is None:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        limit = None if soft == resource.RLIM_INFINITY else int(soft)
    if in_use is None:
        in_use = open_descriptors()
    if limit is None:  # no limit: the one asked for, or a large default
        cap = requested if requested is not None else 65536
        return Room(cap=cap, spare_for_arrivals=cap, limit=None)
    left = limit - in_use - max(SPARE, limit // 8)
    cap = max(1, left // 2)
    if requested is not None:
        cap = min(cap, requested)
    return Room(cap=cap, spare_for_arrivals=max(1, left - cap), limit=limit)


class Sheddable(Protocol):
    """A connection the shedder can close."""

    def shed(self) -> None:
        """Close the connection at once (its descriptor is released)."""


class Shedder:
    """The open connections of one server, and which of them are waiting (see the module
    docstring). Called from the event loop only.

    >>> class Conn:
    ...     def __init__(self, name): self.name, self.closed = name, False
    ...     def shed(self): self.closed = True
    >>> shedder = Shedder(cap=2)
    >>> a, b, c = Conn("a"), Conn("b"), Conn("c")
    >>> shedder.opened(a), shedder.opened(b)
    (True, True)
    >>> shedder.busy(a)  # a's request arrived whole: it is not shed
    >>> shedder.opened(c), a.closed, b.closed, shedder.shed
    (True, False, True, 1)
    """

    def __init__(self, cap: int) -> None:
        if cap < 1:
            raise ValueError("the connection cap must be at least 1")
        self.cap = cap
        #: Connections closed to admit new ones (or refused, every other one being busy).
        self.shed = 0
        self._open: set[Sheddable] = set()
        #: The waiting connections, the one waiting longest first.
        self._waiting: OrderedDict[Sheddable, None] = OrderedDict()

    @property
    def open(self) -> int:
        """Connections open (not counting those already shed)."""
        return len(self._open)

    def opened(self, conn: Sheddable) -> bool:
        """Count a new connection in, waiting; shed the slowest waiting one if the cap is
        passed. False when ``conn`` itself had to be closed (every other one busy)."""
        self._open.add(conn)
        self.waiting(conn)
        if len(self._open) <= self.cap:
            return True
        victim = next(iter(self._waiting))
        self._drop(victim)
        return victim is not conn

    def waiting(self, conn: Sheddable) -> None:
        """``conn`` starts waiting now: idle, or receiving a request's line, headers or body."""
        if conn in self._open:
            self._waiting[conn] = None
            self._waiting.move_to_end(conn)

    def busy(self, conn: Sheddable) -> None:
        """``conn``'s request has arrived whole: it is answered, not shed."""
        self._waiting.pop(conn, None)

    def closed(self, conn: Sheddable) -> None:
        """``conn`` is gone (whoever closed it)."""
        self._open.discard(conn)
        self._waiting.pop(conn, None)

    def relieve(self, count: int) -> int:
        """Shed up to ``count`` of the slowest waiting connections (the process ran out of
        descriptors anyway); how many were shed."""
        done = 0
        while done < count and self._waiting:
            self._drop(next(iter(self._waiting)))
            done += 1
        return done

    def _drop(self, conn: Sheddable) -> None:
        self.closed(conn)
        self.shed += 1
        conn.shed()
