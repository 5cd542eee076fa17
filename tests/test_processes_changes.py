"""What an attached process pays to learn what changed: nothing when it works alone (its
writes' answers bring the owner's journal notes, and the owner's published mark says
nobody else wrote), one request when another process wrote. The answers stay right: a
write by the owner is seen at once, a new owner makes readers read everything again, and a
mark that cannot be trusted is never read as current. Real owner and attached backends
(the owner's socket, in this process: it attaches as a second process does)."""

from __future__ import annotations

import mmap
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rdfmem import DecisionGraph, Memories, Memory, Node, RdfStore
from rdfmem.backends.attached import AttachedBackend, is_update
from rdfmem.backends.journal_mark import MARK_NAME, MarkReader, MarkWriter
from rdfmem.backends.unixhttp import UnixHTTPTransport
from rdfmem.core.errors import DecisionGraphError


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[RdfStore, RdfStore, list[str]]]:
    """The owner, an attached store, and the requests the attached store sends."""
    owner = RdfStore.open(tmp_path / "store")
    attached = RdfStore.open(tmp_path / "store")
    assert isinstance(attached.backend, AttachedBackend)
    sent: list[str] = []

    def note(request: httpx.Request) -> None:
        kind = "update" if is_update(request) else "query"
        sent.append("changes" if request.url.path == "/changes" else kind)

    attached.backend.client.event_hooks["request"].append(note)
    try:
        yield owner, attached, sent
    finally:
        attached.close()
        owner.close()


def _turn(store: RdfStore, i: int) -> tuple[list[str], list[str]]:
    memories, graph = Memories(store, project="p"), DecisionGraph(store)
    memories.save(Memory("project", f"Zebra note {i}", f"zebra crossing {i}"))
    found = [m.title for m, _ in memories.search("zebra crossing", limit=50)]
    graph.add_node(Node(id=f"goal{i}", type="goal", label=f"goal {i}"))
    goals = [n.label for n in graph.query("active_goals")]
    return found, goals


def test_an_attached_process_working_alone_asks_nothing_to_learn_what_changed(
    pair: tuple[RdfStore, RdfStore, list[str]],
) -> None:
    _, attached, sent = pair
    _turn(attached, 0)  # the first look reads everything
    sent.clear()
    found, goals = _turn(attached, 1)
    assert "Zebra note 1" in found and "goal 1" in goals  # its own writes, seen
    assert "changes" not in sent, sent


def test_a_write_by_another_process_is_seen_at_once_for_one_request(
    pair: tuple[RdfStore, RdfStore, list[str]],
) -> None:
    owner, attached, sent = pair
    _turn(attached, 0)
    Memories(owner, project="p").save(Memory("project", "Owner zebra", "zebra crossing owner"))
    DecisionGraph(owner).add_node(Node(id="owner-goal", type="goal", label="owner goal"))
    sent.clear()
    found = [m.title for m, _ in Memories(attached, project="p").search("zebra crossing")]
    goals = [n.label for n in DecisionGraph(attached).query("active_goals")]
    assert "Owner zebra" in found and "owner goal" in goals
    assert sent.count("changes") == 1, sent  # the first to look asks; the other knows


def test_an_edge_is_checked_in_one_request_and_refused_as_before(
    pair: tuple[RdfStore, RdfStore, list[str]],
) -> None:
    _, attached, sent = pair
    graph = DecisionGraph(attached)
    graph.add_node(Node(id="a", type="goal", label="A"))
    graph.add_node(Node(id="b", type="action", label="B"))
    sent.clear()
    graph.add_edge({"id": "e1", "from_id": "a", "to_id": "b", "type": "leads_to"})
    assert sent == ["query", "update"]  # the three checks in one query, then the write
    with pytest.raises(DecisionGraphError, match="already exists"):
        graph.add_edge({"id": "e1", "from_id": "a", "to_id": "b", "type": "leads_to"})
    with pytest.raises(DecisionGraphError, match="no node 'missing'"):
        graph.add_edge({"id": "e2", "from_id": "a", "to_id": "missing", "type": "leads_to"})
    assert [e.id for e in graph.get_edges("a")] == ["e1"]


def test_after_the_owner_leaves_the_next_owner_makes_readers_read_everything(
    tmp_path: Path,
) -> None:
    owner = RdfStore.open(tmp_path / "store")
    attached = RdfStore.open(tmp_path / "store")
    try:
        memories = Memories(attached, project="p")
        memories.save(Memory("project", "Before", "zebra before"))
        assert [m.title for m, _ in memories.search("zebra")] == ["Before"]
        owner.close()  # the attached process takes the store over at its next request
        memories.save(Memory("project", "After", "zebra after"))
        assert attached.backend.owner  # type: ignore[attr-defined]
        assert sorted(m.title for m, _ in memories.search("zebra")) == ["After", "Before"]
    finally:
        attached.close()
        owner.close()


def test_the_mark_is_trusted_only_when_whole_and_of_the_file_there_now(tmp_path: Path) -> None:
    reader = MarkReader(tmp_path)
    assert reader.read() is None  # no owner has published yet
    writer = MarkWriter(tmp_path)
    epoch = "ab" * 16
    writer.write(epoch, 7)
    assert reader.read() == (epoch, 7)
    # A writer killed halfway leaves the sequence odd: read as unknown, never as current.
    with open(tmp_path / MARK_NAME, "r+b") as f, mmap.mmap(f.fileno(), 8) as raw:
        raw[0:8] = (int.from_bytes(raw[0:8], "little") + 1).to_bytes(8, "little")
    assert reader.read() is None
    again = MarkWriter(tmp_path)  # the next owner writes over it
    again.write("cd" * 16, 1)
    assert reader.read() == ("cd" * 16, 1)
    # A file removed and made anew is read anew (never through the old mapping).
    writer.close()
    again.close()
    os.remove(tmp_path / MARK_NAME)
    assert reader.read() is None
    fresh = MarkWriter(tmp_path)
    fresh.write("ef" * 16, 3)
    assert reader.read() == ("ef" * 16, 3)
    fresh.close()
    # A mark whose owner is dead says nothing of what the files hold now.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with open(tmp_path / MARK_NAME, "r+b") as f, mmap.mmap(f.fileno(), 40) as raw:
        raw[32:40] = dead.pid.to_bytes(8, "little")
    assert reader.read() is None
    reader.close()


def test_the_lean_transport_fails_as_httpx_does_when_nobody_listens(tmp_path: Path) -> None:
    transport = UnixHTTPTransport(str(tmp_path / "nobody.sock"))
    with httpx.Client(transport=transport) as client, pytest.raises(httpx.ConnectError):
        client.get("http://owner/changes")


def test_what_this_process_wrote_is_read_back_here_and_another_write_at_once(
    pair: tuple[RdfStore, RdfStore, list[str]],
) -> None:
    owner, attached, sent = pair
    attached.update("turns", lambda n: (n or 0) + 1)
    attached.update("turns", lambda n: (n or 0) + 1)  # the notes start with the first
    sent.clear()
    assert attached.get("turns") == 2
    assert sent == []  # the owner's answer to the write brought the entry back
    owner.update("turns", lambda n: n + 10)  # another process: the mark moves
    assert attached.get("turns") == 12
    attached.update("turns", lambda n: n + 1)
    assert owner.get("turns") == 13 and attached.get("turns") == 13


def test_a_node_this_process_added_is_indexed_without_reading_it_again(
    pair: tuple[RdfStore, RdfStore, list[str]],
) -> None:
    owner, attached, sent = pair
    graph = DecisionGraph(attached)
    graph.add_node(Node(id="g0", type="goal", label="first"))
    assert [n.label for n in graph.query("active_goals")] == ["first"]
    sent.clear()
    graph.add_node(Node(id="g1", type="goal", label="second"))
    graph.add_edge({"from_id": "g0", "to_id": "g1", "type": "leads_to"})
    assert [n.label for n in graph.query("active_goals")] == ["first", "second"]
    assert sent == [
        "query",
        "update",
        "update",
    ]  # the node's check and the writes (the edge's ends come from the index)
    DecisionGraph(owner).update_node("g1", status="completed")  # another process
    assert [n.label for n in graph.query("active_goals")] == ["first"]
    assert [n.id for n in graph.query("descendants", node_id="g0")] == ["g1"]
