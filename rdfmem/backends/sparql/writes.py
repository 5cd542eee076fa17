"""The requests of one remote write (``SparqlBackend.apply``), beyond what one ``INSERT
DATA`` / ``DELETE DATA`` can make: removing quads that hold blank nodes (SPARQL cannot name
an existing blank node, so they are deleted by pattern, when the pattern matches no other
blank node), writes too large for one request (staged in scratch graphs, then applied by
one request), and the write's change-log record. The blank node rules are in
``rdfmem.backends.sparql.client``'s docstring; the SPARQL is written by
``rdfmem.backends.sparql.wire`` and ``rdfmem.backends.sparql.oneop``. The server is reached
through ``Server``, which ``SparqlBackend`` is.

**One operation**: every write, with its blank-node deletes and its change-log record, is
one SPARQL Update operation (``oneop``): Virtuoso keeps the operations of a request that
came before one that failed, so a write of several operations could end half applied (a
server that undoes a whole request, Oxigraph server, gets the plain ``INSERT DATA`` /
``DELETE DATA`` operations of an unconditional write). Virtuoso does not remove a literal
of a datatype it does not know (``rdf:JSON``: every key/value entry; a vector) that an
operation names to delete beside its change record, its receipt or another graph: in such
an operation the quad is deleted by pattern, its literal matched by text and datatype
(``oneop.by_text``); ``DELETE DATA`` of several graphs goes that way too. A
blank-node delete is conditional, in that operation, on the pattern still matching as many
blank nodes as the check counted (a node another client added meanwhile is never removed);
when the condition fails the write changes nothing and is planned again.

**Large writes**: Virtuoso compiles an update to SQL and refuses one of ~1,500 quads, so
against Virtuoso a write of more than 500 quads (``max_quads_per_request``) is copied 500
quads per request into scratch graphs (``urn:rdfmem:graph:staging:<token>:<n>``, hidden from
rdfmem's reads), then applied from there by that one operation, which lands only while
every part is still staged (each part leaves a mark in ``<token>:live``, with the server's
time). If staging fails, the scratch graphs are dropped and nothing of the write is
applied. A client killed in between leaves its scratch graphs, hidden from rdfmem's reads;
the next client that stages drops them once no part has arrived for ``staging_idle_s`` by
the server's clock (``drop_abandoned``): a live client taken for dead then gets an error
and nothing is written, never a part of its write.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from contextlib import suppress
from typing import Any, Protocol

from pyoxigraph import DefaultGraph, NamedNode, Quad

from rdfmem.backends.sparql.lease_steps import instant
from rdfmem.backends.sparql.leases import Leases
from rdfmem.backends.sparql.oneop import (
    STAGED_AT,
    Guard,
    blank_pattern,
    named_safely,
    staged_plan,
    write_operation,
)
from rdfmem.backends.sparql.text import DEFAULT_GRAPH_LABEL, STAMP, change_template
from rdfmem.backends.sparql.wire import (
    STAGING_PREFIX,
    blanks_match,
    compile_blank_delete,
    edit_requests,
    has_blank,
    to_wire,
)
from rdfmem.core.errors import BackingError, InvalidTerm, RdfMemError
from rdfmem.core.terms import sparql_term

__all__ = [
    "ABANDONED_AFTER_S",
    "BEAT_S",
    "STAGING_IDLE_S",
    "Server",
    "blank_guard",
    "drop",
    "drop_abandoned",
    "drop_gate",
    "prepare",
    "refusal",
    "stage",
]

#: A scratch graph without a live mark (a refused fence's or receipt's graph) older than
#: this (by the token's own time) was left by a client that died: an hour also covers
#: clocks that disagree.
ABANDONED_AFTER_S = 3600.0
#: A staged write none of whose parts arrived for this long by the server's clock is taken
#: for abandoned (its client died); its scratch graphs are dropped. Taking a live one for
#: dead only fails its write, whole (its applying operation finds a part missing).
STAGING_IDLE_S = 120.0
#: A staging client marks the server's time at least this often (and four times per idle
#: time): the mark is what tells it from a dead one.
BEAT_S = 5.0


class Server(Protocol):
    """What a write needs of the server connection (``SparqlBackend``)."""

    @property
    def default_graph(self) -> NamedNode | None:
        """The named graph that is rdfmem's default graph, or None (the server's own)."""
        ...

    @property
    def staging_idle_ms(self) -> int:
        """How long a staged write may go without a part before it is taken for dead."""
        ...

    @property
    def leases(self) -> Leases:
        """The client's leases (deferred writes are sent before staging)."""
        ...

    def select_rows(self, sparql: str) -> list[dict[str, Any]]: ...

    def whole_requests(self) -> bool:
        """Whether the server undoes a whole request when one of its operations fails."""
        ...

    def send_update(self, sparql: str) -> None: ...

    def record_name(self) -> str:
        """A fresh name for a change record of this client's (``ChangeLog.name``)."""
        ...


def prepare(
    backend: Server,
    remove: Sequence[Quad],
    add: Sequence[Quad],
    *,
    limit: int | None,
    change_graph: NamedNode | None,
) -> tuple[list[NamedNode], list[str], Guard | None]:
    """The request that removes ``remove`` and adds ``add`` in one operation, the scratch
    graphs it applies from (staged now, when more than ``limit`` quads go in one request)
    and its guard (None: unconditional); the change record for ``change_graph`` (None: no
    change log) rides in the same operation. A quad both removed and added is left as it
    is (a blank node's would be re-minted). When this raises, the scratch graphs are
    dropped already; when sending the request fails, the caller drops them (``drop``).

    Raises:
        InvalidTerm: a quad with a blank node cannot be removed alone (``blank_guard``).
        Unreachable, BackingError: staging failed.
    """
    kept = set(remove) & set(add)
    remove = [q for q in remove if q not in kept]
    add = [q for q in add if q not in kept]
    plain = [q for q in remove if not has_blank(q)]
    guard = Guard()
    blank_guard(backend, [q for q in remove if has_blank(q)], guard)
    if not plain and not add and not guard.counts:
        return [], [], None
    change = ""
    if change_graph is not None:
        graphs = [q.graph_name for q in (*remove, *add)]
        touched = {DEFAULT_GRAPH_LABEL if isinstance(g, DefaultGraph) else g.value for g in graphs}
        subjects = [to_wire(q.subject) for q in (*remove, *add)]
        named = [x for x in subjects if isinstance(x, NamedNode)]
        change = change_template(change_graph, backend.record_name(), sorted(touched), named)
    scratch: list[NamedNode] = []
    if limit is not None and len(plain) + len(add) > limit:
        scratch = stage(backend, plain, add, limit, guard)
        plain, add = [], []
    try:
        guarded = guard if guard.counts else None
        single = not (plain and add) and not change  # one plain operation anyway
        by_name = single and named_safely(plain, add, backend.default_graph)
        if guarded is None and (by_name or backend.whole_requests()):
            # One operation, or a server that applies a request whole (Oxigraph server).
            ops = edit_requests(plain, add, default_graph=backend.default_graph)
            if change:
                ops.append(f"INSERT {{ {change} }} WHERE {{ {STAMP} }}")
            return scratch, [" ; ".join(ops)], None
        # Literals Virtuoso would keep (rdf:JSON, vectors) are removed by pattern here,
        # unless the operation is a plain edit of one graph (``oneop.by_text``).
        request = write_operation(
            plain, add, default_graph=backend.default_graph, change=change, guard=guarded
        )
        if scratch:
            request += " ;\n" + " ;\n".join(f"DROP SILENT GRAPH {sparql_term(g)}" for g in scratch)
    except BaseException:
        drop(backend, scratch)  # the write did not happen: leave no scratch graph behind
        raise
    return scratch, [request], guarded


def blank_guard(backend: Server, quads: Sequence[Quad], guard: Guard) -> None:
    """Add to ``guard`` the deletes of quads that hold blank nodes, by pattern, each
    conditional on its pattern matching on the server just the blank nodes it matches
    now, all of which are among ``quads`` (quads not there are left).

    Raises:
        InvalidTerm: other blank nodes match a quad's pattern too, so no SPARQL
            update can remove the quad alone.
    """
    removing = set(quads)
    seen: set[str] = set()
    for quad in quads:
        ask, delete = compile_blank_delete(quad, default_graph=backend.default_graph)
        if delete in seen:
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
        seen.add(delete)
        n = len(guard.counts)
        template, where = blank_pattern(quad, f"{n}", backend.default_graph)
        _, counted = blank_pattern(quad, f"c{n}", backend.default_graph)
        guard.counts.append((counted, len(rows)))
        guard.branches.append(where)
        guard.deletes.append(template)


def stage(
    backend: Server, remove: Sequence[Quad], add: Sequence[Quad], limit: int, guard: Guard
) -> list[NamedNode]:
    """Copy a write too large for one request into scratch graphs; add to ``guard`` the
    operation's parts that apply it from there while every part is still staged. Returns
    the scratch graphs (the live mark first)."""
    # The token starts with the time (ms) it was made: a scratch graph left without its
    # live mark (a refused fence's graph) is dropped an hour after.
    token = f"{int(time.time() * 1000)}-{uuid.uuid4().hex}"
    plan = staged_plan(remove, add, default_graph=backend.default_graph, limit=limit, token=token)
    guard.counts.extend(plan.counts)
    guard.branches.extend(plan.branches)
    guard.deletes.extend(plan.deletes)
    guard.inserts.extend(plan.inserts)
    backend.leases.flush()
    every = min(BEAT_S, backend.staging_idle_ms / 4000.0)
    beaten = -every
    try:
        for part in plan.parts:
            # A long staged write renews the claims it is made under as it goes, so that
            # its apply is not refused for a claim that ran out meanwhile.
            backend.leases.keep_alive()
            if time.monotonic() - beaten >= every:  # the first part, then now and then
                beaten = time.monotonic()
                part = f"{part} ;\n{plan.beat}"
            backend.send_update(part)
    except BaseException:
        drop(backend, plan.scratch)
        raise
    return plan.scratch


def drop(backend: Server, scratch: Sequence[NamedNode]) -> None:
    """Drop scratch graphs, as far as the server answers (never raises)."""
    if scratch:
        with suppress(RdfMemError):
            backend.send_update(" ; ".join(f"DROP SILENT GRAPH {sparql_term(g)}" for g in scratch))


def drop_abandoned(
    backend: Server,
    *,
    now: float | None = None,
    empty_graph_patterns: bool = True,
    idle_s: float = STAGING_IDLE_S,
) -> list[str]:
    """Drop the scratch graphs of staged writes abandoned by their clients (killed between
    staging and applying): those whose last part arrived more than ``idle_s`` ago by the
    server's clock, and graphs without a live mark whose token is older than
    ``ABANDONED_AFTER_S`` (``now``: this client's time for those). Scratch graphs are
    hidden from rdfmem's reads and a write applies from them only while all its parts are
    there, so an abandoned one changed nothing. Returns the graphs dropped; never raises.
    """
    moment = time.time() if now is None else now
    # ``GRAPH ?g { }`` lists the named graphs without reading their quads; a server that
    # answers it with nothing (``empty_graph_patterns`` False: Virtuoso) is asked for the
    # graphs of its quads instead.
    pattern = "" if empty_graph_patterns else "?s ?p ?o"
    prefix = f'FILTER(STRSTARTS(STR(?g), "{STAGING_PREFIX}"))'
    try:
        rows = backend.select_rows(
            f"SELECT DISTINCT ?g WHERE {{ GRAPH ?g {{ {pattern} }} {prefix} }}"
        )
        marks = backend.select_rows(
            f"SELECT ?g ?at (NOW() AS ?now) WHERE {{ GRAPH ?g {{ ?g {STAGED_AT} ?at }} {prefix} }}"
        )
        last: dict[str, float] = {}
        server_now = moment
        for row in marks:
            graph, at, clock = row.get("g"), row.get("at"), row.get("now")
            if isinstance(graph, NamedNode) and at is not None and clock is not None:
                token = _token(graph)
                last[token] = max(last.get(token, 0.0), instant(at.value))
                server_now = instant(clock.value)
    except (RdfMemError, AttributeError):
        return []
    old: dict[str, list[NamedNode]] = {}
    for row in rows:
        graph = row.get("g")
        if not isinstance(graph, NamedNode):
            continue
        token = _token(graph)
        if token in last:
            dead = server_now - last[token] > idle_s
        else:
            stamp = token.split("-", 1)[0]
            dead = stamp.isdigit() and moment - int(stamp) / 1000 > ABANDONED_AFTER_S
        if dead:
            old.setdefault(token, []).append(graph)
    # The live mark first: once it is gone, the write can no longer apply.
    dropped = [
        g
        for graphs in old.values()
        for g in sorted(graphs, key=lambda g: not g.value.endswith(":live"))
    ]
    drop(backend, dropped)
    return [g.value for g in dropped]


def _token(graph: NamedNode) -> str:
    """The staged write a scratch graph belongs to (a fence's graph is its own)."""
    return graph.value[len(STAGING_PREFIX) :].split(":", 1)[0]


def drop_gate(backend: Server, guard: Guard) -> None:
    """Drop what a refused guarded write left (Virtuoso keeps its gate); never raises."""
    with suppress(RdfMemError):
        backend.send_update(guard.cleared())


def refusal(guard: Guard) -> BackingError:
    """The error for a guarded write whose condition failed (nothing was written)."""
    return BackingError(
        "the write was not applied: the server changed under it (blank nodes it removes "
        "were matched by another write, or its staged parts were cleared); nothing was "
        f"written ({guard.gate.value})"
    )
