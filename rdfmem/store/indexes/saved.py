"""Indexes saved beside an on-disk store, loaded one by one when first asked for.

``IndexHub.export`` gives the backend, at close, each fresh index pickled on its own (a
*section*: its kind, key and graphs beside its pickle and that pickle's large arrays, kept
out of band); the backend writes them to the index file (``rdfmem.backends.indexfile``),
the arrays at aligned offsets. At the next open the file is memory-mapped: the hub keeps
the sections as their pickles and views of the mapped arrays, and unpickles one only when
it is first asked for (``take``), its arrays made over the mapping without a copy. So
opening costs reading the small pickles, and a first search loads the vectors and keywords
it reads (the rows it scores come in from the mapping), not the decision graph. A section
never asked for is written back as it was, when its graphs were not written.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from hashlib import blake2b
from pathlib import Path
from typing import Any

from rdfmem.store.indexes import changelist as changelist_module
from rdfmem.store.indexes import columns as columns_module
from rdfmem.store.indexes import graph as graph_module
from rdfmem.store.indexes import hnsw as hnsw_module
from rdfmem.store.indexes import keywords as keywords_module
from rdfmem.store.indexes import rowkeys as rowkeys_module
from rdfmem.store.indexes import vectors as vectors_module
from rdfmem.store.indexes import versions as versions_module

__all__ = ["Section", "Sections", "code_digest"]

_KINDS: dict[str, type[Any]] = {
    "vectors": vectors_module.VectorSet,
    "keywords": keywords_module.KeywordSet,
    "graphs": graph_module.GraphIndex,
    "versions": versions_module.VersionIndex,
}


@cache
def code_digest() -> str:
    """A digest of the index classes' source: saved indexes are read by the code that
    wrote them only (a checkout changed between runs rebuilds)."""
    digest = blake2b(digest_size=12)
    modules = (columns_module, graph_module, hnsw_module, keywords_module, rowkeys_module)
    for module in (*modules, changelist_module, vectors_module, versions_module):
        digest.update(Path(module.__file__ or "").read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class Section:
    """One saved index: what kind, its key in the hub, the graphs it covers, its pickle
    and the buffers of the arrays that pickle left out of band (views of the mapped index
    file once loaded)."""

    kind: str
    key: Any
    graphs: tuple[str, ...]
    data: bytes | memoryview
    buffers: tuple[Any, ...] = ()

    @classmethod
    def of(cls, kind: str, key: Any, graphs: tuple[str, ...], index: Any) -> Section:
        buffers: list[pickle.PickleBuffer] = []
        data = pickle.dumps(index, protocol=5, buffer_callback=buffers.append)
        return cls(kind, key, graphs, data, tuple(buffers))

    def __reduce__(self) -> tuple[Any, ...]:
        # The pickle and the buffers out of band (a loaded section's are memoryviews of
        # the mapped file, read only when the section is loaded).
        data = pickle.PickleBuffer(self.data)
        buffers = tuple(pickle.PickleBuffer(b) for b in self.buffers)
        return (Section, (self.kind, self.key, self.graphs, data, buffers))

    def load(self, seen: int) -> Any | None:
        """The index, fresh as of generation ``seen`` (None when it does not load)."""
        try:
            # the owner's own file: rdfmem.backends.indexfile
            index = pickle.loads(self.data, buffers=self.buffers)
        except Exception:  # rebuilt from the store instead
            return None
        if not isinstance(index, _KINDS[self.kind]):
            return None
        index.seen = seen
        return index


class Sections:
    """The sections of the index file this store opened with, not yet asked for."""

    def __init__(self, saved: dict[str, Any] | None, seen: int) -> None:
        self.seen = seen
        self.pending: dict[tuple[str, Any], Section] = {}
        if saved is None or saved.get("code") != code_digest():
            return
        for section in saved.get("sections") or ():
            if isinstance(section, Section) and section.kind in _KINDS:
                self.pending[(section.kind, section.key)] = section

    def take(self, kind: str, key: Any) -> Any | None:
        """The saved index of ``kind`` at ``key``, loaded now (None: none saved)."""
        section = self.pending.pop((kind, key), None)
        return None if section is None else section.load(self.seen)

    def covering(self, kind: str, graph: str) -> list[Any]:
        """The keys of the saved indexes of ``kind`` that cover ``graph``."""
        return [k for (n, k), s in self.pending.items() if n == kind and graph in s.graphs]

    def still_fresh(self, fresh: Callable[[int, Sequence[str]], bool]) -> list[Section]:
        """The sections never loaded whose graphs were not written since (kept as they are)."""
        return [s for s in self.pending.values() if fresh(self.seen, s.graphs)]
