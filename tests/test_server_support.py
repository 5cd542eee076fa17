"""Shared pieces of the ``rdfmem serve`` tests: data, served stores, a listener that counts
outbound connections, tight limits."""

from __future__ import annotations

import contextlib
import csv
import io
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pyoxigraph as ox
import pytest
from servers import free_port

from rdfmem import RdfStore
from rdfmem.server import BackgroundServer

SELECT_ALL = "SELECT ?s ?p ?o WHERE { ?s ?p ?o } ORDER BY ?s ?p ?o"
CONSTRUCT_ALL = "CONSTRUCT WHERE { ?s ?p ?o }"
TOKEN = "s3cret-token"


def fill(store: RdfStore) -> None:
    store.assert_("urn:ex:alice", "urn:ex:says", 'héllo "world"')
    store.assert_("urn:ex:alice", "urn:ex:age", 42)
    store.assert_("urn:ex:bob", "urn:ex:says", ox.Literal("salut", language="fr"))
    store.assert_("urn:ex:bob", "urn:ex:knows", ox.NamedNode("urn:ex:alice"), graph="urn:ex:g1")
    store.assert_("urn:ex:carol", "urn:ex:knows", ox.NamedNode("urn:ex:bob"), graph="urn:ex:g2")
    store.set("budget", {"tokens": 4096})


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundServer]:
    """One on-disk store with a little data, served read-only with default limits."""
    store = RdfStore.open(tmp_path_factory.mktemp("served") / "store")
    fill(store)
    with BackgroundServer(store) as server:
        yield server
    store.close()


@pytest.fixture
def client(served: BackgroundServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, timeout=30) as c:
        yield c


def rows_of(data: bytes, fmt: ox.QueryResultsFormat) -> set[tuple[str, ...]]:
    if fmt == ox.QueryResultsFormat.CSV:  # lossy: pyoxigraph does not read it back
        lines = list(csv.reader(io.StringIO(data.decode("utf-8"))))
        return {tuple(line) for line in lines[1:]}
    parsed = ox.parse_query_results(data, fmt)
    assert isinstance(parsed, ox.QuerySolutions)
    names = [v.value for v in parsed.variables]
    return {tuple(str(s[n]) for n in names) for s in parsed}


def triples_of(data: bytes, fmt: ox.RdfFormat) -> set[ox.Triple]:
    return {q.triple if isinstance(q, ox.Quad) else q for q in ox.parse(data, fmt)}


# -- real clients ---------------------------------------------------------------------------


@pytest.fixture
def writable() -> Iterator[tuple[BackgroundServer, RdfStore]]:
    store = RdfStore()
    fill(store)
    with BackgroundServer(store, allow_update=True, token=TOKEN) as server:
        yield server, store


class Listener:
    """A loopback TCP listener that counts connections: SERVICE or LOAD would connect here."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/"
        self.hits = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def listener() -> Iterator[Listener]:
    lst = Listener()
    yield lst
    lst.close()


def spellings(url: str) -> list[str]:
    pre = f"PREFIX : <{url}> PREFIX svc: <{url}> "
    where = "SELECT * WHERE { BIND(1 AS ?one) "
    return [
        f"SELECT * WHERE {{ SERVICE <{url}> {{ ?s ?p ?o }} }}",
        f"select * where {{ service <{url}> {{ ?s ?p ?o }} }}",
        f"SELECT * WHERE {{ sErViCe SiLeNt <{url}> {{ ?s ?p ?o }} }}",
        f"SELECT * WHERE {{ SERVICE#comment\n<{url}>{{}} }}",
        f"SELECT * WHERE {{ SERVICE\t\r\n<{url}>{{}} }}",
        f"{pre}SELECT * WHERE {{ SERVICE svc:x {{ }} }}",
        f"{pre}SELECT * WHERE {{ SERVICE:x{{}} }}",
        f"{pre}{where}SERVICE:{{}} }}",
        f"{where}BIND(IRI('{url}') AS ?u) SERVICE ?u {{ }} }}",
        f"SELECT * WHERE {{ ?s ?p falseSERVICE<{url}>{{}} }}",
        f"SELECT * WHERE {{ ?s ?p ?o SERVICESILENT<{url}>{{}} }}",
        f"{pre}SELECT * WHERE {{ ?s ?p ex:x.y.SERVICE<{url}>{{}} }}",
        f"SELECT * WHERE {{ {{}}SERVICE<{url}>{{}} }}",
        f"SELECT * WHERE {{ OPTIONAL{{SERVICE<{url}>{{}}}} }}",
        f"SELECT * WHERE {{ \\u0053ERVICE <{url}> {{}} }}",
        f"# SERVICE in a comment is fine, but not here:\nSELECT * {{ SERVICE <{url}> {{}} }}",
        f"SELECT * WHERE {{ ?s ?p 'x' . SERVICE <{url}> {{}} }}",
    ]


@contextmanager
def limited(max_result_bytes: int = 1 << 20, timeout: float = 0.5) -> Iterator[BackgroundServer]:
    """A server with tight limits over 200 triples (cross products explode quickly)."""
    store = RdfStore()
    for i in range(200):
        store.assert_(f"urn:ex:s{i}", "urn:ex:p", i)
    with BackgroundServer(
        store, timeout=timeout, max_concurrent=2, max_waiting=0, max_result_bytes=max_result_bytes
    ) as server:
        yield server


def running_queries(server: BackgroundServer) -> int:
    return int(httpx.get(server.url + "/health").json()["queries_running"])


class Served:
    """A real ``rdfmem serve`` process on a free loopback port; its stderr kept in a file."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.proc = proc
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.sparql_url = self.url + "/sparql"
        self.log = log

    def children(self) -> list[int]:
        """The server's child processes still alive (query evaluations)."""
        found: list[int] = []
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            with contextlib.suppress(OSError):
                found += [int(p) for p in (task / "children").read_text().split()]
        return found

    def cpu_seconds(self) -> float:
        """CPU time used by the server and its children so far."""
        total = 0
        for pid in [self.proc.pid, *self.children()]:
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")


@contextmanager
def serve_process(store: str, *options: str, tmp_path: Path) -> Iterator[Served]:
    """``python -m rdfmem serve STORE --port P OPTIONS…``, ready to answer; stopped after."""
    port = free_port()
    log = tmp_path / f"serve-{port}.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rdfmem", "serve", store, "--port", str(port), *options],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    served = Served(proc, port, log)
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(served.url + "/health", timeout=1).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"rdfmem serve did not start: {log.read_text()}")
            time.sleep(0.05)
        yield served
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def disk_store(path: Path, triples: int) -> str:
    """An on-disk store of ``triples`` triples ``<urn:ex:sI> <urn:ex:p> I``, closed again."""
    store = RdfStore.open(path)
    store.backend.store.bulk_extend(  # type: ignore[attr-defined]
        ox.Quad(ox.NamedNode(f"urn:ex:s{i}"), ox.NamedNode("urn:ex:p"), ox.Literal(i))
        for i in range(triples)
    )
    store.close()
    return str(path)


def _query_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("rdfmem-query-")]


def test_stopped_servers_leave_no_query_worker_threads() -> None:
    # Five start/stop cycles, each answering queries, used to leave five worker threads
    # (and more with concurrent queries) behind (issue 22, item 9).
    before = set(_query_threads())
    store = RdfStore()
    store.assert_("urn:a", "urn:p", "v")
    for _ in range(5):
        with BackgroundServer(store) as server:
            answer = httpx.get(
                server.sparql_url,
                params={"query": "SELECT ?o WHERE { ?s ?p ?o }"},
                headers={"Accept": "text/csv"},
            )
            assert answer.status_code == 200 and "v" in answer.text
    deadline = time.monotonic() + 10
    while set(_query_threads()) - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert set(_query_threads()) - before == set()
    store.close()


def test_a_closed_app_takes_no_new_query() -> None:
    from starlette.testclient import TestClient

    from rdfmem.server import create_app

    app = create_app(RdfStore())
    with TestClient(app, base_url="http://localhost") as client:
        assert client.get("/sparql", params={"query": "ASK {}"}).status_code == 200
        app.close()
        app.close()  # idempotent
        refused = client.get("/sparql", params={"query": "SELECT * { ?s ?p ?o }"})
        assert refused.status_code == 503


def filled_store(subjects: int) -> RdfStore:
    """An in-memory store of ``subjects`` subjects, each with a value and a link to the
    next: the data point and join queries are served from."""
    store = RdfStore()
    store.assert_many(
        triple
        for i in range(subjects)
        for triple in (
            (ox.NamedNode(f"urn:ex:s{i}"), ox.NamedNode("urn:ex:p"), f"value {i}"),
            (
                ox.NamedNode(f"urn:ex:s{i}"),
                ox.NamedNode("urn:ex:next"),
                ox.NamedNode(f"urn:ex:s{i + 1}"),
            ),
        )
    )
    return store
