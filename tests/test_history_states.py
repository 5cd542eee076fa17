"""A domain write that knows the quads it leaves (``versioning_update(..., states=)``,
``memory_history.versioned(..., state=)``) records the very versions the request's own
copy would: the same states, tombstones, links and attribution, on every backend (an
embedded store writes them as data; a server copies them by pattern as before)."""

from __future__ import annotations

import datetime as dt

import pytest
from conftest import StoreFactory
from pyoxigraph import Literal, NamedNode, Quad

from rdfmem import RdfStore
from rdfmem.core.errors import InvalidTerm
from rdfmem.core.terms import sparql_term
from rdfmem.domain import memory_history
from rdfmem.domain.embeddings import vector_literal
from rdfmem.domain.memories import Memories, Memory
from rdfmem.domain.memory_rdf import _delete_request, _triples
from rdfmem.store.history import HistoryClock, Recorder, StateLines

GRAPH = NamedNode("urn:ex:things")
TYPE = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")
LABEL = NamedNode("http://www.w3.org/2000/01/rdf-schema#label")


def _replace(store: RdfStore, subject: NamedNode, quads: list[Quad], *, known: bool) -> None:
    # The way a domain layer writes: all of the subject's quads replaced, then its version.
    g, s = sparql_term(GRAPH), sparql_term(subject)
    update = f"DELETE WHERE {{ GRAPH {g} {{ {s} ?p ?o }} }}"
    if quads:
        body = " ".join(f"{s} {q.predicate} {q.object} ." for q in quads)
        update += f" ;\nINSERT DATA {{ GRAPH {g} {{ {body} }} }}"
    states = {subject: quads} if known else None
    with store.exclusive(subject):
        store.sparql_update(
            update + " ;\n" + store.versioning_update(GRAPH, [subject], states=states)
        )


def _story(store: RdfStore, subject: NamedNode, *, known: bool) -> list[tuple[object, ...]]:
    states = [
        [
            Quad(subject, TYPE, NamedNode("urn:ex:Thing"), GRAPH),
            Quad(subject, LABEL, Literal("first"), GRAPH),
        ],
        [Quad(subject, LABEL, Literal("second", language="en"), GRAPH)],
        [],
        [Quad(subject, LABEL, Literal("back"), GRAPH)],
    ]
    for i, quads in enumerate(states):
        with store.attributed(by=f"urn:agent:a{i}", why=f"step {i}"):
            _replace(store, subject, quads, known=known)
    versions = store.history_of(GRAPH, subject)
    told = [
        (
            sorted((q.predicate.value, str(q.object)) for q in v.state),
            v.deleted,
            v.by,
            v.why,
            v.revision_of == (versions[n - 1].iri if n else None),
            v.invalidated_at is not None,
        )
        for n, v in enumerate(versions)
    ]
    return told


def test_known_states_record_what_the_copy_records(make_store: StoreFactory) -> None:
    store = make_store(history=True, agent="urn:agent:x")
    copied = _story(store, NamedNode("urn:ex:copied"), known=False)
    written = _story(store, NamedNode("urn:ex:written"), known=True)
    assert written == copied
    assert [deleted for _, deleted, *_ in written] == [False, False, True, False]
    assert written[0][0] == [
        ("http://www.w3.org/1999/02/22-rdf-syntax-ns#type", "<urn:ex:Thing>"),
        ("http://www.w3.org/2000/01/rdf-schema#label", '"first"'),
    ]
    # The past reads the same either way.
    subject = NamedNode("urn:ex:written")
    first = store.history_of(GRAPH, subject)[0].at
    assert sorted(map(str, store.as_of_quads(GRAPH, subject, first) or [])) == sorted(
        map(
            str,
            [
                Quad(subject, TYPE, NamedNode("urn:ex:Thing"), GRAPH),
                Quad(subject, LABEL, Literal("first"), GRAPH),
            ],
        )
    )


def test_a_known_state_about_another_subject_is_refused_and_nothing_written() -> None:
    store = RdfStore(history=True)
    subject, other = NamedNode("urn:ex:a"), NamedNode("urn:ex:b")
    with pytest.raises(InvalidTerm, match="only quads about"):
        store.versioning_update(
            GRAPH, [subject], states={subject: [Quad(other, LABEL, Literal("x"), GRAPH)]}
        )
    # Lines are taken only when each is one triple about the subject: nothing else can
    # ride along into the request.
    for line in (
        '<urn:ex:b> <urn:ex:p> "x" .',
        '<urn:ex:a> <urn:ex:p> "x" . <urn:ex:a> <urn:ex:p> "y" .',
        '<urn:ex:a> <urn:ex:p> "x" } } ; DROP ALL ; INSERT DATA { GRAPH <urn:g> { <urn:a> <urn:b> <urn:c> .',
        '<urn:ex:a> <urn:ex:p> "x" . # a comment',
        "<urn:ex:a> <urn:ex:p> <urn:ex:o>",
    ):
        with pytest.raises(InvalidTerm, match="one N-Triples triple"):
            store.versioning_update(GRAPH, [subject], states={subject: StateLines((line,))})
    assert store.history_of(GRAPH, subject) == []


def test_known_lines_and_known_quads_record_the_same_version() -> None:
    store = RdfStore(history=True)
    seen = []
    for subject in (NamedNode("urn:ex:lines"), NamedNode("urn:ex:quads")):
        state = [
            Quad(subject, TYPE, NamedNode("urn:ex:Thing"), GRAPH),
            Quad(subject, LABEL, Literal('say "hi"\n twice', language="en"), GRAPH),
            Quad(
                subject, NamedNode("urn:ex:n"), Literal("7", datatype=NamedNode("urn:ex:i")), GRAPH
            ),
        ]
        lines = tuple(f"{q.subject} {q.predicate} {q.object} ." for q in state)
        given = StateLines(lines) if subject.value.endswith("lines") else state
        with store.exclusive(subject):
            store.sparql_update(
                f"INSERT DATA {{ GRAPH {sparql_term(GRAPH)} {{ {' '.join(lines)} }} }} ;\n"
                + store.versioning_update(GRAPH, [subject], states={subject: given})
            )
        (version,) = store.history_of(GRAPH, subject)
        seen.append(sorted((q.predicate.value, str(q.object)) for q in version.state))
    assert seen[0] == seen[1]
    assert ("http://www.w3.org/1999/02/22-rdf-syntax-ns#type", "<urn:ex:Thing>") in seen[0]
    assert len(seen[0]) == 3


def test_a_comment_or_an_escape_in_a_line_cannot_reach_past_it() -> None:
    # A trailing comment ends with its line (as in N-Triples); a \\u escape, which SPARQL
    # expands before reading, sends the version to the request's own copy.
    store = RdfStore(history=True)
    store.set("kept", 1)
    for subject, line in (
        (
            NamedNode("urn:ex:commented"),
            '<urn:ex:commented> <urn:ex:p> "x" . # } } ; DROP ALL ; INSERT DATA { .',
        ),
        (NamedNode("urn:ex:escaped"), '<urn:ex:escaped> <urn:ex:p> "x\\u0022y" .'),
    ):
        with store.exclusive(subject):
            store.sparql_update(
                f"INSERT DATA {{ GRAPH {sparql_term(GRAPH)} {{\n{line}\n}} }} ;\n"
                + store.versioning_update(GRAPH, [subject], states={subject: StateLines((line,))})
            )
        (version,) = store.history_of(GRAPH, subject)
        assert [(q.predicate.value, q.object) for q in version.state] == [
            ("urn:ex:p", Literal("x" if "commented" in subject.value else 'x"y'))
        ]
    assert store.get("kept") == 1


def test_a_memory_versioned_from_its_lines_reads_back_as_saved(tmp_path: object) -> None:
    # What ``Memories.save`` and ``forget`` pass (``state=`` their lines), on a disk store.
    store = RdfStore.open(f"{tmp_path}/m", history=True, agent="urn:agent:notes")
    memories = Memories(store)
    graph = memories.graph("global")
    subject = NamedNode("urn:rdfmem:memory:global:office")
    for content in ("In Ghent.", "In Leuven."):
        memory = Memory("global", "Office", content, ["place"], slug="office")
        literal = vector_literal(memories.embedder.embed([f"Office\nplace\n{content}"])[0])
        lines = _triples(subject, memory, literal)
        update = (
            f"{_delete_request(graph, subject)} ;\nINSERT DATA {{ GRAPH {sparql_term(graph)} "
            f"{{\n{chr(10).join(lines)}\n}} }}"
        )
        with store.exclusive(subject):
            store.sparql_update(memory_history.versioned(store, update, graph, subject, lines))
    with store.exclusive(subject):
        store.sparql_update(
            memory_history.versioned(store, _delete_request(graph, subject), graph, subject, [])
        )
    versions = memories.history("global", "Office")
    assert [v.value.content if v.value else None for v in versions] == [
        "In Ghent.",
        "In Leuven.",
        None,
    ]
    assert [v.by for v in versions] == ["urn:agent:notes"] * 3
    assert versions[0].value is not None and versions[0].value.topics == ["place"]
    store.close()


def test_a_write_is_later_than_a_head_written_by_a_clock_ahead() -> None:
    # Another process (or client) whose clock runs ahead made the head: the new version
    # still comes after it; a head from the past leaves the time as it is. (Clocks of
    # their own: the process's clock must not jump for the other tests.)
    ahead = NamedNode("urn:rdfmem:version:29991231T235959.999998Z-0a0b0c0d-0-d4")
    past = NamedNode("urn:rdfmem:version:20000101T000000.000000Z-0a0b0c0d-0-d1")
    later = Recorder("urn:agent:x", clock=HistoryClock()).stamp_after([past, ahead])
    assert later.at == dt.datetime(2999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.timezone.utc)
    before = dt.datetime.now(dt.timezone.utc)
    now = Recorder("urn:agent:x", clock=HistoryClock()).stamp_after([past])
    assert before <= now.at <= dt.datetime.now(dt.timezone.utc)


def test_an_embedded_store_writes_a_known_state_as_data(tmp_path: object) -> None:
    # What makes it cheaper: no pattern for Oxigraph to evaluate, from the first version on.
    store = RdfStore.open(f"{tmp_path}/s", history=True)
    subject = NamedNode("urn:ex:s")
    for label in ("one", "two"):
        quads = [Quad(subject, LABEL, Literal(label), GRAPH)]
        operations = store.versioning_update(GRAPH, [subject], states={subject: quads})
        assert "WHERE" not in operations
        _replace(store, subject, quads, known=True)
    assert "WHERE" in store.versioning_update(GRAPH, [subject])
    assert [v.state[0].object.value for v in store.history_of(GRAPH, subject)] == ["one", "two"]
    store.close()
