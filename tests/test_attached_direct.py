"""An attached process sends its queries and updates as the SPARQL protocol's direct POST
bodies (no form to encode and decode), its other parameters in the query string; the
owner answers them as before, refuses to take an update from a query's query string, and
a write whose parameters are too long for a query string goes as a form. Real owner on its
real socket, real attached processes."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import httpx
import pytest
from pyoxigraph import Literal, NamedNode, Quad

from rdfmem import DecisionGraph, Memories, Memory, Node, RdfStore
from rdfmem.backends.attached import AttachedBackend, is_update
from rdfmem.backends.owner import OWN_VALUE_QUADS, SCOPE_PARAM, SINCE_PARAM, socket_path, values_of
from rdfmem.backends.oxigraph import OxigraphBackend
from rdfmem.core.results import SelectResult

Seen = list[tuple[str, str, bytes]]  # (content type, target, body)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[RdfStore, RdfStore, Seen]]:
    """The owner, an attached store, and the requests the attached store sends."""
    owner = RdfStore.open(tmp_path / "store")
    attached = RdfStore.open(tmp_path / "store")
    assert isinstance(attached.backend, AttachedBackend)
    seen: Seen = []

    def note(request: httpx.Request) -> None:
        media = request.headers.get("content-type", "")
        seen.append((media, request.url.raw_path.decode(), bytes(request.content)))

    attached.backend.client.event_hooks["request"].append(note)
    try:
        yield owner, attached, seen
    finally:
        attached.close()
        owner.close()


def test_a_turn_sends_its_texts_as_bodies_and_the_owner_applies_them(
    pair: tuple[RdfStore, RdfStore, Seen],
) -> None:
    owner, attached, seen = pair
    memories = Memories(attached, project="p")
    memories.save(Memory("project", "Zebra note", "a zebra crossing"))
    hits = memories.search("zebra", limit=3)
    graph = DecisionGraph(attached)
    graph.add_node(Node(id="a", type="goal", label="first"))
    attached.update("counter", lambda c: (c or 0) + 1)

    # GETs (the journal, a graph's subjects) have no body; the one probe of who the
    # server is goes through httpx's own client, as a form.
    posts = [s for s in seen if s[0] and s[2] != b"query=ASK+%7B%7D"]
    assert posts, "no POST was seen"
    kinds = {media for media, _, _ in posts}
    assert kinds <= {"application/sparql-update", "application/sparql-query"}, kinds
    updates = [s for s in posts if s[0] == "application/sparql-update"]
    for _, target, body in updates:
        assert body.decode("utf-8").lstrip().upper().startswith(("INSERT", "DELETE", "PREFIX"))
        params = parse_qs(urlsplit(target).query, keep_blank_values=True)
        assert SINCE_PARAM in params  # the journal's notes come back with the answer
    assert any(SCOPE_PARAM in parse_qs(urlsplit(t).query) for _, t, _ in updates)
    # What was written is there, for the owner and for the writer.
    assert [m.title for m, _ in hits] == ["Zebra note"]
    assert owner.get("counter") == 1 == attached.get("counter")
    assert DecisionGraph(owner).get_node("a").label == "first"
    assert [m.title for m, _ in Memories(owner, project="p").search("zebra")] == ["Zebra note"]


def test_an_update_is_still_told_apart_by_a_watcher(
    pair: tuple[RdfStore, RdfStore, Seen],
) -> None:
    _, attached, _ = pair
    assert isinstance(attached.backend, AttachedBackend)
    kinds: list[bool] = []
    attached.backend.client.event_hooks["request"].append(lambda r: kinds.append(is_update(r)))
    attached.set("k", "v")
    attached.query("ASK { ?s ?p ?o }")
    assert kinds.count(True) == 1 and kinds[-2:] == [True, False]


def test_a_scope_too_long_for_a_query_string_goes_as_a_form(
    pair: tuple[RdfStore, RdfStore, Seen],
) -> None:
    owner, attached, seen = pair
    graph = NamedNode("urn:rdfmem:graph:many")
    subjects = [NamedNode(f"urn:rdfmem:a-rather-long-subject-name:{i:04d}") for i in range(300)]
    data = " ".join(f"<{s.value}> <urn:p> {i} ." for i, s in enumerate(subjects))
    backend = attached.backend
    assert isinstance(backend, AttachedBackend)
    before = backend.changes_since().cursor
    seen.clear()
    with backend.scope(graph, subjects):
        backend.update(f"INSERT DATA {{ GRAPH <{graph.value}> {{ {data} }} }}")
    assert [s[0] for s in seen] == ["application/x-www-form-urlencoded"]
    assert seen[0][2].startswith(b"update=") and len(seen[0][1]) < 100
    assert len(list(owner.backend.match(None, None, None, graph))) == 300
    # The scope reached the owner's journal: a reader fetches those subjects, not all.
    changed = backend.changes_since(before)
    assert not changed.everything and not changed.whole
    assert {s for _, s in changed.subjects} == set(subjects)


def _post(path: Path, target: str, media: str, body: bytes) -> tuple[int, bytes]:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(10)
    conn.connect(str(path))
    try:
        head = (
            f"POST {target} HTTP/1.1\r\nHost: x\r\nContent-Type: {media}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        conn.sendall(head.encode() + body)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    finally:
        conn.close()
    head_bytes, _, answer = data.partition(b"\r\n\r\n")
    return int(head_bytes.split(b" ")[1]), answer


def test_a_query_body_never_runs_an_update_from_its_query_string(tmp_path: Path) -> None:
    store = RdfStore.open(tmp_path / "store")
    try:
        insert = quote("INSERT DATA { GRAPH <urn:g> { <urn:a> <urn:b> <urn:c> } }")
        status, answer = _post(
            socket_path(tmp_path / "store"),
            f"/sparql?update={insert}",
            "application/sparql-query",
            b"ASK { GRAPH <urn:g> { ?s ?p ?o } }",
        )
        assert status == 200
        assert json.loads(answer) == {"head": {}, "boolean": False}
        assert not list(store.backend.match(None, None, None, NamedNode("urn:g")))
    finally:
        store.close()


def test_a_hub_is_carried_to_readers_but_not_back_to_its_own_writer(tmp_path: Path) -> None:
    backend = OxigraphBackend(tmp_path / "plain")
    try:
        graph, hub, small = NamedNode("urn:g"), NamedNode("urn:hub"), NamedNode("urn:small")
        links = [Quad(hub, NamedNode("urn:to"), NamedNode(f"urn:t{i}"), graph) for i in range(100)]
        backend.apply([], [*links, Quad(small, NamedNode("urn:p"), NamedNode("urn:o"), graph)])
        assert len(links) > OWN_VALUE_QUADS
        found = {"everything": False, "subjects": [["urn:g", "urn:hub"], ["urn:g", "urn:small"]]}
        to_reader = values_of(backend, found)
        to_writer = values_of(backend, found, {("urn:g", "urn:hub"), ("urn:g", "urn:small")})
        assert set(to_reader["urn:g"]) == {"urn:hub", "urn:small"}
        assert set(to_writer["urn:g"]) == {"urn:small"}
    finally:
        backend.close()


def test_solutions_come_back_term_for_term(pair: tuple[RdfStore, RdfStore, Seen]) -> None:
    # The owner answers an attached process's SELECT in TSV: every kind of term survives.
    owner, attached, seen = pair
    xsd = "http://www.w3.org/2001/XMLSchema#"
    objects: list[NamedNode | Literal] = [
        Literal('tab\there, line\nthere, "quoted" \\ back'),
        Literal("chat", language="fr"),
        Literal("42", datatype=NamedNode(xsd + "integer")),
        Literal("1.5e3", datatype=NamedNode(xsd + "double")),
        Literal("true", datatype=NamedNode(xsd + "boolean")),
        Literal("ünïcödé ✓ 𝄞"),
        Literal("x", datatype=NamedNode("urn:my-type")),
        Literal(""),
        NamedNode("urn:ü/ñ"),
    ]
    graph, subject = NamedNode("urn:g"), NamedNode("urn:s")
    owner.backend.apply(
        [], [Quad(subject, NamedNode(f"urn:p{i}"), o, graph) for i, o in enumerate(objects)]
    )
    sparql = (
        "SELECT ?p ?o ?none WHERE { GRAPH <urn:g> { ?s ?p ?o "
        "OPTIONAL { ?s <urn:nothing> ?none } } } ORDER BY ?p"
    )
    seen.clear()
    mine, theirs = attached.query(sparql), owner.query(sparql)
    assert isinstance(mine, SelectResult) and isinstance(theirs, SelectResult)
    rows = [dict(r) for r in mine]
    assert rows == [dict(r) for r in theirs]
    assert len(rows) == len(objects) and str(rows[0]["o"]) == str(objects[0])
    assert all("none" not in r for r in rows)
    assert attached.query("ASK { GRAPH <urn:g> { ?s ?p ?o } }") is True


def test_a_chosen_dataset_travels_in_the_query_string(
    pair: tuple[RdfStore, RdfStore, Seen],
) -> None:
    owner, attached, seen = pair
    for name in ("urn:g1", "urn:g2"):
        owner.backend.apply(
            [], [Quad(NamedNode("urn:s"), NamedNode("urn:p"), Literal(name), NamedNode(name))]
        )
    sparql = "SELECT ?o WHERE { ?s ?p ?o }"
    seen.clear()
    rows = attached.query(sparql, default_graph=NamedNode("urn:g2"))
    assert isinstance(rows, SelectResult)
    assert [str(r["o"].value) for r in rows] == ["urn:g2"]
    assert "default-graph-uri=urn%3Ag2" in seen[-1][1] and seen[-1][2] == sparql.encode()
