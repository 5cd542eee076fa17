"""Scoped memories: fnord's title rules, the store on every backend, scope isolation, search."""

from __future__ import annotations

import base64
from datetime import datetime, timezone
from typing import Any

import pytest
from conftest import StoreFactory
from hypothesis import given, settings
from hypothesis import strategies as st

from rdfmem import RdfStore
from rdfmem.core.errors import InvalidTitle, InvalidValue, MemoryNotFound, MemoryScopeError
from rdfmem.core.ontology import named_query, ontology_path
from rdfmem.embeddings import FLOAT32_VECTOR, HashingEmbedder
from rdfmem.memories import (
    Memories,
    Memory,
    is_valid_title,
    slug_to_title,
    title_problems,
    title_to_slug,
)

# -- titles and slugs (fnord's examples) ----------------------------------------------------

VALID = ["Me", "Meeting Notes", "API v2.0", "foo_bar", "don't panic", "x/y", "2024", "Café"]
INVALID = ["Foo  Bar", "Foo - Bar", "Foo, Bar", "C++ tips", "Foo.", "-Foo", " ", ""]


@pytest.mark.parametrize("title", VALID)
def test_fnords_valid_titles(title: str) -> None:
    assert is_valid_title(title)
    assert title_problems(title) == []


@pytest.mark.parametrize("title", INVALID)
def test_fnords_invalid_titles(title: str) -> None:
    assert not is_valid_title(title)
    assert title_problems(title)


def test_non_ascii_letters_count_as_letters() -> None:
    assert is_valid_title("Café")
    assert is_valid_title("Ünïcode Notes")
    assert is_valid_title("日本語")
    assert is_valid_title("नमस्ते दुनिया")  # vowel signs are combining marks of their letters
    assert title_to_slug("नमस्ते दुनिया") == "नमस्ते-दुनिया"
    assert is_valid_title("Cafe\u0301")  # decomposed é: the same title as "Café"
    assert title_to_slug("Cafe\u0301 Central") == "café-central"


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("API v2.0", "api-v2-0"),
        ("don't panic", "don-t-panic"),
        ("foo_bar", "foo-bar"),
        ("foo-bar", "foo-bar"),
        ("Meeting Notes", "meeting-notes"),
        ("x/y", "x-y"),
        ("2024", "2024"),
        ("  Foo  Bar. ", "foo-bar"),
    ],
)
def test_fnords_slugs(title: str, slug: str) -> None:
    assert title_to_slug(title) == slug


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_any_title_gets_a_clean_slug_and_valid_titles_a_non_empty_one(title: str) -> None:
    slug = title_to_slug(title)
    assert "--" not in slug and not slug.startswith("-") and not slug.endswith("-")
    assert slug == slug.lower()
    assert title_to_slug(slug) == slug
    if is_valid_title(title):
        assert slug


def test_slug_to_title_capitalises_each_word() -> None:
    assert slug_to_title("api-v2-0") == "Api V2 0"
    assert slug_to_title("meeting-notes") == "Meeting Notes"
    assert slug_to_title("don-t-panic") == "Don T Panic"


def test_an_invalid_title_lists_every_reason() -> None:
    problems = title_problems("-Foo  Bar, baz.")
    assert len(problems) == 4
    assert any("starts with '-'" in p for p in problems)
    assert any("ends with '.'" in p for p in problems)
    assert any("'  '" in p for p in problems) and any("', '" in p for p in problems)


def test_memory_fills_slug_and_times_and_takes_fields_by_position() -> None:
    before = datetime.now(timezone.utc)
    m = Memory("global", "API v2.0", "Use /v2.", ["api", "http"])
    assert (m.scope, m.title, m.content, m.topics, m.embeddings) == (
        "global",
        "API v2.0",
        "Use /v2.",
        ["api", "http"],
        None,
    )
    assert m.slug == "api-v2-0"
    assert m.inserted_at >= before and m.updated_at >= before


# -- the store ------------------------------------------------------------------------------


def test_save_then_read_round_trips(store: RdfStore) -> None:
    memories = Memories(store, project="p1", session="s1")
    for scope in ("global", "project", "session"):
        saved = memories.save(
            Memory(scope, "API v2.0", f"{scope} notes", topics=["zeta", "api", "alpha"])
        )
        assert saved.embeddings is not None and len(saved.embeddings) == 512
        got = memories.read(scope, "API v2.0")
        assert got == saved
        assert got.topics == ["zeta", "api", "alpha"]
        assert memories.read(scope, "api-v2-0") == saved  # read by slug
        assert memories.exists(scope, "API v2.0")


def test_a_memorys_repr_leaves_out_its_embeddings(store: RdfStore) -> None:
    saved = Memories(store).save(Memory("global", "Tea", "Eli drinks green tea."))
    assert saved.embeddings is not None and len(saved.embeddings) > 10
    shown = repr(saved)
    assert "embeddings" not in shown and str(saved.embeddings[0]) not in shown
    assert "title='Tea'" in shown and "content='Eli drinks green tea.'" in shown


def test_read_and_forget_of_a_missing_memory_raise(store: RdfStore) -> None:
    memories = Memories(store)
    assert not memories.exists("global", "Nothing")
    with pytest.raises(MemoryNotFound, match="Nothing"):
        memories.read("global", "Nothing")
    with pytest.raises(MemoryNotFound):
        memories.forget("global", "Nothing")


def test_forget_removes_every_triple_of_the_memory(store: RdfStore) -> None:
    memories = Memories(store)
    memories.save(Memory("global", "Keep", "k"))
    memories.save(Memory("global", "Drop", "d", topics=["x", "y"]))
    before = store.count()
    memories.forget("global", "Drop")
    assert not memories.exists("global", "Drop")
    assert memories.list() == ["Keep"]
    assert store.count() == before - 11  # 8 fields, 2 topics, their order


def test_an_invalid_title_is_refused_with_every_reason_and_nothing_stored(store: RdfStore) -> None:
    memories = Memories(store)
    with pytest.raises(InvalidTitle) as info:
        memories.save(Memory("global", "-Foo  Bar.", "content"))
    assert len(info.value.reasons) == 3
    assert info.value.title == "-Foo  Bar."
    assert store.count() == 0


def test_titles_are_unique_by_slug_within_a_scope(store: RdfStore) -> None:
    memories = Memories(store, project="p")
    memories.save(Memory("global", "foo_bar", "first"))
    with pytest.raises(InvalidTitle, match="foo_bar"):
        memories.save(Memory("global", "foo-bar", "second"))
    assert memories.read("global", "foo-bar").content == "first"
    assert memories.exists("global", "Foo Bar")
    memories.save(Memory("project", "foo-bar", "another scope, no clash"))
    assert memories.list() == ["foo_bar", "foo-bar"]


def test_saving_the_same_title_again_replaces_it(store: RdfStore) -> None:
    memories = Memories(store)
    first = memories.save(Memory("global", "Plan", "v1", topics=["a"]))
    second = memories.save(Memory("global", "Plan", "v2 entirely new", topics=["b"]))
    got = memories.read("global", "Plan")
    assert (got.content, got.topics) == ("v2 entirely new", ["b"])
    assert got.inserted_at == first.inserted_at
    assert got.updated_at >= first.updated_at and got == second
    assert memories.list("global") == ["Plan"]
    assert [m.content for m, _ in memories.search("plan")] == ["v2 entirely new"]


def test_append_concatenates_and_makes_new_embeddings(store: RdfStore) -> None:
    memories = Memories(store)
    m = memories.save(Memory("global", "Log", "first."))
    grown = memories.append(m, " kubernetes rollout")
    assert grown.content == "first. kubernetes rollout"
    assert grown.embeddings != m.embeddings
    assert memories.read("global", "Log") == grown
    assert memories.search("kubernetes")[0][0].title == "Log"
    assert memories.append(grown, "!").content == "first. kubernetes rollout!"


def test_list_gives_titles_of_one_or_every_available_scope(store: RdfStore) -> None:
    memories = Memories(store, project="p")
    memories.save(Memory("global", "Zed", "z"))
    memories.save(Memory("global", "Alpha", "a"))
    memories.save(Memory("project", "Mid", "m"))
    assert memories.list("global") == ["Alpha", "Zed"]
    assert memories.list("project") == ["Mid"]
    assert memories.list() == ["Alpha", "Zed", "Mid"]


def test_unavailable_or_unknown_scopes_are_errors(store: RdfStore) -> None:
    memories = Memories(store)
    assert memories.scopes == ("global",)
    with pytest.raises(MemoryScopeError, match="project"):
        memories.save(Memory("project", "Plan", "p"))
    with pytest.raises(MemoryScopeError):
        memories.read("session", "Plan")
    with pytest.raises(MemoryScopeError, match="bogus"):
        memories.exists("bogus", "Plan")
    with pytest.raises(MemoryScopeError):
        Memories(store, project="")
    assert store.count() == 0


def test_projects_and_sessions_never_see_each_other(make_store: StoreFactory) -> None:
    a = Memories(make_store(), project="alpha", session="chat-1")
    b = Memories(make_store(), project="beta", session="chat-2")
    a.save(Memory("project", "Secret Plan", "alpha launches the rocket"))
    a.save(Memory("session", "Scratch", "alpha scratch rocket notes"))
    b.save(Memory("global", "Shared", "everyone may read about the rocket"))
    assert b.list("project") == [] and b.list("session") == []
    assert not b.exists("project", "Secret Plan")
    with pytest.raises(MemoryNotFound):
        b.read("project", "Secret Plan")
    assert [m.title for m, _ in b.search("rocket")] == ["Shared"]
    assert sorted(m.title for m, _ in a.search("rocket")) == ["Scratch", "Secret Plan", "Shared"]
    assert a.graph("project") != b.graph("project")


HOSTILE_TITLES = [
    'Quote"Here',
    "a>b<c",
    "a}b{c",
    "back\\slash",
    "line\nbreak",
    "x'y DROP ALL",
    "Ωμέγα✓notes",
]
HOSTILE_IDS = ['"> } DROP ALL ; #', "a b/c", "../etc", "ünï:code?#%"]


@pytest.mark.parametrize("title", HOSTILE_TITLES)
def test_hostile_titles_and_contents_round_trip(store: RdfStore, title: str) -> None:
    memories = Memories(store, project=HOSTILE_IDS[0])
    content = f'{title} }} ; DELETE WHERE {{ ?s ?p ?o }} """ \x00 end'
    saved = memories.save(Memory("project", title, content, topics=[title, '"}']))
    assert memories.read("project", title) == saved
    assert memories.list("project") == [title]
    assert memories.search(title)[0][0] == saved
    graphs = {q.graph_name for q in store.triples()}
    assert graphs == {memories.graph("project")}
    memories.forget("project", title)
    assert store.count() == 0


@pytest.mark.parametrize("scope_id", HOSTILE_IDS)
def test_hostile_project_and_session_ids_are_kept_apart(store: RdfStore, scope_id: str) -> None:
    hostile = Memories(store, project=scope_id, session=scope_id)
    plain = Memories(store, project="etc", session="etc")
    hostile.save(Memory("project", "Note", "hostile project"))
    hostile.save(Memory("session", "Note", "hostile session"))
    plain.save(Memory("project", "Note", "plain project"))
    assert hostile.read("project", "Note").content == "hostile project"
    assert hostile.read("session", "Note").content == "hostile session"
    assert plain.read("project", "Note").content == "plain project"
    assert not plain.exists("session", "Note")


def test_search_ranks_relevant_memories_first(store: RdfStore) -> None:
    memories = Memories(store, project="web")
    memories.save(Memory("global", "Deploys", "We deploy to production every Tuesday."))
    memories.save(Memory("global", "Tea", "Eli drinks green tea in the morning."))
    memories.save(Memory("project", "Tests", "Run the test suite with pytest before merging."))
    memories.save(Memory("project", "Style", "Answers should be concise and structured."))
    assert memories.search("when do we deploy?")[0][0].title == "Deploys"
    assert memories.search("pytest")[0][0].title == "Tests"
    hits = memories.search("green tea", limit=10)
    assert hits[0][0].title == "Tea"
    scores = [score for _, score in hits]
    assert all(s > 0 for s in scores) and scores == sorted(scores, reverse=True)
    assert len(memories.search("the", limit=1)) <= 1
    assert memories.search("anything", limit=0) == []


def test_search_reads_every_vector_with_one_query(make_store: StoreFactory) -> None:
    counting = CountingStore(make_store().backend)
    memories = Memories(counting, project="p")
    for i in range(40):
        memories.save(Memory("global" if i % 2 else "project", f"Note {i}", f"note number {i}"))
    counting.queries = 0
    hits = memories.search("note number 7", limit=5)
    assert hits[0][0].title == "Note 7"
    assert counting.queries <= 3  # the vectors, then the hits of each scope
    counting.queries = 0
    memories.search("note number 8", limit=5)
    assert counting.queries <= (2 if counting.backend.exclusive_writer else 3)


def test_search_sees_writes_made_through_another_store(make_store: StoreFactory) -> None:
    first = Memories(make_store())
    other = Memories(make_store())
    first.save(Memory("global", "Old", "an old note about llamas"))
    assert [m.title for m, _ in first.search("llamas")] == ["Old"]
    other.save(Memory("global", "New", "llamas llamas llamas"))
    assert [m.title for m, _ in first.search("llamas")] == ["New", "Old"]
    other.forget("global", "New")
    assert [m.title for m, _ in first.search("llamas")] == ["Old"]


def test_embeddings_are_one_compact_literal(store: RdfStore) -> None:
    memories = Memories(store)
    saved = memories.save(Memory("global", "Vec", "vector text"))
    rows = store.select(predicate="https://w3id.org/rdfmem#embedding", object="?v")
    assert len(rows) == 1
    literal = rows[0]["v"]
    assert literal.datatype == FLOAT32_VECTOR  # type: ignore[union-attr]
    assert len(base64.b64decode(literal.value)) == 512 * 4  # float32, no overhead
    assert saved.embeddings == memories.read("global", "Vec").embeddings


def test_given_embeddings_are_kept_and_checked(store: RdfStore) -> None:
    memories = Memories(store, embedder=HashingEmbedder(dimension=4))
    saved = memories.save(Memory("global", "Given", "text", embeddings=[0.5, 0.25, 0.0, -1.0]))
    assert memories.read("global", "Given").embeddings == [0.5, 0.25, 0.0, -1.0] == saved.embeddings
    with pytest.raises(InvalidValue, match="dimensions"):
        memories.save(Memory("global", "Wrong", "text", embeddings=[1.0, 2.0]))
    assert not memories.exists("global", "Wrong")


def test_by_topic_and_the_named_query(store: RdfStore) -> None:
    memories = Memories(store, project="p")
    memories.save(Memory("project", "B Note", "b", topics=["ops", "db"]))
    memories.save(Memory("global", "A Note", "a", topics=["ops"]))
    memories.save(Memory("global", "C Note", "c", topics=["ui"]))
    assert [m.title for m in memories.by_topic("ops")] == ["A Note", "B Note"]
    rows = store.query(named_query("memories_by_topic"), bindings={"topic": "ops"})
    assert [(r["scope"].value, r["title"].value) for r in rows] == [  # type: ignore[union-attr]
        ("global", "A Note"),
        ("project", "B Note"),
    ]


def test_stored_memories_conform_to_the_shapes() -> None:
    pyshacl = pytest.importorskip("pyshacl")
    import rdflib

    store = RdfStore()
    memories = Memories(store, project="p", session="s")
    memories.save(Memory("global", "API v2.0", "x", topics=["a", "b"]))
    memories.save(Memory("project", "Café", "y"))
    memories.save(Memory("session", "Note", "z", topics=["c"]))
    shapes = rdflib.Graph().parse(ontology_path() / "shapes.ttl")
    every = store.query("CONSTRUCT { ?s ?p ?o } WHERE { GRAPH ?g { ?s ?p ?o } }")
    data = rdflib.Graph().parse(data=every.serialize("ntriples").decode(), format="nt")  # type: ignore[union-attr]
    conforms, _, report = pyshacl.validate(data, shacl_graph=shapes)
    assert conforms, report
    data.add(
        (
            rdflib.URIRef("urn:rdfmem:memory:global:api-v2-0"),
            rdflib.URIRef("https://w3id.org/rdfmem#scope"),
            rdflib.Literal("galaxy"),
        )
    )
    assert not pyshacl.validate(data, shacl_graph=shapes)[0]


class CountingStore(RdfStore):
    """An RdfStore that counts its SPARQL queries."""

    queries = 0

    def query(self, sparql: str, **options: Any) -> Any:
        self.queries += 1
        return super().query(sparql, **options)


# -- incomplete records (issue 22, item 3) -------------------------------------------------

_BROKEN = {
    "no content": "DELETE WHERE {{ GRAPH {g} {{ {s} <https://w3id.org/rdfmem#content> ?o }} }}",
    "no title": "DELETE WHERE {{ GRAPH {g} {{ {s} <http://purl.org/dc/terms/title> ?o }} }}",
    "no scope": "DELETE WHERE {{ GRAPH {g} {{ {s} <https://w3id.org/rdfmem#scope> ?o }} }}",
    "content an IRI": (
        "DELETE {{ GRAPH {g} {{ {s} <https://w3id.org/rdfmem#content> ?o }} }} "
        "INSERT {{ GRAPH {g} {{ {s} <https://w3id.org/rdfmem#content> <urn:not:text> }} }} "
        "WHERE {{ GRAPH {g} {{ {s} <https://w3id.org/rdfmem#content> ?o }} }}"
    ),
}


@pytest.mark.parametrize("damage", sorted(_BROKEN))
def test_an_incomplete_record_is_no_memory_on_any_read_path(store: RdfStore, damage: str) -> None:
    memories = Memories(store, project="p")
    memories.save(Memory("project", "Half Written", "tea at five", ["tea"]))
    memories.save(Memory("project", "Whole", "tea at noon", ["tea"]))
    graph = memories.graph("project")
    subject = memories._subject("project", "half-written")
    store.sparql_update(_BROKEN[damage].format(g=f"<{graph.value}>", s=f"<{subject.value}>"))
    # before: listed and "existing", but read raised and search skipped it
    assert memories.list("project") == ["Whole"]
    assert not memories.exists("project", "Half Written")
    with pytest.raises(MemoryNotFound):
        memories.read("project", "Half Written")
    assert [m.title for m, _ in memories.search("tea at five")] == ["Whole"]
    assert [m.title for m in memories.by_topic("tea")] == ["Whole"]
    # save replaces the remains; forget removes them
    memories.save(Memory("project", "Half Written", "tea at six"))
    assert memories.read("project", "Half Written").content == "tea at six"
    store.sparql_update(_BROKEN[damage].format(g=f"<{graph.value}>", s=f"<{subject.value}>"))
    memories.forget("project", "Half Written")
    assert not store.ask(subject=subject, graph=graph)
    with pytest.raises(MemoryNotFound):
        memories.forget("project", "Half Written")
