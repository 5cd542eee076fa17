"""``benchmarks/bench_history_domain.py --quick`` runs whole and writes its table (issue 24)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_domain_history_benchmark_quick_reports_every_measure(tmp_path: Path) -> None:
    out = tmp_path / "history_domain.md"
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_history_domain.py"), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=BENCHMARKS.parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    table = out.read_text(encoding="utf-8")
    for line in (
        "| Memories.save, history |",
        "| KnowledgeGraph.add_observations, history |",
        "| Memories.search, as_of |",
        "| KnowledgeGraph.read_graph, as_of |",
        "| KnowledgeGraph.history(name) |",
    ):
        assert line in table
