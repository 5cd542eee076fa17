"""Whether an embedder fits the vectors a store's memories already have.

Vectors of different dimensions do not compare: a search skips the stored vectors of another
dimension than its embedder's, so memories saved with one embedder and searched with another
would be found by their words alone. ``check_dimension`` says so, once, before that happens:
when the memories and generalisations of a store have vectors, and none of them of the
embedder's dimension, it raises an error naming the dimension to pass. (Only the dimension is
stored with a vector, so two models of one dimension are not told apart.)
"""

from __future__ import annotations

import binascii
from typing import TYPE_CHECKING

from pyoxigraph import Literal

from rdfmem.core.errors import InvalidValue
from rdfmem.core.ontology import RDFMEM
from rdfmem.core.results import SelectResult
from rdfmem.domain.embeddings import EMBEDDING, FLOAT32_VECTOR, Embedder

if TYPE_CHECKING:
    from rdfmem.store.rdfstore import RdfStore

__all__ = ["check_dimension", "stored_dimension"]

_TYPES = f"VALUES ?t {{ <{RDFMEM}Memory> <{RDFMEM}Generalisation> }}"


def _base64_length(dimension: int) -> int:
    """The length of the base64 text of ``dimension`` float32 values."""
    return 4 * -(-4 * dimension // 3)


def stored_dimension(store: RdfStore) -> int | None:
    """The dimension of one stored memory or generalisation vector (None: none stored)."""
    rows = store.query(
        f"SELECT ?v WHERE {{ {_TYPES} GRAPH ?g {{ ?s a ?t ; <{EMBEDDING.value}> ?v }} }} LIMIT 1"
    )
    assert isinstance(rows, SelectResult)
    for row in rows:
        value = row["v"]
        if isinstance(value, Literal) and value.datatype == FLOAT32_VECTOR:
            try:
                return len(binascii.a2b_base64(value.value)) // 4
            except (binascii.Error, ValueError):
                return None
    return None


def check_dimension(store: RdfStore, embedder: Embedder, spec: str | None = None) -> None:
    """Raise when the store's memories and generalisations have vectors, none of them of
    ``embedder``'s dimension (``spec``: how the embedder was named, for the message).

    Raises:
        InvalidValue: the stored vectors were made by an embedder of another dimension; the
            message says what to pass instead.
    """
    found = stored_dimension(store)
    dimension = embedder.dimension
    if found is None or found == dimension:
        return
    length = _base64_length(dimension)
    if store.query(
        f"ASK {{ {_TYPES} GRAPH ?g {{ ?s a ?t ; <{EMBEDDING.value}> ?v }} "
        f"FILTER(STRLEN(STR(?v)) = {length}) }}"
    ):
        return  # some were made by an embedder of this dimension: those are compared
    named = spec or getattr(embedder, "name", repr(embedder))
    likely = " (512: probably the default, --embedder hashing)" if found == 512 else ""
    raise InvalidValue(
        f"this store's memories have {found}-dimension vectors, but the embedder {named} makes "
        f"{dimension}: searching them with it would ignore every vector. Pass the embedder "
        f"that saved them, one making {found}-dimension vectors{likely}: rdfmem mcp "
        "--embedder SPEC or RDFMEM_EMBEDDER=SPEC (Memories(store, embedder=...) in Python)"
    )
