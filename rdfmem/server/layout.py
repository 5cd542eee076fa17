"""Where to draw each node: a force-directed layout (Fruchterman and Reingold, 1991) in numpy.

Linked nodes pull together, every pair pushes apart, and the step shrinks each round; the
start is a circle in the given order and nothing is random, so the same graph is drawn the
same way every time. The work is ``rounds`` times ``n²`` for ``n`` nodes, done on arrays
(at 1,000 nodes, well under a second); the rounds shrink as graphs grow.

>>> import numpy as np
>>> points = layout(3, [(0, 1), (1, 2)])
>>> points.shape
(3, 2)
>>> bool(np.all(points >= 0) and np.all(points <= 1))
True
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

__all__ = ["layout"]


def _rounds(n: int) -> int:
    """Fewer rounds for bigger graphs: the time stays near a second at 2,000 nodes."""
    return int(max(40, min(300, 60_000 // max(n, 1))))


def layout(
    n: int, edges: Sequence[tuple[int, int]], *, rounds: int | None = None
) -> NDArray[np.float64]:
    """Positions of ``n`` nodes joined by ``edges`` (pairs of node indexes), scaled into the
    unit square: an ``(n, 2)`` array."""
    if n == 0:
        return np.zeros((0, 2))
    if n == 1:
        return np.full((1, 2), 0.5)
    angles = np.linspace(0.0, 2 * np.pi, n, endpoint=False)
    # A spiral rather than a circle, so no two nodes start on one line through the middle.
    radius = 0.5 + 0.5 * np.arange(n) / n
    pos = np.column_stack((radius * np.cos(angles), radius * np.sin(angles)))
    k = np.sqrt(4.0 / n)  # the ideal distance, for an area of 4
    pairs = np.array([(a, b) for a, b in edges if a != b], dtype=np.int64).reshape(-1, 2)
    temperature = 0.2
    total = rounds if rounds is not None else _rounds(n)
    cooling = (0.005 / temperature) ** (1.0 / total)
    x, y = pos[:, 0].astype(np.float32), pos[:, 1].astype(np.float32)
    k2 = np.float32(k * k)
    for _ in range(total):
        dx = x[:, None] - x[None, :]
        dy = y[:, None] - y[None, :]
        weight = dx * dx + dy * dy
        np.maximum(weight, np.float32(1e-6), out=weight)
        np.divide(k2, weight, out=weight)  # repulsion k²/d along the unit vector: k²/d²
        np.fill_diagonal(weight, 0.0)
        push = np.column_stack(((dx * weight).sum(axis=1), (dy * weight).sum(axis=1)))
        pos = np.column_stack((x, y)).astype(np.float64)
        if len(pairs):
            d = pos[pairs[:, 0]] - pos[pairs[:, 1]]
            length = np.sqrt(np.einsum("ij,ij->i", d, d))[:, None]
            pull = d * length / k  # attraction d²/k along the unit vector
            np.add.at(push, pairs[:, 0], -pull)
            np.add.at(push, pairs[:, 1], pull)
        # Gravity to the middle keeps parts that are not linked from drifting away.
        push -= pos * (0.2 * k * n**0.5)
        size = np.sqrt(np.einsum("ij,ij->i", push, push))[:, None]
        pos += push / np.maximum(size, 1e-9) * np.minimum(size, temperature)
        x, y = pos[:, 0].astype(np.float32), pos[:, 1].astype(np.float32)
        temperature *= cooling
    low, high = pos.min(axis=0), pos.max(axis=0)
    span = np.where(high - low > 1e-9, high - low, 1.0)
    scaled: NDArray[np.float64] = (pos - low) / span
    return scaled
