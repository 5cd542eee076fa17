"""A bulk ``load`` keeps the read-side indexes (issue 21): the first search after loading
memories as N-Triples reads nothing again, and answers as a store that read them all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyoxigraph import NamedNode

from rdfmem import DecisionGraph, Memories, Memory, RdfStore
from rdfmem.core.errors import FormatError
from rdfmem.decisions import Node
from rdfmem.domain.embeddings import VectorIndex
from rdfmem.domain.hybrid import TextIndex

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
WORDS += ["golf", "hotel", "india", "juliet", "kilo", "lima"]


def memories(count: int, start: int = 0) -> list[Memory]:
    return [
        Memory(
            "project",
            f"Memory {i}",
            " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 6)) + f" item{i}",
        )
        for i in range(start, start + count)
    ]


def as_ntriples(saved: list[Memory]) -> str:
    """The memory graph's triples as ``Memories.save`` writes them (no history)."""
    source = RdfStore()
    keep = Memories(source, project="p")
    for memory in saved:
        keep.save(memory)
    return source.export("ntriples", graph=keep.graph("project"))


def answers(mem: Memories, queries: list[str]) -> list[list[tuple[str, float]]]:
    return [[(m.title, round(s, 6)) for m, s in mem.search(q, limit=5)] for q in queries]


QUERIES = ["alpha charlie", "item7", "golf hotel kilo", "item250 lima", "nothing like it"]


@pytest.fixture(params=["memory", "disk"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> RdfStore:
    made = RdfStore() if request.param == "memory" else RdfStore.open(tmp_path / "db")
    request.addfinalizer(made.close)
    return made


def no_whole_reads(monkeypatch: pytest.MonkeyPatch, graph: NamedNode) -> None:
    """Fail if ``graph``'s vectors or texts are read again whole (an empty graph, as the
    global scope here, may be: that reads nothing)."""
    for index in (VectorIndex, TextIndex):
        original = index._entries

        def whole(self: object, names: Any, original: Any = original) -> Any:
            if graph.value in {getattr(n, "value", n) for n in names}:
                raise AssertionError("the loaded graph was read again whole")
            return original(self, names)

        monkeypatch.setattr(index, "_entries", whole)


def test_the_first_search_after_bulk_loads_reads_nothing_again(
    store: RdfStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = Memories(store, project="p")
    graph = mem.graph("project")
    store.load(as_ntriples(memories(150)), "ntriples", graph=graph)
    store.load(as_ntriples(memories(150, start=150)), "ntriples", graph=graph)
    reference = RdfStore()
    ref = Memories(reference, project="p")
    for memory in memories(300):
        ref.save(memory)
    expected = answers(ref, QUERIES)

    no_whole_reads(monkeypatch, graph)
    assert answers(mem, QUERIES) == expected
    mem.save(Memory("project", "Memory 999", "alpha charlie zulu"))  # a turn's save
    assert mem.search("zulu", limit=1)[0][0].title == "Memory 999"


def test_a_load_that_adds_to_memories_already_indexed_is_read_again(store: RdfStore) -> None:
    """A loaded triple about a memory the index holds (a second content, say) changes what
    that memory is: the index reads it again, as one built after the load would."""
    mem = Memories(store, project="p")
    graph = mem.graph("project")
    for memory in memories(40):
        mem.save(memory)
    mem.search("alpha", limit=3)  # the indexes are fresh
    rows = store.query(f'SELECT ?s WHERE {{ GRAPH <{graph.value}> {{ ?s ?p "Memory 3" }} }}')
    subject = next(iter(rows))["s"]
    extra = f'<{subject.value}> <https://w3id.org/rdfmem#content> "zulu yankee" .\n'
    store.load(extra + as_ntriples(memories(10, start=40)), "ntriples", graph=graph)

    rebuilt = RdfStore()
    rebuilt.load(store.export("nquads"), "nquads")
    fresh = Memories(rebuilt, project="p")  # made after the load: reads everything
    assert answers(mem, [*QUERIES, "zulu yankee"]) == answers(fresh, [*QUERIES, "zulu yankee"])
    assert "zulu" in [w for m, _ in mem.search("zulu yankee", limit=1) for w in m.content.split()]


def test_a_load_elsewhere_leaves_the_decision_index_fresh(
    store: RdfStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = DecisionGraph(store)
    graph.add_nodes(Node(id=f"n{i}", type="goal", label=f"goal {i}") for i in range(20))
    mem = Memories(store, project="p")
    store.load(as_ntriples(memories(30)), "ntriples", graph=mem.graph("project"))

    def read_whole(self: DecisionGraph) -> None:
        raise AssertionError("the decision graph was read again whole")

    monkeypatch.setattr(DecisionGraph, "_read_whole", read_whole)
    assert len(graph.query("active_goals")) == 20


def test_a_load_into_the_default_graph_or_that_fails_keeps_answers_right(
    store: RdfStore,
) -> None:
    mem = Memories(store, project="p")
    graph = mem.graph("project")
    for memory in memories(20):
        mem.save(memory)
    mem.search("alpha", limit=3)
    with pytest.raises(FormatError):
        store.load(as_ntriples(memories(5, start=20)) + "<urn:broken", "ntriples", graph=graph)
    store.load("<urn:a> <urn:b> <urn:c> .", "ntriples")  # the default graph: scope unknown
    store.load(as_ntriples(memories(5, start=20)), "ntriples", graph=graph)
    titles = {m.title for m, _ in mem.search("item22", limit=3)}
    assert "Memory 22" in titles
    assert len(mem.list()) == 25
