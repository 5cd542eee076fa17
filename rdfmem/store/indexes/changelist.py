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

Saved in an index file, its columns are pickled out of band (``__reduce_ex__``), so a log
taken back at open is read in place from the mapped file: a first ``changes_since`` after
opening reads only the rows of its window. The first change after opening (``add``,
``remove``, ``cut``) copies the columns into arrays of its own (``_thaw``).

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
import operator
import pickle
from array import array
from collections.abc import Iterator
from typing import Any, Literal, SupportsIndex

from rdfmem.store.history import time_of_version

__all__ = ["ChangeLog", "micros", "micros_of"]

_VERSION = "urn:rdfmem:version:"
_ACTIVITY = "urn:rdfmem:activity:"
_CUT = len(_VERSION)
_TOKEN = len("20261123T231500.123456Z")
_ACT = _TOKEN + 1 + 8  # time token, "-", 8 hex digits
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_HEX = frozenset("0123456789abcdef")

#: Each column and its item type (``array`` type codes; ``B`` for the bytearrays).
_COLUMNS: dict[str, Literal["q", "Q", "i", "B"]] = {
    "times": "q",
    "ends": "Q",
    "subjects": "i",
    "agents": "i",
    "reasons": "i",
    "blob": "B",
    "flags": "B",
}

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


#: The second of the last version whose time was read (``"YYYYMMDDTHHMMSS."``) and its
#: microseconds: versions written in one second take it and add their fraction, with no
#: datetime made (~0.3 µs, where ``time_of_version`` takes ~1.5 µs).
_second: tuple[str, int] = ("", 0)


def _version_micros(version: str) -> int | None:
    global _second
    if not version.startswith(_VERSION):
        return None
    second, fraction = version[_CUT : _CUT + 16], version[_CUT + 16 : _CUT + _TOKEN]
    usual = len(fraction) == 7 and fraction[6] == "Z" and fraction[:6].isdigit()
    last = _second
    if usual and second == last[0] and fraction.isascii():
        return last[1] + int(fraction[:6])
    at = time_of_version(version)
    if at is None:
        return None
    found = micros(at)
    if usual and fraction.isascii():
        _second = (second, found - int(fraction[:6]))
    return found


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
        # Arrays, or views of a mapped file in a log taken back (``__setstate__``).
        self.times: Any = array("q")
        self.blob: Any = bytearray()
        self.ends: Any = array("Q")
        self.subjects: Any = array("i")
        self.agents: Any = array("i")
        self.reasons: Any = array("i")
        self.flags: Any = bytearray()
        self.names: list[str] = []
        self._ids: dict[str, int] | None = {}
        #: False once a version could not be kept as the SPARQL read would report it.
        self.usable = True

    def __getstate__(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__ if k != "_ids"}

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        state = self.__getstate__()
        if operator.index(protocol) >= 5:
            # Out of band where the pickler takes buffers (the index file: mapped back at
            # open and read in place), else in band as bytes.
            for key in _COLUMNS:
                state[key] = pickle.PickleBuffer(state[key])
        return (_restored, (state,))

    def __setstate__(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            code = _COLUMNS.get(key)
            if code is not None and not isinstance(value, bytearray if code == "B" else array):
                # Bytes or a view of a mapped file: read in place until the first change.
                value = memoryview(value).cast("B").cast(code)
            setattr(self, key, value)
        self._ids = None  # made again when a version is next added

    def _thaw(self) -> None:
        # Columns of this log's own, for a change (a log taken back holds views).
        if isinstance(self.times, array):
            return
        for key, code in _COLUMNS.items():
            view = memoryview(getattr(self, key)).cast("B")
            if code == "B":
                setattr(self, key, bytearray(view))
            else:
                column = array(code)
                column.frombytes(view)
                setattr(self, key, column)

    def __len__(self) -> int:
        return len(self.times)

    def nbytes(self) -> int:
        """The bytes of the columns (the names table not counted)."""
        return sum(memoryview(getattr(self, key)).nbytes for key in _COLUMNS)

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
        self._thaw()
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
        self._thaw()
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
                tail = str(blob[begin:end], "ascii")
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
        self._thaw()
        start = bisect.bisect_left(self.times, low)
        rows = list(self.window(low, 2**62))
        if start < len(self.times):
            del self.blob[self.ends[start - 1] if start else 0 :]
            for column in (self.times, self.ends, self.subjects, self.agents, self.reasons):
                del column[start:]
            del self.flags[start:]
        return rows


def _restored(state: dict[str, Any]) -> ChangeLog:
    log = ChangeLog.__new__(ChangeLog)
    log.__setstate__(state)
    return log
