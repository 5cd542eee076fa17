"""A client following the change log reads a graph whole into its indexes the first time it
searches or queries it (a server's rows read as tuples, paged past a row limit): its
answers are the answers of an embedded store holding the same memory, on each real server,
past Virtuoso's limit of 1,000 rows an answer (``tests/servers.py``)."""

from __future__ import annotations

from typing import Any

from servers import Server

from rdfmem import DecisionGraph, Edge, Memories, Memory, Node, RdfStore
from rdfmem.decisions import EdgeType, NodeType

#: More memories and nodes than Virtuoso gives rows in one answer.
COUNT = 1_200
WORDS = ("deploy", "cache", "latency", "graph", "vector", "goal", "plan", "index", "rank")
KINDS: tuple[NodeType, ...] = ("goal", "decision", "option", "action", "outcome")
EDGES: tuple[EdgeType, ...] = ("leads_to", "chosen", "requires", "blocks")


def _memory(local: RdfStore) -> None:
    memories = Memories(local, project="p")
    for i in range(COUNT):
        text = " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 6))
        topics = [WORDS[i % len(WORDS)]] if i % 3 else []
        memories.save(Memory("project", f"Note {i}", f"{text} {i}", topics=topics))
    graph = DecisionGraph(local)
    graph.add_nodes(
        Node(
            id=f"n{i}",
            type=KINDS[i % len(KINDS)],
            label=f"node {i}\twith a tab",
            # Some nodes leave the optional fields unbound: rows with gaps.
            confidence=None if i % 2 else (i % 8) / 8,  # (short: Virtuoso keeps ~7 digits)
            rationale=None if i % 3 else f'because "{i}"',
            metadata={"i": i} if i % 4 == 0 else {},
        )
        for i in range(COUNT)
    )
    graph.add_edges(
        Edge(from_id=f"n{i - 1}", to_id=f"n{i}", type=EDGES[i % len(EDGES)])
        for i in range(1, COUNT)
    )


def _nodes(nodes: list[Node]) -> list[dict[str, Any]]:
    return [n.model_dump() for n in nodes]


def test_first_reads_answer_as_an_embedded_store(server: Server) -> None:
    local = RdfStore()
    _memory(local)
    remote = server.connect(change_log=True, timeout=300)
    try:
        remote.load(local.export("nquads"), format="nquads")
        here, there = DecisionGraph(local), DecisionGraph(remote)
        goals = there.query("active_goals")  # the graph read whole: nodes and links
        assert len(goals) == COUNT // len(KINDS)
        assert _nodes(goals) == _nodes(here.query("active_goals"))
        assert _nodes(there.query("recent_decisions", limit=7)) == _nodes(
            here.query("recent_decisions", limit=7)
        )
        assert _nodes(there.query("descendants", node_id="n900")) == _nodes(
            here.query("descendants", node_id="n900")
        )
        assert there.get_node("n10") == here.get_node("n10")
        for query in ("deploy latency 17", "graph plan", "Note 1111"):
            found = Memories(remote, project="p").search(query, limit=5)  # texts and vectors
            expected = Memories(local, project="p").search(query, limit=5)
            assert [(m.title, round(s, 6)) for m, s in found] == [
                (m.title, round(s, 6)) for m, s in expected
            ]
            assert found
    finally:
        remote.close()
        local.close()
