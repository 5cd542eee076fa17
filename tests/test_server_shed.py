"""Slow clients are shed (issue 23, item 4): the connection cap of ``rdfmem serve`` is derived
from the descriptor limit, and at the cap the connection waiting longest (idle, or still
sending its request) is closed to admit a new one; a connection whose request is being
answered is never shed.

Against a real ``rdfmem serve`` process with its descriptor limit lowered to 256: 300 clients
that send headers and a few body bytes, then hold, used to keep ``/health`` unanswered for
the 30 s body timeout (the cap of 256 connections was not below the limit), wave after wave.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from servers import free_port
from test_server_support import disk_store

from rdfmem import RdfStore
from rdfmem.server import BackgroundServer
from rdfmem.server.shedding import connection_room

#: A request that has sent its headers and 6 of its 1,000 body bytes, then holds.
SLOW = (
    b"POST /sparql HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Type: application/sparql-query\r\nContent-Length: 1000\r\n\r\nSELECT"
)
LIMIT = 256


@contextmanager
def limited_server(store: str, tmp_path: Path, limit: int) -> Iterator[tuple[int, int]]:
    """``rdfmem serve STORE`` with ``RLIMIT_NOFILE`` lowered to ``limit``: (pid, port)."""
    port = free_port()
    log = tmp_path / "serve.log"

    def lower() -> None:  # runs in the child, before it executes Python
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))

    with log.open("wb") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rdfmem",
                "serve",
                store,
                "--port",
                str(port),
                "--no-access-log",
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
            preexec_fn=lower,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"rdfmem serve did not start: {log.read_text()}")
            time.sleep(0.05)
        yield proc.pid, port
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _slow_clients(port: int, count: int) -> list[socket.socket]:
    """``count`` connections that each send headers and a few body bytes, then hold."""
    held = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.settimeout(5)
        try:
            sock.connect(("127.0.0.1", port))
            sock.sendall(SLOW)
        except OSError:  # closed by the server before the bytes went out: shed already
            sock.close()
            continue
        held.append(sock)
    return held


def _closed_by_server(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False  # still open, nothing to read
    except OSError:
        return True  # reset


class _Probe(threading.Thread):
    """``GET /health`` on a new connection every 0.2 s; the time each took (inf: failed)."""

    def __init__(self, port: int, pid: int) -> None:
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/health"
        self.pid = pid
        self.times: list[float] = []
        self.descriptors: list[int] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                ok = httpx.get(self.url, timeout=10).status_code == 200
            except httpx.HTTPError:
                ok = False
            self.times.append(time.monotonic() - started if ok else float("inf"))
            with contextlib.suppress(OSError):
                self.descriptors.append(len(os.listdir(f"/proc/{self.pid}/fd")))
            self.stop.wait(0.2)


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    return disk_store(tmp_path_factory.mktemp("shed") / "store", 200)


def test_health_answers_within_3_s_through_waves_of_300_slow_clients(
    small_store: str, tmp_path: Path
) -> None:
    waves: list[list[socket.socket]] = []
    with limited_server(small_store, tmp_path, LIMIT) as (pid, port):
        probe = _Probe(port, pid)
        probe.start()
        try:
            for _ in range(3):
                waves.append(_slow_clients(port, 300))
                time.sleep(3)
            closed_first = sum(_closed_by_server(s) for s in waves[0])
            last_alive = sum(not _closed_by_server(s) for s in waves[-1])
            query = httpx.get(
                f"http://127.0.0.1:{port}/sparql",
                params={"query": "ASK { <urn:ex:s7> <urn:ex:p> 7 }"},
                timeout=10,
            )
        finally:
            probe.stop.set()
            probe.join(15)
            for wave in waves:
                for sock in wave:
                    sock.close()
    slowest = max(probe.times)
    assert len(probe.times) >= 20
    assert slowest < 3.0, f"/health took {slowest:.2f} s at worst ({probe.times})"
    assert max(probe.descriptors) < LIMIT  # the process never ran out of descriptors
    assert closed_first >= 250  # the first wave was shed to admit the later ones
    assert last_alive >= 30  # the newest slow clients are still being heard
    assert query.status_code == 200 and query.json()["boolean"] is True


def test_the_connection_waiting_longest_is_shed_not_one_being_answered(tmp_path: Path) -> None:
    store = RdfStore()
    for i in range(200):
        store.assert_(f"urn:ex:s{i}", "urn:ex:p", i)
    runaway = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l }"
    with BackgroundServer(store, max_connections=3, timeout=3) as server:
        busy = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        target = httpx.URL(server.sparql_url, params={"query": runaway}).raw_path
        busy.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        time.sleep(0.3)  # its request has arrived whole: it is being answered
        older, newer = _slow_clients(server.port, 2)
        time.sleep(0.3)
        answer = httpx.get(server.url + "/health", timeout=5)  # the 4th connection
        time.sleep(0.2)
        shed = [_closed_by_server(s) for s in (older, newer)]
        busy.settimeout(10)
        reply = busy.recv(65536)
        for sock in (busy, older, newer):
            sock.close()
    assert answer.status_code == 200
    assert shed == [True, False]  # the one waiting longest went; the newer one stays
    assert reply.startswith(b"HTTP/1.1 503")  # the busy one got its answer (time limit)


def test_the_cap_is_below_the_descriptor_limit() -> None:
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    room = connection_room()
    if soft != resource.RLIM_INFINITY:
        assert room.cap + room.spare_for_arrivals < soft
    assert connection_room(limit=256, in_use=30).cap < 256 - 30
    assert connection_room(10, limit=256, in_use=30).cap == 10
