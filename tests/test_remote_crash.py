"""A real Oxigraph server killed in the middle of a large write, a ``clear_graph`` or a
``restore``: after a restart on the same data, each is there whole or not at all, and the
dead client's lease expires so others go on.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest
from servers import OxigraphServer

from rdfmem import RdfStore, Unreachable

EX = "http://example.org/"
N = 60_000


def _triples(prefix: str) -> str:
    return "\n".join(f'<{EX}{prefix}{i}> <{EX}p> "{i}" .' for i in range(N))


def _killed_during(
    server: OxigraphServer, store: RdfStore, marker: bytes, work: object, delay: float
) -> BaseException | None:
    """Run ``work()`` on a thread; kill the server ``delay`` s after the request whose body
    holds ``marker`` starts. The error ``work`` raised, if any."""
    started = threading.Event()

    def hook(request: httpx.Request) -> None:
        if marker in request.read():
            started.set()

    store.backend.client.event_hooks["request"].append(hook)  # type: ignore[attr-defined]
    failure: list[BaseException] = []

    def run() -> None:
        try:
            work()  # type: ignore[operator]
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert started.wait(60)
    time.sleep(delay)
    server.kill()
    thread.join(60)
    store.backend.client.event_hooks["request"].remove(hook)  # type: ignore[attr-defined]
    return failure[0] if failure else None


@pytest.mark.parametrize("delay", [0.0, 0.05])
def test_a_large_write_is_whole_or_absent_after_a_kill(tmp_path: Path, delay: float) -> None:
    server = OxigraphServer(tmp_path)
    try:
        server.start()
        store = server.connect(lease_ttl_ms=1000)
        error = _killed_during(
            server, store, b"INSERT+DATA", lambda: store.load(_triples("s"), "ntriples"), delay
        )
        assert error is None or isinstance(error, Unreachable)
        server.start()
        assert store.count() in (0, N)
        if error is None:
            assert store.count() == N  # acknowledged: kept
        store.close()
    finally:
        server.stop()


@pytest.mark.parametrize("delay", [0.0, 0.05])
def test_clear_graph_is_whole_or_absent_after_a_kill(tmp_path: Path, delay: float) -> None:
    server = OxigraphServer(tmp_path)
    try:
        server.start()
        store = server.connect(lease_ttl_ms=1000)
        store.load(_triples("s"), "ntriples", graph=EX + "g")
        store.assert_(EX + "a", EX + "p", "other graph", graph=EX + "h")
        error = _killed_during(server, store, b"CLEAR", lambda: store.clear_graph(EX + "g"), delay)
        assert error is None or isinstance(error, Unreachable)
        server.start()
        assert store.count(graph=EX + "g") in (0, N)
        if error is None:
            assert store.count(graph=EX + "g") == 0
        assert store.count(graph=EX + "h") == 1
        store.clear_graph(EX + "g")  # the dead request's lease has expired
        assert store.count(graph=EX + "g") == 0
        store.close()
    finally:
        server.stop()


@pytest.mark.parametrize("delay", [0.0, 0.05])
def test_restore_is_whole_or_absent_after_a_kill(tmp_path: Path, delay: float) -> None:
    server = OxigraphServer(tmp_path)
    try:
        server.start()
        store = server.connect(lease_ttl_ms=1000)
        keys = 5_000
        snapshot = store.snapshot()
        snapshot["entries"] = [{"key": f"k{i}", "value": 1} for i in range(keys)]
        store.restore(snapshot)
        snapshot["entries"] = [{"key": f"k{i}", "value": 2} for i in range(keys)]
        error = _killed_during(
            server, store, b"INSERT+DATA", lambda: store.restore(snapshot), delay
        )
        assert error is None or isinstance(error, Unreachable)
        server.start()
        values = {store.get(f"k{i}") for i in range(keys)}
        assert values in ({1}, {2})  # the old entries or the snapshot's, never a mix
        if error is None:
            assert values == {2}
        store.set("k0", 3)  # the dead request's lease has expired
        store.close()
    finally:
        server.stop()
