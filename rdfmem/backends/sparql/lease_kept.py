"""The claims one client keeps after a section, unused, until they linger too long.

``Leases`` keeps a section's own claim when nobody else wanted its subjects, so that the
client's next section there costs one read instead of a claim and a read. Kept claims are
deleted by a daemon thread after ``linger_s`` unused, or before less than ``spare_s`` of
their trusted time is left; the thread ends whenever nothing is kept.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from collections.abc import Callable, Sequence
from contextlib import suppress

from pyoxigraph import NamedNode

from rdfmem.backends.sparql.lease_steps import Claim, clock

__all__ = ["KeptClaims"]

#: Every ``KeptClaims`` that kept a claim: at exit, a process that never closed its store
#: still deletes its kept claims, so other clients need not wait for their ttl.
_LIVE: weakref.WeakSet[KeptClaims] = weakref.WeakSet()


class KeptClaims:
    """The claims of one client: in use by a section (busy) or kept unused (idle)."""

    def __init__(
        self, *, linger_s: float, spare_s: float, delete: Callable[[Sequence[Claim]], None]
    ) -> None:
        self.linger_s, self.spare_s = linger_s, spare_s
        self._delete = delete  # deletes claims on the server; never raises
        self._cond = threading.Condition()
        self._idle: dict[str, tuple[Claim, float]] = {}  # token -> (claim, unused since)
        self._busy: set[str] = set()
        self._dying: set[str] = set()  # lingered out, being deleted by the reaper
        self._reaper: threading.Thread | None = None
        self._closed = False
        #: How often kept claims were used again rather than lingering out (a moving
        #: average: 1 when every kept claim served a next section).
        self.reuse = 1.0

    def mine(self) -> frozenset[str]:
        """The tokens of every claim of this client on the server: busy, idle, or being
        deleted (another of its reads must not take them for another client's)."""
        with self._cond:
            return frozenset(self._idle) | frozenset(self._busy) | frozenset(self._dying)

    def take(self, subjects: Sequence[NamedNode]) -> Claim | None:
        """An idle claim covering every one of ``subjects`` with more than ``spare_s`` of
        trusted time left, now busy; None when there is none."""
        with self._cond:
            now = clock()
            for token, (claim, _) in self._idle.items():
                if claim.deadline - now > self.spare_s and all(claim.covers(s) for s in subjects):
                    del self._idle[token]
                    self._busy.add(token)
                    self.reuse = 0.9 * self.reuse + 0.1
                    return claim
        return None

    def take_covering(self, subjects: Sequence[NamedNode]) -> list[Claim]:
        """Remove and return the idle claims covering any of ``subjects`` (all for none)."""
        with self._cond:
            taken = [
                claim
                for claim, _ in self._idle.values()
                if not subjects or any(claim.covers(s) for s in subjects)
            ]
            for claim in taken:
                del self._idle[claim.token]
            return taken

    def using(self, claim: Claim) -> None:
        """Note a new claim of this client, in use by a section."""
        with self._cond:
            self._busy.add(claim.token)

    def done(self, claim: Claim, *, keep: bool) -> None:
        """The section using ``claim`` ended; ``keep``: the claim lives on, idle."""
        with self._cond:
            self._busy.discard(claim.token)
            if not keep or self._closed:
                return
            self._idle[claim.token] = (claim, clock())
            _LIVE.add(self)
            if self._reaper is None:
                self._reaper = threading.Thread(
                    target=self._reap, name="rdfmem-lease-reaper", daemon=True
                )
                self._reaper.start()
            self._cond.notify_all()

    def close(self) -> list[Claim]:
        """Keep nothing from now on; return the idle claims (for the caller to delete)."""
        with self._cond:
            self._closed = True
            claims = [claim for claim, _ in self._idle.values()]
            self._idle.clear()
            self._cond.notify_all()
            return claims

    def _due(self, claim: Claim, since: float) -> float:
        return min(since + self.linger_s, claim.deadline - self.spare_s)

    def _reap(self) -> None:
        while True:
            with self._cond:
                if self._closed or not self._idle:
                    self._reaper = None
                    return
                now = clock()
                due = [c for c, since in self._idle.values() if self._due(c, since) <= now]
                if not due:
                    first = min(self._due(c, since) for c, since in self._idle.values())
                    self._cond.wait(max(first - now, 0.001))
                    continue
                for claim in due:
                    del self._idle[claim.token]
                    self._dying.add(claim.token)
                    self.reuse *= 0.9
            with suppress(Exception):  # outside the lock: sections need not wait for it
                self._delete(due)
            with self._cond:
                self._dying.difference_update(c.token for c in due)


@atexit.register
def _delete_all_at_exit() -> None:
    for kept in list(_LIVE):
        claims = kept.close()
        if claims:
            with suppress(Exception):
                kept._delete(claims)
