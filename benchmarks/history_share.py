"""rdfmem's own time in a write, measured in the call: the call's time less that of the
engine's ``Store.update`` requests inside it (``bench_history.py``'s write section)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pyoxigraph import Quad, Store

from rdfmem import RdfStore


class _TimedStore:
    """A pyoxigraph ``Store`` whose ``update`` calls are timed (``seconds``); everything
    else passes through to it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.seconds: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def __contains__(self, quad: Quad) -> bool:
        return quad in self.store

    def update(self, *args: Any, **kwargs: Any) -> None:
        t0 = time.perf_counter()
        try:
            self.store.update(*args, **kwargs)
        finally:
            self.seconds.append(time.perf_counter() - t0)


def python_share(store: RdfStore, call: Callable[[int], object], n: int, start: int) -> list[float]:
    """rdfmem's own seconds in each of ``n`` calls of ``call(i)`` on an embedded Oxigraph
    ``store``: each call's time less that of the ``Store.update`` requests it made."""
    backend: Any = store.backend
    timed = _TimedStore(backend.store)
    backend.store = timed
    out = []
    try:
        for i in range(start, start + n):
            made = len(timed.seconds)
            t0 = time.perf_counter()
            call(i)
            out.append(time.perf_counter() - t0 - sum(timed.seconds[made:]))
    finally:
        backend.store = timed.store
    return out
