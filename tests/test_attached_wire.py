"""The owner's socket speaks plain HTTP/1.1 to any client, not only to rdfmem's own: a
request written by hand is answered, kept alive or closed as asked, and a malformed one is
refused without stopping the owner. Real owner on its real socket."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from rdfmem import RdfStore
from rdfmem.backends.attached import AttachedBackend
from rdfmem.backends.owner import socket_path


@pytest.fixture
def owner(tmp_path: Path) -> Iterator[Path]:
    store = RdfStore.open(tmp_path / "store")
    store.set("greeting", "hello")
    try:
        yield socket_path(tmp_path / "store")
    finally:
        store.close()


def _exchange(path: Path, request: bytes) -> tuple[bytes, socket.socket]:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(10)
    conn.connect(str(path))
    conn.sendall(request)
    return _answer(conn), conn


def _answer(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += conn.recv(65536)
    return head + b"\r\n\r\n" + body


def _ask(host_line: bytes = b"Host: x\r\n", extra: bytes = b"") -> bytes:
    query = quote("ASK { GRAPH ?g { ?s ?p ?o } }")
    return b"GET /sparql?query=%s HTTP/1.1\r\n%s%s\r\n" % (query.encode(), host_line, extra)


def test_two_requests_on_one_connection_then_close_when_asked(owner: Path) -> None:
    first, conn = _exchange(owner, _ask())
    try:
        assert first.startswith(b"HTTP/1.1 200 ")
        assert json.loads(first.partition(b"\r\n\r\n")[2]) == {"head": {}, "boolean": True}
        conn.sendall(_ask(extra=b"Connection: close\r\n"))
        second = _answer(conn)
        assert second.startswith(b"HTTP/1.1 200 ")
        assert conn.recv(10) == b""  # closed after the answer, as asked
    finally:
        conn.close()


def test_malformed_headers_are_refused_and_the_owner_keeps_serving(
    owner: Path, tmp_path: Path
) -> None:
    bad, conn = _exchange(owner, _ask(extra=b"no colon here\r\n"))
    conn.close()
    assert bad.startswith(b"HTTP/1.1 400 ")
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(150))
    flood, conn = _exchange(owner, _ask(extra=many))
    conn.close()
    assert flood.startswith(b"HTTP/1.1 431 ")
    old, conn = _exchange(owner, _ask().replace(b"HTTP/1.1", b"HTTP/1.0"))
    conn.close()
    assert b" 200 " in old.split(b"\r\n")[0]
    attached = RdfStore.open(tmp_path / "store")
    try:
        assert isinstance(attached.backend, AttachedBackend)
        assert attached.get("greeting") == "hello"
    finally:
        attached.close()


def test_a_subject_list_of_a_bad_graph_name_is_refused(owner: Path) -> None:
    bad, conn = _exchange(owner, b"GET /subjects?graph=not+an+iri HTTP/1.1\r\nHost: x\r\n\r\n")
    conn.close()
    assert bad.startswith(b"HTTP/1.1 400 ")
    good, conn = _exchange(
        owner, b"GET /subjects?graph=urn%3Ardfmem%3Agraph%3Astore HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    conn.close()
    listed = json.loads(good.partition(b"\r\n\r\n")[2])["listed"]
    assert len(listed) == 1 and listed[0].endswith("greeting")
