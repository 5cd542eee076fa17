"""A key/value write on an embedded Oxigraph store keeping history is one request made
from strings (``rdfmem.store.history_entry``, issue 24's write cost): it must write the
entry and record exactly the quads ``Recorder.record`` makes, and a store written that way
must read back the same history, on disk and after reopening. A domain write takes its
heads from the version index when it knows them: the chains stay whole."""

from __future__ import annotations

import datetime as dt
import json
import random
import threading
from itertools import pairwise
from pathlib import Path

import pytest
from pyoxigraph import Literal, NamedNode, Quad
from stored_quads import stored, stored_text

from rdfmem import RdfStore
from rdfmem.domain.memories import Memories, Memory
from rdfmem.store.history import LATEST, VALUE, HistoryClock, Recorder, attributed
from rdfmem.store.history_entry import EntryTexts, entry_request

UTC = dt.timezone.utc
GRAPH = NamedNode("urn:rdfmem:graph:store")
HISTORY = NamedNode("urn:rdfmem:history:urn:rdfmem:graph:store")
PRED = NamedNode("urn:rdfmem:store:value")
RDF_JSON = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#JSON")
A = NamedNode("urn:rdfmem:store:a")
PREV = "urn:rdfmem:version:20251231T000000.000000Z-0a0b0c0d-0-d3"
OLD = "urn:rdfmem:version:20251230T000000.000000Z-0a0b0c0d-0"  # no -d place


class _FixedClock(HistoryClock):
    def now(self, after: dt.datetime | None = None) -> dt.datetime:
        return dt.datetime(2026, 1, 1, 12, 30, 0, 7, tzinfo=UTC)


def _value(value: object) -> Literal:
    return Literal(json.dumps(value, ensure_ascii=False), datatype=RDF_JSON)


#: (head, old value, new value: None deletes)
CASES = {
    "first version": (None, None, {"n": 1}),
    "a revision": (PREV, 1, 'quote " and\nnewline é \\ backslash'),
    "a deletion": (PREV, {"n": 2}, None),
    "a head without a place": (OLD, None, [1, 2]),
}


@pytest.mark.parametrize("why", [None, 'a "quoted" reason\non two lines, ünïcode'])
@pytest.mark.parametrize("case", sorted(CASES))
def test_entry_request_holds_the_entry_and_the_quads_of_record(case: str, why: str | None) -> None:
    head, old, new = CASES[case]
    recorder = Recorder("urn:agent:default", clock=_FixedClock())
    old_values = [] if old is None else [_value(old)]
    new_values = [] if new is None else [_value(new)]
    old_quads = [Quad(A, PRED, v, GRAPH) for v in old_values]
    new_quads = [Quad(A, PRED, v, GRAPH) for v in new_values]
    heads = {} if head is None else {A: NamedNode(head)}
    texts = EntryTexts(GRAPH.value, PRED.value)
    with attributed(by="urn:agent:writer", why=why):
        random.seed(24)
        made: list[tuple[str, str, bool]] = []
        gone, added = recorder.record(
            GRAPH, [(A, new_quads)], heads, rename={PRED: VALUE}, made=made
        )
        token = next(q.subject.value for q in added if q.predicate.value.endswith("endedAtTime"))
        write = entry_request(
            recorder,
            texts,
            A.value,
            head,
            old_values,
            new_values,
            when=token.rsplit(":", 1)[1],
        )
    assert stored_text(write.added) == stored(new_quads + added)
    assert stored_text(write.removed) == stored(old_quads + gone)
    assert [(A.value, write.version, write.deleted)] == made
    assert (write.by, write.why) == ("urn:agent:writer", why)


def test_an_on_disk_store_reads_back_what_one_request_wrote(tmp_path: Path) -> None:
    store = RdfStore.open(tmp_path / "s", history=True, agent="urn:agent:a")
    try:
        store.set("meeting", "Monday")
        between = dt.datetime.now(UTC)
        with store.attributed(by="urn:agent:planner", why='moved: "Tuesday"'):
            store.set("meeting", "Tuesday")
        assert store.update("meeting", lambda v: v + "!") == "Tuesday!"
        assert store.delete("meeting") is True
        assert store.delete("meeting") is False  # nothing to delete: nothing recorded
        versions = store.history("meeting")
        assert [(v.value, v.by, v.why, v.deleted) for v in versions] == [
            ("Monday", "urn:agent:a", None, False),
            ("Tuesday", "urn:agent:planner", 'moved: "Tuesday"', False),
            ("Tuesday!", "urn:agent:a", None, False),
            (None, "urn:agent:a", None, True),
        ]
        for before, after in pairwise(versions):
            assert after.revision_of == before.iri
            assert before.invalidated_at == after.at
        assert store.get("meeting", as_of=between) == "Monday"
        assert store.get("meeting") is None and store.keys() == []
        # One head per resource, the newest version.
        heads = list(store.backend.match(None, LATEST, None, HISTORY))
        assert [q.object.value for q in heads] == [versions[-1].iri]
        assert [c.key for c in store.changes_since(versions[0].at)] == ["meeting"] * 4
    finally:
        store.close()
    again = RdfStore.open(tmp_path / "s", history=True)
    try:
        assert [v.value for v in again.history("meeting")] == [
            "Monday",
            "Tuesday",
            "Tuesday!",
            None,
        ]
        again.set("meeting", "Friday")  # the chain goes on from the stored head
        last = again.history("meeting")[-1]
        assert last.value == "Friday" and last.revision_of == versions[-1].iri
        assert again.get("meeting", as_of=between) == "Monday"
    finally:
        again.close()


def test_an_entry_written_around_rdfmem_is_replaced_and_versioned() -> None:
    # Not a literal (an IRI written by a raw update): the write takes the general route.
    store = RdfStore(history=True, agent="urn:agent:a")
    store.sparql_update(
        f"INSERT DATA {{ GRAPH <{GRAPH.value}> {{ <{A.value}> <{PRED.value}> <urn:ex:x> }} }}"
    )
    store.set("a", 1)
    store.set("a", 2)
    assert store.get("a") == 2
    assert len(list(store.backend.match(A, PRED, None, GRAPH))) == 1
    assert [v.value for v in store.history("a")] == [1, 2]


def test_threads_leave_one_version_per_write_in_one_chain(tmp_path: Path) -> None:
    store = RdfStore.open(tmp_path / "s", history=True)
    try:

        def work() -> None:
            for _ in range(25):
                store.update("counter", lambda n: (n or 0) + 1)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        versions = store.history("counter")
        assert [v.value for v in versions] == list(range(1, 101))
        assert all(b.revision_of == a.iri for a, b in pairwise(versions))
    finally:
        store.close()


def test_saves_take_their_heads_from_the_version_index_and_keep_one_chain(
    tmp_path: Path,
) -> None:
    store = RdfStore.open(tmp_path / "s", history=True, agent="urn:agent:notes")
    memories = Memories(store)
    graph = memories.graph("global")
    history = NamedNode("urn:rdfmem:history:" + graph.value)
    try:
        for i in range(3):
            memories.save(Memory("global", "Office", f"The office is on floor {i}."))
        # Written around rdfmem: the index is stale, the head is read from the store.
        store.sparql_update("INSERT DATA { GRAPH <urn:ex:g> { <urn:ex:a> <urn:ex:b> 1 } }")
        memories.save(Memory("global", "Office", "The office is on floor 3."))
        memories.save(Memory("global", "Office", "The office is on floor 4."))
    finally:
        store.close()
    again = Memories(RdfStore.open(tmp_path / "s", history=True))
    try:
        # Reopened: the saved index, or the store's head, names the predecessor.
        again.save(Memory("global", "Office", "The office is on floor 5."))
        versions = again.history("global", "Office")
        assert [v.value.content for v in versions if v.value] == [
            f"The office is on floor {i}." for i in range(6)
        ]
        assert versions[0].revision_of is None
        assert all(b.revision_of == a.iri for a, b in pairwise(versions))
        heads = list(again.store.backend.match(None, LATEST, None, history))
        assert [q.object.value for q in heads] == [versions[-1].iri]
    finally:
        again.store.close()
