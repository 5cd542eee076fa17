"""Generalisations: the GEN|v1| wire format (Gralkor's cases) and the RDF store, every backend."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyoxigraph import Literal, NamedNode

from rdfmem import RdfStore
from rdfmem.core.errors import (
    GeneralisationNotFound,
    GeneralisationParseError,
    InvalidKey,
    NotAGeneralisation,
)
from rdfmem.core.ontology import named_query, ontology_path
from rdfmem.generalisations import PREFIX, Generalisation, Generalisations, decode, encode

GRALKOR_HEADER = 'GEN|v1|{"id":"abc123","level":2,"confidence":0.85,"generalises":["def456"]}'
GRALKOR_TEXT = "Eli prefers concise, structured responses by default."


def gen(
    id: str = "abc123",
    content: str = GRALKOR_TEXT,
    level: int = 2,
    confidence: float = 0.85,
    generalises: list[str] | None = None,
    created_at: datetime | None = None,
) -> Generalisation:
    return Generalisation(
        id=id,
        content=content,
        level=level,
        confidence=confidence,
        generalises=generalises or [],
        created_at=created_at,
    )


# -- the wire format ----------------------------------------------------------------------


def test_encode_writes_gralkors_header_line_then_the_content() -> None:
    raw = encode(gen(generalises=["def456"]))
    assert raw == f"{GRALKOR_HEADER}\n{GRALKOR_TEXT}"
    assert raw.startswith(PREFIX)


def test_decode_reads_gralkors_example() -> None:
    g, content = decode(f"{GRALKOR_HEADER}\n{GRALKOR_TEXT}")
    assert (g.id, g.level, g.confidence, g.generalises) == ("abc123", 2, 0.85, ["def456"])
    assert content == g.content == GRALKOR_TEXT
    assert g.created_at is None


def test_round_trip_keeps_every_field_but_created_at() -> None:
    original = gen(generalises=["b", "a"], created_at=datetime(2024, 1, 2, tzinfo=timezone.utc))
    back, _ = decode(encode(original))
    assert back == original.model_copy(update={"created_at": None})
    assert "created_at" not in encode(original)


def test_decode_trims_content_and_keeps_inner_newlines() -> None:
    raw = PREFIX + '{"id":"x","level":0,"confidence":0.5}\n\n   line one\n\nline two  \n\t'
    _, content = decode(raw)
    assert content == "line one\n\nline two"


def test_multi_line_content_survives_the_round_trip() -> None:
    text = "first line\nsecond line\n  indented third"
    _, content = decode(encode(gen(content=text)))
    assert content == text


def test_only_the_first_newline_splits_header_from_content() -> None:
    raw = PREFIX + '{"id":"x","level":1,"confidence":1}\n' + PREFIX + '{"id":"y"}\nmore'
    g, content = decode(raw)
    assert g.id == "x"
    assert content == PREFIX + '{"id":"y"}\nmore'


def test_generalises_defaults_to_an_empty_list() -> None:
    g, _ = decode(PREFIX + '{"id":"x","level":1,"confidence":0.5}\ntext')
    assert g.generalises == []
    g, _ = decode(PREFIX + '{"id":"x","level":1,"confidence":0.5,"generalises":null}\ntext')
    assert g.generalises == []


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "Eli prefers concise answers.",
        "GEN|v1|" + '{"id":"x","level":1,"confidence":0.5}',  # no newline
        "gen|v1|" + '{"id":"x","level":1,"confidence":0.5}\ntext',
        "GEN|v2|" + '{"id":"x","level":1,"confidence":0.5}\ntext',
        "note\nGEN|v1|" + '{"id":"x","level":1,"confidence":0.5}\ntext',
        " GEN|v1|" + '{"id":"x","level":1,"confidence":0.5}\ntext',
    ],
)
def test_text_that_is_not_a_generalisation(raw: str) -> None:
    with pytest.raises(NotAGeneralisation):
        decode(raw)


@pytest.mark.parametrize(
    "header",
    ["{not json", '{"id":"x",', "", '"just a string"', "[1, 2]", "null", "42"],
)
def test_a_malformed_header_is_a_parse_error_about_the_metadata(header: str) -> None:
    with pytest.raises(GeneralisationParseError) as info:
        decode(f"{PREFIX}{header}\ncontent")
    assert info.value.field == "metadata"


@pytest.mark.parametrize("missing", ["id", "level", "confidence"])
def test_a_missing_field_is_a_parse_error_naming_it(missing: str) -> None:
    meta = {"id": "x", "level": 1, "confidence": 0.5}
    del meta[missing]
    with pytest.raises(GeneralisationParseError) as info:
        decode(f"{PREFIX}{json.dumps(meta)}\ncontent")
    assert info.value.field == missing
    assert missing in str(info.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("id", ""),
        ("id", 7),
        ("level", "two"),
        ("level", -1),
        ("level", 1.5),
        ("confidence", "high"),
        ("confidence", 1.5),
        ("confidence", True),
        ("generalises", "abc"),
        ("generalises", [1, 2]),
    ],
)
def test_a_mistyped_field_is_a_parse_error_naming_it(field: str, value: object) -> None:
    meta: dict[str, object] = {"id": "x", "level": 1, "confidence": 0.5}
    meta[field] = value
    with pytest.raises(GeneralisationParseError) as info:
        decode(f"{PREFIX}{json.dumps(meta)}\ncontent")
    assert info.value.field == field


@settings(max_examples=60, deadline=None)
@given(
    id=st.text(min_size=1, max_size=20),
    content=st.text(max_size=80),
    level=st.integers(min_value=0, max_value=10**6),
    confidence=st.floats(min_value=0, max_value=1),
    generalises=st.lists(st.text(min_size=1, max_size=10), max_size=4, unique=True),
)
def test_any_generalisation_round_trips_with_its_content_trimmed(
    id: str, content: str, level: int, confidence: float, generalises: list[str]
) -> None:
    g = Generalisation(
        id=id, content=content, level=level, confidence=confidence, generalises=generalises
    )
    raw = encode(g)
    assert raw.split("\n", 1)[0].startswith(PREFIX)
    back, text = decode(raw)
    assert back == g.model_copy(update={"content": content.strip()})
    assert text == content.strip()


def test_fields_may_be_given_by_position() -> None:
    g = Generalisation("g1", "text", 3, 0.5, ["g0"])
    assert (g.id, g.content, g.level, g.confidence, g.generalises) == ("g1", "text", 3, 0.5, ["g0"])


# -- the store ----------------------------------------------------------------------------


def test_add_then_get_returns_what_was_stored(store: RdfStore) -> None:
    gens = Generalisations(store, "eli")
    stored = gens.add(gen(generalises=["z9", "a1", "m5"]))
    assert stored.created_at is not None
    assert gens.get("abc123") == stored
    assert gens.get("abc123").generalises == ["z9", "a1", "m5"]
    assert "abc123" in gens and "nope" not in gens


def test_get_of_a_missing_id_raises(store: RdfStore) -> None:
    with pytest.raises(GeneralisationNotFound, match="nope"):
        Generalisations(store, "eli").get("nope")


def test_each_group_is_its_own_named_graph(store: RdfStore) -> None:
    a, b = Generalisations(store, "alice"), Generalisations(store, "bob")
    a.add(gen(content="Alice likes tea."))
    b.add(gen(content="Bob likes coffee."))
    assert a.get("abc123").content == "Alice likes tea."
    assert b.get("abc123").content == "Bob likes coffee."
    assert a.graph.value.endswith("alice_gen") and a.partition == "alice_gen"
    graphs = {q.graph_name.value for q in store.triples() if isinstance(q.graph_name, NamedNode)}
    assert {a.graph.value, b.graph.value} <= graphs
    assert [g.content for g, _ in a.search("coffee")] == []


@pytest.mark.parametrize("group", ["", "a b", "a/b", "a:b", "a>b", "ok\n", "café", "x_gen}"])
def test_group_ids_outside_the_pattern_are_refused(store: RdfStore, group: str) -> None:
    with pytest.raises(InvalidKey, match="group id"):
        Generalisations(store, group)


def test_update_replaces_in_place(store: RdfStore) -> None:
    gens = Generalisations(store, "eli")
    first = gens.add(gen(confidence=0.5))
    updated = gens.update(gen(content="Eli prefers short answers.", confidence=0.9, level=3))
    assert updated.created_at == first.created_at
    got = gens.get("abc123")
    assert (got.content, got.confidence, got.level) == ("Eli prefers short answers.", 0.9, 3)
    rows = store.query("SELECT ?c WHERE { GRAPH ?g { ?s <https://w3id.org/rdfmem#content> ?c } }")
    assert [r["c"].value for r in rows] == ["Eli prefers short answers."]  # type: ignore[union-attr]
    assert store.ask(
        subject=gens.subject("abc123"), predicate="http://purl.org/dc/terms/modified", object="?t"
    )


def test_adding_the_same_id_again_replaces_it(store: RdfStore) -> None:
    gens = Generalisations(store, "eli")
    gens.add(gen(content="old"))
    gens.add(gen(content="new"))
    assert gens.get("abc123").content == "new"
    assert gens.by_level(2) == [gens.get("abc123")]


def test_update_of_a_missing_id_raises_and_writes_nothing(store: RdfStore) -> None:
    gens = Generalisations(store, "eli")
    before = store.count()
    with pytest.raises(GeneralisationNotFound):
        gens.update(gen(id="ghost"))
    assert store.count() == before


def test_delete_removes_it_and_says_whether_there_was_one(store: RdfStore) -> None:
    gens = Generalisations(store, "eli")
    gens.add(gen(id="keep"))
    gens.add(gen(id="drop"))
    assert gens.delete("drop") is True
    with pytest.raises(GeneralisationNotFound):
        gens.get("drop")
    assert gens.get("keep").id == "keep"
    assert gens.delete("drop") is False  # one rule for every delete verb: a bool
    assert [g.id for g, _ in gens.search(GRALKOR_TEXT)] == ["keep"]


def test_by_level_lists_one_level_most_confident_first(store: RdfStore) -> None:
    gens = Generalisations(store, "eli")
    gens.add(gen(id="a", level=1, confidence=0.2))
    gens.add(gen(id="b", level=1, confidence=0.9))
    gens.add(gen(id="c", level=2, confidence=0.5))
    assert [g.id for g in gens.by_level(1)] == ["b", "a"]
    assert [g.id for g in gens.by_level(2)] == ["c"]
    assert gens.by_level(7) == []


def test_lineage_follows_generalises_transitively(store: RdfStore) -> None:
    gens = Generalisations(store, "eli")
    gens.add(gen(id="fact1", level=0))
    gens.add(gen(id="fact2", level=0))
    gens.add(gen(id="mid", level=1, generalises=["fact1", "fact2"]))
    gens.add(gen(id="top", level=2, generalises=["mid", "missing"]))
    gens.add(gen(id="other", level=1))
    assert [g.id for g in gens.lineage("top")] == ["mid", "fact1", "fact2"]
    assert [g.id for g in gens.lineage("mid")] == ["fact1", "fact2"]
    assert gens.lineage("fact1") == []


def test_lineage_of_a_deep_chain_and_a_cycle(store: RdfStore) -> None:
    gens = Generalisations(store, "eli")
    for level in range(15):
        below = [f"g{level - 1}"] if level else ["g14"]  # g0 closes a cycle
        gens.add(gen(id=f"g{level}", level=level, generalises=below))
    lineage = [g.id for g in gens.lineage("g14")]
    assert lineage == [f"g{level}" for level in range(13, -1, -1)]  # g14 itself left out


def test_lineage_of_a_missing_id_raises(store: RdfStore) -> None:
    with pytest.raises(GeneralisationNotFound):
        Generalisations(store, "eli").lineage("nope")


def test_search_ranks_by_content_and_its_hits_decode(store: RdfStore) -> None:
    gens = Generalisations(store, "eli")
    gens.add(gen(id="style", content=GRALKOR_TEXT))
    gens.add(gen(id="tea", content="Eli drinks green tea every morning."))
    gens.add(gen(id="deploy", content="Deployments happen on Tuesdays after the standup."))
    hits = gens.search("what kind of responses does Eli prefer?", 2)
    assert hits[0][0].id == "style"
    assert len(hits) <= 2
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    for g, _ in hits:
        back, content = decode(encode(g))
        assert (back.id, content) == (g.id, g.content)
    assert gens.search("tuesday deployments", 1)[0][0].id == "deploy"
    assert gens.search("anything", 0) == []


def test_search_takes_query_as_memories_search_does_and_text_still_works(store: RdfStore) -> None:
    gens = Generalisations(store, "eli")
    gens.add(gen(id="style", content=GRALKOR_TEXT))
    gens.add(gen(id="tea", content="Eli drinks green tea every morning."))
    by_position = gens.search("green tea in the morning", 2)
    assert by_position[0][0].id == "tea"
    assert gens.search(query="green tea in the morning", limit=2) == by_position
    assert gens.search(text="green tea in the morning", limit=2) == by_position
    with pytest.raises(TypeError, match="not both"):
        gens.search("tea", text="tea")
    with pytest.raises(TypeError, match="needs the text"):
        gens.search()


def test_the_rdf_reads_without_the_wire_format(store: RdfStore) -> None:
    gens = Generalisations(store, "eli")
    gens.add(gen(id="fact", level=0, content="Eli asked for bullet points."))
    gens.add(gen(id="abc123", generalises=["fact"]))
    rows = store.query(
        """
        PREFIX rm: <https://w3id.org/rdfmem#>
        PREFIX dcterms: <http://purl.org/dc/terms/>
        PREFIX prov: <http://www.w3.org/ns/prov#>
        SELECT ?level ?confidence ?content ?sourceText WHERE {
          GRAPH <urn:rdfmem:partition:eli_gen> {
            ?g a rm:Generalisation ; dcterms:identifier "abc123" ; rm:level ?level ;
               rm:confidence ?confidence ; rm:content ?content ; prov:wasDerivedFrom ?source ;
               dcterms:created ?created .
            ?source rm:content ?sourceText .
          }
        }
        """
    )
    row = rows[0]  # type: ignore[index]
    assert int(row["level"].value) == 2
    assert float(row["confidence"].value) == 0.85
    assert row["content"].value == GRALKOR_TEXT
    assert row["sourceText"].value == "Eli asked for bullet points."


HOSTILE = [
    'x" } ; DROP ALL ; INSERT DATA { <urn:x> <urn:y> "z',
    "> <urn:evil> <urn:evil> .",
    "new\nline\r\ttab",
    "spaces and %20 percent",
    "ünïcødé ✓ 🚀",
    "back\\slash 'quote'",
    "a:b#c?d/e",
]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_ids_and_contents_round_trip_without_injection(
    store: RdfStore, hostile: str
) -> None:
    gens = Generalisations(store, "eli")
    gens.add(gen(id="plain"))
    stored = gens.add(gen(id=hostile, content=hostile, generalises=["plain", hostile + "!"]))
    assert gens.get(hostile) == stored
    assert stored.content == hostile
    assert [g.id for g in gens.lineage(hostile)] == ["plain"]
    graphs = {str(q.graph_name) for q in store.triples()}
    assert graphs == {"<urn:rdfmem:partition:eli_gen>"}
    assert not store.ask(subject="urn:x", predicate="?p", object="?o")
    gens.delete(hostile)
    assert hostile not in gens and "plain" in gens


def test_named_queries_run_on_every_backend(store: RdfStore) -> None:
    gens = Generalisations(store, "eli")
    gens.add(gen(id="a", level=0))
    gens.add(gen(id="b", level=1, generalises=["a"]))
    other = Generalisations(store, "zed")
    other.add(gen(id="b", level=1))
    by_level = store.query(named_query("generalisations_by_level"), bindings={"level": 1})
    assert sorted(r["graph"].value for r in by_level) == [  # type: ignore[union-attr]
        "urn:rdfmem:partition:eli_gen",
        "urn:rdfmem:partition:zed_gen",
    ]
    lineage = store.query(
        named_query("generalisation_lineage"), bindings={"graph": gens.graph, "id": Literal("b")}
    )
    assert [r["generalisationId"].value for r in lineage] == ["a"]  # type: ignore[union-attr]


def test_stored_generalisations_conform_to_the_shapes() -> None:
    pyshacl = pytest.importorskip("pyshacl")
    import rdflib

    store = RdfStore()
    gens = Generalisations(store, "eli")
    gens.add(gen(id="a", level=0))
    gens.add(gen(id="b", generalises=["a", "c"]))
    gens.update(gen(id="b", generalises=["a"]))
    shapes = rdflib.Graph().parse(ontology_path() / "shapes.ttl")
    conforms, _, report = pyshacl.validate(union_graph(store), shacl_graph=shapes)
    assert conforms, report
    broken = RdfStore()
    broken.load(
        "<urn:g> a <https://w3id.org/rdfmem#Generalisation> ; <https://w3id.org/rdfmem#level> -1 .",
        "turtle",
        graph="urn:rdfmem:partition:x_gen",
    )
    assert not pyshacl.validate(union_graph(broken), shacl_graph=shapes)[0]


def union_graph(store: RdfStore) -> object:
    """Every triple of every graph, as one rdflib Graph (what SHACL validates)."""
    import rdflib

    every = store.query("CONSTRUCT { ?s ?p ?o } WHERE { GRAPH ?g { ?s ?p ?o } }")
    return rdflib.Graph().parse(data=every.serialize("ntriples").decode(), format="nt")  # type: ignore[union-attr]
