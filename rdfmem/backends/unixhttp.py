"""HTTP/1.1 over a Unix socket, lean: the wire an attached process speaks to its owner.

httpx's own transport (httpcore) costs about 0.2 ms a request on top of the request itself,
the largest part of a local round trip, and an attached process's turn makes a dozen of
them. The owner is rdfmem's own server (``rdfmem.backends.owner``): it answers every
request with ``Content-Length`` and keeps connections alive, so this transport writes the
request in one ``sendall``, reads the answer by its length, and keeps idle connections for
the next request (one per thread at a time).

Failures are httpx's, so callers handle them as from any transport: a connection that
cannot be made is ``httpx.ConnectError`` (the request was not sent); a connection lost
after the request went out is ``httpx.RemoteProtocolError`` (it may have been run); no
answer in time is ``httpx.ReadTimeout``. An idle connection the owner closed meanwhile is
noticed before it is used (it reads as ended) and replaced, as httpcore does.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Sequence

import httpx

__all__ = ["UnixHTTPTransport", "read_answer"]

_HEAD_END = b"\r\n\r\n"


class UnixHTTPTransport(httpx.BaseTransport):
    """HTTP/1.1 to the server listening on the Unix socket ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._idle: list[socket.socket] = []
        self._lock = threading.Lock()

    def _connection(self, timeout: float | None) -> socket.socket:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                break
            if _alive(conn):
                conn.settimeout(timeout)
                return conn
            conn.close()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(timeout)
        try:
            conn.connect(self.path)
        except OSError as exc:
            conn.close()
            raise httpx.ConnectError(f"cannot connect to {self.path}: {exc}") from exc
        return conn

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout", {})
        timeout = timeouts.get("read") if isinstance(timeouts, dict) else None
        target = request.url.raw_path.decode("ascii")
        status, headers, content = self.exchange(
            request.method, target, request.headers.raw, request.read(), timeout, request
        )
        return httpx.Response(status, headers=headers, content=content, request=request)

    def exchange(
        self,
        method: str,
        target: str,
        headers: Sequence[tuple[bytes, bytes]],
        body: bytes,
        timeout: float | None,
        request: httpx.Request | None = None,
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """One request and its answer, with no ``httpx.Request`` to build: the status,
        headers and body (``headers`` must name the host and the body's length).

        Raises:
            httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadTimeout: as
                ``handle_request``.
        """
        head = [f"{method} {target} HTTP/1.1".encode()]
        head += [b"%s: %s" % (k, v) for k, v in headers]
        conn = self._connection(timeout)
        try:
            conn.sendall(b"\r\n".join(head) + _HEAD_END + body)
            status, answer, content, keep = _read_answer(conn, method == "HEAD")
        except TimeoutError as exc:
            conn.close()
            raise httpx.ReadTimeout(f"no answer from {self.path} in time", request=request) from exc
        except OSError as exc:
            conn.close()
            raise httpx.RemoteProtocolError(
                f"the connection to {self.path} was lost: {exc}", request=request
            ) from exc
        if keep:
            with self._lock:
                self._idle.append(conn)
        else:
            conn.close()
        return status, answer, content

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            with contextlib.suppress(OSError):
                conn.close()


def _alive(conn: socket.socket) -> bool:
    """False when an idle connection has something to read: the server never speaks
    first, so that is its end (or garbage)."""
    try:
        readable, _, _ = select.select([conn], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


def _read_answer(
    conn: socket.socket, head_only: bool
) -> tuple[int, list[tuple[bytes, bytes]], bytes, bool]:
    """``read_answer`` with the body as bytes."""
    status, headers, body, keep = read_answer(conn, head_only)
    return status, headers, bytes(body), keep


def read_answer(
    conn: socket.socket, head_only: bool
) -> tuple[int, list[tuple[bytes, bytes]], bytearray, bool]:
    """Status, headers, body and whether the connection may be used again. A body of a
    known length is read into one buffer made at its size (a large one, the indexes the
    owner hands over, is not grown and copied chunk by chunk).

    Raises:
        ConnectionError: the connection ended before the whole answer came.
    """
    data = bytearray()
    while (end := data.find(_HEAD_END)) < 0:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection without an answer")
        data += chunk
    lines = bytes(data[:end]).split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise ConnectionError(f"not an HTTP answer: {lines[0][:100]!r}")
    status = int(parts[1])
    headers: list[tuple[bytes, bytes]] = []
    length: int | None = None
    keep = parts[0] == b"HTTP/1.1"
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name, value = name.strip(), value.strip()
        headers.append((name, value))
        lowered = name.lower()
        if lowered == b"content-length":
            length = int(value)
        elif lowered == b"connection":
            keep = value.lower() == b"keep-alive" or (keep and value.lower() != b"close")
        elif lowered == b"transfer-encoding" and value.lower() != b"identity":
            raise ConnectionError(f"unexpected transfer encoding {value!r}")
    start = end + len(_HEAD_END)
    if head_only or status in (204, 304) or 100 <= status < 200:
        length = 0
    if length is None:  # the body runs to the end of the connection
        keep = False
        body = data[start:]
        while chunk := conn.recv(65536):
            body += chunk
        return status, headers, body, keep
    body = bytearray(length)
    got = min(length, len(data) - start)
    body[:got] = data[start : start + got]
    view = memoryview(body)
    while got < length:
        count = conn.recv_into(view[got:])
        if not count:
            raise ConnectionError("the server closed the connection in the middle of an answer")
        got += count
    return status, headers, body, keep
