"""Where one client met other clients lately: what ``Leases`` reads before it keeps a claim
after a section, or claims a whole range instead of a subject.

A subject (or a range, by its ``range_node``) on which this client met another one is
*contended* for a while (``CONTENDED_S``, twice as long each time contention there comes
back while the last period lasts or soon after, up to an hour): clients sharing subjects
go on sharing them, so no claim is kept there nor the range claimed. A range is claimed
whole once ``ESCALATE_AFTER`` sections in a row in it met nobody. Thread-safe; no I/O.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import ClassVar

from pyoxigraph import NamedNode

from rdfmem.backends.sparql.lease_steps import range_node

__all__ = ["Contention"]


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

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # subject IRI -> (monotonic time its calm ends, how long it lasts)
        self._contended: dict[str, tuple[float, float]] = {}
        self._streak: dict[str, int] = {}  # range prefix -> uncontended sections in a row
        self._recent: dict[str, float] = {}  # subject IRI -> when this client last claimed it
        self._sampled = 0

    def contend(
        self, subjects: Sequence[NamedNode], within: str | None, *, soft: bool = False
    ) -> None:
        """Keep no claim on ``subjects`` (and claim not the range ``within``) for a while
        (see the module). ``soft``: others were only seen near, not met; a period running
        already is left as it is."""
        now = time.monotonic()
        names = [s.value for s in subjects]
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
            if within is not None:
                self._streak.pop(within, None)

    def contended(self, subjects: Sequence[NamedNode]) -> bool:
        """Whether any of ``subjects`` (subject or range nodes) is contended now."""
        now = time.monotonic()
        with self._lock:
            return any(self._contended.get(s.value, (0.0, 0.0))[0] > now for s in subjects)

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
