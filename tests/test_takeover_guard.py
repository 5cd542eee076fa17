"""After a takeover, the new owner of an on-disk store guards the queries a terminal sends it
as the first owner did: ``rdfmem query STORE --timeout N`` runs in a child process of the
new owner, killed at the limit and capped in memory, while the new owner's own turns keep
answering; and that child reads the store as it is now, writes of every process included.
Real processes throughout: the first owner is killed with ``SIGKILL``."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli_query_limits import COUNT_RUNAWAY, HOLDER, _cpu_seconds, _query

from rdfmem import RdfStore

ROOT = Path(__file__).resolve().parents[1]

# The process that attaches, then takes the store over; driven line by line on its stdin.
TAKER = textwrap.dedent(
    """
    import json, sys, time
    from rdfmem import RdfStore
    store = RdfStore.open(sys.argv[1])
    print(json.dumps({"owner": store.backend.owner}), flush=True)
    for line in sys.stdin:
        word, *args = line.split()
        if word == "write":  # takes the store over when its owner is gone
            store.assert_(args[0], "urn:ex:p", 1)
            print(json.dumps({"owner": store.backend.owner}), flush=True)
        elif word == "turns":  # the agent's own reads and writes, timed, for args[0] s
            took, end = [], time.monotonic() + float(args[0])
            while time.monotonic() < end:
                started = time.monotonic()
                store.set("turn", len(took))
                assert store.query("ASK { <urn:ex:s1> ?p ?o }")
                assert store.get("turn") == len(took)
                took.append(time.monotonic() - started)
            took.sort()
            p50, p99 = took[len(took) // 2], took[len(took) * 99 // 100]
            found = {"slowest": took[-1], "p50": p50, "p99": p99, "turns": len(took)}
            print(json.dumps(found), flush=True)
    store.close()
    """
)

WRITER = textwrap.dedent(
    """
    import sys
    from rdfmem import RdfStore
    with RdfStore.open(sys.argv[1]) as store:
        assert type(store.backend).__name__ == "AttachedBackend"
        store.assert_(sys.argv[2], "urn:ex:p", 1)
    """
)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture
def store_path(tmp_path: Path) -> str:
    path = str(tmp_path / "memory")
    store = RdfStore.open(path)
    for i in range(60):  # 60**6 rows for COUNT_RUNAWAY: far more than a second's work
        store.assert_(f"urn:ex:s{i}", "urn:ex:p", i)
    store.close()
    return path


class Taker:
    """The attached process, as the test drives it."""

    def __init__(self, path: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", TAKER, path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        self.pid = self.process.pid

    def answer(self) -> dict[str, object]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, "the attached process ended"
        found: dict[str, object] = json.loads(line)
        return found

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()


def _holder(store_path: str) -> subprocess.Popen[str]:
    """A process that opens the store first (its owner), once it says it is ready."""
    owner = subprocess.Popen(
        [sys.executable, "-c", HOLDER, store_path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert owner.stdout is not None and owner.stdout.readline().strip() == "ready"
    return owner


@pytest.fixture
def taker(store_path: str) -> Iterator[Taker]:
    """A process that attached to the store while another owned it, and then took it over
    when that owner was killed."""
    owner = _holder(store_path)
    taker = Taker(store_path)
    try:
        assert taker.answer() == {"owner": False}  # attached
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=30)
        taker.send("write urn:ex:taken")
        assert taker.answer() == {"owner": True}  # took the store over
        yield taker
    finally:
        owner.kill()
        owner.communicate(timeout=30)
        taker.process.communicate(timeout=60)  # closing its stdin ends it
        assert taker.process.returncode == 0


def _children(pid: int) -> list[int]:
    """The child processes of ``pid`` (any of its threads forked them)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def _address_space_limit(pid: int) -> str:
    """The soft ``Max address space`` of process ``pid`` (``unlimited`` or bytes)."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max address space"):
            return line.split()[3]
    return "unknown"


def test_a_runaway_sent_to_the_new_owner_is_stopped_and_its_turns_go_on(
    store_path: str, taker: Taker
) -> None:
    cli = subprocess.Popen(
        [sys.executable, "-m", "rdfmem", "query", store_path, COUNT_RUNAWAY, "--timeout", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
    )
    started = time.monotonic()
    taker.send("turns 5")  # the agent's own turns, all the while
    limits: set[str] = set()
    while cli.poll() is None and time.monotonic() - started < 60:
        for child in _children(taker.pid):  # the query's process, forked by the new owner
            with contextlib.suppress(OSError):  # ended meanwhile
                limits.add(_address_space_limit(child))
        time.sleep(0.05)
    output = cli.communicate(timeout=60)[0]
    took = time.monotonic() - started
    assert cli.returncode == 1, output
    assert "time limit of 1 s" in output and "--timeout" in output
    assert took < 1 + 5  # the limit, plus starting Python and opening the store
    assert limits and "unlimited" not in limits  # it ran in a child capped in memory
    turns = taker.answer()
    assert isinstance(turns["slowest"], float) and isinstance(turns["turns"], int)
    assert turns["slowest"] < 0.5, turns  # no turn waited for the runaway
    assert turns["turns"] > 20, turns
    # The child was killed at the limit: the new owner is idle again.
    time.sleep(0.5)
    before = _cpu_seconds(taker.pid)
    time.sleep(2)
    assert _cpu_seconds(taker.pid) - before < 0.5
    assert _children(taker.pid) == []


def test_the_new_owners_query_process_reads_every_process_writes(
    store_path: str, taker: Taker
) -> None:
    ask = "SELECT (COUNT(*) AS ?n) { VALUES ?s { <urn:ex:fresh> <urn:ex:mine> } ?s ?p ?o }"
    code, output, _ = _query(store_path, ask, "--timeout", "10", "-o", "csv")
    assert code == 0 and output.splitlines() == ["n", "0"], output
    kept = _children(taker.pid)
    assert len(kept) == 1  # the query's process, kept for the next query
    # A third process writes through the new owner, and the new owner writes itself.
    subprocess.run(
        [sys.executable, "-c", WRITER, store_path, "urn:ex:fresh"],
        check=True,
        timeout=60,
        env=_env(),
    )
    taker.send("write urn:ex:mine")
    assert taker.answer() == {"owner": True}
    code, output, _ = _query(store_path, ask, "--timeout", "10", "-o", "csv")
    assert code == 0 and output.splitlines() == ["n", "2"], output
    assert kept[0] not in _children(taker.pid)  # forked before those writes: retired


def test_a_process_that_never_takes_over_runs_no_query_process(store_path: str) -> None:
    owner = _holder(store_path)
    attached = Taker(store_path)
    try:
        assert attached.answer() == {"owner": False}
        code, output, _ = _query(store_path, COUNT_RUNAWAY, "--timeout", "1")
        assert code == 1 and "time limit of 1 s" in output  # the owner stopped it
        attached.send("write urn:ex:attached")
        assert attached.answer() == {"owner": False}
        assert _children(attached.pid) == []  # no sandbox: the owner answers the terminal
    finally:
        owner.communicate(timeout=30)  # closing its stdin ends it
        attached.process.communicate(timeout=60)
    assert attached.process.returncode == 0
