"""Where ``rdfmem mcp`` keeps its memory, as the official memory server finds its file.

* ``rdfmem mcp STORE``: the store STORE names (a folder, ``:memory:`` or a SPARQL URL).
* ``rdfmem mcp`` with ``MEMORY_FILE_PATH`` set (the official server's variable): that file.
  A relative path is taken from the working directory (the official server takes it from
  beside its own script, inside npm's cache).
* Neither: ``~/.rdfmem/memory`` (the official server's default, ``memory.jsonl`` beside its
  script in npm's cache, is not a place anyone can find again).

A ``.jsonl`` (or the official server's older ``.json``) path, from the variable or as STORE,
is the official server's file: the memory is kept in the store folder beside it
(``memory.jsonl`` -> ``memory.jsonl.rdfmem/``), and the file is brought in once, on the first
start, in one atomic write. The store records the import (file, size, time), so no later
start imports it again, whatever became of the file; the file itself is only ever read.

>>> where("/data/memory.jsonl", {}).store, where(None, {}).jsonl is None
('/data/memory.jsonl.rdfmem', True)
>>> where(None, {"MEMORY_FILE_PATH": "/m/memory.jsonl"}).jsonl
PosixPath('/m/memory.jsonl')
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rdfmem.store.rdfstore import RdfStore

__all__ = ["DEFAULT_STORE", "IMPORT_KEY", "Place", "bring_in", "where"]

#: The store of ``rdfmem mcp`` with neither STORE nor ``MEMORY_FILE_PATH``.
DEFAULT_STORE = "~/.rdfmem/memory"
#: The key under which a store records the memory.jsonl it was started from.
IMPORT_KEY = "rdfmem:mcp:imported-jsonl"
#: The folder beside a memory.jsonl holding its store: ``memory.jsonl`` + this.
SUFFIX = ".rdfmem"
_FILE_SUFFIXES = (".jsonl", ".json")


@dataclass(frozen=True)
class Place:
    """The store to open (``store``: a folder, ``:memory:`` or a URL) and the official
    server's file to bring in once (``jsonl``), if any; ``said`` names where it came from."""

    store: str
    jsonl: Path | None = None
    said: str = ""


def where(store: str | None, env: Mapping[str, str]) -> Place:
    """The memory of ``rdfmem mcp [STORE]`` in an environment ``env``."""
    said = "STORE"
    if store is None:
        store, said = env.get("MEMORY_FILE_PATH") or DEFAULT_STORE, "MEMORY_FILE_PATH"
        if store == DEFAULT_STORE:
            said = "the default"
    if store == ":memory:" or "://" in store:
        return Place(store, None, said)
    path = Path(store).expanduser()
    if not path.is_absolute():
        path = Path(os.getcwd()) / path
    if path.suffix.lower() in _FILE_SUFFIXES and not path.is_dir():
        return Place(str(path) + SUFFIX, path, said)
    return Place(str(path), None, said)


def bring_in(store: RdfStore, jsonl: Path, project: str | None = None) -> str | None:
    """Import ``jsonl`` into ``store``'s knowledge graph unless the store recorded an import
    already (or the file does not exist yet); returns what was done, for the log.

    Raises:
        RdfMemError: a broken line in the file (nothing imported, nothing recorded).
    """
    if store.get(IMPORT_KEY) is not None or not jsonl.is_file():
        return None
    from rdfmem.mcp.graph import Client, KnowledgeGraph
    from rdfmem.mcp.jsonl import read_jsonl

    stat = jsonl.stat()
    model = read_jsonl(jsonl.read_text(encoding="utf-8"), source=str(jsonl))
    graph = KnowledgeGraph(store, project)
    entities, observations, relations = graph.import_model(model, Client("rdfmem mcp import"))
    store.set(
        IMPORT_KEY,
        {
            "file": str(jsonl),
            "size": stat.st_size,
            "modified": datetime.fromtimestamp(stat.st_mtime, timezone.utc).isoformat(),
            "imported": datetime.now(timezone.utc).isoformat(),
            "entities": entities,
            "observations": observations,
            "relations": relations,
        },
    )
    return (
        f"imported {entities} entities, {observations} observations and {relations} "
        f"relations from {jsonl} (once: later starts use the store)"
    )


def opener(
    place: Place,
    open_store: Callable[[str], RdfStore],
    project: str | None,
    log: Callable[[str], None],
) -> Callable[[], RdfStore]:
    """A function that opens ``place``'s store and brings its jsonl in (once)."""

    def open_it() -> RdfStore:
        store = open_store(place.store)
        if place.jsonl is not None:
            try:
                done = bring_in(store, place.jsonl, project)
            except BaseException:
                store.close()
                raise
            if done:
                log(done)
        return store

    return open_it
