"""A remote client's first reads run side by side (issue 21, remote turns): a search reads
the texts on a thread while it reads the vectors, and a decision graph's links are read on a
thread while its nodes are; the answers are those of reads one after the other, and a write
made while such a read runs is seen by the next call. On real Oxigraph and Virtuoso
servers.
"""

from __future__ import annotations

from servers import Server

from rdfmem import DecisionGraph, Edge, Node
from rdfmem.memories import Memories, Memory


def test_a_first_search_finds_what_was_there_and_what_came_during_it(server: Server) -> None:
    writer, reader = server.connect(change_log=True), server.connect(change_log=True)
    try:
        mine = Memories(writer, project="p")
        for i in range(30):
            mine.save(Memory("project", f"note {i}", f"plain words {i}"))
        theirs = Memories(reader, project="p")
        texts = theirs._texts
        texts.start([theirs.graph("project")])  # the texts' whole read begins on a thread
        mine.save(Memory("project", "zebra", "a zebra crossed"))  # returned after it began
        mine.save(Memory("project", "note 3", "now about a zebra too"))  # a rewrite
        found = [m.title for m, _ in theirs.search("zebra", limit=5)]
        assert set(found[:2]) == {"zebra", "note 3"}, found
        assert [m.title for m, _ in theirs.search("plain words 7", limit=1)] == ["note 7"]
        assert theirs.read("project", "note 3").content == "now about a zebra too"
    finally:
        writer.close()
        reader.close()


def test_a_graph_read_whole_has_its_nodes_and_links(server: Server) -> None:
    writer, reader = server.connect(change_log=True), server.connect(change_log=True)
    try:
        graph = DecisionGraph(writer)
        graph.add_nodes(Node(id=f"n{i}", type="goal", label=f"goal {i}") for i in range(40))
        graph.add_edges(
            Edge(from_id=f"n{i}", to_id=f"n{i + 1}", type="leads_to") for i in range(39)
        )
        seen = DecisionGraph(reader)
        assert [n.id for n in seen.query("active_goals")] == [f"n{i}" for i in range(40)]
        assert [n.id for n in seen.query("descendants", node_id="n35")] == [
            "n36",
            "n37",
            "n38",
            "n39",
        ]
        assert [n.id for n in seen.query("path_between", from_id="n0", to_id="n3")] == [
            "n0",
            "n1",
            "n2",
            "n3",
        ]
    finally:
        writer.close()
        reader.close()
