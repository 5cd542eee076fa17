"""Read-side indexes survive a restart of an on-disk store: written at a clean close, taken
back at the next open, never trusted after a crash or another program's open."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from pyoxigraph import Store

from rdfmem import DecisionGraph, Memories, Memory, RdfStore
from rdfmem.backends.indexfile import INDEX_FILE

ROOT = Path(__file__).resolve().parents[1]


def _fill(store: RdfStore, n: int = 40) -> None:
    memories = Memories(store)
    for i in range(n):
        memories.save(Memory(title=f"note {i}", content=f"tea number {i} at noon", scope="global"))
    graph = DecisionGraph(store)
    graph.add_node({"id": "g1", "type": "goal", "label": "ship it"})
    graph.add_node({"id": "d1", "type": "decision", "label": "pick oxigraph"})
    graph.add_edge({"from_id": "g1", "to_id": "d1", "type": "leads_to"})


def _loaded(store: RdfStore) -> int:
    hub = store.indexes
    assert hub is not None
    with hub.reading():
        saved = hub.export()
    return 0 if saved is None else len(saved["sections"])


def test_indexes_written_at_close_are_taken_back_at_open(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with RdfStore.open(path) as store:
        _fill(store)
        before = [(m.title, round(s, 6)) for m, s in Memories(store).search("tea number 7")]
        goals = [n.id for n in DecisionGraph(store).query("active_goals")]
    assert (path / INDEX_FILE).is_file()
    assert os.stat(path / INDEX_FILE).st_mode & 0o077 == 0  # this user's alone
    with RdfStore.open(path) as store:
        assert not (path / INDEX_FILE).exists()  # consumed: a crash now leaves none
        assert _loaded(store) >= 3  # the vectors and keywords of the scope, and the nodes
        after = [(m.title, round(s, 6)) for m, s in Memories(store).search("tea number 7")]
        assert after == before
        assert [n.id for n in DecisionGraph(store).query("active_goals")] == goals
        Memories(store).save(Memory(title="coffee", content="coffee at noon", scope="global"))
        assert "coffee" in [m.title for m, _ in Memories(store).search("coffee at noon")]


def test_another_programs_open_drops_the_saved_indexes(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with RdfStore.open(path) as store:
        _fill(store, 5)
        Memories(store).search("tea")
    raw = Store(str(path))  # raw pyoxigraph, behind rdfmem's back
    raw.update(
        "DELETE WHERE { GRAPH ?g { ?s <https://w3id.org/rdfmem#content> ?o } } ;"
        "INSERT DATA { GRAPH <urn:x> { <urn:a> <urn:b> 'c' } }"
    )
    del raw
    with RdfStore.open(path) as store:
        assert _loaded(store) == 0  # not taken back: rebuilt on first use
        assert Memories(store).search("tea") == []  # the contents are gone: nothing stale


KILLED = textwrap.dedent(
    """
    import sys
    from rdfmem import Memories, Memory, RdfStore
    store = RdfStore.open(sys.argv[1])
    memories = Memories(store)
    i = 0
    while True:
        memories.save(Memory(title=f"killed {i}", content=f"zebra {i}", scope="global"))
        memories.search("zebra")
        print(i, flush=True)
        i += 1
    """
)


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_a_process_killed_at_a_random_point_never_leaves_a_stale_index(
    tmp_path: Path, seed: int
) -> None:
    path = tmp_path / "store"
    with RdfStore.open(path) as store:  # a clean close first: a file to find
        _fill(store, 5)
        Memories(store).search("tea")
    assert (path / INDEX_FILE).is_file()
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    proc.stdout.readline()
    time.sleep(random.Random(seed).uniform(0.0, 1.0))
    proc.send_signal(signal.SIGKILL)
    printed = proc.communicate(timeout=30)[0].split()
    acknowledged = int(printed[-1]) + 1 if printed else 1
    assert not (path / INDEX_FILE).exists()
    with RdfStore.open(path) as store:
        found = {m.title for m, _ in Memories(store).search("zebra", limit=10_000)}
        assert {f"killed {i}" for i in range(acknowledged)} <= found


def test_a_saved_graph_index_answers_as_the_one_it_was_saved_from() -> None:
    """A saved decision index makes its nodes as they are first read (no 30,000 objects on
    the first turn after opening): every read and change answers as the original does."""
    import pickle

    from rdfmem.store.indexes.graph import GraphIndex

    def build() -> GraphIndex:
        g = GraphIndex("urn:g")
        for i in range(50):
            g.put_node(f"n{i}", "goal" if i % 5 == 0 else "decision", "active", (i, f"n{i}"), i)
        for i in range(49):
            g.link(f"n{i}", f"n{i + 1}")
        return g

    original, saved = build(), pickle.loads(pickle.dumps(build()))
    for g in (original, saved):
        assert len(g.nodes) == 50 and "n7" in g.nodes and "zz" not in g.nodes
    assert saved.value("n7") == original.value("n7") == 7
    assert saved.newest("goal", 3) == original.newest("goal", 3)
    assert saved.reachable("n45") == original.reachable("n45")
    for g in (original, saved):
        g.remove_node("n48")
        g.put_node("n3", "goal", "completed", (3, "n3"), "three")
        g.put_node("n99", "goal", "active", (99, "n99"), 99)
    assert saved.newest("goal", 20) == original.newest("goal", 20)
    assert saved.reachable("n40") == original.reachable("n40")
    assert sorted(saved.nodes) == sorted(original.nodes)
    again = pickle.loads(pickle.dumps(saved))
    assert {i: again.value(i) for i in again.nodes} == {
        i: original.value(i) for i in original.nodes
    }
