"""``serve(store, workers=N)`` (issue 23, item 1's HTTP half): N reader processes answer on
the one listening socket from read-only opens of the on-disk store; the owner process keeps
the writes. A read sent after an update was acknowledged sees it, whichever reader answers.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from servers import free_port
from test_server_support import Served, disk_store

from rdfmem import RdfStore
from rdfmem.core.errors import ServerConfigError
from rdfmem.server import serve

TOKEN = "workers-token"
_SERVE = (
    "import sys; from rdfmem import RdfStore; from rdfmem.server import serve; "
    "store = RdfStore.open(sys.argv[1]); "
    "serve(store, port=int(sys.argv[2]), workers=int(sys.argv[3]), access_log=False, "
    "allow_update=True, token=sys.argv[4], timeout=3)"
)


@contextmanager
def served_with_readers(store: str, workers: int, tmp_path: Path) -> Iterator[Served]:
    port = free_port()
    log = tmp_path / f"serve-{port}.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", _SERVE, store, str(port), str(workers), TOKEN],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    served = Served(proc, port, log)
    try:
        deadline = time.monotonic() + 30
        while len(served.children()) < workers or not _answers(served.url):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start: {log.read_text()}")
            time.sleep(0.05)
        yield served
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _answers(url: str) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(url + "/health", timeout=1).status_code == 200
    return False


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return disk_store(tmp_path_factory.mktemp("workers") / "store", 200)


def test_reads_after_an_acknowledged_update_see_it_on_every_reader(
    store_path: str, tmp_path: Path
) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    stale = []
    with served_with_readers(store_path, 2, tmp_path) as server:
        readers = server.children()
        before = [server_cpu(pid) for pid in readers]
        for i in range(40):
            update = f"INSERT DATA {{ <urn:ex:written> <urn:ex:n> {i} }}"
            if i % 2:  # a form body and a direct body: both are updates sent to the owner
                done = httpx.post(server.sparql_url, data={"update": update}, headers=auth)
            else:
                done = httpx.post(
                    server.sparql_url,
                    content=update,
                    headers={**auth, "Content-Type": "application/sparql-update"},
                )
            assert done.status_code in (200, 204), done.text
            for _ in range(3):  # new connections: any reader may take them
                ask = httpx.get(
                    server.sparql_url,
                    params={"query": f"ASK {{ <urn:ex:written> <urn:ex:n> {i} }}"},
                )
                if ask.json()["boolean"] is not True:
                    stale.append(i)
        count = httpx.post(
            server.sparql_url,
            data={"query": "SELECT (COUNT(*) AS ?n) { <urn:ex:written> <urn:ex:n> ?v }"},
        )
        refused = httpx.post(
            server.sparql_url, data={"update": "CLEAR ALL"}, headers={"Authorization": "Bearer x"}
        )
        busy = [server_cpu(pid) - used for pid, used in zip(readers, before, strict=True)]
    assert stale == []
    assert count.json()["results"]["bindings"][0]["n"]["value"] == "40"  # a form query
    assert refused.status_code == 403  # the owner checked the token
    assert all(cpu > 0 for cpu in busy), busy  # both readers answered


def server_cpu(pid: int) -> float:
    with contextlib.suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return float(int(fields[11]) + int(fields[12]))
    return 0.0


def test_workers_need_an_on_disk_store() -> None:
    with pytest.raises(ServerConfigError, match="on-disk"):
        serve(RdfStore(), port=0, workers=2)
