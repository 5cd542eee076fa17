"""What keeps ``rdfmem serve`` near engine speed (issue 23's throughput target) without giving
up a guarantee: one write per small answer, plain queries spared the guard's parse but still
judged, sandboxed reads waited for on the event loop (no thread in between) and still killed
at their time limit, and reader processes that end with their owner.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from servers import free_port
from test_server_support import disk_store, filled_store

from rdfmem.server import BackgroundServer
from rdfmem.server.point import PATTERNS, POINT, plain_query

_JOIN = "SELECT ?o WHERE { <urn:ex:s1> <urn:ex:next> ?n . ?n <urn:ex:p> ?o }"
#: A join the sandbox answers (DISTINCT: not read straight from the indexes, direct.py).
_SANDBOXED = "SELECT DISTINCT ?o WHERE { <urn:ex:s1> <urn:ex:next> ?n . ?n <urn:ex:p> ?o }"
_POINT = "SELECT ?o WHERE { <urn:ex:s1> <urn:ex:p> ?o }"
_RUNAWAY = "SELECT (COUNT(*) AS ?n) { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l }"
_ACCEPT = {"Accept": "application/sparql-results+json"}


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (_POINT, POINT),
        ("PREFIX ex: <urn:ex:> ASK { GRAPH ?g { ex:s ex:p ?o . } }", POINT),
        (_JOIN, PATTERNS),
        ("SELECT * { ?s ?p ?o . }", POINT),
        ("SELECT * { ?s ?p ?s }", PATTERNS),
        ("SELECT * WHERE { GRAPH <urn:g> { ?s <urn:p> ?o . ?o <urn:q> ?x } } LIMIT 3", PATTERNS),
        ("SELECT * { ?s ?p ?o ?x ?y ?z }", None),
        ("SELECT * { SERVICE <http://example.org/> { ?s ?p ?o } }", None),
        ("SELECT * { ?s ?p ?o FILTER(?o > 1) }", None),
        ("INSERT DATA { <urn:a> <urn:b> <urn:c> }", None),
        ("CLEAR GRAPH <urn:g>", None),
        ("SELECT * { ?s ?p ?o } ; DROP ALL", None),
        ("SELECT * { ?s <urn:\\u0020> ?o }", None),
        ("LOAD <http://example.org/x>", None),
        ("SELECT * { ?s ?p ?o . ?o ?q ?r } ORDER BY ?s", None),
    ],
)
def test_only_plain_triple_patterns_skip_the_guard(text: str, kind: str | None) -> None:
    assert plain_query(text) == kind


def test_an_answer_leaves_in_one_write_and_refusals_still_come() -> None:
    with BackgroundServer(filled_store(60)) as server:
        path = "/sparql?query=" + httpx.QueryParams({"q": _POINT}).get("q").replace(" ", "%20")
        with socket.create_connection((server.host, server.port)) as sock:
            request = (
                f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: {_ACCEPT['Accept']}\r\n\r\n"
            )
            sock.sendall(request.encode())
            time.sleep(0.3)  # the answer is there whole, or in pieces, by now
            first = sock.recv(1 << 16)
        head, _, body = first.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        assert len(body) == length and b"value 1" in body  # one segment: head and body together
        with httpx.Client(base_url=server.url) as client:
            for text in (
                "INSERT DATA { <urn:a> <urn:b> <urn:c> }",
                "SELECT * { SERVICE <http://x/> { ?s ?p ?o } }",
            ):
                refused = client.get("/sparql", params={"query": text})
                assert refused.status_code in (400, 403), refused.text
            assert (
                client.get("/sparql", params={"query": "SELECT ?o { ex:s ex:p ?o }"}).status_code
                == 400
            )
            count = "SELECT (COUNT(*) AS ?n) { ?s ?p ?o }"
            rows = client.get("/sparql", params={"query": count}, headers=_ACCEPT).json()
            assert rows["results"]["bindings"][0]["n"]["value"] == "120"  # nothing written


def test_a_head_request_gets_its_head() -> None:
    with BackgroundServer(filled_store(60)) as server:
        with socket.create_connection((server.host, server.port), timeout=5) as sock:
            began = time.monotonic()
            sock.sendall(b"HEAD /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            head = sock.recv(1 << 16)
            took = time.monotonic() - began
        assert head.startswith(b"HTTP/1.1 200") and head.endswith(b"\r\n\r\n")
        assert took < 2.0  # at once, not when the kept-alive connection times out


def test_a_sandboxed_read_answers_without_a_thread_and_a_runaway_is_killed_on_time() -> None:
    with BackgroundServer(filled_store(60), timeout=1.0) as server:
        runner = server.app.state.endpoint.runner
        with httpx.Client(base_url=server.url, headers=_ACCEPT, timeout=10) as client:
            for i in range(20):
                query = _SANDBOXED.replace("s1>", f"s{i}>")
                answer = client.get("/sparql", params={"query": query})
                assert answer.status_code == 200
                assert answer.json()["results"]["bindings"][0]["o"]["value"] == f"value {i + 1}"
            assert runner.sandbox is not None and runner.sandbox.forks == 1  # one kept child
            assert runner.pool.threads == 0  # waited for on the event loop: no query thread
            began = time.monotonic()
            runaway = client.get("/sparql", params={"query": _RUNAWAY})
            took = time.monotonic() - began
            assert runaway.status_code == 503 and took < 2.0, (runaway.status_code, took)
            assert runner.pool.running == 0  # the slot is free again
            deadline = time.monotonic() + 3
            while _zombies(os.getpid()) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not _zombies(os.getpid())  # the killed child was reaped
            assert client.get("/sparql", params={"query": _SANDBOXED}).status_code == 200
            assert runner.sandbox.forks == 2  # a new child for the next read


def _zombies(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return [p for p in found if _is_zombie_or_alive(p) == "zombie"]


def _is_zombie_or_alive(pid: int) -> str:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
    return "zombie" if state == "Z" else "alive"


_SERVE = (
    "import sys; from rdfmem import RdfStore; from rdfmem.server import serve; "
    "store = RdfStore.open(sys.argv[1]); "
    "serve(store, port=int(sys.argv[2]), workers=2, access_log=False)"
)


def test_readers_end_with_their_owner_however_it_is_stopped(tmp_path: Path) -> None:
    store = disk_store(tmp_path / "store", 50)
    port = free_port()
    owner = subprocess.Popen(
        [sys.executable, "-c", _SERVE, store, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    readers: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            readers = _alive_children(owner.pid)
            if len(readers) >= 2 and _answers(port):
                break
            time.sleep(0.1)
        assert len(readers) >= 2, "the readers did not start"
        owner.send_signal(signal.SIGTERM)
        owner.wait(15)
        deadline = time.monotonic() + 5
        while any(_is_zombie_or_alive(p) == "alive" for p in readers):
            assert time.monotonic() < deadline, "a reader outlived its owner"
            time.sleep(0.1)
        assert not _answers(port)  # nobody answers on the port any more
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        for pid in readers:
            if _is_zombie_or_alive(pid) == "alive":
                os.kill(pid, signal.SIGKILL)


def _alive_children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return [p for p in found if _is_zombie_or_alive(p) == "alive"]


def _answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
