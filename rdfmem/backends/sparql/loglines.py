"""What one change-log cursor has read, in date order, so that its next bounded look
(``ChangeLog._bounded``) is counted, and its next cursor made, without a pass over every
record of the window in Python.

A ``Line`` belongs to one cursor (the exact ``frozenset`` of names a look returned): the
dates (microseconds, ``logread.exact_us``) of the records it read that a client counts as
the server does, sorted, with their names; and the records it read that it cannot count
(``odd``: a date not in UTC, several dates). Counting the records of a span is two
bisections; the records still in the next window are a slice.

>>> line = Line(0.0, frozenset({"a", "b", "c"}), [1_000_000, 2_000_000], ["a", "b"], [(3.0, "c")])
>>> line.count(1_000_000, 2_000_000), line.since(2_000_000), line.odd_since(1.0)
(1, ['b'], True)
>>> later = line.advance(1.5, frozenset({"a", "b", "c", "d"}), {"d": (4.0, (4_000_000,))})
>>> later.names, later.odd
(['b', 'd'], [(3.0, 'c')])
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["Line", "line_of", "names_of"]

#: ``name -> (latest date in seconds, dates in microseconds or None)`` of records read.
Dated = Mapping[str, tuple[float, tuple[int, ...] | None]]


@dataclass
class Line:
    """The records one cursor (``since``, ``recent``) has read, in date order."""

    start: float  # the cursor's ``since``
    recent: frozenset[str]  # the cursor's names (the line is this set's, by identity)
    dates: list[int]  # microseconds of the records it counts, sorted
    names: list[str]  # their names, in the same order
    odd: list[tuple[float, str]]  # (latest date, name) of the records it cannot count

    def count(self, low_us: int, high_us: int) -> int:
        """How many of its countable records are dated in ``[low_us, high_us)``."""
        return bisect.bisect_left(self.dates, high_us) - bisect.bisect_left(self.dates, low_us)

    def since(self, low_us: int) -> list[str]:
        """The names of its countable records dated at or after ``low_us``, oldest first."""
        return self.names[bisect.bisect_left(self.dates, low_us) :]

    def odd_since(self, low: float) -> bool:
        """Whether a record it cannot count has a date at or after ``low`` (seconds)."""
        return any(at >= low for at, _ in self.odd)

    def advance(self, left: float, recent: frozenset[str], read: Dated) -> Line:
        """The line of the next cursor (``left``, ``recent``): its records dated at or after
        ``left``, and those of ``read`` new to it that ``recent`` holds."""
        cut = bisect.bisect_left(self.dates, int(left * 1_000_000))
        dates, names = self.dates[cut:], self.names[cut:]
        odd = [(at, n) for at, n in self.odd if at >= left]
        for name, (latest, moments) in read.items():
            if name in self.recent or name not in recent:
                continue
            if moments is None or len(moments) != 1:
                odd.append((latest, name))
                continue
            at = moments[0]
            if not dates or at >= dates[-1]:
                dates.append(at)
                names.append(name)
            else:
                place = bisect.bisect_right(dates, at)
                dates.insert(place, at)
                names.insert(place, name)
        return Line(left, recent, dates, names, odd)


def line_of(since: float, recent: frozenset[str], dated: Dated) -> Line:
    """The line of the cursor (``since``, ``recent``), from what the client remembers of
    the records it read (``dated``); a name it does not remember is left out (a bounded look
    then finds the server's count larger, and looks in full)."""
    counted: list[tuple[int, str]] = []
    odd: list[tuple[float, str]] = []
    for name in recent:
        entry = dated.get(name)
        if entry is None:
            continue
        latest, moments = entry
        if moments is None or len(moments) != 1:
            odd.append((latest, name))
        else:
            counted.append((moments[0], name))
    counted.sort()
    return Line(since, recent, [d for d, _ in counted], [n for _, n in counted], odd)


def names_of(line: Line, left: float) -> Iterable[str]:
    """Every name of ``line`` dated at or after ``left`` (countable or not)."""
    yield from line.since(int(left * 1_000_000))
    yield from (n for at, n in line.odd if at >= left)
