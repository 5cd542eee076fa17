"""Vectors made again for memories and generalisations that have none: what an export left
out (``rdfmem export`` writes no vectors unless ``--with-vectors``) and ``rdfmem load`` puts
back, so a memory read from such a file is found by ``search`` as before.

A memory's vector is made from the same text ``Memories.save`` embeds (title, topics,
content), a generalisation's from its content; with the same embedder the vectors are the
ones the export left out. (``Memories.search`` ranks by keywords too, which need no
vector: a memory without one is found by its words, not by meaning.)

>>> from pyoxigraph import RdfFormat, serialize
>>> from rdfmem import RdfStore
>>> from rdfmem.domain.memories import Memories, Memory
>>> source = RdfStore()
>>> _ = Memories(source).save(Memory("global", "Tea", "Eli drinks green tea."))
>>> exported = serialize([q for q in source.triples() if q.predicate != EMBEDDING],
...                      None, RdfFormat.TRIG)
>>> store = RdfStore()
>>> _ = store.load(exported, "trig")
>>> by_vector = Memories(store, ranking="vector")
>>> [m.title for m, _ in by_vector.search("green tea")]
[]
>>> embed_missing(store)
1
>>> [m.title for m, _ in by_vector.search("green tea")]
['Tea']
"""

from __future__ import annotations

from typing import Any

from pyoxigraph import Literal, NamedNode

from rdfmem.core.ontology import RDFMEM
from rdfmem.core.results import SelectResult
from rdfmem.core.terms import sparql_term
from rdfmem.domain.embeddings import EMBEDDING, Embedder, HashingEmbedder, vector_literal
from rdfmem.domain.memories import _embedding_text, _from_rdf
from rdfmem.store.rdfstore import RdfStore

__all__ = ["embed_missing"]

_MEMORY = NamedNode(RDFMEM + "Memory")
_GENERALISATION = NamedNode(RDFMEM + "Generalisation")
_CONTENT = RDFMEM + "content"
_MISSING = f"""SELECT ?g ?s ?class ?p ?o WHERE {{ GRAPH ?g {{
  ?s a ?class . FILTER (?class IN ({sparql_term(_MEMORY)}, {sparql_term(_GENERALISATION)}))
  FILTER NOT EXISTS {{ ?s {sparql_term(EMBEDDING)} ?v }}
  ?s ?p ?o }} }}"""


def embed_missing(store: RdfStore, embedder: Embedder | None = None) -> int:
    """Give each memory and generalisation of ``store`` without a vector one made by
    ``embedder`` (``HashingEmbedder()``, the default of ``Memories`` and
    ``Generalisations``, when None); returns how many were given one."""
    made = embedder if embedder is not None else HashingEmbedder()
    rows = store.query(_MISSING)
    assert isinstance(rows, SelectResult)
    found: dict[tuple[str, str], tuple[str, dict[str, list[Any]]]] = {}
    for row in rows:
        key = (row["g"].value, row["s"].value)
        _, props = found.setdefault(key, (row["class"].value, {}))
        props.setdefault(row["p"].value, []).append(row["o"])
    places: list[tuple[str, str]] = []
    texts: list[str] = []
    for key, (kind, props) in found.items():
        if kind == _MEMORY.value:
            memory = _from_rdf(props)
            text = None if memory is None else _embedding_text(memory)
        else:
            content = [t for t in props.get(_CONTENT, []) if isinstance(t, Literal)]
            text = content[0].value if content else None
        if text is not None:
            places.append(key)
            texts.append(text)
    if not texts:
        return 0
    vectors = made.embed(texts)
    by_graph: dict[str, list[tuple[NamedNode, NamedNode, Literal]]] = {}
    for (graph, subject), vector in zip(places, vectors, strict=True):
        by_graph.setdefault(graph, []).append(
            (NamedNode(subject), EMBEDDING, vector_literal(vector))
        )
    for graph, triples in by_graph.items():
        store.assert_many(triples, graph=NamedNode(graph))
    return len(texts)
