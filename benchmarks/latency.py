"""Latency figures as a user pays them: every call timed, none left out.

A benchmark that drops its first calls ("warm-up") reports a process that no user runs: an
MCP host starts a fresh server per session, an agent answers right after it loaded its
memory. So every figure here is taken over *all* the calls made, the first included:
``Latencies`` keeps each call's seconds and reports the first, the median (p50), p99 and the
slowest call, and the rate over the whole run.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Latencies:
    """The seconds of every call of a run, in order (the first call first)."""

    seconds: tuple[float, ...]

    @classmethod
    def of(cls, seconds: Iterable[float]) -> Latencies:
        return cls(tuple(seconds))

    def __add__(self, other: Latencies) -> Latencies:
        return Latencies(self.seconds + other.seconds)

    @property
    def n(self) -> int:
        return len(self.seconds)

    @property
    def total(self) -> float:
        return float(sum(self.seconds))

    @property
    def first(self) -> float:
        return self.seconds[0]

    @property
    def p50(self) -> float:
        return float(np.percentile(self.seconds, 50))

    @property
    def p99(self) -> float:
        """Linear interpolation between ranks (over 40 calls: between the two slowest)."""
        return float(np.percentile(self.seconds, 99))

    @property
    def slowest(self) -> float:
        return max(self.seconds)

    @property
    def slowest_at(self) -> int:
        """The index of the slowest call (0: the first)."""
        return self.seconds.index(self.slowest)

    @property
    def per_second(self) -> float:
        """Calls per second over the whole run, the first calls included."""
        return self.n / self.total if self.total > 0 else float("inf")

    def summary(self) -> dict[str, float]:
        """Milliseconds, for the printed progress lines and the JSON a child prints."""
        return {
            "n": self.n,
            "first_ms": self.first * 1e3,
            "p50_ms": self.p50 * 1e3,
            "p99_ms": self.p99 * 1e3,
            "slowest_ms": self.slowest * 1e3,
            "per_s": self.per_second,
        }


def time_calls(call: Callable[[int], object], count: int, start: int = 0) -> Latencies:
    """``call(i)`` for ``count`` values of i from ``start``, each timed."""
    seconds = []
    for i in range(start, start + count):
        t0 = time.perf_counter()
        call(i)
        seconds.append(time.perf_counter() - t0)
    return Latencies(tuple(seconds))


def time_for(
    call: Callable[[int], object], budget: float, most: int, least: int = 3, start: int = 0
) -> Latencies:
    """``call(i)`` until ``budget`` seconds have passed (at least ``least`` calls, at most
    ``most``), each timed."""
    seconds: list[float] = []
    began = time.perf_counter()
    i = start
    while len(seconds) < most and (len(seconds) < least or time.perf_counter() - began < budget):
        t0 = time.perf_counter()
        call(i)
        seconds.append(time.perf_counter() - t0)
        i += 1
    return Latencies(tuple(seconds))


def rss_bytes() -> int | None:
    """This process's resident memory now (Linux ``/proc/self/statm``), None elsewhere."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def ms(seconds: float) -> str:
    """Milliseconds, with the digits that matter."""
    value = seconds * 1e3
    if value < 10:
        return f"{value:.2f}"
    if value < 100:
        return f"{value:.1f}"
    return f"{value:,.0f}"


def ratio(x: float) -> str:
    return f"{x:,.2f}×" if x < 10 else f"{x:,.0f}×"  # noqa: RUF001


def load_average() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def machine() -> str:
    """One line for a results file: Python, cores, load now."""
    import platform

    return (
        f"Python {platform.python_version()} on {platform.machine()} ({sys.platform}), "
        f"{os.cpu_count()} cores, load average {load_average():.1f}"
    )


NO_WARM_UP = (
    "No warm-up is left out: every figure counts every call made, the first ones included "
    "(the first search after loading or opening rebuilds what the process does not hold "
    "yet, and a user pays for it)."
)
