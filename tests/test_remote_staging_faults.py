"""A staged remote write lands whole or not at all, and what a dead client staged is
cleared promptly by the next client that stages (issue 22, left from last time).

Virtuoso keeps the operations of a request that came before one that failed, so a write
spread over several operations could end half applied; a client killed while staging
leaves scratch graphs. Real servers and real processes: the only thing the tests control is
what happens on the way (an httpx event hook, a transport that stops a child process).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pyoxigraph import Literal, NamedNode, Quad
from servers import Server

from rdfmem import BackingError, RemoteStore
from rdfmem.backends.sparql.client import SparqlBackend

EX = "http://example.org/"
GRAPH = NamedNode(EX + "g")
STAGING = "urn:rdfmem:graph:staging:"
ROOT = Path(__file__).resolve().parents[1]


def _quads(n: int, value: str) -> list[Quad]:
    return [
        Quad(NamedNode(f"{EX}s{i}"), NamedNode(EX + "p"), Literal(value), GRAPH) for i in range(n)
    ]


def _connect(server: Server, **options: object) -> RemoteStore:
    # Staging from 50 quads on, on both servers (Virtuoso needs it past 500).
    return server.connect(max_quads_per_request=50, **options)


def _values(store: RemoteStore) -> dict[str, int]:
    found: dict[str, int] = {}
    for quad in store.triples(graph=GRAPH):
        found[str(quad.object.value)] = found.get(str(quad.object.value), 0) + 1
    return found


@pytest.fixture
def store(server: Server) -> Iterator[RemoteStore]:
    remote = _connect(server)
    yield remote
    remote.close()


def test_a_staged_write_whose_apply_fails_later_leaves_the_data_as_it_was(
    server: Server, store: RemoteStore
) -> None:
    """The applying request finds a scratch graph gone (another client took the writer for
    dead and cleared it): before, its first operations applied what was left (the new
    values beside the old ones) and it reported success."""
    old, new = _quads(120, "old"), _quads(120, "new")
    store.backend.apply([], old)
    cleared: list[str] = []

    def clear_a_part(request: httpx.Request) -> None:
        body = urllib.parse.unquote_plus(request.read().decode())
        applying = f"GRAPH <{STAGING}" in body and "DROP SILENT GRAPH" in body
        if applying and "-fence-" not in body and not cleared:
            # Another client drops the scratch graph of the removals just before the apply.
            graphs = [g for g in server.scratch_graphs() if not g.endswith(":live")]
            victim = graphs[-1]
            httpx.post(
                server.update_url, data={"update": f"DROP SILENT GRAPH <{victim}>"}
            ).raise_for_status()
            cleared.append(victim)

    store.backend.client.event_hooks["request"].append(clear_a_part)
    with pytest.raises(BackingError, match="nothing was written"):
        store.backend.apply(old, new)  # every rdfmem write goes through the backend's apply
    assert cleared
    assert _values(store) == {"old": 120}  # as it was: not half old, half new
    assert server.scratch_graphs() == []  # and no scratch graph is left behind
    store.backend.client.event_hooks["request"].remove(clear_a_part)
    store.backend.apply(old, new)  # written again, it lands whole
    assert _values(store) == {"new": 120}


_CHILD = textwrap.dedent(
    """
    import sys, time, urllib.parse
    import httpx
    from pyoxigraph import Literal, NamedNode, Quad
    from rdfmem import RemoteStore

    query_url, update_url = sys.argv[1], sys.argv[2]
    parts = 0

    class Stalling(httpx.HTTPTransport):
        def handle_request(self, request):
            global parts
            body = urllib.parse.unquote_plus(request.read().decode())
            if body.startswith("update=") and "GRAPH <urn:rdfmem:graph:staging:" in body:
                parts += 1
                if parts == 4:  # three parts are on the server: stop here, to be killed
                    print("STAGED", flush=True)
                    time.sleep(3600)
            return super().handle_request(request)

    store = RemoteStore.connect(
        query_url, update_url, max_quads_per_request=50, transport=Stalling()
    )
    g, p = NamedNode("http://example.org/g"), NamedNode("http://example.org/p")
    add = [Quad(NamedNode(f"http://example.org/dead{i}"), p, Literal("dead"), g)
           for i in range(400)]
    store.backend.apply([], add)
    print("APPLIED", flush=True)
    """
)


def test_a_client_killed_mid_staging_leaves_nothing_and_the_next_one_clears_it(
    server: Server, store: RemoteStore
) -> None:
    store.backend.apply([], _quads(5, "kept"))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, server.query_url, server.update_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline().decode().strip()
        assert line == "STAGED", child.stderr.read().decode() if child.stderr else line
        child.send_signal(signal.SIGKILL)  # killed between staging and applying
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()  # waits, and closes its pipes
    left = server.scratch_graphs()
    assert left, "the dead client's scratch graphs are on the server"
    assert _values(store) == {"kept": 5}  # nothing of the dead write is visible
    # The next client that stages, once no part arrived for its idle time (by the
    # server's clock), drops them, long before the hour the token alone would wait.
    # (``RemoteStore.connect`` does not pass ``staging_idle_ms`` on: the backend itself.)
    nxt = RemoteStore(
        SparqlBackend(
            server.query_url, server.update_url, max_quads_per_request=50, staging_idle_ms=1_000
        )
    )
    try:
        time.sleep(1.5)
        started = time.monotonic()
        nxt.backend.apply([], _quads(100, "next"))
        assert time.monotonic() - started < 30
        assert server.scratch_graphs() == []
        assert _values(nxt) == {"kept": 5, "next": 100}
    finally:
        nxt.close()


def test_a_live_stager_is_not_taken_for_dead(server: Server, store: RemoteStore) -> None:
    """Another client that stages meanwhile (and so clears abandoned staging) keeps the
    scratch graphs whose parts are still arriving: both writes land whole."""
    staged: list[str] = []

    def other_client_stages(request: httpx.Request) -> None:
        body = urllib.parse.unquote_plus(request.read().decode())
        if "DROP SILENT GRAPH" in body and f"GRAPH <{STAGING}" in body and not staged:
            staged.append("between staging and applying")
            other = _connect(server)
            try:
                other.backend.apply([], _quads(60, "other"))
            finally:
                other.close()

    store.backend.client.event_hooks["request"].append(other_client_stages)
    store.backend.apply([], _quads(200, "mine"))
    assert staged
    assert _values(store) == {"mine": 200, "other": 60}
    assert server.scratch_graphs() == []
