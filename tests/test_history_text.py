"""A versioned key/value write on an embedded Oxigraph store sends its history as SPARQL
DATA text written straight from strings (``history_text.record_text``, issue 24): it must record
exactly the quads ``Recorder.record`` makes, and a store written that way reads back the
same history as one written through ``Quad`` objects."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

import pytest
from pyoxigraph import Literal, NamedNode, Quad
from stored_quads import stored, stored_text

from rdfmem import RdfStore
from rdfmem.backends.oxigraph import OxigraphBackend
from rdfmem.store.history import VALUE, HistoryClock, Recorder, attributed
from rdfmem.store.history_text import record_text

UTC = dt.timezone.utc
GRAPH = NamedNode("urn:rdfmem:graph:store")
PRED = NamedNode("urn:rdfmem:store:value")
RDF_JSON = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#JSON")
A = NamedNode("urn:rdfmem:store:a")
B = NamedNode("urn:rdfmem:store:b")
PREV = NamedNode("urn:rdfmem:version:20251231T000000.000000Z-0a0b0c0d-0-d3")
OLD = NamedNode("urn:rdfmem:version:20251230T000000.000000Z-0a0b0c0d-0")  # no -d place


class _FixedClock(HistoryClock):
    def now(self, after: dt.datetime | None = None) -> dt.datetime:
        return dt.datetime(2026, 1, 1, 12, 30, 0, 7, tzinfo=UTC)


def _entry(subject: NamedNode, value: object) -> Quad:
    return Quad(subject, PRED, Literal(json.dumps(value), datatype=RDF_JSON), GRAPH)


CASES = {
    "first version": ([(A, [_entry(A, {"n": 1})])], {}),
    "a revision": ([(A, [_entry(A, 'quote " and\nnewline é')])], {A: PREV}),
    "a deletion": ([(A, [])], {A: PREV}),
    "two keys, one head without a place": ([(A, [_entry(A, 1)]), (B, [])], {A: PREV, B: OLD}),
}


@pytest.mark.parametrize("why", [None, 'a "quoted" reason\non two lines, ünïcode'])
@pytest.mark.parametrize("case", sorted(CASES))
def test_record_text_holds_the_quads_of_record(case: str, why: str | None) -> None:
    changes, heads = CASES[case]
    recorder = Recorder("urn:agent:default", clock=_FixedClock())
    with attributed(by="urn:agent:writer", why=why):
        random.seed(24)
        made_quads: list[tuple[str, str, bool]] = []
        gone, added = recorder.record(GRAPH, changes, heads, rename={PRED: VALUE}, made=made_quads)
        random.seed(24)
        made_text: list[tuple[str, str, bool]] = []
        removed, inserted = record_text(
            recorder, GRAPH, changes, heads, rename={PRED: VALUE}, made=made_text
        )
    assert stored_text(inserted) == stored(added)
    assert stored_text(removed) == stored(gone)
    assert made_text == made_quads


def test_an_on_disk_store_reads_back_what_the_text_route_wrote(tmp_path: Path) -> None:
    store = RdfStore.open(tmp_path / "s", history=True, agent="urn:agent:a")
    try:
        assert isinstance(store.backend, OxigraphBackend)
        store.set("meeting", "Monday")
        between = dt.datetime.now(UTC)
        with store.attributed(by="urn:agent:planner", why='moved: "Tuesday"'):
            store.set("meeting", "Tuesday")
        store.update_many(["meeting", "room"], lambda _: {"room": 4})
        versions = store.history("meeting")
        assert [(v.value, v.by, v.why, v.deleted) for v in versions] == [
            ("Monday", "urn:agent:a", None, False),
            ("Tuesday", "urn:agent:planner", 'moved: "Tuesday"', False),
            (None, "urn:agent:a", None, True),
        ]
        assert versions[1].revision_of == versions[0].iri
        assert versions[0].invalidated_at == versions[1].at
        assert store.get("meeting", as_of=between) == "Monday"
        assert store.keys() == ["room"]
    finally:
        store.close()
    # Reopened: the version index starts empty and reads what the text route wrote.
    again = RdfStore.open(tmp_path / "s", history=True)
    try:
        assert [v.value for v in again.history("meeting")] == ["Monday", "Tuesday", None]
        assert again.get("meeting", as_of=between) == "Monday"
        again.set("meeting", "Friday")  # the chain goes on from the stored head
        last = again.history("meeting")[-1]
        assert last.value == "Friday" and last.revision_of == versions[-1].iri
    finally:
        again.close()
