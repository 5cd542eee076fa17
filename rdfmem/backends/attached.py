"""A process attached to an on-disk store that another process owns.

``RdfStore.open(path)`` in a process that finds the store's files held by another process
(``StoreAlreadyOpen``) attaches instead: its backend is rdfmem's SPARQL client, talking to
the owner over the Unix socket in the store's folder (``rdfmem.backends.owner``), and its
``exclusive`` sections are the record locks every process of the store shares
(``rdfmem.backends.filelocks``), not leases: sections of the owner and of every attached
process exclude each other, and a process killed inside one blocks nobody.

**Takeover.** When the owner goes away (closed, or killed), the next request of an
attached process finds no one at the socket; it then opens the store's files itself and
becomes the owner (serving the others), or, when another process got there first, waits
for that one's socket. A request is sent again only when it cannot have been run: the
connection was refused, or the closing owner answered ``503 closing``. An update whose
answer was lost with a killed owner raises ``Unreachable`` (it may have been applied).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
from pyoxigraph import NamedNode

from rdfmem.backends.filelocks import SubjectFileLocks
from rdfmem.backends.owner import CLOSING, reachable, socket_path
from rdfmem.backends.sparql.client import SparqlBackend
from rdfmem.core.errors import StoreAlreadyOpen

__all__ = ["AttachedBackend"]

#: The URL of the owner's endpoint (the host name is never resolved: the socket is used).
OWNER_URL = "http://rdfmem-owner/sparql"


class AttachedBackend(SparqlBackend):
    """The owner's store, reached through its socket.

    ``wait_s``: how long to wait for an owner's socket to answer (a process that just
    opened the store's files needs a moment to start serving).

    Raises:
        StoreAlreadyOpen: the files are held by a process that does not serve them (an
            rdfmem older than this one, another program, or another user's process).
    """

    def __init__(self, path: str | os.PathLike[str], *, wait_s: float = 5.0, **options: Any):
        self.path = Path(path)
        self.socket = socket_path(self.path)
        self.wait_s = wait_s
        self._owned: Any = None  # the OxigraphBackend this process opened on takeover
        self._takeover = threading.Lock()
        self._await_owner()
        super().__init__(
            OWNER_URL, transport=_Failover(self), snapshot_reads=True, lease_linger_ms=0, **options
        )
        self.persistent = True
        self._locks = SubjectFileLocks.of(self.path)

    @property
    def owner(self) -> bool:
        """True once this process took the store over (its requests then go to itself)."""
        return self._owned is not None

    def exclusive(
        self, subjects: Sequence[NamedNode], within: str | None = None
    ) -> AbstractContextManager[Any]:
        """The subjects' record locks, shared with the owner and every attached process."""
        return self._locks.exclusive(subjects)

    def reattach(self) -> None:
        """Make sure someone serves the store: become its owner when nobody holds its files,
        else wait for the holder's socket.

        Raises:
            StoreAlreadyOpen: the holder does not serve within ``wait_s``.
        """
        from rdfmem.backends.oxigraph import OxigraphBackend  # only on takeover

        with self._takeover:
            # The owner that left may hold the files a moment longer than its socket: try
            # both, in turn, until one answers.
            deadline = time.monotonic() + self.wait_s
            while not reachable(self.socket):
                try:
                    self._owned = OxigraphBackend(self.path)
                    return
                except StoreAlreadyOpen:
                    if time.monotonic() >= deadline:
                        raise self._not_served() from None
                time.sleep(0.02)

    def _await_owner(self) -> None:
        deadline = time.monotonic() + self.wait_s
        while not reachable(self.socket):
            if time.monotonic() >= deadline:
                raise self._not_served()
            time.sleep(0.02)

    def _not_served(self) -> StoreAlreadyOpen:
        return StoreAlreadyOpen(
            f"the store at {self.path} is held by a process that does not serve it at "
            f"{self.socket} (another program, another user, or an rdfmem without "
            "sharing); close that process, or open the store there",
            cause=None,
        )

    def close(self) -> None:
        if self.closed:
            return
        super().close()
        self._locks.close()
        owned, self._owned = self._owned, None
        if owned is not None:
            owned.close()

    def __repr__(self) -> str:
        return f"AttachedBackend({str(self.path)!r})"


class _Failover(httpx.BaseTransport):
    """HTTP over the owner's socket; a request that was not run is sent again to the next
    owner (``AttachedBackend.reattach``)."""

    def __init__(self, backend: AttachedBackend) -> None:
        self._backend = backend
        self._inner = httpx.HTTPTransport(uds=str(backend.socket))

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        for _ in range(20):
            try:
                response = self._inner.handle_request(request)
            except httpx.ConnectError:
                self._backend.reattach()
                continue
            if response.status_code == 503:
                body = response.read()
                if body == CLOSING:
                    response.close()
                    time.sleep(0.01)
                    self._backend.reattach()
                    continue
            return response
        raise httpx.ConnectError("no owner of the store answered after 20 takeovers")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._inner.close()
