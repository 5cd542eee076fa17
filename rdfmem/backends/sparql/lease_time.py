"""The time of claims: the clock a client trusts its leases by, the server's instants as
``xsd:dateTime`` texts, and the reserve the protocol keeps at the end of a claim (``guard_s``).
No I/O.
"""

from __future__ import annotations

import re
import time
from calendar import timegm

from rdfmem.core.errors import BackingError

__all__ = ["clock", "guard_s", "instant", "until"]

_BOOTTIME = getattr(time, "CLOCK_BOOTTIME", None)


def clock() -> float:
    """Seconds on a clock that never goes back and keeps counting while the machine is
    suspended (Linux ``CLOCK_BOOTTIME``; ``time.monotonic`` elsewhere): a lease's time
    to live runs on the server while a laptop sleeps, so a client's trust in it must too
    (``time.monotonic`` stops during suspend on Linux)."""
    if _BOOTTIME is not None:
        return time.clock_gettime(_BOOTTIME)
    return time.monotonic()


def guard_s(ttl_ms: float) -> float:
    """Seconds of a claim's life the protocol keeps in reserve (a fifth of its time to live,
    at most 1 s): the client stops trusting a claim that much before its end, the server
    refuses a write under a claim that reaches it with less than that left (``lease_fence``),
    and a client taking a subject over from a claim that ended waits that much past its end
    (``acquire``): a write admitted just before the end may still be committing on a server
    that does not isolate requests (Virtuoso, Oxigraph server).

    >>> guard_s(10_000), guard_s(1_000)
    (1.0, 0.2)
    """
    return min(ttl_ms / 5000.0, 1.0)


def until(start: str, ttl_ms: int) -> str:
    """The instant a claim started at ``start`` (the server's ``NOW()``, as the server
    wrote it) ends, as a SPARQL ``xsd:dateTime`` in the server's own form (with a time
    zone when ``start`` has one, in UTC; without when it has none), to the microsecond,
    rounded down: a fence compares the server's ``NOW()`` with it.

    >>> until("1970-01-01T00:00:01.5Z", 10_000)
    '"1970-01-01T00:00:11.500000Z"^^<http://www.w3.org/2001/XMLSchema#dateTime>'
    >>> until("2026-01-01T10:00:00.123456789", 400)
    '"2026-01-01T10:00:00.523456"^^<http://www.w3.org/2001/XMLSchema#dateTime>'
    """
    m = _INSTANT.match(start.strip())
    if m is None:
        raise BackingError(f"the server's NOW() is not an xsd:dateTime: {start!r}")
    whole = instant(start.split(".")[0] + (m.group(8) or "")) if m.group(7) else instant(start)
    micros = int((m.group(7) or "0")[:6].ljust(6, "0")) + int(ttl_ms) * 1000
    whole += micros // 1_000_000
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
    zone = "Z" if m.group(8) else ""
    return f'"{text}.{micros % 1_000_000:06d}{zone}"^^<http://www.w3.org/2001/XMLSchema#dateTime>'


_INSTANT = re.compile(
    r"^(-?\d{4,})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?$"
)


def instant(text: str) -> float:
    """Seconds since the epoch of an ``xsd:dateTime`` (no time zone is read as UTC).

    >>> instant("1970-01-01T00:00:01.5Z"), instant("1970-01-01T01:00:00+01:00")
    (1.5, 0.0)

    Raises:
        BackingError: the text is not a dateTime.
    """
    m = _INSTANT.match(text.strip())
    if m is None:
        raise BackingError(f"the server's NOW() is not an xsd:dateTime: {text!r}")
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    seconds = float(timegm((year, month, day, hour, minute, second, 0, 0, 0)))
    if m.group(7):
        seconds += float("0." + m.group(7))
    zone = m.group(8)
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return seconds
