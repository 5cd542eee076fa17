"""Memory search on a shared server keeps the vectors in the client and follows the change
log: another process's save is found by the next search, and only what changed is fetched."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from servers import Server

from rdfmem import DecisionGraph, Edge, Memories, Memory, Node, RdfStore
from rdfmem.embeddings import EMBEDDING

WRITER = """
import sys
from rdfmem import DecisionGraph, Edge, Memories, Memory, Node, RdfStore
store = RdfStore.connect(sys.argv[1], sys.argv[2], change_log=True)
memories = Memories(store, project="shared", ranking="vector")
for line in sys.stdin:
    verb, rest = line.rstrip("\\n").split(" ", 1)
    title, _, content = rest.partition("|")
    if verb == "save":
        memories.save(Memory("project", title, content))
    else:
        memories.forget("project", title)
    print("done", flush=True)   # the write has returned
store.close()
"""


class Writer:
    """Another process, writing memories through rdfmem with the change log."""

    def __init__(self, server: Server) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, server.query_url, server.update_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "done"

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=60)
        self.proc.stdout.close()
        assert code == 0


@pytest.fixture
def writer(server: Server) -> Iterator[Writer]:
    w = Writer(server)
    yield w
    w.close()


def titles(memories: Memories, query: str) -> list[str]:
    return [m.title for m, _ in memories.search(query, limit=3)]


def tea_found(server: Server) -> tuple[RdfStore, Memories]:
    """A client keeping the change log that saved one memory and found it by search."""
    store = server.connect(change_log=True)
    memories = Memories(store, project="shared", ranking="vector")
    memories.save(Memory("project", "Tea", "Eli drinks green tea every morning."))
    assert titles(memories, "green tea") == ["Tea"]
    return store, memories


def test_another_process_save_and_forget_are_seen_by_the_next_search(
    server: Server, writer: Writer
) -> None:
    store, memories = tea_found(server)
    writer.send("save Deploy|Deploy with make release on Fridays.")
    assert titles(memories, "how do we deploy a release")[0] == "Deploy"
    writer.send("save Deploy|Deploy with the pipeline, never by hand.")
    best, _ = memories.search("deploy pipeline by hand", limit=1)[0]
    assert best.content == "Deploy with the pipeline, never by hand."
    writer.send("forget Deploy|")
    assert "Deploy" not in titles(memories, "how do we deploy a release")
    store.close()


REMOVE_EVERY_VECTOR = f"DELETE WHERE {{ GRAPH ?g {{ ?s <{EMBEDDING.value}> ?v }} }}"


def every_vector_removed_by_another_client(server: Server) -> None:
    """Every stored vector deleted by a client without the change log (raw SPARQL)."""
    other = RdfStore.connect(server.query_url, server.update_url)
    other.sparql_update(REMOVE_EVERY_VECTOR)
    other.close()


def thirty_notes_followed(store: RdfStore) -> tuple[Memories, list[int], int]:
    """Thirty memories saved and searched once (every vector read), the sizes of the answers
    the store receives from now on, and the bytes of a search when nothing changed."""
    memories = Memories(store, project="shared", ranking="vector")
    for i in range(30):
        memories.save(Memory("project", f"Note {i}", f"ordinary note number {i}"))
    memories.search("note", limit=1)
    sent: list[int] = []
    client: httpx.Client = store.backend.client  # type: ignore[attr-defined]
    client.event_hooks["response"] = [lambda r: sent.append(len(r.read()))]
    memories.search("note", limit=1)
    quiet = sum(sent)
    return memories, sent, quiet


def test_only_the_changed_subjects_are_fetched_again(server: Server, writer: Writer) -> None:
    store = server.connect(change_log=True)
    memories, sent, quiet = thirty_notes_followed(store)
    sent.clear()
    writer.send("save Cat|The cat is called Miso.")
    assert titles(memories, "what is the cat called")[0] == "Cat"
    after_one_save = sum(sent)
    sent.clear()
    store.refresh()
    memories.search("note", limit=1)
    whole = sum(sent)
    # One memory's vector (about 2.8 KB of base64) and the log, not thirty vectors.
    assert after_one_save < quiet + 6_000 < whole
    store.close()


def test_raw_writes_of_other_clients_are_seen_after_refresh(server: Server) -> None:
    store, memories = tea_found(server)
    every_vector_removed_by_another_client(server)  # behind the log's back
    assert titles(memories, "green tea") == ["Tea"]  # the rule: not seen yet
    store.refresh()
    assert titles(memories, "green tea") == []
    store.close()


def test_a_raw_update_through_rdfmem_reads_everything_again(server: Server) -> None:
    store, memories = tea_found(server)
    store.sparql_update(REMOVE_EVERY_VECTOR)
    assert titles(memories, "green tea") == []
    store.close()


def test_without_the_change_log_every_search_reads_the_server(server: Server) -> None:
    store = server.connect()
    assert store.follower(EMBEDDING) is None
    memories = Memories(store, project="shared", ranking="vector")
    memories.save(Memory("project", "Tea", "Eli drinks green tea every morning."))
    every_vector_removed_by_another_client(server)
    assert titles(memories, "green tea") == []
    store.close()


def test_raw_writes_of_other_clients_are_seen_once_the_vectors_are_old(server: Server) -> None:
    store, memories = tea_found(server)
    kept = store.follower(EMBEDDING)
    assert kept is not None
    kept.max_age_s = 0.0  # every graph read whole at each search
    every_vector_removed_by_another_client(server)
    assert titles(memories, "green tea") == []
    store.close()


def test_decision_and_key_value_writes_leave_the_kept_vectors_alone(server: Server) -> None:
    store = server.connect(change_log=True)
    memories, sent, quiet = thirty_notes_followed(store)
    decisions = DecisionGraph(store)
    goal = decisions.add_node(Node(type="goal", label="Ship it"))
    step = decisions.add_node(Node(type="action", label="Tag the release"))
    decisions.add_edge(Edge(from_id=goal.id, to_id=step.id, type="leads_to"))
    store.update("turns", lambda n: (n or 0) + 1)
    sent.clear()
    memories.search("note", limit=1)
    assert sum(sent) < quiet + 6_000  # the log's records, not thirty vectors again
    store.close()


# -- the change log is input from other tenants (issue 22, item 6) --------------------------

_LOG = "https://w3id.org/rdfmem#"
_CHANGES = "urn:rdfmem:graph:changes"
_GRAPH = "urn:rdfmem:memories:project:shared"

POISON = {
    "a horizon that is not a date": (
        f'INSERT DATA {{ GRAPH <{_CHANGES}> {{ <urn:rdfmem:changes> <{_LOG}prunedBefore> "soon" }} }}'
    ),
    "a date that is not a date": (
        f"INSERT DATA {{ GRAPH <{_CHANGES}> {{ <urn:rdfmem:change:bad> <{_LOG}changedAt> "
        f'"tomorrow"^^<http://www.w3.org/2001/XMLSchema#dateTime> ; <{_LOG}changedGraph> <{_GRAPH}> }} }}'
    ),
    "an IRI for a date": (
        f"INSERT DATA {{ GRAPH <{_CHANGES}> {{ <urn:rdfmem:change:iri> <{_LOG}changedAt> <urn:x> }} }}"
    ),
    "a record from the future, 9 KiB of graphs and subjects": (
        f"INSERT DATA {{ GRAPH <{_CHANGES}> {{ <urn:rdfmem:change:future> <{_LOG}changedAt> "
        '"2999-01-01T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> ; '
        + " ; ".join(f"<{_LOG}changedGraph> <urn:g{i}>" for i in range(60))
        + " ; "
        + " ; ".join(f"<{_LOG}changedSubject> <urn:s{i}>" for i in range(60))
        + " } }"
    ),
}


def _poisoned(server: Server, record: str) -> None:
    other = httpx.post(server.update_url, data={"update": record}, timeout=30)
    assert other.status_code < 300, other.text


def _log_rows(server: Server) -> int:
    answer = httpx.post(
        server.query_url,
        data={"query": f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{_CHANGES}> {{ ?s ?p ?o }} }}"},
        headers={"Accept": "application/sparql-results+json"},
        timeout=30,
    )
    return int(answer.json()["results"]["bindings"][0]["n"]["value"])


@pytest.mark.parametrize("poison", sorted(POISON))
def test_a_poisoned_change_log_never_breaks_a_follower(
    server: Server, writer: Writer, poison: str
) -> None:
    store, memories = tea_found(server)
    _poisoned(server, POISON[poison])
    # before: every search raised (a bad date), or read graphs x subjects rows for good
    assert titles(memories, "green tea") == ["Tea"]
    writer.send("save Deploy|Deploy with make release on Fridays.")
    assert titles(memories, "how do we deploy a release")[0] == "Deploy"
    newcomer = server.connect(change_log=True)  # a new client reads the log from scratch
    assert titles(Memories(newcomer, project="shared", ranking="vector"), "green tea")[0] == "Tea"
    newcomer.close()
    rows = _log_rows(server)
    assert rows < 60  # the poison was pruned: the log holds only rdfmem's small records
    store.close()


def test_a_look_at_the_change_log_reads_a_bounded_number_of_rows() -> None:
    from pyoxigraph import Literal, NamedNode

    from rdfmem.backends.sparql.logread import read_look
    from rdfmem.backends.sparql.text import CHANGED_AT, MAX_CHANGE_ROWS

    now = Literal(
        "2026-01-01T00:00:00Z", datatype=NamedNode("http://www.w3.org/2001/XMLSchema#dateTime")
    )
    at = NamedNode(CHANGED_AT[1:-1])
    rows = [
        {"c": NamedNode(f"urn:rdfmem:change:{i}"), "p": at, "o": now}
        for i in range(MAX_CHANGE_ROWS + 1)
    ] + [{"now": now}]
    look = read_look(rows, (0.0, frozenset()), 60.0, False)
    assert look.changes.everything and look.changes.suspect  # cut at the cap: read all again
