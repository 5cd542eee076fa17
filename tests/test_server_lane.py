"""The fast lane (``rdfmem.server.lane``): a plain ``GET /sparql?query=`` is answered from
the HTTP parser's callbacks, with the very answer the full ASGI path gives, and every other
request (a foreign ``Host``, an ``Origin``, a body, ``Connection: close``, other parameters)
still goes the full way, refused or answered as before.
"""

from __future__ import annotations

import socket
import threading
import time
from urllib.parse import quote

import httpx
import pytest
from test_server_support import filled_store

from rdfmem.server import BackgroundServer

_JOIN = "SELECT ?o WHERE { <urn:ex:s1> <urn:ex:next> ?n . ?n <urn:ex:p> ?o }"
_POINT = "SELECT ?o WHERE { <urn:ex:s1> <urn:ex:p> ?o }"
_JSON = "application/sparql-results+json"
_COUNT = "SELECT (COUNT(*) AS ?n) { ?s ?p ?o }"


def _seen(response: httpx.Response) -> tuple[int, dict[str, str], bytes]:
    headers = {k: v for k, v in response.headers.items() if k != "date"}
    return response.status_code, headers, response.content


@pytest.fixture(scope="module")
def server():  # type: ignore[no-untyped-def]
    with BackgroundServer(filled_store(30), timeout=2.0) as running:
        yield running


@pytest.mark.parametrize(
    ("text", "accept", "status"),
    [
        (_POINT, _JSON, 200),
        (_JOIN, _JSON, 200),
        (_JOIN, "text/csv", 200),
        (_POINT, "application/sparql-results+xml", 200),
        ("ASK { <urn:ex:s1> <urn:ex:p> ?o }", _JSON, 200),
        (_COUNT, _JSON, 200),
        (_POINT, "text/nothing", 406),
        ("SELECT ?o { ex:s ex:p ?o }", _JSON, 400),
        ("DROP ALL", _JSON, 400),
        ("CLEAR GRAPH <urn:g>", _JSON, 400),
        ("SELECT * { SERVICE <http://example.org/> { ?s ?p ?o } }", _JSON, 403),
    ],
)
def test_the_lane_answers_as_the_full_path_does(
    server: BackgroundServer, text: str, accept: str, status: int
) -> None:
    lane = server.app.lane
    with httpx.Client(base_url=server.url, headers={"Accept": accept}) as client:
        before = lane.taken
        fast = client.get("/sparql", params={"query": text})
        assert lane.taken == before + 1  # this one took the lane
        # The same query by POST goes the full (ASGI) way.
        full = client.post(
            "/sparql", content=text, headers={"Content-Type": "application/sparql-query"}
        )
        assert lane.taken == before + 1
    assert fast.status_code == status, fast.text
    assert _seen(fast) == _seen(full)
    with httpx.Client(base_url=server.url, headers={"Accept": _JSON}) as client:
        rows = client.get("/sparql", params={"query": _COUNT}).json()
    assert rows["results"]["bindings"][0]["n"]["value"] == "60"  # nothing was written


def test_requests_that_are_not_plain_go_the_full_way(server: BackgroundServer) -> None:
    lane = server.app.lane
    before = lane.taken
    query = {"query": _POINT}
    with httpx.Client(base_url=server.url, headers={"Accept": _JSON}) as client:
        foreign = client.get("/sparql", params=query, headers={"Host": "evil.example"})
        assert foreign.status_code == 421
        cross = client.get("/sparql", params=query, headers={"Origin": "http://evil.example"})
        assert cross.status_code == 403
        assert client.get("/sparql", params={"update": "DROP ALL"}).status_code == 405
        twice = client.get("/sparql", params=[("query", _POINT), ("query", _POINT)])
        assert twice.status_code == 400
        named = client.get("/sparql", params={**query, "default-graph-uri": "urn:g"})
        assert named.status_code == 200 and named.json()["results"]["bindings"] == []
        closing = client.get("/sparql", params=query, headers={"Connection": "close"})
        assert closing.status_code == 200 and closing.headers["connection"] == "close"
    assert lane.taken == before


def _responses(sock: socket.socket, count: int) -> list[tuple[bytes, bytes]]:
    """``count`` whole responses (head, body) read from ``sock``."""
    data = b""
    out: list[tuple[bytes, bytes]] = []
    deadline = time.monotonic() + 10
    while len(out) < count and time.monotonic() < deadline:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if sep:
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
            if len(rest) >= length:
                out.append((head, rest[:length]))
                data = rest[length:]
                continue
        data += sock.recv(1 << 16)
    return out


def test_pipelined_requests_are_answered_in_order(server: BackgroundServer) -> None:
    def get(text: str, subject: int) -> bytes:
        path = "/sparql?query=" + quote(text.replace("s1>", f"s{subject}>"))
        return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: {_JSON}\r\n\r\n".encode()

    post = (
        f"POST /sparql HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: {_JSON}\r\n"
        f"Content-Type: application/sparql-query\r\nContent-Length: {len(_POINT)}\r\n\r\n"
        f"{_POINT}"
    ).encode()
    # A join (answered by a child), a point behind it, a POST (the full path) behind that,
    # then a join again: sent in one write, answered in the order asked.
    batch = get(_JOIN, 3) + get(_POINT, 7) + post + get(_JOIN, 9) + get(_POINT, 2)
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(batch)
        answers = _responses(sock, 5)
    values = [body.split(b'"value":"')[1].split(b'"')[0] for _, body in answers]
    assert values == [b"value 4", b"value 7", b"value 1", b"value 10", b"value 2"]
    assert all(head.startswith(b"HTTP/1.1 200") for head, _ in answers)


def test_a_runaway_on_the_lane_is_stopped_at_its_limits(server: BackgroundServer) -> None:
    runaway = "SELECT * { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l . ?m ?n ?o }"
    with httpx.Client(base_url=server.url, headers={"Accept": _JSON}, timeout=10) as client:
        began = time.monotonic()
        stopped = client.get("/sparql", params={"query": runaway})
        took = time.monotonic() - began
        assert stopped.status_code in (422, 503) and took < 3.0, (stopped.status_code, took)
        point = client.get("/sparql", params={"query": _POINT})
        assert point.status_code == 200  # the connection and the server answer on


def test_the_quick_spelling_check_agrees_with_the_token_walk() -> None:
    """``plain_query`` judges the common spelling with one match (``point._SIMPLE``); on
    every text that match takes, its answer is the token walk's."""
    import random

    from rdfmem.server.point import _SIMPLE, _walked, plain_query

    rng = random.Random(23)
    taken = 0
    for base in (_POINT, _JOIN, "select ?s ?o { ?s <urn:p> ?o . } limit 5"):
        for _ in range(20000):
            chars = list(base)
            for _ in range(rng.randrange(1, 4)):  # one to three characters changed
                at = rng.randrange(len(chars))
                chars[at] = rng.choice([" ", "", ".", "?", "<", ">", "{", "}", "a", "\n", "  "])
            text = "".join(chars)
            if _SIMPLE.fullmatch(text):
                taken += 1
                assert plain_query(text) == _walked(text), text
    assert taken > 100
    assert plain_query(_POINT) == _walked(_POINT) == "point"
    assert plain_query(_JOIN) == _walked(_JOIN) == "patterns"


@pytest.mark.parametrize(
    "text",
    [
        "SELECT" + " ?a" * 1300 + " x",
        "SELECT ?o { " + "<a> <b> ?c . " * 290 + "x",
        "SELECT ?o { <a> <b> ?c" + " " * 3990 + "x",
        "SELECT ?o { <a> <b> ?c . " + " " * 3990 + "x",
        "SELECT ?o { <a> <b> ?c }" + " " * 3990 + "x",
        "SELECT ?o " + " " * 4000 + "x",
    ],
)
def test_the_quick_spelling_check_takes_linear_time(text: str) -> None:
    from rdfmem.server.point import _SIMPLE

    began = time.perf_counter()
    assert _SIMPLE.fullmatch(text) is None
    assert time.perf_counter() - began < 0.02  # ~0.1 ms; two runs of spaces meeting: ~25 ms


def test_a_client_that_does_not_read_its_answers_is_not_read_either(
    server: BackgroundServer,
) -> None:
    """Answers to requests pipelined by a client that does not read them wait in the
    server's buffer only up to its high-water mark: then the server stops reading that
    connection (as uvicorn's own path does), and goes on once the client reads."""
    lane = server.app.lane
    path = "/sparql?query=" + quote(_POINT)
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: {_JSON}\r\n\r\n".encode()
    count = 60000
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(30)
        sock.connect((server.host, server.port))
        before = lane.taken
        sender = threading.Thread(target=sock.sendall, args=(request * count,), daemon=True)
        sender.start()
        taken_unread, deadline = -1, time.monotonic() + 20
        while lane.taken - before != taken_unread and time.monotonic() < deadline:
            taken_unread = lane.taken - before  # until it stops taking requests
            time.sleep(0.5)
        seen, tail = 0, b""
        while seen < count:
            chunk = sock.recv(1 << 20)
            assert chunk, f"the server closed the connection after {seen} answers"
            data = tail + chunk
            seen += data.count(b"HTTP/1.1 200 OK")
            tail = data[-14:]  # a status line cut in two is counted once
        sender.join(10)
    assert taken_unread < count  # it stopped reading while its answers were not read
    assert seen == count and lane.taken - before == count
