"""The approximate (usearch HNSW) side of a vector set: making a graph, choosing its beam,
and a digest of each row that tells whether a graph made elsewhere holds the same vector
(``rdfmem.store.indexes.graphfile``).

Split from ``rdfmem.store.indexes.vectors``, which keeps the rows and decides when a graph
is built, taken from a file, or searched.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "BEAMS",
    "RECALL_TARGET",
    "SAMPLE",
    "candidates",
    "choose_beam",
    "digests",
    "has_usearch",
    "new_graph",
    "normalised",
    "scores",
]

#: The recall@10 against exact search that the approximate search's beam is chosen for, on
#: the last 64 queries (above the 0.95 that issue 11 asks of fresh queries: 64 queries are
#: a small sample).
RECALL_TARGET = 0.98
BEAMS = (128, 256, 512, 1024, 2048)
SAMPLE = 64  # calibration queries
_CHUNK = 65_536  # rows per exact matrix product while calibrating (64 MiB of scores at most)
#: Odd 64-bit multipliers, one per float32 word of a row (``digests``); fixed, so every
#: process computes the same digest of the same row.
_MULTIPLIERS = np.random.default_rng(0x5EED_21).integers(
    1, 2**63, size=4096, dtype=np.uint64
) | np.uint64(1)
_DIGEST_ROWS = 4_096  # rows per step of ``digests`` (bounds its temporary arrays)


@cache
def has_usearch() -> bool:
    """Whether usearch (the ``ann`` extra) is installed."""
    return importlib.util.find_spec("usearch") is not None


def normalised(vector: NDArray[Any]) -> NDArray[np.float32]:
    """``vector`` as float32 of length 1 (NaN and infinities as 0; zero stays zero)."""
    row = np.asarray(vector, dtype=np.float32).reshape(-1)
    if not np.isfinite(row).all():
        row = np.nan_to_num(row, nan=0.0, posinf=0.0, neginf=0.0)
    norm = float(np.linalg.norm(row))
    return row / norm if norm > 0.0 else row


def digests(matrix: NDArray[np.float32], rows: NDArray[np.int64]) -> NDArray[np.uint64]:
    """A 64-bit digest of each of ``rows`` of ``matrix``: the row's bits as 32-bit words,
    times fixed odd multipliers, summed modulo 2**64. Equal rows give equal digests in
    every process; a graph node whose digest differs from the row's is not that row."""
    dimension = matrix.shape[1]
    if dimension > len(_MULTIPLIERS):
        multipliers = np.resize(_MULTIPLIERS, dimension)
    else:
        multipliers = _MULTIPLIERS[:dimension]
    out = np.empty(len(rows), dtype=np.uint64)
    for start in range(0, len(rows), _DIGEST_ROWS):
        part = rows[start : start + _DIGEST_ROWS]
        words = np.ascontiguousarray(matrix[part]).view(np.uint32).astype(np.uint64)
        with np.errstate(over="ignore"):
            out[start : start + len(part)] = (words * multipliers).sum(axis=1, dtype=np.uint64)
    return out


def scores(rows: NDArray[np.float32], query: NDArray[np.float32]) -> NDArray[np.float32]:
    """``rows @ query`` on this thread. Not through BLAS: OpenBLAS spreads a matrix-vector
    product over threads, and on a busy machine waiting for them costs milliseconds (2,000
    rows of 512: 8 ms at load 5 on 2 cores, against 0.2 ms here; measured)."""
    found: NDArray[np.float32] = np.einsum("ij,j->i", rows, query)
    return found


def candidates(limit: int) -> int:
    # HNSW candidates re-ranked with the exact float32 rows (the graph compares int8 rows).
    return max(10 * limit, 100)


def new_graph(dimension: int) -> Any:
    from usearch.index import Index

    # int8 cosine graph (4x less to compare while building); candidates are re-ranked
    # with the exact float32 rows, so scores are exact and recall is the graph's.
    return Index(
        ndim=dimension,
        metric="cos",
        dtype="i8",
        connectivity=16,
        expansion_add=128,
        expansion_search=BEAMS[-1],
    )


def choose_beam(
    ann: Any,
    matrix: NDArray[np.float32],
    rows: NDArray[np.int64],
    queries: NDArray[np.float32] | None,
) -> int:
    """Set ``ann``'s beam to the narrowest whose recall@10 reaches ``RECALL_TARGET`` (the
    widest when none does) on ``queries``, or when None on ``SAMPLE`` of the rows (each
    searched without itself), and return it. ``rows`` are the live rows of ``matrix`` (the
    keys of ``ann``). A hit counts when its exact score is at least the 10th best exact
    score, so equal scores are not misses. Reads only its arguments (and rows of ``matrix``
    that no write changes): safe on a background thread."""
    live = len(rows)
    pick: NDArray[np.int64] | None = None
    if queries is None:
        chosen = np.random.default_rng(live).choice(rows, size=min(SAMPLE, live), replace=False)
        pick = np.searchsorted(rows, chosen)  # positions in ``rows``
        queries = matrix[chosen]
    k = min(10, live - (0 if pick is None else 1))
    if k < 1:
        ann.expansion_search = BEAMS[0]
        return BEAMS[0]
    best = np.full((len(queries), k), -np.inf, dtype=np.float32)
    for start in range(0, live, _CHUNK):
        stop = min(live, start + _CHUNK)
        block = queries @ matrix[rows[start:stop]].T  # (queries, rows)
        if pick is not None:
            mine = (pick >= start) & (pick < stop)
            block[np.nonzero(mine)[0], pick[mine] - start] = -np.inf
        merged = np.concatenate([best, block], axis=1)
        best = -np.partition(-merged, k - 1, axis=1)[:, :k]
    tenth = best.min(axis=1) - 1e-5
    for beam in BEAMS:
        ann.expansion_search = beam
        found = ann.search(queries, candidates(10) + 1)
        hits = 0
        for j in range(len(queries)):
            keys = np.asarray(found.keys[j][: found.counts[j]], dtype=np.int64)
            if pick is not None:
                keys = keys[keys != rows[pick[j]]]
            top = np.sort(scores(matrix[keys], queries[j]))[::-1][:k]
            hits += int(np.count_nonzero(top >= tenth[j]))
        if hits >= RECALL_TARGET * k * len(queries):
            return beam
    return BEAMS[-1]
