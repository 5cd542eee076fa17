"""The owner's journal of an on-disk store: what each write changed, followed by attached
processes (their searches and decision queries see the owner's writes at once) and by the
owner's own indexes (another process's write re-reads its subjects, not the graph)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from pyoxigraph import NamedNode, Quad

from rdfmem import DecisionGraph, Memories, Memory, RdfStore
from rdfmem.backends.journal import Journal, scope_of_quads

ROOT = Path(__file__).resolve().parents[1]


def test_the_journal_says_what_changed_since_a_generation() -> None:
    journal = Journal(keep=4)
    for generation, scope in enumerate(
        [("urn:g", ("urn:a",)), ("urn:g", ("urn:b",)), ("urn:h", None)], start=1
    ):
        journal.note(generation, scope)
    found = journal.since(journal.epoch, 1)
    assert found["everything"] is False and found["generation"] == 3
    assert found["subjects"] == [["urn:g", "urn:b"]] and found["whole"] == ["urn:h"]
    assert journal.since("another owner", 1)["everything"] is True
    assert journal.subjects_between(0, 2, {"urn:g"}) == {("urn:g", "urn:a"), ("urn:g", "urn:b")}
    assert journal.subjects_between(0, 3, {"urn:h"}) is None  # changed whole
    journal.note(4, None)
    assert journal.since(journal.epoch, 3)["everything"] is True  # a raw update
    for generation in range(5, 20):
        journal.note(generation, ("urn:g", ("urn:c",)))
    assert journal.since(journal.epoch, 1)["everything"] is True  # older than the notes kept


def test_the_scope_of_a_write_of_quads() -> None:
    a, p = NamedNode("urn:a"), NamedNode("urn:p")
    one = [Quad(a, p, a, NamedNode("urn:g"))]
    assert scope_of_quads(one) == ("urn:g", ("urn:a",))
    two_graphs = [*one, Quad(a, p, a, NamedNode("urn:h"))]
    assert scope_of_quads(two_graphs) is None


FOLLOWER = textwrap.dedent(
    """
    import sys
    from rdfmem import DecisionGraph, Memories, RdfStore
    store = RdfStore.open(sys.argv[1])
    memories, graph = Memories(store), DecisionGraph(store)
    for line in sys.stdin:  # one look per line the test sends
        titles = sorted(m.title for m, _ in memories.search("zebra crossing", limit=50))
        goals = sorted(n.label for n in graph.query("active_goals"))
        print(titles, goals, flush=True)
    store.close()
    """
)


def test_an_attached_process_follows_the_owners_writes(tmp_path: Path) -> None:
    path = tmp_path / "store"
    owner = RdfStore.open(path)
    memories, graph = Memories(owner), DecisionGraph(owner)
    memories.save(Memory(title="first", content="a zebra crossing", scope="global"))
    graph.add_node({"id": "g1", "type": "goal", "label": "cross"})
    follower = subprocess.Popen(
        [sys.executable, "-c", FOLLOWER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert follower.stdin is not None and follower.stdout is not None

    def look() -> str:
        assert follower.stdin is not None and follower.stdout is not None
        follower.stdin.write("look\n")
        follower.stdin.flush()
        return follower.stdout.readline().strip()

    try:
        assert look() == "['first'] ['cross']"  # read whole, the first time
        memories.save(Memory(title="second", content="another zebra crossing", scope="global"))
        graph.add_node({"id": "g2", "type": "goal", "label": "arrive"})
        assert look() == "['first', 'second'] ['arrive', 'cross']"  # followed
        memories.forget("global", "first")
        graph.update_node("g1", status="completed")
        assert look() == "['second'] ['arrive']"
    finally:
        follower.communicate(timeout=60)  # closes its input: it leaves
        owner.close()
