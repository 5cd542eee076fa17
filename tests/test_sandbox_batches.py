"""The sandbox's reads from an event loop share process hops (``rdfmem.store.batches``): reads
that arrive together go to one kept child in one write, instead of a child (and a fork) each;
a read queued behind a slow one is sent again to another child long before the slow one's
limit; a runaway is still killed at its deadline, and nothing it leaves runs on.

Real forked children of this process, driven from a real asyncio event loop.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import httpx
import pytest

from rdfmem import RdfStore
from rdfmem.core.errors import Busy, TimedOut
from rdfmem.server import BackgroundServer
from rdfmem.store.batches import PATIENCE
from rdfmem.store.sandbox import Sandbox


def _pid(store: RdfStore, n: int) -> tuple[int, int]:
    return os.getpid(), n


def _spin(store: RdfStore) -> int:
    while True:
        pass


def _running_children() -> list[int]:
    """This process's children still running (not zombies, not gone)."""
    found: list[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    running = []
    for pid in found:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "R":
            running.append(pid)
    return running


@pytest.fixture
def store() -> RdfStore:
    memory = RdfStore()
    memory.assert_("urn:ex:a", "urn:ex:p", 1)
    yield memory
    memory.close()


def test_reads_that_arrive_together_share_one_child(store: RdfStore) -> None:
    async def main(sandbox: Sandbox) -> list[tuple[int, int]]:
        deadline = time.monotonic() + 20
        return await asyncio.gather(
            *(sandbox.run_async(_pid, {"n": n}, deadline=deadline) for n in range(8))
        )

    with Sandbox(store, size=4) as sandbox:
        answers = asyncio.run(main(sandbox))
        again = asyncio.run(main(sandbox))  # a new loop: its own children
    assert [n for _, n in answers] == list(range(8))  # each read its own answer, in order
    # One child answered all eight (sent in one write): before, each read took a child of
    # its own while none was idle (eight forks, four kept).
    assert len({pid for pid, _ in answers}) == 1
    assert len({pid for pid, _ in again}) == 1
    assert sandbox.forks == 2


def test_a_read_queued_behind_a_runaway_goes_to_another_child(store: RdfStore) -> None:
    limit = 2.0

    async def main(sandbox: Sandbox) -> tuple[float, float, BaseException | None, set[int]]:
        began = time.monotonic()
        runaway = asyncio.ensure_future(
            sandbox.run_async(_spin, {}, deadline=began + limit)
        )  # sent first: the quick reads below are queued behind it in the same child
        quick = [sandbox.run_async(_pid, {"n": n}, deadline=began + limit + 0.3) for n in range(3)]
        answers = await asyncio.gather(*quick)
        quick_took = time.monotonic() - began
        try:
            await runaway
            error = None
        except TimedOut as exc:
            error = exc
        return quick_took, time.monotonic() - began, error, {pid for pid, _ in answers}

    with Sandbox(store, size=4) as sandbox:
        quick_took, runaway_took, error, pids = asyncio.run(main(sandbox))
        forks = sandbox.forks
        deadline = time.monotonic() + 3
        while _running_children() and time.monotonic() < deadline:
            time.sleep(0.05)
        left = _running_children()
    print(f"quick reads behind a runaway: {quick_took * 1e3:.0f} ms; runaway: {runaway_took:.2f} s")
    # Sent again after PATIENCE (50 ms) rather than at the runaway's limit (2 s).
    assert quick_took < min(1.0, limit / 2), quick_took
    assert quick_took >= PATIENCE
    assert isinstance(error, TimedOut)
    assert limit <= runaway_took < limit + 1.0  # the target: within the limit + 1 s
    assert len(pids) == 1  # the three quick reads went on together to one other child
    # Two children: the runaway's (killed at its limit) and the one the quick reads moved
    # to; the quick reads were not sent a third time when the runaway's child was killed.
    assert forks == 2
    assert left == []  # nothing keeps burning the CPU


def test_two_runaways_queued_together_run_once_each(store: RdfStore) -> None:
    """The second runaway, moved to another child after PATIENCE, was sent a third time
    when the first one's child was killed (its own deadline not yet passed), and ran
    twice."""

    async def main(sandbox: Sandbox) -> list[BaseException | None]:
        began = time.monotonic()
        first = sandbox.run_async(_spin, {}, deadline=began + 1.0)
        second = sandbox.run_async(_spin, {}, deadline=began + 1.5)
        outcomes = await asyncio.gather(first, second, return_exceptions=True)
        return [o if isinstance(o, BaseException) else None for o in outcomes]

    with Sandbox(store, size=4) as sandbox:
        outcomes = asyncio.run(main(sandbox))
        forks = sandbox.forks
    assert all(isinstance(o, TimedOut) for o in outcomes)
    assert forks == 2


def test_reads_beyond_busy_children_wait_then_are_refused(store: RdfStore) -> None:
    async def main(sandbox: Sandbox) -> tuple[BaseException | None, tuple[int, int]]:
        began = time.monotonic()
        runaway = asyncio.ensure_future(sandbox.run_async(_spin, {}, deadline=began + 1.0))
        await asyncio.sleep(0.3)  # the runaway holds the only child
        try:
            await sandbox.run_async(_pid, {"n": 1}, deadline=began + 5)
            refused = None
        except Busy as exc:
            refused = exc
        with pytest.raises(TimedOut):
            await runaway
        after = await sandbox.run_async(_pid, {"n": 2}, deadline=time.monotonic() + 5)
        return refused, after

    with Sandbox(store, size=1, max_waiting=0) as sandbox:
        refused, after = asyncio.run(main(sandbox))
    assert isinstance(refused, Busy) and "busy" in str(refused)
    assert after[1] == 2  # a new child once the runaway's was killed


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_write_retires_the_old_child_and_the_next_read_sees_it(store: RdfStore) -> None:
    async def read(sandbox: Sandbox) -> tuple[int, int]:
        answer: tuple[int, int] = await sandbox.run_async(
            _count_p, {}, deadline=time.monotonic() + 20
        )
        return answer

    async def main(sandbox: Sandbox) -> list[tuple[int, int]]:
        first = await read(sandbox)
        store.assert_("urn:ex:b", "urn:ex:p", 2)  # the write generation moves
        second = await read(sandbox)
        await asyncio.sleep(0.5)  # the old child is killed and collected off the loop
        return [first, second]

    with Sandbox(store, size=4) as sandbox:
        (old_pid, before), (new_pid, after) = asyncio.run(main(sandbox))
        old_alive = _alive(old_pid)
    assert (before, after) == (1, 2)  # the read after the write sees it
    assert new_pid != old_pid
    assert not old_alive  # the child holding the old snapshot was ended, not kept idle


def _count_p(store: RdfStore) -> tuple[int, int]:
    return os.getpid(), len(list(store.match(predicate="urn:ex:p")))


def test_health_counts_the_reads_out_to_children() -> None:
    runaway = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l }"
    memory = RdfStore()
    for i in range(200):
        memory.assert_(f"urn:ex:s{i}", "urn:ex:p", i)
    with BackgroundServer(memory, timeout=2) as server:
        url = server.url + "/sparql"
        answers: list[int] = []
        thread = threading.Thread(
            target=lambda: answers.append(
                httpx.get(url, params={"query": runaway}, timeout=30).status_code
            )
        )
        thread.start()
        seen = 0
        deadline = time.monotonic() + 1.5
        while not seen and time.monotonic() < deadline:
            seen = httpx.get(server.url + "/health").json()["queries_running"]
            time.sleep(0.05)
        thread.join(30)
        after = httpx.get(server.url + "/health").json()["queries_running"]
    memory.close()
    assert seen == 1  # the runaway, out to a child (no worker thread holds it)
    assert answers == [503] and after == 0
