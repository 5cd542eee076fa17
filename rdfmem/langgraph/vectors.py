"""The one place the LangGraph store touches rdfmem's vector machinery.

Vectors are stored as ``rm:float32Vector`` literals (``rdfmem.domain.embeddings``), the same as
memories', so any rdfmem vector search reads them. In memory they live in ``VectorRows``, a
float32 matrix that grows in place and reuses the rows of removed vectors, so a write costs
one row and a search one matrix-vector product.

>>> rows = VectorRows(2)
>>> a, b = rows.add([3.0, 4.0]), rows.add([1.0, 0.0])
>>> [round(s, 2) for s in rows.scores(np.array([a, b]), np.array([1.0, 0.0])).tolist()]
[0.6, 1.0]
>>> rows.remove(a); rows.add([0.0, 2.0]) == a
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pyoxigraph import Literal

from rdfmem.domain.embeddings import FLOAT32_VECTOR, literal_vector, vector_literal

__all__ = ["FLOAT32_VECTOR", "VectorRows", "as_vector", "literal_vector", "vector_literal"]

Vector = NDArray[np.float32]


def as_vector(values: Sequence[float] | NDArray[Any]) -> Vector:
    """A float32 copy of ``values``."""
    vector: Vector = np.asarray(values, dtype=np.float32).reshape(-1).copy()
    return vector


def _unit(vector: Vector) -> Vector:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0.0 else vector


class VectorRows:
    """Unit vectors of one dimension, by row number; cosine scores against a query."""

    def __init__(self, dims: int, capacity: int = 64) -> None:
        self.dims = dims
        self._matrix: Vector = np.zeros((capacity, dims), dtype=np.float32)
        self._size = 0
        self._free: list[int] = []
        #: What each row belongs to (None for a free row).
        self.owners: list[Any] = []

    def __len__(self) -> int:
        return self._size - len(self._free)

    def add(self, vector: Sequence[float] | NDArray[Any] | Literal, owner: Any = None) -> int:
        """Store a vector (normalised; a zero vector scores 0) of ``owner``; returns its row."""
        values = literal_vector(vector) if isinstance(vector, Literal) else as_vector(vector)
        if self._free:
            row = self._free.pop()
        else:
            if self._size == self._matrix.shape[0]:
                grown = np.zeros((self._size * 2, self.dims), dtype=np.float32)
                grown[: self._size] = self._matrix[: self._size]
                self._matrix = grown
            row = self._size
            self._size += 1
            self.owners.append(None)
        self._matrix[row] = _unit(values)
        self.owners[row] = owner
        return row

    def remove(self, row: int) -> None:
        """Forget a row (it scores 0 until reused)."""
        self._matrix[row] = 0.0
        self.owners[row] = None
        self._free.append(row)

    def all_scores(self, query: Sequence[float] | NDArray[Any]) -> Vector:
        """Cosine similarity of ``query`` with every row (free rows score 0)."""
        scores: Vector = self._matrix[: self._size] @ _unit(as_vector(query))
        return scores

    def scores(self, rows: NDArray[np.intp], query: Sequence[float] | NDArray[Any]) -> Vector:
        """Cosine similarity of ``query`` with each of ``rows``, in their order."""
        q = _unit(as_vector(query))
        if rows.size == 0:
            return np.zeros(0, dtype=np.float32)
        if rows.size * 4 < self._size:  # a few rows: gather them
            return self._matrix[rows] @ q
        return (self._matrix[: self._size] @ q)[rows]
