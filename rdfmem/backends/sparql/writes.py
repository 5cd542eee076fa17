"""Remote writes that one ``INSERT DATA`` / ``DELETE DATA`` cannot make: removing quads that
hold blank nodes (SPARQL cannot name an existing blank node, so they are deleted by
pattern, when the pattern matches no other blank node), and writes too large for one
request (staged in scratch graphs, then applied by one request). The rules are in
``rdfmem.backends.sparql.client``'s docstring; the SPARQL is written by ``sparql_wire``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import suppress
from typing import TYPE_CHECKING

from pyoxigraph import NamedNode, Quad

from rdfmem.backends.sparql.wire import blanks_match, compile_blank_delete, staged_edit
from rdfmem.core.errors import InvalidTerm, RdfMemError
from rdfmem.core.terms import sparql_term

if TYPE_CHECKING:
    from rdfmem.backends.sparql.client import SparqlBackend

__all__ = ["blank_deletes", "drop", "stage"]


def blank_deletes(backend: SparqlBackend, quads: Sequence[Quad]) -> list[str]:
    """The updates removing quads that hold blank nodes, by pattern: each pattern's
    blank nodes on the server must all be among ``quads`` (quads not there are left).

    Raises:
        InvalidTerm: other blank nodes match a quad's pattern too, so no SPARQL
            update can remove the quad alone.
    """
    removing = set(quads)
    deletes: dict[str, None] = {}
    for quad in quads:
        ask, delete = compile_blank_delete(quad, default_graph=backend.default_graph)
        if delete in deletes:
            continue
        rows = backend.select_rows(ask)
        if not any(blanks_match(r, quad.subject, quad.object) for r in rows):
            continue
        others = [
            r
            for r in rows
            if Quad(
                r.get("s", quad.subject),
                quad.predicate,
                r.get("o", quad.object),
                quad.graph_name,
            )
            not in removing
        ]
        if others:
            raise InvalidTerm(
                f"cannot remove {quad}: {len(rows)} blank nodes on the server match it, "
                "and SPARQL cannot name one of them (give such nodes IRIs)"
            )
        deletes[delete] = None
    return list(deletes)


def stage(
    backend: SparqlBackend, remove: Sequence[Quad], add: Sequence[Quad], limit: int
) -> tuple[list[NamedNode], list[str]]:
    """Copy a write too large for one request into scratch graphs (``staged_edit``);
    the one request that applies it."""
    parts, apply, scratch = staged_edit(
        remove, add, default_graph=backend.default_graph, limit=limit, token=uuid.uuid4().hex
    )
    backend.leases.flush()
    try:
        for part in parts:
            backend.send_update(part)
    except BaseException:
        drop(backend, scratch)
        raise
    return scratch, [apply]


def drop(backend: SparqlBackend, scratch: Sequence[NamedNode]) -> None:
    """Drop scratch graphs, as far as the server answers (never raises)."""
    if scratch:
        with suppress(RdfMemError):
            backend.send_update(" ; ".join(f"DROP SILENT GRAPH {sparql_term(g)}" for g in scratch))
