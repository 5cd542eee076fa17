"""A process that attaches to an on-disk store starts from the owner's indexes.

When ``RdfStore.open`` attaches (``rdfmem.backends.attached``), this hook asks the owner
which indexes it can hand over (one small request: their kinds and predicates or names)
and makes this process's followers for them (memory vectors: ``RdfStore.follower``; texts:
``follow.text_follower``; the decision graph: ``graph_follow.graph_follower``), reading
nothing. At the first look any of them makes (``changes_since(None)``), the backend fetches
the owner's indexes in one request (``rdfmem.backends.owner_indexes``) and ``seed`` puts
each into its follower, with the follower's cursor at the generation they are consistent
with: the journal's notes since then name what to read again. So the first search,
``active_goals`` or ``recent_decisions`` of an attached process reads what changed, not
everything.

``seed`` runs inside that first look (the followers' shared cursor is held): it only fills
followers made here, never makes one, and skips any a thread is inside of (that one reads
its graph whole, as before).
"""

from __future__ import annotations

import time
from typing import Any

from pyoxigraph import NamedNode

from rdfmem.store.indexes.follow import text_follower
from rdfmem.store.indexes.graph_follow import graph_follower
from rdfmem.store.indexes.saved import Sections
from rdfmem.store.rdfstore import RdfStore

__all__ = ["attach_indexes"]


def attach_indexes(store: RdfStore) -> None:
    """On a store this process attached to: make the followers of the indexes the owner
    can hand over, and have the first look fill them (``AttachedBackend.seed``)."""
    backend = store.backend
    keys = getattr(backend, "shared_index_keys", None)
    if keys is None or not hasattr(backend, "seed"):
        return
    followers: dict[tuple[str, str], Any] = {}
    for kind, name in keys():
        found: Any = None
        if kind == "vectors":
            found = store.follower(NamedNode(name))
        elif kind == "keywords":
            found = text_follower(store, name)
        elif kind == "graphs":
            found = graph_follower(store)
        if found is not None:
            followers[(kind, name)] = found
    if followers:
        backend.seed = lambda indexes: seed(followers, indexes)


def seed(followers: dict[tuple[str, str], Any], indexes: dict[str, Any]) -> int:
    """Put each handed-over index into its follower (made by ``attach_indexes``), for a
    graph it holds nothing of yet; answers how many were put."""
    sections = Sections(indexes, 0)
    put = 0
    for (kind, key), section in list(sections.pending.items()):
        name = "" if kind == "graphs" else str(key[1])
        follower = followers.get((kind, name))
        if follower is None or len(section.graphs) != 1:
            continue
        graph = section.graphs[0]
        if not follower.lock.acquire(blocking=False):
            continue  # a thread is inside it: that one reads its graph whole
        try:
            if graph in follower.sets:
                continue
            index = section.load(0)
            if index is not None:
                follower.sets[graph] = index
                follower.read_at[graph] = time.monotonic()
                put += 1
        finally:
            follower.lock.release()
    return put


RdfStore.opened_hooks.append(attach_indexes)
