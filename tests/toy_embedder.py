"""A tiny embedder for the tests of ``--embedder module:attribute``: three dimensions, one per
meaning (animals, vehicles, food), found by word lists, so a query sharing no word with a memory
still finds it by meaning, which the default hashing embedder cannot do.

``python -m rdfmem mcp --embedder toy_embedder:ToyEmbedder`` with this folder on PYTHONPATH.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_MEANINGS = (
    {"feline", "kitten", "cat", "purrs", "animal", "pet"},
    {"vehicle", "sedan", "car", "engine", "gearbox", "drive"},
    {"meal", "soup", "bread", "dinner", "cook", "food"},
)


def _vector(text: str) -> list[float]:
    words = set(re.findall(r"\w+", text.lower()))
    return [float(len(words & meaning)) for meaning in _MEANINGS]


class ToyEmbedder:
    """rdfmem's Embedder protocol: ``dimension`` and ``embed`` (lists, not normalised: rdfmem
    checks and normalises them)."""

    dimension = 3
    name = "toy-meanings-v1"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [_vector(t) for t in texts]


class LangChainStyle:
    """LangChain's ``Embeddings`` protocol: ``embed_documents`` and ``embed_query``."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [_vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return _vector(text)


def make_embedder() -> ToyEmbedder:
    """A factory, as ``toy_embedder:make_embedder`` names it."""
    return ToyEmbedder()


class Broken:
    """Says 3 dimensions, returns 2 numbers per text."""

    dimension = 3

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]


NOT_AN_EMBEDDER = 42
