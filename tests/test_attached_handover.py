"""A process that attaches to an on-disk store starts from the owner's indexes (handed over
in one request at its first look: ``rdfmem.backends.owner_indexes``) instead of reading
every vector, text and node through the socket, and its first answers are the same as a
full read's, whatever was written since the index file was saved: by the owner, by another
attached process, or around the indexes (a raw update). Real processes: the owner runs in a
child process, another attached process in another; this test process attaches last."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rdfmem import DecisionGraph, Memories, Memory, Node, RdfStore
from rdfmem.backends.attached import AttachedBackend
from rdfmem.core.errors import DecisionGraphError

ROOT = Path(__file__).resolve().parents[1]

#: The owner: opens the store, runs the steps named in argv, prints "ready", and keeps the
#: store open until its stdin closes.
OWNER = textwrap.dedent(
    """
    import sys
    from rdfmem import DecisionGraph, Memories, Memory, Node, RdfStore
    store = RdfStore.open(sys.argv[1])
    memories, graph = Memories(store, project="p"), DecisionGraph(store)
    for step in sys.argv[2:]:
        if step == "write":  # through rdfmem: the owner's indexes follow
            memories.save(Memory("project", "Owner zebra", "zebra crossing by the owner"))
            graph.add_node(Node(id="owner-goal", type="goal", label="owner goal"))
            graph.update_node("g1", status="completed")
            graph.delete_node("g2")
            memories.forget("project", "Zebra 4")
        elif step == "read":  # the owner's turn: its indexes brought up to date
            memories.search("zebra crossing", limit=50)
            graph.query("active_goals")
            graph.query("recent_decisions", limit=50)
        elif step == "raw":  # around the indexes: a write of unknown scope
            store.sparql_update(
                "DELETE { GRAPH ?g { ?s ?p ?o } } WHERE { GRAPH ?g { ?s ?p ?o . ?s ?q ?t . "
                "FILTER(isLiteral(?t) && CONTAINS(STR(?t), 'zebra crossing 3')) } }"
            )
            store.sparql_update(
                "DELETE WHERE { GRAPH <urn:rdfmem:graph:decisions> "
                "{ <urn:rdfmem:graph:decisions/node/g6> ?p ?o } }"
            )
    print(type(store.backend).__name__, flush=True)
    sys.stdin.read()
    store.close()
    """
)

#: Another attached process: writes a memory and a goal, and exits.
OTHER = textwrap.dedent(
    """
    import sys
    from rdfmem import DecisionGraph, Memories, Memory, Node, RdfStore
    store = RdfStore.open(sys.argv[1])
    Memories(store, project="p").save(Memory("project", "Other zebra", "zebra crossing other"))
    DecisionGraph(store).add_node(Node(id="other-goal", type="goal", label="other goal"))
    DecisionGraph(store).update_node("g5", label="goal five renamed")
    print(type(store.backend).__name__, flush=True)
    store.close()
    """
)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _made(path: Path) -> None:
    """A store of a few memories and goals, searched once (its indexes are built), then
    closed: the index file is saved beside it."""
    with RdfStore.open(path) as store:
        memories, graph = Memories(store, project="p"), DecisionGraph(store)
        for i in range(12):
            memories.save(Memory("project", f"Zebra {i}", f"zebra crossing {i}"))
        for i in range(8):
            graph.add_node(Node(id=f"g{i}", type="goal", label=f"goal {i}"))
        graph.add_edge({"from_id": "g0", "to_id": "g3", "type": "leads_to"})
        memories.search("zebra", limit=50)
        graph.query("active_goals")
    assert (path / "rdfmem.indexes").exists()


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    _made(path)
    return path


class _Owner:
    def __init__(self, path: Path, *steps: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", OWNER, str(path), *steps],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "OxigraphBackend"

    def stop(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        try:
            assert self.proc.wait(timeout=60) == 0
        finally:
            self.proc.stdout.close()


@pytest.fixture
def owner_of(store_path: Path) -> Iterator[type[_Owner]]:
    started: list[_Owner] = []

    class Started(_Owner):
        def __init__(self, path: Path, *steps: str) -> None:
            super().__init__(path, *steps)
            started.append(self)

    yield Started
    for owner in started:
        owner.stop()


def _other(path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", OTHER, str(path)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "AttachedBackend"


def _answers(store: RdfStore) -> tuple[list[str], list[str], list[str], list[str]]:
    """A first turn's reads: a search, active goals, recent decisions, a node's links."""
    memories, graph = Memories(store, project="p"), DecisionGraph(store)
    found = sorted(m.title for m, _ in memories.search("zebra crossing", limit=50))
    goals = sorted(n.label for n in graph.query("active_goals"))
    recent = sorted(n.id for n in graph.query("recent_decisions", limit=50))
    links = sorted(e.to_id for e in graph.get_edges("g0"))
    return found, goals, recent, links


def _attached(path: Path, *, handover: bool = True) -> RdfStore:
    store = RdfStore.open(path)
    assert isinstance(store.backend, AttachedBackend)
    if not handover:
        store.backend.seed = None  # the full read, as before the handover
    return store


def _first_answers(path: Path) -> tuple[tuple[list[str], ...], tuple[list[str], ...], int]:
    """The first answers of a process that takes the owner's indexes, those of one that
    reads everything, and how many indexes the first was handed."""
    taking, reading = _attached(path), _attached(path, handover=False)
    try:
        # The one that reads everything answers first: both see the same store.
        full = _answers(reading)
        handed = _answers(taking)
        assert isinstance(taking.backend, AttachedBackend)
        return handed, full, taking.backend.handed_over
    finally:
        taking.close()
        reading.close()


def test_the_owner_hands_over_the_indexes_it_opened_with(
    store_path: Path, owner_of: type[_Owner]
) -> None:
    owner_of(store_path)  # opened, nothing read: its indexes are still the file's
    handed, full, count = _first_answers(store_path)
    assert count >= 3  # vectors, keywords, the decision graph
    assert handed == full
    assert "Zebra 11" in handed[0] and "goal 7" in handed[1]


def test_the_first_answers_are_right_after_the_owner_wrote_since_the_file_was_saved(
    store_path: Path, owner_of: type[_Owner]
) -> None:
    owner_of(store_path, "write")
    handed, full, count = _first_answers(store_path)
    assert count >= 3
    assert handed == full
    found, goals, recent, _ = handed
    assert "Owner zebra" in found and "Zebra 4" not in found  # saved, forgotten
    assert "owner goal" in goals  # added
    assert "goal 1" not in goals and "goal 2" not in goals  # completed, deleted
    assert "g2" not in recent


def test_writes_of_another_process_the_owner_did_not_read_are_caught_up(
    store_path: Path, owner_of: type[_Owner]
) -> None:
    owner_of(store_path, "write", "read")  # the owner's indexes are up to date …
    _other(store_path)  # … then another process writes: the owner has not read it yet
    handed, full, count = _first_answers(store_path)
    assert count >= 3  # handed over as of before that write, caught up from the journal
    assert handed == full
    found, goals, _, _ = handed
    assert {"Other zebra", "Owner zebra"} <= set(found)
    assert {"other goal", "owner goal", "goal five renamed"} <= set(goals)


def test_a_write_around_the_indexes_is_never_answered_from_them(
    store_path: Path, owner_of: type[_Owner]
) -> None:
    owner_of(store_path, "write", "read", "raw")  # unknown scope, after the owner's read
    handed, full, _ = _first_answers(store_path)
    assert handed == full
    assert "Zebra 3" not in handed[0]  # removed by the raw updates
    assert "goal 6" not in handed[1] and "g6" not in handed[2]
    assert "Owner zebra" in handed[0] and "owner goal" in handed[1]


def test_then_the_attached_process_follows_writes_as_before(
    store_path: Path, owner_of: type[_Owner]
) -> None:
    owner_of(store_path, "write", "read")
    store = _attached(store_path)
    try:
        first = _answers(store)
        assert isinstance(store.backend, AttachedBackend)
        assert store.backend.handed_over >= 3
        _other(store_path)
        Memories(store, project="p").save(Memory("project", "Mine", "zebra crossing mine"))
        found, goals, _, _ = _answers(store)
        assert {"Other zebra", "Mine"} <= set(found) and "Other zebra" not in first[0]
        assert "other goal" in goals
    finally:
        store.close()


def test_an_owner_without_indexes_hands_nothing_and_the_process_reads_everything(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bare"
    with RdfStore.open(path) as store:
        Memories(store, project="p").save(Memory("project", "Zebra", "zebra crossing"))
    # No saved indexes, and the owner reads nothing: it has none to hand over.
    (path / "rdfmem.indexes").unlink(missing_ok=True)
    owner = _Owner(path)
    try:
        store = _attached(path)
        try:
            found, _, _, _ = _answers(store)
            assert found == ["Zebra"]
            assert isinstance(store.backend, AttachedBackend)
            assert store.backend.handed_over == 0
        finally:
            store.close()
    finally:
        owner.stop()


def test_a_subject_list_asked_off_the_request_path_is_never_wrong_about_absence() -> None:
    """The list of a graph's subjects a handed-over process asks for on a thread of its
    own is taken at some generation; the notes held since then say what it lacks."""
    from rdfmem.backends.attached_changes import Replica

    epoch, graph = "e" * 32, "urn:g"

    def replica() -> Replica:
        made = Replica()
        made.adopt({"epoch": epoch, "generation": 10, "everything": True}, "")
        notes = {"epoch": epoch, "generation": 12, "everything": False, "whole": []}
        made.adopt({**notes, "subjects": [[graph, "urn:new"]]}, f"{epoch} 10")
        return made

    held = replica()  # listed at 11: urn:new, named by a note after it, may exist now
    held.adopt_listing(graph, epoch, 11, ["urn:old"])
    assert held.known([(graph, "urn:absent")], (epoch, 12)) == []
    assert held.known([(graph, "urn:old")], (epoch, 12)) is None
    assert held.known([(graph, "urn:new")], (epoch, 12)) is None
    assert held.known([(graph, "urn:absent")], (epoch, 13)) is None  # someone wrote since

    older = replica()  # listed before the notes held begin: what changed between is unknown
    older.adopt_listing(graph, epoch, 9, ["urn:old"])
    assert older.known([(graph, "urn:absent")], (epoch, 12)) is None

    other = replica()  # another owner's list
    other.adopt_listing(graph, "f" * 32, 11, ["urn:old"])
    assert other.known([(graph, "urn:absent")], (epoch, 12)) is None

    whole = Replica()  # the graph changed whole after the list was taken
    whole.adopt({"epoch": epoch, "generation": 10, "everything": True}, "")
    notes = {"epoch": epoch, "generation": 12, "everything": False, "subjects": []}
    whole.adopt({**notes, "whole": [graph]}, f"{epoch} 10")
    whole.adopt_listing(graph, epoch, 11, ["urn:old"])
    assert whole.known([(graph, "urn:absent")], (epoch, 12)) is None


def test_a_handed_over_process_lists_subjects_without_making_a_turn_wait(
    store_path: Path, owner_of: type[_Owner]
) -> None:
    owner_of(store_path, "write", "read")
    store = _attached(store_path)
    try:
        graph = DecisionGraph(store)
        _answers(store)
        graph.add_node(Node(id="fresh-1", type="goal", label="fresh one"))  # asked, listed later
        assert isinstance(store.backend, AttachedBackend)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the list arrives off the request path
            before = store.backend.requests_sent
            graph.add_node(
                Node(
                    id=f"fresh-{int(deadline * 1000 - time.monotonic() * 1000)}",
                    type="goal",
                    label="x",
                )
            )
            if store.backend.requests_sent - before == 1:  # only its write: checked here
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the decision graph's subjects never came")
        with pytest.raises(DecisionGraphError, match="already exists"):
            graph.add_node(Node(id="fresh-1", type="goal", label="again"))
        assert "fresh one" in [n.label for n in graph.query("active_goals")]
    finally:
        store.close()
