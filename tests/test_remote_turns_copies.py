"""The nodes a decision query answers from an index are the caller's own (issue 21, remote
turns): changing one, or anything in it, never changes the graph's answers, nor another
answer still held; a copy is given again only once nobody holds it and it is unchanged
(``rdfmem.domain.node_copies``), so ``active_goals`` over thousands of goals makes no new
objects call after call. On an embedded store and on a remote client following the log.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator

import pytest
from servers import Server

from rdfmem import DecisionGraph, Node, RdfStore


@pytest.fixture(params=["embedded", "remote"])
def graph(request: pytest.FixtureRequest) -> Iterator[DecisionGraph]:
    if request.param == "embedded":
        store = RdfStore()
    else:
        server: Server = request.getfixturevalue("oxigraph_server")
        server.wipe()
        store = server.connect(change_log=True)
    graph = DecisionGraph(store)
    graph.add_nodes(
        Node(id=f"g{i}", type="goal", label=f"goal {i}", metadata={"n": i} if i % 2 else {})
        for i in range(6)
    )
    graph.add_node(Node(id="deep", type="goal", label="deep", metadata={"tags": ["a"]}))
    yield graph
    store.close()


def labels(graph: DecisionGraph) -> list[tuple[str, str, object]]:
    return [(n.id, n.label, n.metadata) for n in graph.query("active_goals")]


def test_changing_a_dropped_answer_changes_no_later_answer(graph: DecisionGraph) -> None:
    expected = labels(graph)
    for change in (
        lambda n: setattr(n, "label", "changed"),
        lambda n: n.metadata.__setitem__("n", "changed"),
        lambda n: n.metadata.clear(),
        lambda n: n.model_fields_set.clear(),
        lambda n: setattr(n, "status", "completed"),
    ):
        for node in graph.query("active_goals"):
            change(node)
        assert labels(graph) == expected
        assert graph.get_node("g1").label == "goal 1"
        assert [n.id for n in graph.query("active_goals")] == [i for i, _, _ in expected]


def test_answers_alive_at_once_share_nothing(graph: DecisionGraph) -> None:
    graph.query("active_goals")  # kept copies, released
    first = graph.query("active_goals")
    second = graph.query("active_goals")
    assert all(a is not b for a, b in zip(first, second, strict=True))
    first[1].metadata["n"] = "first's"
    assert second[1].metadata == {"n": 1}
    # Something inside a dropped answer still held: the next answer has its own.
    held_metadata, held_fields = first[1].metadata, first[2].model_fields_set
    deep_tags = next(n for n in first if n.id == "deep").metadata["tags"]
    del first, second
    third = graph.query("active_goals")
    held_metadata["n"] = "later"
    held_fields.discard("label")
    deep_tags.append("b")
    assert [n.metadata for n in third][:2] == [{}, {"n": 1}]
    assert "label" in third[2].model_fields_set
    assert next(n for n in third if n.id == "deep").metadata == {"tags": ["a"]}


def test_an_updated_node_is_answered_as_it_is_now(graph: DecisionGraph) -> None:
    graph.query("active_goals")
    graph.update_node("g1", label="renamed")
    graph.update_node("g2", status="completed")
    assert [(i, label) for i, label, _ in labels(graph)][:2] == [
        ("g0", "goal 0"),
        ("g1", "renamed"),
    ]
    assert "g2" not in [i for i, _, _ in labels(graph)]


def allocations(call: Callable[[], object]) -> int:
    """Objects the collector tracks that ``call`` left behind while its answer is held."""
    gc.collect()
    before = len(gc.get_objects())
    answer = call()
    during = len(gc.get_objects())
    del answer
    return during - before


def test_a_repeated_query_makes_no_new_nodes(graph: DecisionGraph) -> None:
    graph.add_nodes(Node(id=f"m{i}", type="goal", label=f"more {i}") for i in range(2000))
    ask = lambda: graph.query("active_goals")  # noqa: E731
    ask()
    # Measured on the first and the tenth repeated call: the answer's list, not 2,000
    # nodes and their dicts and sets (three objects a node before).
    later = min(allocations(ask) for _ in range(3))
    assert later < 500, later
