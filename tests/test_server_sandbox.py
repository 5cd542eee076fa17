"""The query sandbox (issue 23, item 1): reads that are not point lookups run in kept child
processes, killed at their time limit, capped in memory, forked again only after a write.

Against a real ``rdfmem serve`` process and the sandbox itself. Times are loose bounds (CI
shares two cores): the issue's targets (timeout within limit + 1 s, a point query within
50 ms meanwhile) are printed, and asserted with room.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

import httpx
import pytest
from test_server_support import TOKEN, Served, disk_store, serve_process

from rdfmem import RdfStore
from rdfmem.core.errors import ChildFailed, QueryError, TimedOut
from rdfmem.server import BackgroundServer
from rdfmem.store.sandbox import Sandbox

#: Sorting a cross product: memory grows with every row until the cap (or the time limit).
HUNGRY = "SELECT ?a ?d ?g WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i } ORDER BY ?a ?d ?g"
#: Two patterns, not a point lookup, prefixed names (not read straight from the indexes:
#: ``rdfmem.server.direct``): answered by a sandbox child.
JOIN = "PREFIX ex: <urn:ex:> SELECT ?o WHERE { ex:s5 ex:p ?o . ?x ex:p ?o }"
POINT = "SELECT ?o WHERE { <urn:ex:s7> <urn:ex:p> ?o }"
JSON = {"Accept": "application/sparql-results+json"}


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    return disk_store(tmp_path_factory.mktemp("sandbox") / "store", 2000)


def _rss(pid: int) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def test_a_runaway_is_stopped_in_time_and_memory_while_points_answer(
    big_store: str, tmp_path: Path
) -> None:
    limit = 3.0
    outcome: dict[str, object] = {}

    def runaway(server: Served) -> None:
        began = time.monotonic()
        response = httpx.get(server.sparql_url, params={"query": HUNGRY}, timeout=60)
        outcome["status"], outcome["text"] = response.status_code, response.text
        outcome["seconds"] = time.monotonic() - began

    with serve_process(big_store, "--timeout", str(limit), tmp_path=tmp_path) as server:
        assert httpx.get(server.sparql_url, params={"query": JOIN}, headers=JSON).status_code == 200
        base = _rss(server.proc.pid)
        thread = threading.Thread(target=runaway, args=(server,))
        thread.start()
        peak, points = 0, []
        with httpx.Client(headers=JSON, timeout=10) as client:
            while thread.is_alive():
                peak = max([peak, *(_rss(pid) for pid in server.children())])
                began = time.monotonic()
                answer = client.get(server.sparql_url, params={"query": POINT})
                points.append(time.monotonic() - began)
                assert answer.status_code == 200
                time.sleep(0.05)
        thread.join()
        time.sleep(3.0)
        used = server.cpu_seconds()
        time.sleep(1.0)
        idle = server.cpu_seconds() - used
        after = httpx.get(server.sparql_url, params={"query": JOIN}, headers=JSON)
    points.sort()
    print(
        f"runaway: {outcome['status']} after {outcome['seconds']:.2f} s (limit {limit} s); "
        f"child peak RSS {peak >> 20} MiB (server {base >> 20} MiB); points during it: "
        f"p50 {points[len(points) // 2] * 1e3:.1f} ms, slowest {points[-1] * 1e3:.1f} ms "
        f"({len(points)}); CPU 3 s later {idle:.2f} s per s"
    )
    # Stopped by its time limit (503) or by its memory cap (500), whichever came first.
    assert outcome["status"] in (500, 503), outcome["text"]
    assert float(outcome["seconds"]) <= limit + 2.0  # target: limit + 1 s
    assert peak < base + (1 << 30) + (64 << 20)  # the cap: 1 GiB above the fork's size
    assert idle < 0.3  # back to idle
    assert points and points[-1] < 1.0  # target: 50 ms; generous on a shared CI machine
    assert after.status_code == 200  # the next read gets a new child


def test_children_are_kept_until_a_write_makes_them_old(big_store: str, tmp_path: Path) -> None:
    options = ("--allow-update", "--token", TOKEN, "--max-concurrent", "1")
    with (
        serve_process(big_store, *options, tmp_path=tmp_path) as server,
        httpx.Client(headers=JSON, timeout=30) as client,
    ):
        first = client.get(server.sparql_url, params={"query": JOIN}).json()
        kept = server.children()
        for _ in range(5):
            assert client.get(server.sparql_url, params={"query": JOIN}).json() == first
        assert len(kept) == 1 and server.children() == kept  # one child, reused
        update = "INSERT DATA { <urn:ex:new> <urn:ex:p> 5 }"
        wrote = client.post(
            server.sparql_url, data={"update": update}, headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert wrote.status_code == 204
        seen = client.get(server.sparql_url, params={"query": JOIN}).json()
        values = {b["o"]["value"] for b in seen["results"]["bindings"]}
        assert values == {"5"} and len(seen["results"]["bindings"]) == 2  # the write is seen
        assert server.children() and server.children() != kept  # by a child forked after it


def _spin(store: RdfStore) -> int:
    while True:
        pass


def _grab(store: RdfStore, mib: int) -> int:
    hoard = bytearray(mib << 20)
    return len(hoard)


def _fail(store: RdfStore) -> int:
    raise QueryError("no such thing")


def test_the_sandbox_kills_spins_caps_memory_and_passes_errors_back() -> None:
    store = RdfStore()
    with Sandbox(store, size=1, memory_cap=256 << 20) as sandbox:
        began = time.monotonic()
        with pytest.raises(TimedOut):
            sandbox.run(_spin, {}, timeout=0.5)
        assert time.monotonic() - began < 1.5
        with pytest.raises(ChildFailed, match="memory cap of 256 MiB"):
            sandbox.run(_grab, {"mib": 512}, timeout=10)
        assert sandbox.run(_grab, {"mib": 16}, timeout=10) == 16 << 20
        with pytest.raises(QueryError, match="no such thing"):
            sandbox.run(_fail, {}, timeout=10)
        forks = sandbox.forks
        assert sandbox.run(_grab, {"mib": 1}, timeout=10) == 1 << 20
        assert sandbox.forks == forks  # the child that raised is kept
    store.close()


def test_a_background_server_answers_joins_from_its_sandbox() -> None:
    store = RdfStore()
    for i in range(20):
        store.assert_(f"urn:ex:s{i}", "urn:ex:p", i)
    with BackgroundServer(store) as server:
        runner = server.app.state.endpoint.runner
        for _ in range(3):
            answer = httpx.get(server.url + "/sparql", params={"query": JOIN}, headers=JSON)
            assert answer.json()["results"]["bindings"] == [
                {"o": {"type": "literal", "value": "5", "datatype": _INT}}
            ]
        assert runner.sandbox is not None and runner.sandbox.forks == 1
        store.assert_("urn:ex:other", "urn:ex:p", 5)
        answer = httpx.get(server.url + "/sparql", params={"query": JOIN}, headers=JSON)
        assert len(answer.json()["results"]["bindings"]) == 2
        assert runner.sandbox.forks == 2
    store.close()


_INT = "http://www.w3.org/2001/XMLSchema#integer"
