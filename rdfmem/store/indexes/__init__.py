"""Read-side indexes of the store floor, fed by writes (vectors, nodes, adjacency, recency).

On an embedded store (``backend.exclusive_writer``) every write passes through rdfmem: the
domain modules update these structures in the same critical section as the write that
changes them, and ``IndexHub`` notices any write that did not (``hub.py`` says how), so the
next read rebuilds from SPARQL. A remote store has no hub: its reads go to the server.

Public surface, for other modules (LangGraph items, remote client caches):

* ``RdfStore.indexes`` -> ``IndexHub | None``; ``RdfStore.follower(predicate)``;
* ``IndexHub.writing(graphs)`` (a write to known graphs), ``IndexHub.fresh(seen, graphs)``,
  ``IndexHub.vectors(graphs, predicate)`` -> ``VectorSet``, ``IndexHub.graph_index(graph)``;
* ``IndexHub.keywords(graphs, name)`` -> ``KeywordSet`` (BM25: put/remove/search/rebuild);
* ``VectorSet.put/remove/search/rebuild``, ``GraphIndex`` for node and link queries.
"""

from rdfmem.store.indexes.follow import Follower
from rdfmem.store.indexes.graph import GraphIndex
from rdfmem.store.indexes.hub import IndexHub
from rdfmem.store.indexes.keywords import KeywordSet, tokenize
from rdfmem.store.indexes.vectors import ANN_THRESHOLD, VectorSet

__all__ = [
    "ANN_THRESHOLD",
    "Follower",
    "GraphIndex",
    "IndexHub",
    "KeywordSet",
    "VectorSet",
    "tokenize",
]
