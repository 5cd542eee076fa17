"""What made a versioned ``Memories.save`` cheaper (issue 24's write cost) changes no quad
and lets nothing new through:

* the version of a saved memory is written from the request's own lines with fewer
  checks only when those lines are the body of that request's ``INSERT DATA``
  (``StateLines.sent``); the history graph holds the very quads the term-by-term check
  and the pattern copy write, for contents with quotes, line breaks, non-ASCII and
  control characters;
* lines that are not the request's own are checked term by term, as before;
* the guard's fast path (``find_forbidden``) still finds every spelling of ``SERVICE``
  and ``LOAD``;
* the change log's times, read from the second last read, are the times the IRIs name.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
from pyoxigraph import NamedNode

from rdfmem import RdfStore
from rdfmem.core.errors import InvalidTerm
from rdfmem.core.guard import find_forbidden
from rdfmem.core.terms import sparql_term
from rdfmem.domain import memory_history
from rdfmem.domain.embeddings import vector_literal
from rdfmem.domain.memories import Memories, Memory
from rdfmem.domain.memory_rdf import _delete_request, _triples
from rdfmem.store.history import StateLines, history_graph, time_of_version
from rdfmem.store.indexes.changelist import _version_micros, micros

UTC = dt.timezone.utc
CONTENTS = [
    "The office is in Ghent.",
    'She said "move it"\nto Leuven, then\r\nback\ttwice \\ done',
    "Büro in Köln, 日本語, emoji 🙂",
    "a control \x01 character and \x7f",
    "The office is in Ghent.",
]


def _save_request(memories: Memories, content: str) -> tuple[NamedNode, NamedNode, str, list[str]]:
    # A save's own request, as ``Memories.save`` makes it, with fixed times (so that every
    # store gets the same data).
    graph = memories.graph("global")
    subject = NamedNode("urn:rdfmem:memory:global:office")
    at = dt.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    topics = [["place", "work"], [], ["place"]][len(content) % 3]
    memory = Memory(
        "global", "Office", content, topics, slug="office", inserted_at=at, updated_at=at
    )
    literal = vector_literal(memories.embedder.embed([content])[0])
    lines = _triples(subject, memory, literal)
    update = (
        f"{_delete_request(graph, subject)} ;\nINSERT DATA {{ GRAPH {sparql_term(graph)} "
        f"{{\n{chr(10).join(lines)}\n}} }}"
    )
    return graph, subject, update, lines


def _history_text(store: RdfStore, graph: NamedNode) -> list[str]:
    # The history graph as sorted N-Quads, each activity's token named by its place in
    # time, its times and hour written out as words (the only parts two stores written
    # alike may differ in).
    text = "\n".join(sorted(str(q) for q in store.match(None, None, None, history_graph(graph))))
    tokens = sorted(set(re.findall(r"urn:rdfmem:activity:(\d{8}T\d{6}\.\d{6}Z-[0-9a-f]{8})", text)))
    for i, token in enumerate(tokens):
        text = text.replace(token, f"TOKEN{i}")
    text = re.sub(r'"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z"', '"WHEN"', text)
    return sorted(re.sub(r'"\d{4}-\d\d-\d\dT\d\d"', '"HOUR"', text).split("\n"))


@pytest.mark.parametrize("route", ["checked", "copied"])
def test_a_save_versioned_from_its_sent_lines_writes_the_same_quads(
    tmp_path: Path, route: str
) -> None:
    stores = {
        name: RdfStore.open(tmp_path / name, history=True, agent="urn:agent:notes")
        for name in ("sent", route)
    }
    for content in CONTENTS:
        for name, store in stores.items():
            memories = Memories(store)
            graph, subject, update, lines = _save_request(memories, content)
            with store.exclusive(subject):
                if name == "sent":
                    text = memory_history.versioned(store, update, graph, subject, lines)
                else:
                    states = {subject: StateLines(tuple(lines))} if route == "checked" else None
                    text = (
                        update + " ;\n" + store.versioning_update(graph, [subject], states=states)
                    )
                store.sparql_update(text)
    sent, other = (
        _history_text(s, NamedNode("urn:rdfmem:memories:global")) for s in stores.values()
    )
    assert sent == other
    assert len(sent) > 8 * len(CONTENTS)
    versions = Memories(stores["sent"]).history("global", "Office")
    assert [v.value.content if v.value else None for v in versions] == CONTENTS
    for store in stores.values():
        store.close()


def test_memories_save_on_disk_keeps_each_content_in_its_version(tmp_path: Path) -> None:
    store = RdfStore.open(tmp_path / "m", history=True, agent="urn:agent:notes")
    memories = Memories(store)
    for content in CONTENTS:
        memories.save(Memory("global", "Office", content, ["place"]))
    memories.forget("global", "Office")
    versions = memories.history("global", "Office")
    assert [v.value.content if v.value else None for v in versions] == [*CONTENTS, None]
    assert [v.deleted for v in versions] == [False] * len(CONTENTS) + [True]
    store.close()


def test_lines_that_are_not_the_requests_own_are_checked_term_by_term() -> None:
    # ``versioned`` trusts nothing it cannot see in the request: these lines are not its
    # INSERT DATA, so each is checked, and a line holding more than one triple is refused.
    store = RdfStore(history=True)
    memories = Memories(store)
    graph, subject, update, lines = _save_request(memories, "x")
    smuggled = [
        *lines[:-1],
        f'{sparql_term(subject)} <urn:ex:p> "a" }} }} ; DROP ALL ; INSERT DATA {{ GRAPH <urn:g> {{ <urn:a> <urn:b> <urn:c> .',
    ]
    with pytest.raises(InvalidTerm, match="one N-Triples triple"):
        memory_history.versioned(store, update, graph, subject, smuggled)
    # Told ``sent``, a line with a backslash or a line break is still checked in full.
    for bad in (
        f'{sparql_term(subject)} <urn:ex:p> "a\\" . {sparql_term(subject)} <urn:ex:q> "b" .',
        f'{sparql_term(subject)} <urn:ex:p> "a" .\n{sparql_term(subject)} <urn:ex:q> "b" .',
    ):
        with pytest.raises(InvalidTerm, match="one N-Triples triple"):
            store.versioning_update(
                graph, [subject], states={subject: StateLines((bad,), sent=True)}
            )
    assert store.history_of(graph, subject) == []


def test_the_guards_fast_path_still_finds_every_spelling() -> None:
    blob = '"' + "QUJDRA+/LOA" * 400 + '"^^<urn:ex:v>'  # base64-like, "LOA" in it
    for text, keyword in (
        (f"INSERT DATA {{ <urn:a> <urn:b> {blob} }} ; LoAd <http://evil/>", "LOAD"),
        (f"INSERT DATA {{ <urn:a> <urn:b> {blob} }} ; \u017fervice", "SERVICE"),
        (
            f"ASK {{ {blob.replace('^^<urn:ex:v>', '')} }} # \\u000A SERVI\\u0043E <x> {{}}",
            "SERVICE",
        ),
        ("SELECT * { SERVICE:x { } }", "SERVICE"),
    ):
        found = find_forbidden(text)
        assert found is not None and found.keyword == keyword, text[-60:]
    for text in (
        f"INSERT DATA {{ <urn:a> <urn:b> {blob} }}",
        'INSERT DATA { <urn:a> <urn:load> "a \\" LOAD SERVICE" }',
        "SELECT * { ?s <urn:x/service> ?o } # LOAD",
    ):
        assert find_forbidden(text) is None, text[-60:]


def test_change_log_times_are_the_times_the_iris_name() -> None:
    prefix = "urn:rdfmem:version:"
    tokens = [
        "20261124T193541.148449Z",
        "20261124T193541.000001Z",
        "20261124T193541.999999Z",
        "20261124T193542.000000Z",
        "20261124T193541.148450Z",  # back to a second read before
        "20251231T235959.999999Z",
        "20261124T193542.9999Z",  # too short
        "20261124T193542.99999\u0663Z",  # a digit that is not ASCII
        "20261124T193542.123456X",
        "20261324T193542.123456Z",  # month 13
    ]
    for token in tokens * 2:
        for version in (f"{prefix}{token}-1b94fcaf-0", f"{prefix}{token}"):
            at = time_of_version(version)
            assert _version_micros(version) == (None if at is None else micros(at)), version
    assert _version_micros("urn:rdfmem:activity:20261124T193541.148449Z-1b94fcaf") is None
