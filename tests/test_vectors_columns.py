"""Exact search of a sparse query (the default embedder's: about 28 non-zero dimensions of
512) reads only the dimensions it uses, from a transposed copy of the rows kept from the
set's 4,096th row on (``rdfmem.store.indexes.columns``). Its answers are the row scan's."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from rdfmem.domain.embeddings import HashingEmbedder, top_k
from rdfmem.store.indexes.columns import BLOCK
from rdfmem.store.indexes.vectors import VectorSet

EMBEDDER = HashingEmbedder(dimension=128)
WORDS = [
    "deploy",
    "api",
    "server",
    "memory",
    "agent",
    "graph",
    "vector",
    "search",
    "cache",
    "index",
    "write",
    "read",
]


def _texts(count: int, seed: int, length: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=length)) + f" item{i}" for i in range(count)]


def _rows(vs: VectorSet) -> tuple[list[str], np.ndarray]:
    block = vs._blocks[EMBEDDER.dimension]  # the test looks inside
    n = len(block.keys)
    live = [i for i in range(n) if block.alive[i]]
    return [block.keys[i][1] for i in live], block.matrix[live]


def _same_as_row_scan(vs: VectorSet, queries: np.ndarray) -> None:
    subjects, matrix = _rows(vs)
    for query in queries:
        got = vs.search(query, 10)
        want = top_k(matrix, query, 10)
        assert np.allclose([s for _, _, s in got], [s for _, s in want], atol=1e-6)
        assert {s for _, s, _ in got} <= {subjects[i] for i, _ in top_k(matrix, query, 20)}


def test_sparse_queries_are_scored_by_columns_with_the_row_scans_answers() -> None:
    vs = VectorSet(("urn:g",), "urn:p", approximate=False)
    texts = _texts(BLOCK + 1_500, 1, 8)
    vectors = EMBEDDER.embed(texts)
    for i in range(BLOCK - 1):  # below BLOCK rows: no copy, the rows are scanned
        vs.put("urn:g", f"urn:s{i}", vectors[i])
    block = vs._blocks[EMBEDDER.dimension]
    queries = EMBEDDER.embed(_texts(20, 2, 3))
    assert not block.columns.blocks
    for i in range(BLOCK - 1, len(texts)):  # the BLOCK-th write makes the copy
        vs.put("urn:g", f"urn:s{i}", vectors[i])
    assert block.columns.blocks and block.columns.sparse(queries[0]) is not None
    _same_as_row_scan(vs, queries)
    for i in range(0, 3_000, 2):  # removed rows are never answered; the set compacts
        vs.remove("urn:g", f"urn:s{i}")
    vs.put("urn:g", "urn:s1", EMBEDDER.embed(["deploy deploy api"])[0])  # replaced
    _same_as_row_scan(vs, queries)
    assert vs.search(EMBEDDER.embed(["deploy deploy api"])[0], 1)[0][1] == "urn:s1"
    dense = np.ones(EMBEDDER.dimension, dtype=np.float32)  # scanned by rows, as before
    assert block.columns.sparse(dense) is None
    _same_as_row_scan(vs, dense[None, :])


def test_the_copy_is_saved_and_loaded_with_the_rows_and_takes_later_writes() -> None:
    vs = VectorSet(("urn:g",), "urn:p", approximate=False)
    texts = _texts(BLOCK + 100, 3, 8)
    vs.rebuild(("urn:g", f"urn:s{i}", v) for i, v in enumerate(EMBEDDER.embed(texts)))
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(vs, protocol=5, buffer_callback=buffers.append)
    loaded = pickle.loads(data, buffers=[b.raw().toreadonly() for b in buffers])
    queries = EMBEDDER.embed(_texts(10, 4, 3))
    assert loaded._blocks[EMBEDDER.dimension].columns.blocks
    _same_as_row_scan(loaded, queries)
    later = EMBEDDER.embed(["cache cache cache index"])[0]
    loaded.put("urn:g", "urn:later", later)  # into the loaded (read-only) copy's room
    assert loaded.search(later, 1)[0][1] == "urn:later"
    _same_as_row_scan(loaded, queries)


def test_sparse_queries_below_the_bound_build_no_graph_and_stay_exact() -> None:
    pytest.importorskip("usearch")
    embedder = HashingEmbedder()  # 512 dimensions: a short text uses a few of them
    vs = VectorSet(("urn:g",), "urn:p", ann_threshold=BLOCK)  # approximate=None
    texts = _texts(BLOCK + 500, 3, 8)
    vs.rebuild(("urn:g", f"urn:s{i}", v) for i, v in enumerate(embedder.embed(texts)))
    queries = embedder.embed(_texts(30, 4, 3))
    block = vs._blocks[embedder.dimension]
    assert block.columns.sparse(queries[0]) is not None  # the sparse case
    matrix = block.matrix[: len(block.keys)]
    for query in queries:  # exact, past the searches after which a graph would be built
        got = [score for _, _, score in vs.search(query, 5)]
        assert np.allclose(got, [score for _, score in top_k(matrix, query, 5)], atol=1e-6)
    assert vs.wait(30)
    assert block.ann is None and block.built is None  # no graph was built
    dense = np.random.default_rng(5).standard_normal(embedder.dimension).astype(np.float32)
    for _ in range(12):  # a dense query past the threshold still gets its graph
        vs.search(dense, 5)
    assert vs.wait(60)
    vs.search(dense, 5)
    assert block.ann is not None
