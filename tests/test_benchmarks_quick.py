"""A ``--quick`` benchmark run never overwrites committed results (benchmarks/results_io.py),
and the latency benchmarks' quick runs work end to end."""

# ruff: noqa: RUF001  (the tables print multiplication signs)

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import need

RESULTS_IO = Path(__file__).resolve().parent.parent / "benchmarks" / "results_io.py"


def _load():
    spec = importlib.util.spec_from_file_location("benchmarks_results_io", RESULTS_IO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quick_run_leaves_the_results_file_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "results" / "kv.md"
    target.parent.mkdir()
    target.write_text("committed table\n", encoding="utf-8")
    written = _load().write_results(target, "quick table\n", quick=True)
    try:
        assert target.read_text(encoding="utf-8") == "committed table\n"
        assert written.resolve() != target.resolve()
        assert written.read_text(encoding="utf-8") == "quick table\n"
        assert str(written) in capsys.readouterr().err
    finally:
        written.unlink(missing_ok=True)


def test_quick_run_creates_no_results_file(tmp_path: Path) -> None:
    target = tmp_path / "results" / "kv.md"
    written = _load().write_results(target, "quick table\n", quick=True)
    try:
        assert not target.exists()
        assert written.read_text(encoding="utf-8") == "quick table\n"
    finally:
        written.unlink(missing_ok=True)


def test_full_run_writes_the_results_file(tmp_path: Path) -> None:
    target = tmp_path / "results" / "kv.md"
    target.parent.mkdir()
    target.write_text("old table\n", encoding="utf-8")
    written = _load().write_results(target, "full table\n", quick=False)
    assert written == target
    assert target.read_text(encoding="utf-8") == "full table\n"


# -- the latency benchmarks' quick runs (issue 21): each runs whole and writes its table -------

BENCHMARKS = RESULTS_IO.parent


def _run_quick(script: str, out: Path, *extra: str) -> str:
    """``python benchmarks/SCRIPT --quick --out OUT``: it exits cleanly and writes its table."""
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--quick", "--out", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=BENCHMARKS.parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out.read_text(encoding="utf-8")


@pytest.mark.slow
@pytest.mark.server
@pytest.mark.timeout(900)
def test_agent_loop_quick_counts_every_turn(tmp_path: Path) -> None:
    need(shutil.which("oxigraph") is not None, "the oxigraph server binary (remote turns)")
    table = _run_quick("bench_agent_loop.py", tmp_path / "agent_loop.md")
    assert "No warm-up is left out" in table
    assert "## The 40 turns right after loading N memories and N nodes" in table
    assert "| first turn | p50 | p99 | slowest |" in table
    for store in (
        "rdfmem in memory",
        "rdfmem on disk, closed and opened again",
        "LangGraph InMemoryStore (index)",
        "LangGraph SqliteStore, on a file",
    ):
        assert f"| 5,000 | {store} |" in table, store
    assert "Cost growth from 500 to 5,000 stored" in table
    assert "RSS growth per memory" in table
    assert "turns right after 1,000 memories saved one by one" in table


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_cold_start_quick_measures_fresh_processes(tmp_path: Path) -> None:
    table = _run_quick(
        "bench_cold_start.py", tmp_path / "cold_start.md", "--cache", str(tmp_path / "cache")
    )
    assert "No warm-up is left out" in table
    for n in ("1,000", "5,000"):
        assert f"## {n} memories + {n} decision nodes" in table
    assert "| **open → first search** (target ≤ 300 ms at 100,000) |" in table
    assert "| **first turn ÷ warm turn** (target ≤ 30× at 30,000) |" in table
    assert "| floor: `pyoxigraph.Store(path)` |" in table
    # the store was built into the cache folder, beside its marker, for the next run
    assert len(list((tmp_path / "cache").glob("store-1000-*.json"))) == 1


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_processes_quick_reports_each_measure(tmp_path: Path) -> None:
    """It runs and writes all three tables; whether several processes share the store is
    what the table reports, not what this test asserts."""
    table = _run_quick("bench_processes.py", tmp_path / "processes.md")
    assert "## 3 processes × 100 `update` on one on-disk store" in table
    assert "Expected 300; **the counter holds" in table
    assert "## Turns of an attached process against the owner's" in table
    assert (
        "| phase | process | turns | requests to the owner (median per turn) | first | p50 "
        "| p99 | slowest |" in table
    )
    assert "## Two `rdfmem mcp STORE` stdio servers × 40 `add_observations`" in table
    assert "Seen by the two servers:" in table


# -- the history benchmarks' quick runs (issue 24) ---------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_history_benchmark_quick_reports_every_measure(tmp_path: Path) -> None:
    table = _run_quick("bench_history.py", tmp_path / "history.md")
    for line in ("rdfmem, history=True", "get(key, as_of=t)", "changes_since(t, t + 1 h)"):
        assert line in table
    assert "History quads kept per write" in table


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_domain_history_benchmark_quick_reports_every_measure(tmp_path: Path) -> None:
    table = _run_quick("bench_history_domain.py", tmp_path / "history_domain.md")
    for line in (
        "| Memories.save, history |",
        "| KnowledgeGraph.add_observations, history |",
        "| Memories.search, as_of |",
        "| KnowledgeGraph.read_graph, as_of |",
        "| KnowledgeGraph.history(name) |",
    ):
        assert line in table


@pytest.mark.slow
@pytest.mark.server
@pytest.mark.timeout(900)
def test_changelog_hostile_quick_meets_its_checks(tmp_path: Path) -> None:
    need(shutil.which("oxigraph") is not None, "the oxigraph server binary")
    table = _run_quick("bench_changelog_hostile.py", tmp_path / "changelog_hostile.md")
    assert "fresh client's (no change log): yes" in table
