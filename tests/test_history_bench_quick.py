"""``benchmarks/bench_history.py --quick`` runs whole and writes its table (issue 24)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_history_benchmark_quick_reports_every_measure(tmp_path: Path) -> None:
    out = tmp_path / "history.md"
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_history.py"), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=BENCHMARKS.parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    table = out.read_text(encoding="utf-8")
    for line in ("rdfmem, history=True", "get(key, as_of=t)", "changes_since(t, t + 1 h)"):
        assert line in table
    assert "History quads kept per write" in table
