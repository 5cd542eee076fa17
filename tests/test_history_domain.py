"""Memory with time for the domain layers (issue 24): memories and decision nodes keep
their versions (written in the same request as the data), attributed, and read as of any
moment; memories carry optional world time. On every embedded backend and an Oxigraph
server (``make_store``)."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pytest
from conftest import StoreFactory
from pydantic import ValidationError

from rdfmem import RdfStore
from rdfmem.core.errors import HistoryUnavailable, InvalidValue, MemoryNotFound, NodeNotFound
from rdfmem.domain.decisions import DecisionGraph, Edge, Node
from rdfmem.domain.memories import Memories, Memory

UTC = dt.timezone.utc


def now() -> dt.datetime:
    return dt.datetime.now(UTC)


@pytest.mark.kv_contract  # also on Virtuoso (tests/servers.py)
def test_a_memory_keeps_its_versions_who_wrote_them_and_why(make_store: StoreFactory) -> None:
    memories = Memories(make_store(history=True, agent="urn:agent:notes"), project="web")
    memories.save(Memory("project", "Deploy Steps", "Run the migration.", ["deploy"]))
    first = now()
    with memories.store.attributed(by="urn:agent:reviewer", why="the flag comes last"):
        memories.save(Memory("project", "Deploy Steps", "Migrate, then flip the flag."))
    second = now()
    memories.forget("project", "Deploy Steps")

    versions = memories.history("project", "Deploy Steps")
    assert [v.value.content if v.value else None for v in versions] == [
        "Run the migration.",
        "Migrate, then flip the flag.",
        None,
    ]
    assert [v.by for v in versions] == ["urn:agent:notes", "urn:agent:reviewer", "urn:agent:notes"]
    assert [v.why for v in versions] == [None, "the flag comes last", None]
    assert [v.deleted for v in versions] == [False, False, True]
    assert versions[0].value is not None and versions[0].value.topics == ["deploy"]
    assert versions[0].at < first < versions[1].at < second < versions[2].at

    assert memories.read("project", "deploy steps", as_of=first).content == "Run the migration."
    assert memories.read("project", "Deploy Steps", as_of=second).title == "Deploy Steps"
    with pytest.raises(MemoryNotFound):
        memories.read("project", "Deploy Steps")
    with pytest.raises(MemoryNotFound):
        memories.read("project", "Deploy Steps", as_of=versions[0].at - dt.timedelta(seconds=1))
    assert memories.history("project", "Never Saved") == []


@pytest.mark.kv_contract  # also on Virtuoso (tests/servers.py)
def test_list_and_search_as_of_see_the_memories_alive_then(make_store: StoreFactory) -> None:
    memories = Memories(make_store(history=True), session="s1")
    memories.save(Memory("global", "Tea", "Eli drinks green tea.", ["drinks"]))
    memories.save(Memory("session", "Standup", "Search latency is 340 ms."))
    then = now()
    memories.forget("global", "Tea")
    memories.save(Memory("session", "Standup", "Search latency is 120 ms."))
    memories.save(Memory("global", "Coffee", "Eli switched to coffee.", ["drinks"]))

    assert memories.list() == ["Coffee", "Standup"]
    assert memories.list(as_of=then) == ["Tea", "Standup"]
    assert memories.list("session", as_of=then) == ["Standup"]
    past = [m.title for m, _ in memories.search("what does Eli drink", as_of=then)]
    assert past[0] == "Tea" and "Coffee" not in past
    latency = memories.search("search latency", as_of=then)
    assert latency[0][0].content == "Search latency is 340 ms."
    assert len([m for m, _ in latency if m.title == "Standup"]) == 1
    current = [m.title for m, _ in memories.search("what does Eli drink")]
    assert current[0] == "Coffee" and "Tea" not in current
    assert memories.list(as_of=then - dt.timedelta(hours=1)) == []


def test_world_time_is_stored_and_filters_search(make_store: StoreFactory) -> None:
    memories = Memories(make_store())
    ghent = Memory(
        "global",
        "Office Ghent",
        "The office is in Ghent.",
        ["office"],
        valid_from=dt.datetime(2020, 1, 1),  # naive: UTC
        valid_until=dt.datetime(2024, 3, 1, tzinfo=UTC),
    )
    memories.save(ghent)
    memories.save(
        Memory(
            "global",
            "Office Leuven",
            "The office is in Leuven.",
            ["office"],
            valid_from=dt.datetime(2024, 3, 1, tzinfo=UTC),
        )
    )
    memories.save(Memory("global", "Office Chairs", "The office chairs are blue.", ["office"]))

    stored = memories.read("global", "Office Ghent")
    assert stored.valid_from == dt.datetime(2020, 1, 1, tzinfo=UTC)
    assert stored.valid_until == dt.datetime(2024, 3, 1, tzinfo=UTC)
    assert memories.read("global", "Office Chairs").valid_from is None

    def titles(moment: dt.datetime) -> set[str]:
        return {m.title for m, _ in memories.search("where is the office", valid_at=moment)}

    assert titles(dt.datetime(2022, 6, 1, tzinfo=UTC)) == {"Office Ghent", "Office Chairs"}
    assert titles(dt.datetime(2024, 3, 1, tzinfo=UTC)) == {"Office Leuven", "Office Chairs"}
    assert titles(dt.datetime(2019, 1, 1)) == {"Office Chairs"}
    assert len(memories.search("where is the office")) == 3
    with pytest.raises(InvalidValue, match="valid_at takes a datetime"):
        memories.search("office", valid_at="2024-01-01")  # type: ignore[arg-type]


def test_world_time_must_end_after_it_starts() -> None:
    with pytest.raises(ValidationError, match=r"valid_until .* must be later than valid_from"):
        Memory("global", "Backwards", "x", valid_from=dt.datetime(2024, 1, 1),
               valid_until=dt.datetime(2023, 1, 1))  # fmt: skip


def test_search_valid_at_looks_past_memories_that_do_not_hold(make_store: StoreFactory) -> None:
    memories = Memories(make_store(), ranking="keyword")
    ended = dt.datetime(2020, 1, 1, tzinfo=UTC)
    for i in range(12):  # the best keyword matches, all ended before 2021
        memories.save(Memory("global", f"Old Rate {i}", "rate rate rate limit", valid_until=ended))
    memories.save(Memory("global", "Current Rate", "the rate limit is 100 a minute"))
    found = memories.search("rate limit", limit=1, valid_at=dt.datetime(2025, 1, 1, tzinfo=UTC))
    assert [m.title for m, _ in found] == ["Current Rate"]


def test_reads_of_the_past_need_a_store_keeping_history() -> None:
    memories = Memories(RdfStore())
    memories.save(Memory("global", "Tea", "green"))
    for read in (
        lambda: memories.history("global", "Tea"),
        lambda: memories.read("global", "Tea", as_of=now()),
        lambda: memories.list(as_of=now()),
        lambda: memories.search("tea", as_of=now()),
    ):
        with pytest.raises(HistoryUnavailable, match="history=True"):
            read()
    graph = DecisionGraph(RdfStore())
    graph.add_node(Node(id="a", type="goal", label="A"))
    with pytest.raises(HistoryUnavailable):
        graph.history("a")
    with pytest.raises(HistoryUnavailable):
        graph.query("active_goals", as_of=now())
    with pytest.raises(InvalidValue, match="datetime"):
        Memories(RdfStore(history=True)).read("global", "Tea", as_of="yesterday")  # type: ignore[arg-type]


@pytest.mark.kv_contract  # also on Virtuoso (tests/servers.py)
def test_a_decision_node_keeps_its_versions(make_store: StoreFactory) -> None:
    graph = DecisionGraph(make_store(history=True, agent="urn:agent:planner"))
    graph.add_node(Node(id="ship", type="goal", label="Ship v1"))
    # Apart by more than a server's clock resolution (a version's time is the store's
    # clock, a server's NOW() on a remote store; ``first`` is this process's).
    time.sleep(0.02)
    first = now()
    time.sleep(0.02)
    with graph.store.attributed(by="urn:agent:lead", why="shipped on Friday"):
        graph.update_node("ship", status="completed")
    time.sleep(0.02)
    second = now()
    time.sleep(0.02)
    graph.delete_node("ship")

    versions = graph.history("ship")
    assert [v.value.status if v.value else None for v in versions] == ["active", "completed", None]
    assert [(v.by, v.why) for v in versions] == [
        ("urn:agent:planner", None),
        ("urn:agent:lead", "shipped on Friday"),
        ("urn:agent:planner", None),
    ]
    assert graph.get_node("ship", as_of=first).status == "active"
    assert graph.get_node("ship", as_of=second).status == "completed"
    with pytest.raises(NodeNotFound):
        graph.get_node("ship", as_of=now())
    with pytest.raises(NodeNotFound):
        graph.get_node("ship", as_of=versions[0].at - dt.timedelta(seconds=1))


@pytest.mark.kv_contract  # also on Virtuoso (tests/servers.py)
def test_named_queries_as_of_run_over_the_graph_as_it_was(make_store: StoreFactory) -> None:
    graph = DecisionGraph(make_store(history=True))
    graph.add_nodes(
        [
            Node(id="goal", type="goal", label="Fast search"),
            Node(id="pick", type="decision", label="Pick a backend"),
            Node(id="pg", type="option", label="Postgres"),
            Node(id="es", type="option", label="Elasticsearch"),
        ]
    )
    graph.add_edges(
        [
            Edge(from_id="goal", to_id="pick", type="leads_to"),
            Edge(from_id="pick", to_id="pg", type="chosen"),
        ]
    )
    before = now()
    graph.add_edge(Edge(from_id="pick", to_id="es", type="rejected"))
    graph.update_node("goal", status="completed")
    middle = now()
    graph.delete_node("pick")

    assert graph.query("active_goals") == []
    assert [n.id for n in graph.query("active_goals", as_of=before)] == ["goal"]
    assert [n.id for n in graph.query("descendants", node_id="goal")] == []
    assert [n.id for n in graph.query("descendants", as_of=before, node_id="goal")] == [
        "pick",
        "pg",
    ]
    assert [n.id for n in graph.query("descendants", as_of=middle, node_id="goal")] == [
        "pick",
        "pg",
        "es",
    ]
    path = graph.query("path_between", as_of=middle, from_id="goal", to_id="es")
    assert [n.id for n in path] == ["goal", "pick", "es"]
    assert [n.id for n in graph.query("recent_decisions", as_of=before, limit=5)] == ["pick"]
    assert graph.query("path_between", from_id="goal", to_id="es") == []
    # a deletion versions every resource that named the node (the edge into it too)
    assert graph.history("goal")[-1].value is not None
    assert len(graph.history("goal")) == 4  # added, linked to pick, completed, link dropped


def test_history_survives_reopening_an_on_disk_store(tmp_path: Path) -> None:
    with RdfStore.open(tmp_path / "store", history=True) as store:
        Memories(store).save(Memory("global", "Tea", "green"))
        then = now()
        Memories(store).save(Memory("global", "Tea", "black"))
    with RdfStore.open(tmp_path / "store", history=True) as store:
        memories = Memories(store)
        assert [v.value.content for v in memories.history("global", "Tea") if v.value] == [
            "green",
            "black",
        ]
        assert memories.read("global", "Tea", as_of=then).content == "green"
