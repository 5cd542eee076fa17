"""Embedders named by a spec, plugged into ``Memories``: rdfmem's protocol, LangChain's, a
factory; what a wrong spec or a broken plug-in says; the dimension check of a store."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from rdfmem import RdfStore
from rdfmem.core.errors import InvalidValue
from rdfmem.domain.embedder_check import check_dimension
from rdfmem.domain.embedder_spec import check_spec
from rdfmem.domain.embedders import (
    CheckedEmbedder,
    EmbeddingsAdapter,
    as_embedder,
    embedder_from_spec,
)
from rdfmem.domain.embeddings import Embedder, HashingEmbedder
from rdfmem.domain.memories import Memories, Memory

sys.path.insert(0, str(Path(__file__).parent))  # toy_embedder, as PYTHONPATH gives a server

NOTES = [
    ("Pet", "the kitten purrs on the sofa"),
    ("Garage", "the sedan needs a new gearbox"),
    ("Kitchen", "bread and soup for dinner"),
]


def _memories(embedder: Embedder) -> Memories:
    memories = Memories(RdfStore(), embedder=embedder)
    for title, content in NOTES:
        memories.save(Memory(scope="global", title=title, content=content))
    return memories


def _titles(memories: Memories, query: str) -> list[str]:
    return [m.title for m, _ in memories.search(query, 3)]


@pytest.mark.parametrize(
    "spec",
    ["toy_embedder:ToyEmbedder", "toy_embedder:make_embedder", "toy_embedder:LangChainStyle"],
)
def test_a_plugged_embedder_finds_by_meaning_what_shares_no_word(spec: str) -> None:
    memories = _memories(embedder_from_spec(spec))
    # No memory has the words "feline", "vehicle" or "meal": only the embedder links them.
    assert _titles(memories, "feline")[0] == "Pet"
    assert _titles(memories, "vehicle")[0] == "Garage"
    assert _titles(memories, "a meal")[0] == "Kitchen"
    assert memories.embedder.dimension == 3
    # The default finds none of them by meaning: the plug-in is what ranks.
    default = _memories(HashingEmbedder())
    assert _titles(default, "feline")[:1] != ["Pet"]


def test_specs_of_rdfmem_embedders() -> None:
    assert isinstance(embedder_from_spec(None), HashingEmbedder)
    assert embedder_from_spec("hashing").dimension == 512
    assert embedder_from_spec(" hashing:128 ").dimension == 128
    made = embedder_from_spec("toy_embedder:ToyEmbedder")
    assert isinstance(made, CheckedEmbedder) and made.name == "toy-meanings-v1"
    lang = embedder_from_spec("toy_embedder:LangChainStyle")
    assert isinstance(lang, EmbeddingsAdapter) and lang.dimension == 3


def test_rows_come_back_float32_unit_length() -> None:
    rows = embedder_from_spec("toy_embedder:ToyEmbedder").embed(["kitten cat", "nothing"])
    assert rows.dtype == np.float32 and rows.shape == (2, 3)
    assert np.allclose(np.linalg.norm(rows, axis=1), [1.0, 0.0])


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("", "not a known embedder"),
        ("word2vec", "not a known embedder and not module:attribute"),
        ("hashing:1", "at least 2"),
        ("no_such_module_xyz:Thing", "no module named no_such_module_xyz"),
        ("toy_embedder:Missing", "has no attribute Missing"),
        ("toy_embedder:NOT_AN_EMBEDDER", "is no embedder"),
        ("toy embedder:x", "dotted Python names"),
    ],
)
def test_a_wrong_spec_says_what_to_pass(spec: str, says: str) -> None:
    with pytest.raises(InvalidValue) as caught:
        check_spec(spec) if spec in ("", "word2vec", "toy embedder:x") else embedder_from_spec(spec)
    assert says in str(caught.value)
    if "is no embedder" in says:
        assert "embed_documents" in str(caught.value)
    else:
        assert "module:attribute" in str(caught.value)


def test_a_broken_plugin_is_an_error_naming_it_and_nothing_is_saved() -> None:
    memories = Memories(RdfStore(), embedder=embedder_from_spec("toy_embedder:Broken"))
    with pytest.raises(InvalidValue, match=r"toy_embedder:Broken returned shape \(1, 2\)"):
        memories.save(Memory(scope="global", title="A", content="text"))
    assert memories.list("global") == []


def test_a_langchain_style_object_plugs_in_directly() -> None:
    from toy_embedder import LangChainStyle

    embedder = as_embedder(LangChainStyle())
    assert embedder.name.startswith("langchain:toy_embedder.LangChainStyle")
    memories = _memories(embedder)
    assert _titles(memories, "feline")[0] == "Pet"


def test_the_dimension_check_names_what_to_pass() -> None:
    store = RdfStore()
    check_dimension(store, HashingEmbedder())  # nothing stored: anything fits
    toy = embedder_from_spec("toy_embedder:ToyEmbedder")
    memories = Memories(store, embedder=toy)
    memories.save(Memory(scope="global", title="Pet", content="kitten"))
    check_dimension(store, toy)
    with pytest.raises(InvalidValue) as caught:
        check_dimension(store, HashingEmbedder(), "hashing")
    message = str(caught.value)
    assert "3-dimension vectors" in message and "hashing makes 512" in message
    assert "--embedder SPEC" in message and "RDFMEM_EMBEDDER" in message
    # Once some memories have this embedder's dimension, it is accepted (those compare).
    Memories(store).save(Memory(scope="global", title="Other", content="text"))
    check_dimension(store, HashingEmbedder())
