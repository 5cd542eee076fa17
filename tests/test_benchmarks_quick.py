"""A ``--quick`` benchmark run never overwrites committed results (benchmarks/results_io.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

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
