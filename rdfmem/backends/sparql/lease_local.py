"""One client's local side of its leases: its threads take turns per subject
(``SubjectLocks``), and each ``Leases.exclusive`` block a thread is in is a ``Section``.
No I/O.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from pyoxigraph import NamedNode

from rdfmem.backends.sparql.lease_steps import Claim, Row

__all__ = ["Section", "SubjectLocks", "fences_of"]


class SubjectLocks:
    """Threads of one client take turns per subject; ``[]`` means every subject."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy: set[str] = set()
        self._all = False

    @contextmanager
    def hold(self, subjects: Sequence[NamedNode]) -> Iterator[None]:
        names = {s.value for s in subjects}
        with self._cond:
            while self._all or (not names and self._busy) or (names & self._busy):
                self._cond.wait()
            if names:
                self._busy |= names
            else:
                self._all = True
        try:
            yield
        finally:
            with self._cond:
                if names:
                    self._busy -= names
                else:
                    self._all = False
                self._cond.notify_all()


@dataclass
class Section:
    """One ``exclusive`` block: the claims it writes under, its own claim, deferred writes,
    and what its claim's read brought."""

    fences: list[Claim]
    own: Claim | None
    pending: list[str] = field(default_factory=list)
    wrote: bool = False
    within: str | None = None
    prefetch: list[Row] | None = None
    prefetch_for: frozenset[NamedNode] = frozenset()
    others: bool = False  # the claim's read found another client waiting

    def prefetched(self, subject: NamedNode) -> list[Row] | None:
        """The quads of ``subject`` its claim's read brought (rows of ``?pp ?po ?pg``),
        while the section has written nothing; None when there are none to trust."""
        if self.wrote or self.own is None or self.prefetch is None:
            return None
        if subject not in self.prefetch_for:
            return None
        return [
            r
            for r in self.prefetch
            if r.get("ps") == subject and "pp" in r and "po" in r and "pg" in r
        ]


def fences_of(sections: Sequence[Section]) -> list[Claim]:
    """The claims writes made in ``sections`` go under, each once."""
    fences: list[Claim] = []
    for section in sections:
        fences.extend(c for c in section.fences if c not in fences)
    return fences
