"""``rdfmem serve`` against a web page and a hostile network (issue 10, items 3, 8, 10, 11),
on a real ``rdfmem serve`` process: escaped SERVICE/LOAD on every backend, DNS rebinding and
cross-site requests, what ``/health`` shows, slow and vanishing clients.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import StoreFactory
from test_guard import escaped_payloads, escaped_updates
from test_server_support import TOKEN, Listener, Served, disk_store, serve_process

from rdfmem import RdfStore
from rdfmem.server import BackgroundServer

pytest_plugins = ["test_server_support"]


@pytest.fixture(scope="module")
def process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("security")
    store = disk_store(folder / "secret-folder-name" / "store", 20)
    options = ("--allowed-host", "memory.example", "--cors", "https://tool.example")
    options += ("--header-timeout", "1", "--max-connections", "64")
    with serve_process(store, *options, tmp_path=folder) as served:
        yield served


# -- item 3: the guard judges the text the engine parses, on every backend ----------------


def test_escaped_service_and_load_are_refused_on_every_backend(
    make_store: StoreFactory, listener: Listener
) -> None:
    store = make_store()
    hits = listener.hits
    with BackgroundServer(store, allow_update=True, token=TOKEN) as server:
        for query in escaped_payloads(listener.url):
            assert httpx.get(server.sparql_url, params={"query": query}).status_code == 403
        for update in escaped_updates(listener.url):
            answer = httpx.post(
                server.sparql_url,
                data={"update": update},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            assert answer.status_code == 403, update
    time.sleep(0.2)
    assert listener.hits == hits


# -- item 8: DNS rebinding and cross-site requests -----------------------------------------


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("evil.example", 421),
        ("evil.example:{port}", 421),
        ("127.0.0.1.evil.example", 421),
        ("localhost:{port}", 200),
        ("127.0.0.1:{port}", 200),
        ("[::1]:{port}", 200),
        ("memory.example:{port}", 200),  # --allowed-host
    ],
)
def test_host_must_name_this_server(process: Served, host: str, status: int) -> None:
    header = host.format(port=process.port)
    for path in ("/sparql?query=ASK%7B%7D", "/health", "/store", "/"):
        answer = httpx.get(process.url + path, headers={"Host": header})
        assert answer.status_code == status, (path, header)


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        ("https://evil.example", 403),
        ("null", 403),
        ("http://localhost:1", 403),  # another port is another site
        ("https://tool.example", 200),  # --cors
        ("http://127.0.0.1:{port}", 200),  # the page itself
    ],
)
def test_cross_origin_requests_are_refused_unless_cors_allows(
    process: Served, origin: str, status: int
) -> None:
    given = origin.format(port=process.port)
    form = httpx.post(process.sparql_url, data={"query": "ASK {}"}, headers={"Origin": given})
    get = httpx.get(process.sparql_url, params={"query": "ASK {}"}, headers={"Origin": given})
    assert form.status_code == status and get.status_code == status


# -- item 10: /health discloses nothing ----------------------------------------------------


def test_health_shows_no_path(process: Served) -> None:
    body = httpx.get(process.url + "/health").text
    assert "secret-folder-name" not in body and "/" not in body.replace("\\/", "")


def test_health_shows_no_password(oxigraph_server: object) -> None:
    url = oxigraph_server.query_url  # type: ignore[attr-defined]
    secret = url.replace("http://", "http://agent:hunter2@")
    store = RdfStore.connect(secret)
    try:
        with BackgroundServer(store) as server:
            body = httpx.get(server.url + "/health").text
    finally:
        store.close()
    assert "hunter2" not in body and "agent" not in body and "127.0.0.1" not in body


# -- item 11: slow and vanishing clients ---------------------------------------------------


def test_slow_clients_are_cut_off_and_others_still_answered(process: Served) -> None:
    slow = []
    for _ in range(100):  # more than --max-connections 64
        sock = socket.create_connection(("127.0.0.1", process.port))
        sock.sendall(b"GET /health HTTP/1.1\r\nHo")
        slow.append(sock)
    time.sleep(2.5)  # past --header-timeout 1
    closed = 0
    for sock in slow:
        sock.settimeout(2)
        try:
            closed += sock.recv(1) == b""
        except (ConnectionResetError, TimeoutError):
            closed += 1
        finally:
            sock.close()
    assert closed == len(slow)
    assert httpx.get(process.url + "/health", timeout=5).status_code == 200


def test_a_vanishing_client_logs_no_traceback(process: Served) -> None:
    for _ in range(3):
        sock = socket.create_connection(("127.0.0.1", process.port))
        sock.sendall(
            b"POST /sparql HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/sparql-query\r\nContent-Length: 1000\r\n\r\nASK"
        )
        time.sleep(0.1)
        sock.close()
    sock = socket.create_connection(("127.0.0.1", process.port))
    sock.sendall(b"GET /sparql?query=ASK%7B%7D HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    sock.close()
    time.sleep(0.5)
    assert httpx.get(process.url + "/health", timeout=5).status_code == 200
    assert "Traceback" not in Path(process.log).read_text()


def test_a_body_that_does_not_arrive_is_408() -> None:
    with BackgroundServer(RdfStore(), body_timeout=0.5) as server:
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.settimeout(10)
        sock.sendall(
            b"POST /sparql HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/sparql-query\r\nContent-Length: 100\r\n\r\nASK"
        )
        started = time.monotonic()
        answer = sock.recv(65536)
        waited = time.monotonic() - started
        sock.close()
        assert httpx.get(server.url + "/health").status_code == 200
    assert answer.startswith(b"HTTP/1.1 408") and waited < 5
