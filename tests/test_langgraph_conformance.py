"""LangGraph's own store tests, run unchanged against ``RdfBaseStore``.

LangGraph ships no conformance suite for stores and tells implementers to test against
``InMemoryStore``; its tests of ``InMemoryStore`` are ``tests/test_store.py`` in the
langgraph-checkpoint source distribution. The session fixture downloads that sdist (the
installed version) from PyPI once into a cache, with the two pytest plugins the file needs
(pytest-asyncio, pytest-mock) in a folder of their own so they never load in this suite,
and each test runs the file in a subprocess with ``-p rdfmem.langgraph.conformance``, which
puts ``RdfBaseStore`` in place of ``langgraph.store.memory.InMemoryStore``.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from conftest import need

_SUITE_PLUGINS = ["pytest-asyncio>=1,<2", "pytest-mock>=3.14,<4"]


def _cache() -> Path:
    root = os.environ.get("RDFMEM_TEST_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "rdfmem-tests"


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="session")
def langgraph_suite() -> tuple[Path, Path]:
    """``(sdist folder, plugin folder)``: LangGraph's store tests and their pytest plugins."""
    version = importlib.metadata.version("langgraph-checkpoint")
    cache = _cache() / f"langgraph-checkpoint-{version}"
    root = cache / f"langgraph_checkpoint-{version}"
    suite = root / "tests" / "test_store.py"
    if not suite.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        got = _pip(
            "download",
            "--no-binary",
            ":all:",
            "--no-deps",
            "-d",
            str(cache),
            f"langgraph-checkpoint=={version}",
        )
        need(got.returncode == 0, f"cannot download the langgraph-checkpoint sdist: {got.stderr}")
        archive = cache / f"langgraph_checkpoint-{version}.tar.gz"
        with tarfile.open(archive) as tar:
            tar.extractall(cache, filter="data")
    assert suite.is_file(), (
        f"the langgraph-checkpoint {version} sdist no longer ships tests/test_store.py"
    )
    plugins = cache / "plugins"
    if not (plugins / "pytest_asyncio").is_dir() or not (plugins / "pytest_mock").is_dir():
        got = _pip("install", "--no-deps", "--target", str(plugins), *_SUITE_PLUGINS)
        need(got.returncode == 0, f"cannot install {_SUITE_PLUGINS}: {got.stderr}")
    return root, plugins


def _run_suite(suite: tuple[Path, Path], kind: str, **env: str) -> str:
    root, plugins = suite
    path = os.pathsep.join(p for p in (str(plugins), os.environ.get("PYTHONPATH", "")) if p)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "rdfmem.langgraph.conformance",
            "-p",
            "no:cacheprovider",
            # pytest-asyncio warns (on stderr) when this is unset; LangGraph's tests use the
            # default, function-scoped loops.
            "-o",
            "asyncio_default_fixture_loop_scope=function",
            "tests/test_store.py",
        ],
        cwd=root,
        env={**os.environ, "PYTHONPATH": path, "RDFMEM_LANGGRAPH_BACKEND": kind, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, (run.stdout + run.stderr)[-6000:]
    return run.stdout


def _passed(out: str) -> int:
    """The count of passed tests in pytest's summary line (the last line that has one)."""
    lines = [line for line in out.splitlines() if re.search(r"\d+ passed", line)]
    assert lines, out[-2000:]
    summary = lines[-1]
    assert not re.search(r"failed|error|skipped", summary), summary
    found = re.search(r"(\d+) passed", summary)
    assert found, summary
    return int(found.group(1))


@pytest.mark.parametrize("kind", ["memory", "disk", "rdflib"])
def test_langgraph_store_suite_passes_on_embedded_stores(
    langgraph_suite: tuple[Path, Path], kind: str
) -> None:
    out = _run_suite(langgraph_suite, kind)
    assert f"InMemoryStore is RdfBaseStore on {kind}" in out
    assert _passed(out) >= 100


@pytest.mark.server
def test_langgraph_store_suite_passes_on_oxigraph_server(
    langgraph_suite: tuple[Path, Path], oxigraph_server: Any
) -> None:
    out = _run_suite(
        langgraph_suite,
        "remote",
        RDFMEM_LANGGRAPH_QUERY_URL=oxigraph_server.query_url,
        RDFMEM_LANGGRAPH_UPDATE_URL=oxigraph_server.update_url,
    )
    assert "InMemoryStore is RdfBaseStore on remote" in out
    assert _passed(out) >= 100
