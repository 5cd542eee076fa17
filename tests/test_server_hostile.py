"""``rdfmem serve`` against hostile requests: SERVICE in every spelling, FROM, oversized bodies,
runaway queries, huge results."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from test_server_support import (
    Listener,
    limited,
    running_queries,
    spellings,
)

pytest_plugins = ["test_server_support"]


@pytest.mark.parametrize("index", range(17))
def test_service_is_refused_however_written(
    client: httpx.Client, listener: Listener, index: int
) -> None:
    query = spellings(listener.url)[index]
    hits = listener.hits
    for response in (
        client.get("/sparql", params={"query": query}),
        client.post("/sparql", data={"query": query}),
    ):
        assert response.status_code == 403, query
        assert "SERVICE" in response.text
    assert listener.hits == hits


def test_from_does_not_fetch(client: httpx.Client, listener: Listener) -> None:
    hits = listener.hits
    query = f"SELECT * FROM <{listener.url}> FROM NAMED <{listener.url}> WHERE {{ ?s ?p ?o }}"
    assert client.get("/sparql", params={"query": query}).status_code == 200
    assert listener.hits == hits


def test_oversized_body_is_413(client: httpx.Client) -> None:
    big = b"ASK {} #" + b"x" * (2 << 20)
    declared = client.post(
        "/sparql", content=big, headers={"Content-Type": "application/sparql-query"}
    )
    assert declared.status_code == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: the server counts as it reads
        yield b"ASK {} #"
        for _ in range(40):
            yield b"y" * 65536

    streamed = client.post(
        "/sparql", content=chunks(), headers={"Content-Type": "application/sparql-query"}
    )
    assert streamed.status_code == 413
    assert client.get("/health").status_code == 200


def test_runaway_query_times_out_while_others_answer() -> None:
    # 200^4 = 1.6e9 rows, minutes of work: answered with a timeout, stopped at its next write.
    runaway = "SELECT ?a WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l }"
    outcome: dict[str, httpx.Response] = {}

    def run(url: str) -> None:
        outcome["r"] = httpx.get(url, params={"query": runaway, "format": "tsv"}, timeout=30)

    # No size cap to speak of: the runaway is stopped by its time limit.
    with limited(max_result_bytes=1 << 40) as server, httpx.Client(timeout=30) as other:
        thread = threading.Thread(target=run, args=(server.sparql_url,))
        thread.start()
        time.sleep(0.1)
        answered = other.get(server.sparql_url, params={"query": "ASK { ?s ?p 7 }"})
        health = other.get(server.url + "/health")
        thread.join(30)
        response = outcome["r"]
        deadline = time.monotonic() + 10
        while running_queries(server) and time.monotonic() < deadline:
            time.sleep(0.05)
        still_running = running_queries(server)
    assert answered.status_code == 200 and answered.json()["boolean"] is True
    assert health.status_code == 200
    assert response.status_code == 503
    assert "time limit" in response.text and response.headers["retry-after"]
    assert still_running == 0  # the runaway stopped rather than running on for minutes


def test_concurrency_cap_turns_extra_queries_away() -> None:
    # Each COUNT holds a worker (its child process) until its time limit kills it: 200^4 rows
    # take minutes (200^3 finished inside the 2 s limit on a fast machine).
    blocking = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l }"
    results: list[httpx.Response] = []

    def ask(url: str) -> None:
        results.append(httpx.get(url, params={"query": blocking}, timeout=30))

    with limited(timeout=2) as server:
        threads = [threading.Thread(target=ask, args=(server.sparql_url,)) for _ in range(2)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 1.5
        while running_queries(server) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        # Two reads arriving together may share one child, the second queued behind the
        # first until it is re-sent to a child of its own after 50 ms (rdfmem.store.batches):
        # only then do both hold a child, and the cap of 2 is reached.
        time.sleep(0.5)
        extra = httpx.get(server.sparql_url, params={"query": "ASK {}"})
        for t in threads:
            t.join(30)
        deadline = time.monotonic() + 30
        while running_queries(server) and time.monotonic() < deadline:
            time.sleep(0.1)
        after = httpx.get(server.sparql_url, params={"query": "ASK {}"})
    assert extra.status_code == 503 and extra.headers["retry-after"] == "1"
    assert "busy" in extra.text
    assert [r.status_code for r in results] == [503, 503]  # both over the 2 s limit
    assert after.status_code == 200


def test_result_size_cap_is_422() -> None:
    with limited(timeout=30) as server:
        response = httpx.get(
            server.sparql_url, params={"query": "SELECT * WHERE { ?a ?b ?c . ?d ?e ?f }"}
        )
        graph = httpx.get(
            server.sparql_url,
            params={"query": "CONSTRUCT { ?a ?b ?f } WHERE { ?a ?b ?c . ?d ?e ?f }"},
        )
        small = httpx.get(server.sparql_url, params={"query": "SELECT * { ?a ?b ?c } LIMIT 5"})
    assert response.status_code == 422
    assert "--max-result-bytes" in response.text
    assert graph.status_code == 422
    assert small.status_code == 200
