"""``rdfmem query`` stops a runaway query at its time limit and memory cap, in the process
that runs it: this command's own child, or the child of the process holding the store
(issue 23: one sandbox for every surface)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rdfmem import RdfStore

# 60 subjects: six patterns make 60**6 rows, far more than a second's work or a GiB.
RUNAWAY = "SELECT * { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l . ?m ?n ?o . ?p ?q ?r }"
COUNT_RUNAWAY = RUNAWAY.replace("SELECT *", "SELECT (COUNT(*) AS ?n)")

HOLDER = """
import sys, time
from rdfmem import RdfStore
store = RdfStore.open(sys.argv[1])
print("ready", flush=True)
sys.stdin.read()  # until the test closes it
store.close()
"""


def _query(*args: str) -> tuple[int, str, float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "rdfmem", "query", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


@pytest.fixture
def store_path(tmp_path: Path) -> str:
    path = str(tmp_path / "memory")
    store = RdfStore.open(path)
    for i in range(60):
        store.assert_(f"urn:ex:s{i}", "urn:ex:p", i)
    store.close()
    return path


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.fixture
def holder(store_path: str) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the store open (as ``rdfmem mcp`` would)."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, store_path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    yield process
    process.communicate(timeout=30)  # closing stdin ends it


def test_a_runaway_query_is_stopped_at_its_time_limit(store_path: str) -> None:
    code, output, took = _query(store_path, COUNT_RUNAWAY, "--timeout", "1")
    assert code == 1
    assert "time limit of 1 s" in output and "--timeout" in output
    assert took < 1 + 5  # the limit, plus starting Python and opening the store
    code, output, _ = _query(store_path, "SELECT (COUNT(*) AS ?n) { ?s ?p ?o }", "-o", "csv")
    assert code == 0 and output.splitlines() == ["n", "60"]  # the store is as it was


def test_a_query_past_its_memory_cap_is_stopped(store_path: str) -> None:
    code, output, _ = _query(store_path, RUNAWAY, "--timeout", "60", "--memory-cap", "64")
    assert code == 1
    assert "memory cap of 64 MiB" in output and "--memory-cap" in output
    assert "allocation" not in output  # rdfmem's message alone, not the engine's last words


def test_bad_limits_are_refused_with_what_to_pass(store_path: str) -> None:
    code, output, _ = _query(store_path, "ASK {}", "--timeout", "0")
    assert code == 2 and "--timeout" in output and "0.1" in output


def test_a_runaway_sent_to_the_holding_process_does_not_stall_it(
    store_path: str, holder: subprocess.Popen[str]
) -> None:
    code, output, took = _query(store_path, COUNT_RUNAWAY, "--timeout", "1")
    assert code == 1 and "time limit of 1 s" in output
    assert took < 1 + 5
    # The holder ran it in a child it killed at the limit: it is idle again, and answers.
    time.sleep(0.5)
    before = _cpu_seconds(holder.pid)
    time.sleep(2)
    assert _cpu_seconds(holder.pid) - before < 0.5
    code, output, took = _query(store_path, "ASK { <urn:ex:s1> ?p ?o }", "-o", "json")
    assert code == 0 and '"boolean": true' in output
