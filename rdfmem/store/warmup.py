"""Whole reads that a cold client starts side by side: on a remote store whose indexes are
followed (the change log), the first search reads the memory vectors and texts whole, and
the first decision query reads the graph's nodes and links whole, one after the other on
the request path (at 10,000 memories and nodes: 0.65 s each). A reader that will read its
index whole names how to start that read here when it is made (no request then); the first
read of any followed index starts every read named so far on a thread, so that the server
answers them while this process parses the first (``rdfmem.store.background``).

A start is a promise kept by its reader: the read it starts counts as made when it began,
and what the change log reports after that is read again on top of it (as
``Follower.start_whole`` does), so no answer misses a write.

>>> calls = []
>>> class Backend: ...
>>> class Store: backend = Backend()
>>> store = Store()
>>> class Reader:
...     def start(self) -> None:
...         calls.append("started")
>>> reader = Reader()
>>> want(store, "graph urn:g", reader.start)
>>> start_wanted(store); start_wanted(store)
>>> calls
['started']
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from rdfmem.core.errors import RdfMemError

__all__ = ["start_wanted", "want"]

_wanted: weakref.WeakKeyDictionary[Any, dict[str, weakref.WeakMethod[Callable[[], None]]]]
_wanted = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def want(store: Any, key: str, start: Callable[[], None]) -> None:
    """Name ``start`` (a bound method: held weakly, a reader gone is forgotten) as the start
    of a whole read that ``store``'s first followed read begins; one per ``key``."""
    with _lock:
        named = _wanted.setdefault(store.backend, {})
        if key not in named or named[key]() is None:  # (the first reader alive is kept)
            named[key] = weakref.WeakMethod(start)


def start_wanted(store: Any) -> None:
    """Start every whole read named for ``store``'s backend and not started yet (each once).
    A start that fails is dropped: the read it would have made is made when it is needed,
    and fails there as it should."""
    with _lock:
        found = _wanted.pop(store.backend, None)
    for method in (found or {}).values():
        start = method()
        if start is not None:
            try:
                start()
            except RdfMemError:  # (the server is away: the read on the request path says so)
                continue
