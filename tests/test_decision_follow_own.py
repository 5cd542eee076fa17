"""An attached process applies its own decision writes to the graph index it follows, and
does not read back the node it just linked (a hub node with hundreds of links was read
again whole after each edge); a write of another process to the same node, before, after
or right between this process's look and its write, is read again, and every answer stays
the owner's. Real owner and attached backends (the owner's socket, in this process: it
attaches as a second process does)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from rdfmem import DecisionGraph, Node, RdfStore
from rdfmem.backends.attached import AttachedBackend, is_update
from rdfmem.core.errors import DecisionGraphError

Trio = tuple[RdfStore, RdfStore, RdfStore, list[str]]


@pytest.fixture
def trio(tmp_path: Path) -> Iterator[Trio]:
    """The owner, two attached stores, and the requests the first attached store sends."""
    owner = RdfStore.open(tmp_path / "store")
    attached = RdfStore.open(tmp_path / "store")
    other = RdfStore.open(tmp_path / "store")
    assert isinstance(attached.backend, AttachedBackend)
    assert isinstance(other.backend, AttachedBackend)
    sent: list[str] = []

    def note(request: httpx.Request) -> None:
        sent.append("update" if is_update(request) else "query")

    attached.backend.client.event_hooks["request"].append(note)
    try:
        yield owner, attached, other, sent
    finally:
        other.close()
        attached.close()
        owner.close()


def _hub(graph: DecisionGraph, links: int = 300) -> None:
    """A goal ``hub`` leading to ``links`` goals: more triples than a journal answer
    carries for one subject, so reading it again is a request."""
    graph.add_nodes(
        [Node(id="hub", type="goal", label="hub")]
        + [Node(id=f"t{i}", type="goal", label=f"t{i}") for i in range(links)]
    )
    graph.add_edges(
        [{"from_id": "hub", "to_id": f"t{i}", "type": "leads_to"} for i in range(links)]
    )


def _answers(graph: DecisionGraph) -> tuple[object, ...]:
    return (
        [(n.id, n.label, n.status) for n in graph.query("active_goals")],
        [n.id for n in graph.query("descendants", node_id="hub")],
        [n.id for n in graph.query("ancestors", node_id="new")],
        [n.id for n in graph.query("path_between", from_id="hub", to_id="new")],
        graph.get_node("hub").label,
    )


def _add(graph: DecisionGraph, node_id: str, link_from: str = "hub") -> None:
    graph.add_node(Node(id=node_id, type="goal", label=node_id))
    graph.add_edge({"from_id": link_from, "to_id": node_id, "type": "leads_to"})


def test_an_edge_from_a_hub_node_is_not_read_back(trio: Trio) -> None:
    owner, attached, _, sent = trio
    graph = DecisionGraph(attached)
    _hub(graph)
    graph.query("active_goals")  # this process reads the graph once
    _add(graph, "warm")  # the first check of a new id lists the graph's subjects
    sent.clear()
    _add(graph, "new")
    goals = graph.query("active_goals")
    # The node's write, the edge's write: the edge's ends come from the index, the new
    # ids are known absent, and the hub is not read again.
    assert sent == ["update", "update"], sent
    assert "new" in [n.id for n in goals]
    assert _answers(graph) == _answers(DecisionGraph(owner))


def _between(attached: RdfStore, write: Callable[[], None]) -> Callable[[httpx.Request], None]:
    # Runs ``write`` (another process's) once, as the attached process's next update
    # leaves: after its look, before its write is applied.
    done: list[bool] = []

    def hook(request: httpx.Request) -> None:
        if not done and is_update(request):
            done.append(True)
            write()

    assert isinstance(attached.backend, AttachedBackend)
    attached.backend.client.event_hooks["request"].append(hook)
    return hook


@pytest.mark.parametrize("writer", ["owner", "other"])
def test_another_process_linking_the_same_node_between_two_writes_is_seen(
    trio: Trio, writer: str
) -> None:
    owner, attached, other, _ = trio
    graph = DecisionGraph(attached)
    _hub(graph)
    graph.query("active_goals")
    _add(graph, "mine1")
    theirs = DecisionGraph(owner if writer == "owner" else other)
    _add(theirs, "theirs1")  # a link to the same hub, between two of this process's writes
    theirs.update_node("hub", label="hub, renamed by another")
    _add(graph, "new")
    assert _answers(graph) == _answers(DecisionGraph(owner))
    assert graph.get_node("hub").label == "hub, renamed by another"
    kids = {n.id for n in graph.query("descendants", node_id="hub")}
    assert {"mine1", "theirs1", "new"} <= kids
    # The same again, this process's writes one after another with the other's after.
    _add(graph, "mine2")
    _add(theirs, "theirs2")
    theirs.update_node("theirs2", status="completed")
    assert _answers(graph) == _answers(DecisionGraph(owner))
    assert "theirs2" not in [n.id for n in graph.query("active_goals")]


def test_another_write_right_before_this_process_writes_is_seen(trio: Trio) -> None:
    owner, attached, other, _ = trio
    graph = DecisionGraph(attached)
    _hub(graph)
    graph.query("active_goals")
    _add(graph, "mine")
    theirs = DecisionGraph(other)
    theirs.add_node(Node(id="late", type="goal", label="late"))

    def link_and_rename() -> None:  # another process, inside this one's turn
        theirs.add_edge({"from_id": "hub", "to_id": "late", "type": "leads_to"})
        theirs.update_node("t1", status="completed")

    _between(attached, link_and_rename)
    _add(graph, "new")  # the node's write: the other's writes land just before it
    assert _answers(graph) == _answers(DecisionGraph(owner))
    kids = {n.id for n in graph.query("descendants", node_id="hub")}
    assert {"late", "new", "mine"} <= kids
    assert "t1" not in [n.id for n in graph.query("active_goals")]


def test_an_edge_checks_its_ends_as_another_process_left_them(trio: Trio) -> None:
    owner, attached, other, _ = trio
    graph = DecisionGraph(attached)
    _hub(graph, links=20)
    graph.query("active_goals")
    _add(graph, "mine")
    theirs = DecisionGraph(other)
    theirs.delete_node("t5")
    theirs.add_node(Node(id="born", type="goal", label="born elsewhere"))
    with pytest.raises(DecisionGraphError, match="no node 't5'"):
        graph.add_edge({"from_id": "hub", "to_id": "t5", "type": "leads_to"})
    graph.add_edge({"from_id": "hub", "to_id": "born", "type": "leads_to"})
    kids = [n.id for n in graph.query("descendants", node_id="hub")]
    assert "born" in kids and "t5" not in kids
    assert kids == [n.id for n in DecisionGraph(owner).query("descendants", node_id="hub")]
