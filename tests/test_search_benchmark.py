"""The search-quality benchmark runs end to end (``--quick``) on the LoCoMo development split.

The data is not in the repository (CC BY-NC 4.0): the test reads it from beside the checkout
(``../shared/data/locomo-dev``) or ``RDFMEM_LOCOMO``, and skips without it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("RDFMEM_LOCOMO", ROOT.parent / "shared/data/locomo-dev/locomo-dev.json"))


@pytest.mark.skipif(not DATA.is_file(), reason=f"LoCoMo development split not at {DATA}")
def test_the_quick_benchmark_writes_a_table_beside_and_leaves_results_alone() -> None:
    results = ROOT / "benchmarks" / "results" / "search_quality.md"
    before = results.read_bytes() if results.exists() else None
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_search_quality.py"),
            str(DATA),
            "--quick",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    table = Path(run.stdout.strip().splitlines()[-1]).read_text(encoding="utf-8")
    assert "| rdfmem default (hybrid) | 1-4 |" in table
    assert "| plain BM25 | 1-4 |" in table
    assert "Save cost with the keyword index:" in table
    assert "Slowest turn:" in table
    assert (results.read_bytes() if results.exists() else None) == before
