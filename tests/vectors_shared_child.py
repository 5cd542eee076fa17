"""A process of an on-disk store for ``tests/test_vectors_shared_graph.py``: loads or
changes vectors, searches, and says what its vector set holds. Commands on stdin, one a
line; each answer is one JSON line on stdout."""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
from pyoxigraph import NamedNode

from rdfmem import RdfStore
from rdfmem.core.terms import sparql_term
from rdfmem.domain.embeddings import EMBEDDING, VectorIndex, vector_literal

GRAPH = NamedNode("urn:test:vectors")
DIMENSION = 16


def vector(i: int) -> np.ndarray:
    return np.random.default_rng(i).standard_normal(DIMENSION).astype(np.float32)


def block(store: RdfStore, index: VectorIndex) -> Any:
    vectors = index.vector_set(GRAPH)
    if vectors is None:  # attached: the set its follower keeps
        follower = store.follower(EMBEDDING)
        assert follower is not None
        vectors = follower.sets[GRAPH.value]
    return vectors._blocks[DIMENSION]  # the test looks inside


def main() -> None:
    store = RdfStore.open(sys.argv[1])
    index = VectorIndex(store)
    print(json.dumps({"backend": type(store.backend).__name__}), flush=True)
    for line in sys.stdin:
        command, *args = line.split()
        answer: object = None
        if command == "load":  # subjects a..b with vector(i)
            lines = [
                f"<urn:s:{i}> {sparql_term(EMBEDDING)} {vector_literal(vector(i))} ."
                for i in range(int(args[0]), int(args[1]))
            ]
            store.load("\n".join(lines), "ntriples", graph=GRAPH)
        elif command == "move":  # subject i gets vector(j)
            i, j = int(args[0]), int(args[1])
            subject = NamedNode(f"urn:s:{i}")
            store.sparql_update(
                f"DELETE WHERE {{ GRAPH {sparql_term(GRAPH)} {{ {sparql_term(subject)} "
                f"{sparql_term(EMBEDDING)} ?v }} }}; INSERT DATA {{ GRAPH {sparql_term(GRAPH)} "
                f"{{ {sparql_term(subject)} {sparql_term(EMBEDDING)} "
                f"{vector_literal(vector(j))} }} }}"
            )
        elif command == "drop":
            subject = NamedNode(f"urn:s:{args[0]}")
            store.sparql_update(
                f"DELETE WHERE {{ GRAPH {sparql_term(GRAPH)} {{ {sparql_term(subject)} "
                f"{sparql_term(EMBEDDING)} ?v }} }}"
            )
        elif command == "search":  # the best 5 for vector(j), for each j given
            answer = [
                [
                    (s.value, round(score, 5))
                    for _, s, score in index.search([GRAPH], vector(int(j)), 5)
                ]
                for j in args
            ]
        elif command == "wait":  # the graph made off the request path, then put in place
            rows = block(store, index)
            thread = rows.background
            if thread is not None:
                thread.join(120)
            index.search([GRAPH], vector(0), 1)
            answer = {
                "graph": rows.ann is not None,
                "adopted": rows.adopted,
            }
        print(json.dumps(answer), flush=True)
    store.close()


if __name__ == "__main__":
    main()
