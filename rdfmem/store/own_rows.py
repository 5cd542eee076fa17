"""The rows of a SELECT that rdfmem itself wrote (a follower's whole read of a graph).

On a SPARQL server such a read goes through ``SparqlBackend.select_rows``: its answer is
parsed once (``RdfStore.query`` validates every term of an answer and then parses it again
for the caller: 5-30 MB of texts, nodes and links at 10,000 memories and nodes), and it is
read in pages past a server's row limit. Anywhere else it is ``RdfStore.query``.

Only for rdfmem's own query text: no bindings, no dataset, nothing of a caller's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rdfmem.core.results import Row, SelectResult

if TYPE_CHECKING:
    from rdfmem.store.rdfstore import RdfStore

__all__ = ["on_server", "own_rows", "own_table"]


def on_server(store: RdfStore) -> bool:
    """Whether ``store``'s own reads go to a SPARQL server (``own_rows`` sends them there):
    then a second read may run on a thread beside the first."""
    return hasattr(store.backend, "select_rows")


def own_rows(store: RdfStore, sparql: str) -> Sequence[Row]:
    """The rows of ``sparql``, a SELECT of rdfmem's own, each a dict of its bound
    variables."""
    select = getattr(store.backend, "select_rows", None)
    if select is not None:
        rows: list[dict[str, Any]] = select(sparql)
        return rows
    result = store.query(sparql)
    assert isinstance(result, SelectResult)
    return result


def own_table(store: RdfStore, sparql: str) -> tuple[list[str], Sequence[tuple[Any, ...]]]:
    """The variables of ``sparql`` (as ``own_rows``) and its rows as tuples of terms in
    their order, None where unbound: no dict a row on a server
    (``SparqlBackend.select_table``), for the whole reads of a follower."""
    select = getattr(store.backend, "select_table", None)
    if select is not None:
        table: tuple[list[str], list[tuple[Any, ...]]] = select(sparql)
        return table
    result = store.query(sparql)
    assert isinstance(result, SelectResult)
    return result.variables, [tuple(map(row.get, result.variables)) for row in result]
