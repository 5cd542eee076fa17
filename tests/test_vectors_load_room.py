"""A bulk load pays for what the turns after it would otherwise pay: room in the vector
matrix for the writes that follow (at 20,000 rows of 512 dimensions doubling it cost one
turn 50-95 ms), and, when the HNSW graph is in place, adding the loaded rows to it."""

from __future__ import annotations

import numpy as np
from conftest import need
from pyoxigraph import NamedNode

from rdfmem import RdfStore
from rdfmem.core.terms import sparql_term
from rdfmem.domain.embeddings import EMBEDDING, VectorIndex, vector_literal
from rdfmem.store.indexes.hnsw import has_usearch
from rdfmem.store.indexes.vectors import ANN_THRESHOLD

GRAPH = NamedNode("urn:test:vectors")


def _vector(i: int) -> np.ndarray:
    return np.random.default_rng(i).standard_normal(8).astype(np.float32)


def _load(store: RdfStore, start: int, stop: int) -> None:
    lines = [
        f"<urn:s:{i}> {sparql_term(EMBEDDING)} {vector_literal(_vector(i))} ."
        for i in range(start, stop)
    ]
    store.load("\n".join(lines), "ntriples", graph=GRAPH)


def test_the_writes_after_a_bulk_load_do_not_grow_the_matrix() -> None:
    store = RdfStore()
    index = VectorIndex(store)
    assert index.search([GRAPH], np.ones(8, dtype=np.float32), 1) == []  # kept from here on
    for start in range(0, 4_096, 1_024):  # fills the matrix to its capacity exactly
        _load(store, start, start + 1_024)
    vectors = index.vector_set(GRAPH)
    assert vectors is not None and len(vectors) == 4_096
    matrix = vectors._blocks[8].matrix  # the test looks inside
    for i in range(100):  # the writes that follow, each through the index
        subject = NamedNode(f"urn:new:{i}")
        with index.writing(GRAPH, subject) as change:
            value = np.full(8, i + 1, dtype=np.float32)
            store.sparql_update(
                f"INSERT DATA {{ GRAPH {sparql_term(GRAPH)} {{ {sparql_term(subject)} "
                f"{sparql_term(EMBEDDING)} {vector_literal(value)} }} }}"
            )
            change.put(subject, value)
    assert vectors._blocks[8].matrix is matrix  # no copy in those writes
    assert len(vectors) == 4_196
    hits = index.search([GRAPH], np.full(8, 1, dtype=np.float32), 1)
    assert hits[0][2] > 0.999
    store.close()


def test_a_load_into_a_set_with_its_graph_in_place_adds_every_row_to_the_graph() -> None:
    need(has_usearch(), "the ann extra (usearch) is not installed")
    store = RdfStore()
    index = VectorIndex(store)
    first = ANN_THRESHOLD + 200
    _load(store, 0, first)
    query = np.ones(8, dtype=np.float32)
    for _ in range(10):  # the 9th search starts the graph's build, off the request path
        index.search([GRAPH], query, 5)
    vectors = index.vector_set(GRAPH)
    assert vectors is not None and vectors.wait(120)
    index.search([GRAPH], query, 5)  # puts the graph in place
    block = vectors._blocks[8]  # the test looks inside
    assert block.ann is not None
    _load(store, first, first + 3_000)
    # the loaded rows went into the graph in one call: none is left to score exactly
    assert len(block.ann) == len(vectors) == first + 3_000
    assert block.built_upto == len(block.keys)
    hits = index.search([GRAPH], _vector(first + 1_024), 1)
    assert hits[0][1].value == f"urn:s:{first + 1_024}" and hits[0][2] > 0.9999
    store.close()
