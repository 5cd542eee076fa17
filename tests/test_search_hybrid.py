"""Hybrid search (keyword and vector evidence fused) through Memories and Generalisations."""

from __future__ import annotations

import time

import numpy as np
import pytest

from rdfmem import RdfStore
from rdfmem.backends.oxigraph import OxigraphBackend
from rdfmem.core.errors import InvalidValue
from rdfmem.domain.generalisations import Generalisation, Generalisations
from rdfmem.memories import Memories, Memory
from rdfmem.store.indexes.vectors import VectorSet


def _notes(memories: Memories) -> None:
    memories.save(Memory("global", "Support Group", "Caroline went to the LGBTQ support group"))
    memories.save(Memory("global", "Sunrise", "Melanie painted a sunrise last year"))
    memories.save(Memory("global", "Race", "Melanie ran a charity race for mental health"))


def test_a_rare_shared_word_wins_and_every_ranking_can_be_chosen() -> None:
    store = RdfStore()
    _notes(Memories(store))
    for ranking in ("hybrid", "keyword", "vector"):
        found = Memories(store, ranking=ranking).search("When did Melanie paint a sunrise?", 3)
        assert found[0][0].title == "Sunrise", ranking
    with pytest.raises(InvalidValue, match="ranking is one of"):
        Memories(store, ranking="fuzzy")  # type: ignore[arg-type]


def test_saves_and_forgets_keep_the_keyword_index_as_a_fresh_read_would() -> None:
    store = RdfStore()
    memories = Memories(store)
    _notes(memories)
    memories.forget("global", "Race")
    memories.save(Memory("global", "Sunrise", "Melanie painted a lake at dawn"))
    kept = memories.search("Melanie painted a lake", 5)

    class Shared(OxigraphBackend):  # as a remote server: no index, every search reads afresh
        exclusive_writer = False

    oxigraph = store.backend
    assert isinstance(oxigraph, OxigraphBackend)
    afresh = Memories(RdfStore(Shared(store=oxigraph.store))).search("Melanie painted a lake", 5)
    assert [(m.title, round(s, 4)) for m, s in kept] == [(m.title, round(s, 4)) for m, s in afresh]
    assert kept[0][0].title == "Sunrise"
    assert "Race" not in [m.title for m, _ in kept]


def test_a_write_around_the_index_is_seen_by_the_next_search() -> None:
    store = RdfStore()
    memories = Memories(store)
    _notes(memories)
    assert memories.search("charity", 1)[0][0].title == "Race"
    store.sparql_update(
        "DELETE WHERE { GRAPH <urn:rdfmem:memories:global> "
        "{ <urn:rdfmem:memory:global:race> ?p ?o } }"
    )
    assert [m.title for m, _ in memories.search("charity", 5)] == []


def test_generalisations_rank_by_keywords_too() -> None:
    gens = Generalisations(RdfStore(), "eli")
    gens.add(Generalisation("g1", "Eli drinks oolong every morning.", 0, 0.7))
    gens.add(Generalisation("g2", "Eli likes hot drinks in winter.", 0, 0.7))
    assert gens.search("oolong", 2)[0][0].id == "g1"
    gens.delete("g1")
    assert [g.id for g, _ in gens.search("oolong", 2)] == []


def test_the_approximate_graph_is_built_off_the_request_path() -> None:
    pytest.importorskip("usearch")
    rng = np.random.default_rng(3)
    data = rng.standard_normal((20_000, 64)).astype(np.float32)
    vs = VectorSet(("urn:g",), "urn:p", ann_threshold=10_000)
    vs.rebuild(("urn:g", f"urn:v{i}", v) for i, v in enumerate(data))
    seconds = []
    for q in data[:40]:
        start = time.perf_counter()
        assert vs.search(q, 1)[0][2] > 0.99  # itself, whichever search answered
        seconds.append(time.perf_counter() - start)
    # the build (seconds on this set) never ran inside a search
    assert max(seconds) < 20 * float(np.median(seconds)) + 0.05
    assert vs.wait(120)
    vs.search(data[0], 1)
    assert any(b.ann is not None for b in vs._blocks.values())
    assert [s for _, s, _ in vs.search(data[5], 1)] == ["urn:v5"]
