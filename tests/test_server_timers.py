"""The time limits a connection lives under, kept lazily (``rdfmem.server.protocols``): a
request's line and headers must arrive within the header limit counted from when that
request began (not from the connection's first one), and a kept-alive connection with no
request is closed after uvicorn's keep-alive limit (5 s) counted from its last answer,
however many requests it sent before.
"""

from __future__ import annotations

import socket
import time

from test_server_support import filled_store

from rdfmem.server import BackgroundServer

_GET = b"GET /sparql?query=ASK%7B%7D HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def _answer(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data or not data.endswith(b"}"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def _closed_after(sock: socket.socket, began: float, limit: float) -> float:
    """Seconds from ``began`` until the server closed ``sock`` (waiting at most ``limit``)."""
    sock.settimeout(limit)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return float("inf")
    except ConnectionResetError:
        pass
    return time.monotonic() - began


def test_a_slow_request_is_closed_at_its_own_header_limit() -> None:
    with BackgroundServer(filled_store(3), header_timeout=1.0) as server:
        sock = socket.create_connection((server.host, server.port))
        try:
            for _ in range(3):  # requests over 1.5 s: longer than the limit, each in time
                sock.sendall(_GET)
                assert _answer(sock).startswith(b"HTTP/1.1 200")
                time.sleep(0.5)
            began = time.monotonic()
            sock.sendall(b"GET /sparql?query=ASK")  # a request begun, never finished
            took = _closed_after(sock, began, 5.0)
        finally:
            sock.close()
    assert 0.8 <= took <= 2.5, took  # its own limit, counted from its first bytes


def test_an_idle_kept_alive_connection_is_closed_after_the_keep_alive_limit() -> None:
    with BackgroundServer(filled_store(3)) as server:
        sock = socket.create_connection((server.host, server.port))
        try:
            for _ in range(8):  # 4 s of requests: each answer restarts the idle wait
                sock.sendall(_GET)
                assert _answer(sock).startswith(b"HTTP/1.1 200")
                time.sleep(0.5)
            sock.sendall(_GET)
            assert _answer(sock).startswith(b"HTTP/1.1 200")
            began = time.monotonic()
            took = _closed_after(sock, began, 12.0)
        finally:
            sock.close()
    assert 4.5 <= took <= 7.5, took  # uvicorn's 5 s, from the last answer
