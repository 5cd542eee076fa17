"""Where one client met other clients lately: what ``Leases`` reads before it keeps a claim
after a section, or claims a whole range instead of a subject.

A subject (or a range, by its ``range_node``) on which this client met another one is
*contended* for a while (``CONTENDED_S``, twice as long each time contention there comes
back while the last period lasts or soon after, up to an hour): clients sharing subjects
go on sharing them, so no claim is kept there nor the range claimed. A range is claimed
whole once ``ESCALATE_AFTER`` sections in a row in it met nobody.

A contended subject is calm again early once this client's new claims on it met nobody
``QUIET_AFTER`` times in a row, more the more often contention there came back (``quiet``):
two clients that take turns in bursts (two agents on one memory) then keep their claims
within a burst, two requests a write rather than three, and meet once a burst (a wait of
a kept claim's linger). Clients writing a subject at the same time meet on their new
claims as well, so they seldom get that far. Thread-safe; no I/O.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import ClassVar

from pyoxigraph import NamedNode

from rdfmem.backends.sparql.lease_steps import RANGE_PREFIX, Claim, range_node

__all__ = ["MAX_THEIRS", "Contention"]

#: Graphs and subjects written by other clients that are remembered (the latest).
MAX_THEIRS = 256


class Contention:
    """One client's memory of contention, by subject IRI and by range prefix.

    >>> calm = Contention()
    >>> a = NamedNode("urn:res:a")
    >>> calm.contended([a])
    False
    >>> calm.contend([a], None)
    >>> calm.contended([a])
    True
    """

    CONTENDED_S: ClassVar[float] = 30.0
    RECENT_S: ClassVar[float] = 60.0
    ESCALATE_AFTER: ClassVar[int] = 2
    #: New claims in a row that met nobody before a contended subject is calm again, times
    #: one more than the times its period doubled (0: never early).
    QUIET_AFTER: ClassVar[int] = 8

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # subject IRI -> (monotonic time its calm ends, how long it lasts)
        self._contended: dict[str, tuple[float, float]] = {}
        self._streak: dict[str, int] = {}  # range prefix -> uncontended sections in a row
        self._recent: dict[str, float] = {}  # subject IRI -> when this client last claimed it
        self._sampled = 0
        self._quiet: dict[str, int] = {}  # contended subject -> new claims in a row alone
        self._theirs: OrderedDict[str, float] = OrderedDict()  # IRI -> when others wrote it

    def contend(
        self, subjects: Sequence[NamedNode], within: str | None, *, soft: bool = False
    ) -> None:
        """Keep no claim on ``subjects`` (and claim not the range ``within``) for a while
        (see the module). ``soft``: others were only seen near, not met; a period running
        already is left as it is."""
        now = time.monotonic()
        names = list(dict.fromkeys(s.value for s in subjects))  # each once: one doubling
        if within is not None:
            names.append(range_node(within).value)
        with self._lock:
            if len(self._contended) > 10_000:
                self._contended = {
                    name: (until, calm)
                    for name, (until, calm) in self._contended.items()
                    if until + calm > now
                }
            for name in names:
                until, calm = self._contended.get(name, (0.0, 0.0))
                if soft and now < until:
                    continue
                calm = min(2 * calm, 3600.0) if now < until + calm else self.CONTENDED_S
                self._contended[name] = (now + calm, calm)
                self._quiet.pop(name, None)
            if within is not None:
                self._streak.pop(within, None)

    def contended(self, subjects: Sequence[NamedNode]) -> bool:
        """Whether any of ``subjects`` (subject or range nodes) is contended now."""
        now = time.monotonic()
        with self._lock:
            return any(self._contended.get(s.value, (0.0, 0.0))[0] > now for s in subjects)

    def claimed(
        self, subjects: Sequence[NamedNode], within: str | None, *, waited: bool, crowded: bool
    ) -> None:
        """Note a new claim on ``subjects`` (in the range ``within``, if any): it ``waited``
        for another client's (contended), or met nobody (``quiet``); ``crowded``: others
        claimed in the range, so it is not claimed whole for a while."""
        if waited:
            self.contend(subjects, within)
            return
        self.quiet(subjects)
        if crowded and within is not None:
            self.contend([], within, soft=True)

    def theirs(self, names: Iterable[str]) -> None:
        """Note graphs and subjects (IRIs) that other clients' writes named lately (the
        change log tells a client that follows it)."""
        now = time.monotonic()
        with self._lock:
            for name in names:
                self._theirs.pop(name, None)
                self._theirs[name] = now
            while len(self._theirs) > MAX_THEIRS:
                self._theirs.popitem(last=False)

    def met(self, claim: Claim) -> bool:
        """Whether another client wanted what ``claim`` covers lately: this client met one
        on its subjects within the last contention period there (contended now, or calm
        again early: ``quiet``), or another client's write named one within ``RECENT_S``
        (``theirs``)."""
        now, names = time.monotonic(), [s.value for s in claim.subjects]
        ranges = [n[len(RANGE_PREFIX) :] for n in names if n.startswith(RANGE_PREFIX)]
        with self._lock:
            for name in names:
                until, calm = self._contended.get(name, (0.0, 0.0))
                if until + calm > now or now - self._theirs.get(name, -1e9) < self.RECENT_S:
                    return True
            return bool(ranges) and any(  # a range claim: what another client wrote in it
                now - at < self.RECENT_S and any(n.startswith(p) for p in ranges)
                for n, at in self._theirs.items()
            )

    def quiet(self, subjects: Sequence[NamedNode]) -> None:
        """Count a new claim on ``subjects`` that met nobody; a contended one whose new
        claims met nobody often enough in a row is calm from now on (see the module)."""
        if self.QUIET_AFTER <= 0:
            return
        now = time.monotonic()
        with self._lock:
            for subject in subjects:
                name = subject.value
                until, calm = self._contended.get(name, (0.0, 0.0))
                if until <= now:
                    continue
                alone = self._quiet.get(name, 0) + 1
                doubled = max(0, round(math.log2(max(calm, self.CONTENDED_S) / self.CONTENDED_S)))
                if alone < self.QUIET_AFTER * (1 + doubled):
                    self._quiet[name] = alone
                    continue
                # Calm now; the period's length stays, so contention soon back doubles it.
                self._contended[name] = (now, calm)
                self._quiet.pop(name, None)

    def escalate(self, within: str) -> bool:
        """Whether a section in the range ``within`` should claim the whole range."""
        if self.contended([range_node(within)]):
            return False
        with self._lock:
            return self._streak.get(within, 0) >= self.ESCALATE_AFTER

    def calm(self, within: str) -> None:
        """Count a section in the range ``within`` that met nobody (and kept its claim)."""
        with self._lock:
            self._streak[within] = self._streak.get(within, 0) + 1

    def sample(self) -> bool:
        """True once in eight calls: keep one claim in eight when kept claims mostly
        lingered out unused, to notice when they would serve again."""
        with self._lock:
            self._sampled = (self._sampled + 1) % 8
            return not self._sampled

    def again(self, subjects: Sequence[NamedNode]) -> bool:
        """Whether this client claimed any of ``subjects`` within ``RECENT_S``; notes that
        it claims them now."""
        now = time.monotonic()
        names = [s.value for s in subjects]
        with self._lock:
            again = any(now - self._recent.get(n, -1e9) < self.RECENT_S for n in names)
            if len(self._recent) > 4096:
                self._recent = {k: t for k, t in self._recent.items() if now - t < self.RECENT_S}
            for name in names:
                self._recent[name] = now
        return again
