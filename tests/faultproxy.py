"""A TCP proxy between rdfmem and a real SPARQL server that injects network faults, one
HTTP request at a time, chosen by a seeded random generator.

Each request the client sends is read whole (headers and ``Content-Length`` body), then,
by the proxy's ``plan``:

* ``pass``: forwarded, and the server's answer sent back;
* ``delay``: held back ``delay_s`` seconds, then forwarded (a slow network);
* ``duplicate``: forwarded, answered, and sent to the server a second time ``delay_s``
  later in the background (a retrying proxy; the copy's answer goes nowhere);
* ``drop``: forwarded, and the server's answer thrown away, the client's connection
  closed instead (the server applied it; the client cannot know);
* ``reset``: the client's connection is closed before anything is forwarded.

Upstream, each request goes on a connection of its own (``Connection: close``), so that a
server killed and started again on the same port is reached again at once. Counts of each
fault, and the seconds of delay injected on the client's requests, are kept.
"""

from __future__ import annotations

import random
import socket
import threading
import time
from collections import Counter
from contextlib import suppress

FAULTS = ("pass", "delay", "duplicate", "drop", "reset")


class FaultProxy:
    """Listens on 127.0.0.1 (``port``) and forwards to ``upstream_port``."""

    def __init__(
        self,
        upstream_port: int,
        *,
        seed: int,
        weights: dict[str, float] | None = None,
        delay_s: float = 1.5,
        only_updates: bool = True,
    ) -> None:
        self.upstream_port = upstream_port
        self.random = random.Random(seed)
        self.weights = weights or {"pass": 1.0}
        self.delay_s = delay_s
        self.only_updates = only_updates
        self.counts: Counter[str] = Counter()
        self.delayed_s = 0.0  # delay injected on requests answered to the client
        self._lock = threading.Lock()
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        self.port = int(self._server.getsockname()[1])
        self._closed = False
        self._threads: list[threading.Thread] = []
        threading.Thread(target=self._accept, name="faultproxy-accept", daemon=True).start()

    def url(self, server_url: str) -> str:
        """``server_url`` with the proxy's port instead of the server's."""
        return server_url.replace(f":{self.upstream_port}/", f":{self.port}/")

    def plan(self, body: bytes) -> str:
        """The fault for one request (only updates get faults when ``only_updates``)."""
        if self.only_updates and b"update=" not in body:
            return "pass"
        with self._lock:
            names = list(self.weights)
            return self.random.choices(names, [self.weights[n] for n in names])[0]

    def close(self) -> None:
        self._closed = True
        with suppress(OSError):
            self._server.close()

    # -- the plumbing ----------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            thread = threading.Thread(
                target=self._serve, args=(client,), name="faultproxy-conn", daemon=True
            )
            thread.start()

    def _serve(self, client: socket.socket) -> None:
        with client:
            reader = client.makefile("rb")
            while not self._closed:
                request = _read_request(reader)
                if request is None:
                    return
                fault = self.plan(request)
                with self._lock:
                    self.counts[fault] += 1
                if fault == "reset":
                    _reset(client)
                    return
                if fault == "delay":
                    time.sleep(self.delay_s)
                    with self._lock:
                        self.delayed_s += self.delay_s
                try:
                    answer = self._forward(request)
                except OSError:
                    _reset(client)  # the server is down: the client sees a reset
                    return
                if fault == "duplicate":
                    threading.Thread(
                        target=self._again, args=(request,), name="faultproxy-dup", daemon=True
                    ).start()
                if fault == "drop":
                    _reset(client)
                    return
                try:
                    client.sendall(answer)
                except OSError:
                    return
                if b"\r\nconnection: close" in answer.split(b"\r\n\r\n", 1)[0].lower():
                    return

    def _again(self, request: bytes) -> None:
        time.sleep(self.delay_s)
        with suppress(OSError):
            self._forward(request)

    def _forward(self, request: bytes) -> bytes:
        head, _, body = request.partition(b"\r\n\r\n")
        lines = [
            line
            for line in head.split(b"\r\n")
            if not line.lower().startswith((b"connection:", b"keep-alive:"))
        ]
        sent = b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n" + body
        with socket.create_connection(("127.0.0.1", self.upstream_port), timeout=60) as up:
            up.sendall(sent)
            chunks = []
            while True:
                chunk = up.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        answer = b"".join(chunks)
        if not answer:
            raise OSError("the server closed the connection without an answer")
        # The answer is whole (read to the server's close); tell the client so.
        head, _, rest = answer.partition(b"\r\n\r\n")
        kept = [
            line
            for line in head.split(b"\r\n")
            if not line.lower().startswith((b"connection:", b"transfer-encoding:"))
            and not line.lower().startswith(b"content-length:")
        ]
        body = _dechunk(rest) if b"transfer-encoding: chunked" in head.lower() else rest
        kept.append(b"Content-Length: " + str(len(body)).encode())
        kept.append(b"Connection: close")
        return b"\r\n".join(kept) + b"\r\n\r\n" + body


def _read_request(reader: object) -> bytes | None:
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = reader.readline()  # type: ignore[attr-defined]
        if not line:
            return None
        head += line
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    body = reader.read(length) if length else b""  # type: ignore[attr-defined]
    return head + body


def _dechunk(data: bytes) -> bytes:
    out, rest = b"", data
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        rest = rest[size + 2 :]
    return out


def _reset(sock: socket.socket) -> None:
    """Close with a TCP reset (SO_LINGER 0), as a broken network would."""
    with suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.close()
