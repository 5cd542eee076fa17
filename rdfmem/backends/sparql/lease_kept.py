"""The claims one client keeps after a section, unused, until they linger too long.

``Leases`` keeps a section's own claim when nobody else wanted its subjects, so that the
client's next section there costs one read instead of a claim and a read. Kept claims are
deleted by a daemon thread after ``linger_s`` unused, or before less than ``spare_s`` of
their trusted time is left; the thread ends whenever nothing is kept.

A claim whose subjects came back sooner lingers less: ``GAPS`` times the longest recent
wait between a section there and the next one (at least ``FLOOR_S``, at most ``linger_s``;
twice that after a kept claim of theirs lingered out unused).
Another client that comes for those subjects once this client stopped (two clients taking
turns) then waits for that, not for ``linger_s``: an agent turn of ~30 ms that kept its
claims for 250 ms made the other client's first write wait ~200 ms a round. A claim on
subjects another client wanted lately (``Contention.met``) lingers only ``FLOOR_S``, however
far apart this client's sections there come: a slow client (turns of 140 ms) made a fast
one wait 160-220 ms at the start of each of its rounds.
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

    #: A kept claim lingers this many times the longest recent gap between its uses …
    GAPS = 2.0
    #: … and never less than this (nor more than ``linger_s``).
    FLOOR_S = 0.05
    #: ``close`` waits at most this long for the deletes the reaper has under way.
    CLOSE_WAIT_S = 10.0

    def __init__(
        self, *, linger_s: float, spare_s: float, delete: Callable[[Sequence[Claim]], None]
    ) -> None:
        self.linger_s, self.spare_s = linger_s, spare_s
        self._delete = delete  # deletes claims on the server; never raises
        self._cond = threading.Condition()
        self._idle: dict[str, tuple[Claim, float]] = {}  # token -> (claim, unused since)
        self._busy: set[str] = set()
        self._dying: set[str] = set()  # lingered out, being deleted by the reaper
        self._brief: set[str] = set()  # idle claims kept only ``FLOOR_S`` (``done``)
        self._reaper: threading.Thread | None = None
        # subjects of a claim (by IRI) -> the longest recent gap between two of its uses
        # (rises at once, decays by a fifth a use): how long a kept claim of theirs lingers.
        self._gaps: dict[frozenset[str], float] = {}
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
            for token, (claim, since) in self._idle.items():
                if claim.deadline - now > self.spare_s and all(claim.covers(s) for s in subjects):
                    del self._idle[token]
                    self._busy.add(token)
                    self.reuse = 0.9 * self.reuse + 0.1
                    self._note_gap(claim, now - since)
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
                self._brief.discard(claim.token)
            return taken

    def using(self, claim: Claim) -> None:
        """Note a new claim of this client, in use by a section."""
        with self._cond:
            self._busy.add(claim.token)

    def done(self, claim: Claim, *, keep: bool, brief: bool = False) -> None:
        """The section using ``claim`` ended; ``keep``: the claim lives on, idle (``brief``:
        only ``FLOOR_S``, its subjects being wanted by another client lately)."""
        with self._cond:
            self._busy.discard(claim.token)
            self._brief.discard(claim.token)
            if not keep or self._closed:
                return
            self._idle[claim.token] = (claim, clock())
            if brief:
                self._brief.add(claim.token)
            _LIVE.add(self)
            if self._reaper is None:
                self._reaper = threading.Thread(
                    target=self._reap, name="rdfmem-lease-reaper", daemon=True
                )
                self._reaper.start()
            self._cond.notify_all()

    def close(self) -> list[Claim]:
        """Keep nothing from now on; return the idle claims (for the caller to delete),
        once the claims the reaper is deleting now are deleted (at most ``CLOSE_WAIT_S``):
        the caller closes the connection next, and a delete cut off there would leave its
        claim on the server until its ttl, making other clients wait for it."""
        with self._cond:
            self._closed = True
            claims = [claim for claim, _ in self._idle.values()]
            self._idle.clear()
            self._brief.clear()
            self._cond.notify_all()
            if self._reaper is not threading.current_thread():
                self._cond.wait_for(lambda: not self._dying, timeout=self.CLOSE_WAIT_S)
            return claims

    def _note_gap(self, claim: Claim, gap: float) -> None:
        key = frozenset(s.value for s in claim.subjects)
        last = self._gaps.get(key)
        if last is None and len(self._gaps) >= 4096:
            self._gaps.clear()
        self._gaps[key] = gap if last is None else max(gap, 0.8 * last + 0.2 * gap)

    def _lingered_out(self, claim: Claim) -> None:
        # Unused for longer than its subjects' recent gaps: the next one lingers twice as
        # long (so a client whose sections come further apart soon keeps them again).
        key = frozenset(s.value for s in claim.subjects)
        gap = self._gaps.get(key)
        if gap is not None:
            self._gaps[key] = min(2 * gap, self.linger_s)  # (soon short again)

    def linger(self, claim: Claim) -> float:
        """How long ``claim`` is kept unused (see the module)."""
        if claim.token in self._brief:
            return min(self.linger_s, self.FLOOR_S)
        gap = self._gaps.get(frozenset(s.value for s in claim.subjects))
        if gap is None:
            return self.linger_s
        return min(self.linger_s, max(self.FLOOR_S, self.GAPS * gap))

    def _due(self, claim: Claim, since: float) -> float:
        return min(since + self.linger(claim), claim.deadline - self.spare_s)

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
                    self._brief.discard(claim.token)
                    self._dying.add(claim.token)
                    self.reuse *= 0.9
                    self._lingered_out(claim)
            with suppress(Exception):  # outside the lock: sections need not wait for it
                self._delete(due)
            with self._cond:
                self._dying.difference_update(c.token for c in due)
                self._cond.notify_all()  # (``close`` may be waiting for them)


@atexit.register
def _delete_all_at_exit() -> None:
    for kept in list(_LIVE):
        claims = kept.close()
        if claims:
            with suppress(Exception):
                kept._delete(claims)
