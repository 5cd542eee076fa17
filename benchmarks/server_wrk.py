"""The ``wrk`` load generator of ``bench_server.py``: one measurement, parsed."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path


def _ms(text: str) -> float:
    value = float(re.sub(r"[a-z]+$", "", text))
    unit = re.sub(r"^[0-9.]+", "", text)
    return value * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[unit]


def run_wrk(
    url: str, connections: int, seconds: int, subjects: int, script: Path
) -> tuple[float, float, float, float, int]:
    threads = min(2, connections)
    base, path = url.rsplit("/", 1)
    out = subprocess.run(
        [
            "wrk",
            "-t",
            str(threads),
            "-c",
            str(connections),
            "-d",
            f"{seconds}s",
            "--latency",
            "-s",
            str(script),
            base,
            "--",
            "/" + path,
            str(subjects),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))  # type: ignore[union-attr]
    slowest = _ms(re.search(r"Latency\s+\S+\s+\S+\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    p50 = _ms(re.search(r"\s50%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    p99 = _ms(re.search(r"\s99%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    errors = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    socket_errors = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out
    )
    failed = int(errors.group(1)) if errors else 0
    if socket_errors:
        failed += sum(int(x) for x in socket_errors.groups())
    return rps, p50, p99, slowest, failed
