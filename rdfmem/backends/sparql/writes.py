"""The requests of one remote write (``SparqlBackend.apply``), beyond what one ``INSERT
DATA`` / ``DELETE DATA`` can make: removing quads that hold blank nodes (SPARQL cannot name
an existing blank node, so they are deleted by pattern, when the pattern matches no other
blank node), writes too large for one request (staged in scratch graphs, then applied by
one request), and the write's change-log record. The blank node rules are in
``rdfmem.backends.sparql.client``'s docstring; the SPARQL is written by
``rdfmem.backends.sparql.wire``. The server is reached through ``Server``, which
``SparqlBackend`` is.

**Large writes**: Virtuoso compiles an update to SQL and refuses one of ~1,500 quads, so
against Virtuoso a write of more than 500 quads (``max_quads_per_request``) is copied 500
quads per request into scratch graphs (``urn:rdfmem:graph:staging:<id>:<n>``, hidden from
rdfmem's reads) and applied from there by **one** request (``INSERT … WHERE`` then ``DELETE
… WHERE`` on the scratch graphs, then ``DROP``): the quads added appear in one operation,
never in parts (those removed go in the next operation: a reader may see both, never
neither; Virtuoso does not undo a request's earlier operations when a later one fails). If
staging fails, the scratch graphs are dropped and nothing of the write is applied (a client
killed in between leaves its scratch graphs, hidden from reads; the next
client that stages drops those older than an hour: ``drop_abandoned``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from contextlib import suppress
from typing import Any, Protocol

from pyoxigraph import DefaultGraph, NamedNode, Quad

from rdfmem.backends.sparql.leases import Leases
from rdfmem.backends.sparql.text import DEFAULT_GRAPH_LABEL, log_change
from rdfmem.backends.sparql.wire import (
    STAGING_PREFIX,
    blanks_match,
    compile_blank_delete,
    edit_requests,
    has_blank,
    staged_edit,
    to_wire,
)
from rdfmem.core.errors import InvalidTerm, RdfMemError
from rdfmem.core.terms import sparql_term

__all__ = [
    "ABANDONED_AFTER_S",
    "Server",
    "blank_deletes",
    "drop",
    "drop_abandoned",
    "prepare",
    "stage",
]

#: A scratch graph older than this belongs to a staged write whose client died (a staged
#: write sends its parts within seconds; an hour also covers clocks that disagree).
ABANDONED_AFTER_S = 3600.0


class Server(Protocol):
    """What a write needs of the server connection (``SparqlBackend``)."""

    @property
    def default_graph(self) -> NamedNode | None:
        """The named graph that is rdfmem's default graph, or None (the server's own)."""
        ...

    @property
    def leases(self) -> Leases:
        """The client's leases (deferred writes are sent before staging)."""
        ...

    def select_rows(self, sparql: str) -> list[dict[str, Any]]: ...

    def send_update(self, sparql: str) -> None: ...


def prepare(
    backend: Server,
    remove: Sequence[Quad],
    add: Sequence[Quad],
    *,
    limit: int | None,
    change_graph: NamedNode | None,
) -> tuple[list[NamedNode], list[str]]:
    """The requests that remove ``remove`` and add ``add``, and the scratch graphs they
    apply from (staged now, when more than ``limit`` quads go in one request); the change
    record for ``change_graph`` (None: no change log) rides in the last request. A quad
    both removed and added is left as it is (a blank node's would be re-minted). When this
    raises, the scratch graphs are dropped already; when sending the requests fails, the
    caller drops them (``drop``).

    Raises:
        InvalidTerm: a quad with a blank node cannot be removed alone (``blank_deletes``).
        Unreachable, BackingError: staging failed.
    """
    kept = set(remove) & set(add)
    remove = [q for q in remove if q not in kept]
    add = [q for q in add if q not in kept]
    plain = [q for q in remove if not has_blank(q)]
    scratch: list[NamedNode] = []
    if limit is not None and len(plain) + len(add) > limit:
        scratch, requests = stage(backend, plain, add, limit)
    else:
        requests = edit_requests(plain, add, default_graph=backend.default_graph)
    try:
        deletes = blank_deletes(backend, [q for q in remove if has_blank(q)])
        if deletes:  # with the write: one request
            requests[:1] = [" ; ".join(deletes + requests[:1])]
        if requests and change_graph is not None:
            graphs = [q.graph_name for q in (*remove, *add)]
            touched = {
                DEFAULT_GRAPH_LABEL if isinstance(g, DefaultGraph) else g.value for g in graphs
            }
            subjects = [to_wire(q.subject) for q in (*remove, *add)]
            named = [x for x in subjects if isinstance(x, NamedNode)]
            change = log_change(change_graph, uuid.uuid4().hex, sorted(touched), named)
            requests[-1] = f"{requests[-1]} ; {change}"
    except BaseException:
        drop(backend, scratch)  # the write did not happen: leave no scratch graph behind
        raise
    return scratch, requests


def blank_deletes(backend: Server, quads: Sequence[Quad]) -> list[str]:
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
    backend: Server, remove: Sequence[Quad], add: Sequence[Quad], limit: int
) -> tuple[list[NamedNode], list[str]]:
    """Copy a write too large for one request into scratch graphs (``staged_edit``);
    the one request that applies it."""
    # The token starts with the time (ms) it was made: another client can tell a write
    # abandoned long ago (its client was killed mid-staging) from one under way.
    token = f"{int(time.time() * 1000)}-{uuid.uuid4().hex}"
    parts, apply, scratch = staged_edit(
        remove, add, default_graph=backend.default_graph, limit=limit, token=token
    )
    backend.leases.flush()
    try:
        for part in parts:
            # A long staged write renews the claims it is made under as it goes, so that
            # its apply is not refused for a claim that ran out meanwhile.
            backend.leases.keep_alive()
            backend.send_update(part)
    except BaseException:
        drop(backend, scratch)
        raise
    return scratch, [apply]


def drop(backend: Server, scratch: Sequence[NamedNode]) -> None:
    """Drop scratch graphs, as far as the server answers (never raises)."""
    if scratch:
        with suppress(RdfMemError):
            backend.send_update(" ; ".join(f"DROP SILENT GRAPH {sparql_term(g)}" for g in scratch))


def drop_abandoned(
    backend: Server, *, now: float | None = None, empty_graph_patterns: bool = True
) -> list[str]:
    """Drop the scratch graphs of staged writes abandoned by their clients (killed between
    staging and applying): those whose token is older than ``ABANDONED_AFTER_S``. Scratch
    graphs are hidden from every read, so an abandoned one changed nothing; this only frees
    the space. Returns the graphs dropped; never raises.
    """
    moment = time.time() if now is None else now
    # ``GRAPH ?g { }`` lists the named graphs without reading their quads; a server that
    # answers it with nothing (``empty_graph_patterns`` False: Virtuoso) is asked for the
    # graphs of its quads instead.
    pattern = "" if empty_graph_patterns else "?s ?p ?o"
    try:
        rows = backend.select_rows(
            f"SELECT DISTINCT ?g WHERE {{ GRAPH ?g {{ {pattern} }} "
            f'FILTER(STRSTARTS(STR(?g), "{STAGING_PREFIX}")) }}'
        )
    except RdfMemError:
        return []
    old: list[NamedNode] = []
    for row in rows:
        graph = row.get("g")
        if not isinstance(graph, NamedNode):
            continue
        stamp = graph.value[len(STAGING_PREFIX) :].split("-", 1)[0]
        if stamp.isdigit() and moment - int(stamp) / 1000 > ABANDONED_AFTER_S:
            old.append(graph)
    drop(backend, old)
    return [g.value for g in old]
