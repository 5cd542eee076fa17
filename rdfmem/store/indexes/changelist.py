"""The changes of one history graph in time order, in columns: ``changes_since`` of an
embedded store as a bisect and a slice (``rdfmem.store.history_reads``).

A ``ChangeLog`` is kept by a history graph's ``VersionIndex`` (``VersionIndex.log``) and
saved with it beside an on-disk store. It holds, for each version, what a ``Change``
reports: its time (microseconds since 1970, ``times``, sorted), its IRI (after
``urn:rdfmem:version:``, ASCII, in ``blob`` up to ``ends[i]``), its resource, agent and
reason (numbers into ``names``, -1 for none), and flags (``flags``: 1 a tombstone, 2
removed by a compaction). The activity's IRI is the version's first 32 characters after
its prefix (its time and random part), checked when a version is added. About 40 bytes of
IRI and 25 of columns a version, plus each resource, agent and reason once.

It is filled by the store's own writes (``add``, in the write's critical section), or
read whole from the backend (``build``): it answers only while ``usable`` (no version
out of time order, every version of the shape rdfmem writes), else the caller reads the
SPARQL buckets.

>>> log = ChangeLog()
>>> v = "urn:rdfmem:version:20260101T000000.000000Z-0a1b2c3d-0-d1"
>>> log.add(v, "urn:s", "urn:agent:a", None, deleted=False, activity=None)
>>> [(c[0], c[1], c[2], c[3], c[4]) for c in log.window(0, 2**62)] == [
...     (v, "urn:rdfmem:activity:20260101T000000.000000Z-0a1b2c3d", "urn:s", "urn:agent:a", None)
... ]
True
"""

from __future__ import annotations

import bisect
import datetime as _dt
from array import array
from collections.abc import Iterator
from typing import Any

from rdfmem.store.history import time_of_version

__all__ = ["ChangeLog", "micros", "micros_of"]

_VERSION = "urn:rdfmem:version:"
_ACTIVITY = "urn:rdfmem:activity:"
_CUT = len(_VERSION)
_TOKEN = len("20261123T231500.123456Z")
_ACT = _TOKEN + 1 + 8  # time token, "-", 8 hex digits
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_HEX = frozenset("0123456789abcdef")

#: A change as ``window`` gives it: version IRI, activity IRI, resource, agent, reason,
#: deleted, microseconds since 1970.
Row = tuple[str, str, str, "str | None", "str | None", bool, int]


def micros(moment: _dt.datetime) -> int:
    """``moment`` (aware) as whole microseconds since 1970 (UTC)."""
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def micros_of(version: str) -> int:
    """The time a version's IRI names, in microseconds since 1970 (0 when it names none)."""
    at = _version_micros(version)
    return 0 if at is None else at


def _version_micros(version: str) -> int | None:
    at = time_of_version(version) if version.startswith(_VERSION) else None
    return None if at is None else micros(at)


class ChangeLog:
    """The versions of one history graph, oldest first, in columns (see the module)."""

    __slots__ = (
        "_ids",
        "agents",
        "blob",
        "ends",
        "flags",
        "names",
        "reasons",
        "subjects",
        "times",
        "usable",
    )

    def __init__(self) -> None:
        self.times = array("q")
        self.blob = bytearray()
        self.ends = array("Q")
        self.subjects = array("i")
        self.agents = array("i")
        self.reasons = array("i")
        self.flags = bytearray()
        self.names: list[str] = []
        self._ids: dict[str, int] | None = {}
        #: False once a version could not be kept as the SPARQL read would report it.
        self.usable = True

    def __getstate__(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__ if k != "_ids"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            setattr(self, key, value)
        self._ids = None  # made again when a version is next added

    def __len__(self) -> int:
        return len(self.times)

    def nbytes(self) -> int:
        """The bytes of the columns (the names table not counted)."""
        columns = (self.times, self.ends, self.subjects, self.agents, self.reasons)
        return len(self.blob) + len(self.flags) + sum(c.itemsize * len(c) for c in columns)

    def _id(self, name: str | None) -> int:
        if name is None:
            return -1
        ids = self._ids
        if ids is None:
            ids = self._ids = {n: i for i, n in enumerate(self.names)}
        found = ids.get(name)
        if found is None:
            found = ids[name] = len(self.names)
            self.names.append(name)
        return found

    def add(
        self,
        version: str,
        subject: str,
        by: str | None,
        why: str | None,
        *,
        deleted: bool,
        activity: str | None,
    ) -> None:
        """Add a version after those held (``activity``: its activity's IRI, checked to
        be the one its IRI names; None: taken as it). A version out of time order, or of
        another shape, makes the log unusable."""
        if not self.usable:
            return
        tail = version[_CUT:]
        at = _version_micros(version)
        if (
            at is None
            or (self.times and at < self.times[-1])
            or not tail.isascii()
            or len(tail) <= _ACT
            or tail[_TOKEN] != "-"
            or tail[_ACT] != "-"
            or not _HEX.issuperset(tail[_TOKEN + 1 : _ACT])
            or (activity is not None and activity != _ACTIVITY + tail[:_ACT])
        ):
            self.usable = False
            return
        self.times.append(at)
        self.blob += tail.encode("ascii")
        self.ends.append(len(self.blob))
        self.subjects.append(self._id(subject))
        self.agents.append(self._id(by))
        self.reasons.append(self._id(why))
        self.flags.append(1 if deleted else 0)

    def remove(self, versions: set[str]) -> None:
        """Mark these versions removed (a compaction, a retention)."""
        for version in versions:
            at = _version_micros(version)
            if at is None:
                continue
            tail = version[_CUT:].encode("ascii", "replace")
            i = bisect.bisect_left(self.times, at)
            while i < len(self.times) and self.times[i] == at:
                if self._tail(i) == tail:
                    self.flags[i] |= 2
                i += 1

    def _tail(self, i: int) -> bytes:
        return bytes(self.blob[self.ends[i - 1] if i else 0 : self.ends[i]])

    def window(self, low: int, high: int) -> Iterator[Row]:
        """The versions made from ``low`` to ``high`` (microseconds, both included)."""
        times = self.times
        start = bisect.bisect_left(times, low)
        stop = bisect.bisect_right(times, high, lo=start)
        blob, ends, names, flags = self.blob, self.ends, self.names, self.flags
        subjects, agents, reasons = self.subjects, self.agents, self.reasons
        begin = ends[start - 1] if start else 0
        for i in range(start, stop):
            end = ends[i]
            flag = flags[i]
            if not flag & 2:
                tail = blob[begin:end].decode("ascii")
                by, why = agents[i], reasons[i]
                yield (
                    _VERSION + tail,
                    _ACTIVITY + tail[:_ACT],
                    names[subjects[i]],
                    names[by] if by >= 0 else None,
                    names[why] if why >= 0 else None,
                    bool(flag & 1),
                    times[i],
                )
            begin = end

    def cut(self, low: int) -> list[Row]:
        """Take off the versions made at ``low`` (microseconds) or later, and return those
        not removed (``window``'s rows): the end of a log read whole, to lay the store's
        own writes of that time over it."""
        start = bisect.bisect_left(self.times, low)
        rows = list(self.window(low, 2**62))
        if start < len(self.times):
            del self.blob[self.ends[start - 1] if start else 0 :]
            for column in (self.times, self.ends, self.subjects, self.agents, self.reasons):
                del column[start:]
            del self.flags[start:]
        return rows
