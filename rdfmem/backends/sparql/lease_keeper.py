"""Keeping the claims of open sections alive while their thread computes.

A section's own claim is renewed by its thread when a write or a read finds a quarter of its
time to live left (``Leases._keep_alive``). A section that spends longer than that without
talking to the server (building a large write on a starved CPU, an embedder called inside
the block) would find its claim gone at its next request, and its write refused with
``LeaseExpired`` although nothing was wrong. So open sections register their own claim
here, and a daemon thread renews each one that has half of its trusted time left, by the
very request the section's thread would send (fenced: a renewal of a claim the server no
longer holds for this client is refused, and the section learns it at its next request).

The thread ends whenever no section is open; a renewal that fails is left to the section's
thread, which checks its claims before each request anyway.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import suppress

from rdfmem.backends.sparql.lease_steps import Claim, clock
from rdfmem.core.errors import StoreError

__all__ = ["Keeper"]


class Keeper:
    """Renews the registered claims (``watch``/``unwatch``) from one daemon thread, with
    ``renew(claim)`` once half of a claim's trusted time has gone by."""

    def __init__(self, renew: Callable[[Claim], None]) -> None:
        self._renew = renew
        self._watched: dict[str, Claim] = {}
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def watch(self, claim: Claim) -> None:
        with self._changed:
            self._watched[claim.token] = claim
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="rdfmem-lease-keeper", daemon=True
                )
                self._thread.start()
            self._changed.notify()

    def unwatch(self, claim: Claim) -> None:
        with self._changed:
            self._watched.pop(claim.token, None)
            self._changed.notify()

    @staticmethod
    def _due_at(claim: Claim) -> float:
        return claim.deadline - claim.ttl_ms / 2000.0

    def _run(self) -> None:
        while True:
            with self._changed:
                if not self._watched:
                    self._thread = None
                    return
                now = clock()
                due = [c for c in self._watched.values() if self._due_at(c) <= now]
                if not due:
                    wait = min(self._due_at(c) for c in self._watched.values()) - now
                    self._changed.wait(max(wait, 0.01))
                    continue
            for claim in due:
                with claim.gate:  # not while one of its fenced requests is on the way
                    with self._changed:
                        if claim.token not in self._watched:
                            continue  # its section closed meanwhile
                    before = claim.deadline
                    with suppress(StoreError):
                        self._renew(claim)
                if claim.deadline == before:
                    # Refused or unanswered: the section's own thread will hear of it at
                    # its next request; stop trying for this one.
                    self.unwatch(claim)
