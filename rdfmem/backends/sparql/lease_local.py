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

__all__ = ["Section", "SubjectLocks", "fences_of", "own_covering"]


class SubjectLocks:
    """Threads of one client take turns per subject; ``[]`` means every subject.

    Re-entrant per thread: a thread inside ``hold`` may hold its subjects again (a
    ``store.set(key)`` inside ``store.exclusive(key)``); it then waits only for the
    subjects it does not hold yet.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy: dict[str, int] = {}  # subject -> thread id holding it
        self._all: int | None = None  # the thread holding every subject
        self._mine = threading.local()

    def _held(self) -> list[set[str] | None]:
        """This thread's holds, innermost last; None is a hold of every subject."""
        stack: list[set[str] | None] = self._mine.__dict__.setdefault("stack", [])
        return stack

    def _blocked(self, me: int, names: set[str] | None) -> bool:
        """Whether another thread holds what ``me`` asks for (None: every subject)."""
        if self._all is not None and self._all != me:
            return True
        if names is None:
            return any(t != me for t in self._busy.values())
        return any(self._busy.get(n, me) != me for n in names)

    @contextmanager
    def hold(self, subjects: Sequence[NamedNode]) -> Iterator[None]:
        me, held = threading.get_ident(), self._held()
        if any(h is None for h in held):  # this thread already holds every subject
            yield
            return
        names = {s.value for s in subjects} - {n for h in held if h for n in h}
        if subjects and not names:  # all of them held by this thread already
            yield
            return
        with self._cond:
            while self._blocked(me, names if subjects else None):
                self._cond.wait()
            if subjects:
                self._busy.update(dict.fromkeys(names, me))
            else:
                self._all = me
        held.append(names if subjects else None)
        try:
            yield
        finally:
            held.pop()
            with self._cond:
                if subjects:
                    for name in names:
                        del self._busy[name]
                else:
                    self._all = None
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

    def rows_for(self, subjects: Sequence[NamedNode]) -> list[Row] | None:
        """Every row its claim's read brought, when they hold every one of ``subjects``'
        quads and the section has written nothing; else None."""
        if self.wrote or self.own is None or self.prefetch is None:
            return None
        if not subjects or any(s not in self.prefetch_for for s in subjects):
            return None
        return self.prefetch


def fences_of(sections: Sequence[Section]) -> list[Claim]:
    """The claims writes made in ``sections`` go under, each once."""
    fences: list[Claim] = []
    for section in sections:
        fences.extend(c for c in section.fences if c not in fences)
    return fences


def own_covering(sections: Sequence[Section], subject: NamedNode) -> Claim | None:
    """The claim of an enclosing section of this thread that already covers ``subject``:
    a nested ``exclusive`` writes under it instead of claiming ``subject`` again."""
    for section in reversed(sections):
        if section.own is not None and section.own.covers(subject):
            return section.own
    return None
