"""What lets other processes read an on-disk store this process owns (``rdfmem serve
--workers``): the folder a read-only open needs, a hook on the owner's writes, and a store
over a read-only open that can be opened again.

RocksDB lets one process write a store and any number open it read-only; a read-only open
sees the data as of its opening (the write-ahead log included: every acknowledged write).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pyoxigraph import Store

from rdfmem.backends.oxigraph import OxigraphBackend
from rdfmem.store.rdfstore import RdfStore

__all__ = ["ReadOnlyOpen", "indexed_store", "on_writes", "owned_folder", "unchanged_since"]


def owned_folder(store: RdfStore) -> Path | None:
    """The folder of ``store`` when it is an on-disk Oxigraph store this process opened
    (and so writes alone); None for any other store."""
    backend = store.backend
    owned = isinstance(backend, OxigraphBackend) and backend.exclusive_writer
    return backend.path if owned and isinstance(backend, OxigraphBackend) else None


def indexed_store(store: RdfStore) -> Store | None:
    """The pyoxigraph store that ``store`` reads when it is embedded Oxigraph (a read-only
    open included: ``ReadOnlyOpen.reopen`` swaps it), else None. ``rdfmem serve`` reads the
    plainest queries straight from its indexes (``rdfmem.server.direct``)."""
    backend = store.backend
    return backend.store if isinstance(backend, OxigraphBackend) else None


def unchanged_since(store: RdfStore) -> Callable[[], bool] | None:
    """For a reader of several index ranges of ``indexed_store(store)``: a check, made
    after them, that they all saw one state (``OxigraphBackend.unchanged_since``); None
    when ``store`` is not embedded Oxigraph, or that cannot be known."""
    backend = store.backend
    return backend.unchanged_since() if isinstance(backend, OxigraphBackend) else None


class _ReadOnlyBackend(OxigraphBackend):
    """An Oxigraph backend over a read-only open: every write raises, so each store it
    reads is one state (``reopen`` swaps in another; a read holding the old one goes on
    with it)."""

    read_only = True


def on_writes(store: RdfStore, callback: Callable[[int], None]) -> Callable[[], None]:
    """Call ``callback(generation)`` now and right after each write through ``store``'s
    backend (before the write returns to its caller); returns what undoes that."""
    hooks = store.backend.write_hooks
    callback(store.backend.generation)
    hooks.append(callback)
    return lambda: hooks.remove(callback)


class ReadOnlyOpen:
    """An ``RdfStore`` (``store``) over a read-only open of the on-disk store at ``path``;
    ``reopen`` opens it again to see later writes (its ``generation`` moves)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._backend = _ReadOnlyBackend(store=Store.read_only(self.path))
        self.store = RdfStore(self._backend)

    def reopen(self) -> None:
        """Open the files again: reads from now on see every write made before this call.
        Reads under way finish on the open they started with."""
        self._backend.store = Store.read_only(self.path)
        self._backend.wrote()  # caches and sandbox children keyed on the generation forget
