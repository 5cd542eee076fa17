"""A remote write as **one** SPARQL Update operation, so that it lands whole or not at all.

Virtuoso applies the operations of one request one by one and keeps those before an
operation that fails, so a write spread over several operations (``INSERT DATA ; DELETE
DATA``, the change-log record, the blank-node deletes, a staged write's ``INSERT … WHERE``
then ``DELETE … WHERE``) could end half applied. Here every part of a write goes in one
``DELETE { … } INSERT { … } WHERE { … }``: one operation commits whole on both servers.

**Conditions** travel inside that operation, as ``COUNT`` sub-selects joined before
everything else (``Guard``): when one fails, the ``WHERE`` has no solution and the
operation changes nothing. Two conditions exist:

* a blank-node delete (SPARQL can only match an existing blank node by pattern) lands only
  while the pattern matches as many blank nodes as the client's check counted, all of which
  the write removes: a node another client added meanwhile is never removed with them;
* a staged write (``rdfmem.backends.sparql.writes``) lands only while each scratch graph
  holds every quad staged into it: a scratch graph cleared meanwhile (its client was taken
  for dead) makes the write fail, never apply in part.

A guarded operation also writes a **receipt** (a one-triple scratch graph), and the
operations after it fail the request when the receipt is missing (the fence's trick:
``CREATE GRAPH`` of a graph that holds triples fails), so the client learns that nothing
was written from the answer itself. Those later operations only read and
drop scratch graphs: whatever happens to them, the data is as one operation left it.

The ``WHERE`` of a guarded operation is a ``UNION`` of branches (the main one binds the
server's ``NOW()`` for the change log; each blank-node pattern and each scratch graph has
its own), so it has several solutions; a template triple holding a blank node would be
minted once per solution, so such triples take their predicate from a variable bound in
the main branch only (Virtuoso implements no ``BNODE()``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from pyoxigraph import BlankNode, DefaultGraph, NamedNode, Quad

from rdfmem.backends.sparql.wire import (
    STAGING_PREFIX,
    chunks,
    graph_on_wire,
    has_blank,
    quad_data,
    stage_quads,
)
from rdfmem.core.terms import sparql_term

__all__ = [
    "APPLIED",
    "STAGED_AT",
    "STAGED_PART",
    "Guard",
    "refused_at",
    "StagedPlan",
    "blank_pattern",
    "staged_plan",
    "write_operation",
]

#: The predicate of a receipt triple.
APPLIED = "<urn:rdfmem:applied>"
#: A staged part's mark: the server's time it arrived, and its number.
STAGED_AT = "<urn:rdfmem:stagedAt>"
STAGED_PART = "<urn:rdfmem:stagedPart>"


@dataclass
class Guard:
    """The conditions of one write and the operations they add (built by
    ``write_operation``)."""

    counts: list[tuple[str, int]] = field(default_factory=list)  # (pattern, expected)
    branches: list[str] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    inserts: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        stamp = f"{STAGING_PREFIX}{int(time.time() * 1000)}-receipt-{uuid.uuid4().hex}"
        self.receipt = NamedNode(stamp)
        self.gate = NamedNode(stamp + "-gate")

    def cleared(self) -> str:
        """The update that drops what a refusal left (Virtuoso keeps the gate)."""
        return f"DROP SILENT GRAPH {sparql_term(self.gate)} ; " + (
            f"DROP SILENT GRAPH {sparql_term(self.receipt)}"
        )

    def named_in(self, error: BaseException) -> bool:
        """Whether ``error`` is this guard's refusal (the server names the gate)."""
        return refused_at(error, self.gate)


def refused_at(error: BaseException, gate: NamedNode) -> bool:
    """Whether ``error`` (or its cause) says that creating ``gate`` failed because it holds
    triples: a gate's refusal. The gate's mere mention is not enough: Virtuoso's message
    quotes the whole request, gate and all, whatever operation failed."""
    needles = (f"<{gate.value}> contains triples", f"<{gate.value}> already exists")
    seen: BaseException | None = error
    while seen is not None:
        if any(needle in str(seen) for needle in needles):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def blank_pattern(quad: Quad, n: str, default_graph: NamedNode | None) -> tuple[str, str]:
    """The quad as a template whose blank nodes are variables ``?b{n}s`` / ``?b{n}o``, and
    as a pattern restricted to blank nodes, in its graph on the wire.

    >>> q = Quad(BlankNode("x"), NamedNode("urn:p"), NamedNode("urn:o"), DefaultGraph())
    >>> blank_pattern(q, "0", None)
    ('?b0s <urn:p> <urn:o> .', '?b0s <urn:p> <urn:o> . FILTER(isBlank(?b0s))')
    """
    parts, filters = [], []
    for slot, term in (("s", quad.subject), ("p", quad.predicate), ("o", quad.object)):
        if isinstance(term, BlankNode):
            parts.append(f"?b{n}{slot}")
            filters.append(f"FILTER(isBlank(?b{n}{slot}))")
        else:
            parts.append(sparql_term(term))
    triple = " ".join(parts) + " ."
    graph = graph_on_wire(quad.graph_name, default_graph)
    if not isinstance(graph, DefaultGraph):
        triple = f"GRAPH {sparql_term(graph)} {{ {triple} }}"
    return triple, " ".join([triple, *filters])


@dataclass
class StagedPlan:
    """A staged write: the requests that stage it, its scratch graphs (the live mark
    first), and what its applying operation adds to a ``Guard``."""

    parts: list[str]
    scratch: list[NamedNode]
    counts: list[tuple[str, int]]
    branches: list[str]
    deletes: list[str]
    inserts: list[str]
    beat: str = ""  # the operation that marks the server's time: the writer is alive


def staged_plan(
    remove: Sequence[Quad],
    add: Sequence[Quad],
    *,
    default_graph: NamedNode | None,
    limit: int,
    token: str,
) -> StagedPlan:
    """A write too large for one request (Virtuoso compiles an update to SQL and refuses
    one of ~1,500 quads): the requests that copy it, ``limit`` quads at a time, into
    scratch graphs (``STAGING_PREFIX`` + ``token``), each leaving its mark in the live graph
    (``<token>:live``; ``beat`` adds the server's time there); and the applying operation's
    parts, which
    copy the scratch graphs into place only while every part's mark is there and every
    scratch graph holds quads. Quads to remove must hold no blank node.

    >>> add = [Quad(NamedNode("urn:s"), NamedNode("urn:p"), NamedNode(f"urn:o{i}"),
    ...     NamedNode("urn:g")) for i in range(3)]
    >>> plan = staged_plan([], add, default_graph=None, limit=2, token="t")
    >>> len(plan.parts), [g.value for g in plan.scratch]
    (2, ['urn:rdfmem:graph:staging:t:live', 'urn:rdfmem:graph:staging:t:0'])
    >>> plan.inserts
    ['GRAPH <urn:g> { ?s0 ?p0 ?o0 . }']

    Raises:
        InvalidTerm: a quad to remove holds a blank node; a graph named by a blank node.
    """
    staged, scratch = stage_quads(remove, add, default_graph, token)
    live = NamedNode(f"{STAGING_PREFIX}{token}:live")
    mark = sparql_term(live)
    # Each part holds its mark (its number in the live graph): the marks tell that every
    # part is there. The server's time goes with some of them (``StagedPlan.beat``).
    parts = []
    for i, chunk in enumerate(chunks(staged, limit)):
        data = f"{quad_data(chunk, None)} GRAPH {mark} {{ {mark} {STAGED_PART} {i} . }}"
        if any(has_blank(q) for q in chunk):  # Virtuoso refuses blank nodes in INSERT DATA
            parts.append(f"INSERT {{ {data} }} WHERE {{}}")
        else:
            parts.append(f"INSERT DATA {{ {data} }}")
    beat = (
        f"INSERT {{ GRAPH {mark} {{ {mark} {STAGED_AT} ?now }} }} WHERE {{ BIND(NOW() AS ?now) }}"
    )
    plan = StagedPlan(parts, [live, *scratch.values()], [], [], [], [], beat)
    plan.counts.append((f"GRAPH {mark} {{ {mark} {STAGED_PART} ?part }}", len(parts)))
    for j, ((verb, target), graph) in enumerate(scratch.items()):
        triple = f"?s{j} ?p{j} ?o{j} ."
        into = f"GRAPH {target} {{ {triple} }}" if target else triple
        (plan.inserts if verb == "INSERT" else plan.deletes).append(into)
        plan.branches.append(f"GRAPH {sparql_term(graph)} {{ {triple} }}")
        # At least one quad: a scratch graph dropped by a client that took this one for dead.
        plan.counts.append(
            (
                f"{{ SELECT ?q{j} WHERE {{ GRAPH {sparql_term(graph)} "
                f"{{ ?q{j} ?r{j} ?t{j} }} }} LIMIT 1 }}",
                1,
            )
        )
    return plan


def _blank_template(quads: Sequence[Quad], default_graph: NamedNode | None) -> tuple[str, str]:
    """Quads holding blank nodes as template triples instantiated in the main branch only
    (their predicates are variables bound there), and the binds of that branch."""
    predicates: dict[NamedNode, str] = {}
    groups: dict[str, list[str]] = {}
    for q in quads:
        var = predicates.setdefault(q.predicate, f"?ap{len(predicates)}")
        triple = f"{sparql_term(q.subject)} {var} {sparql_term(q.object)} ."
        graph = graph_on_wire(q.graph_name, default_graph)
        name = "" if isinstance(graph, DefaultGraph) else sparql_term(graph)
        groups.setdefault(name, []).append(triple)
    template = " ".join(
        f"GRAPH {g} {{ {' '.join(ts)} }}" if g else " ".join(ts) for g, ts in groups.items()
    )
    binds = " ".join(f"BIND({sparql_term(p)} AS {v})" for p, v in predicates.items())
    return template, binds


def write_operation(
    remove: Sequence[Quad],
    add: Sequence[Quad],
    *,
    default_graph: NamedNode | None,
    change: str = "",
    guard: Guard | None = None,
) -> str:
    """The request writing ``remove`` / ``add`` (quads without blank nodes to remove; blank
    nodes to add are minted by the server), ``change`` (a change-log template using
    ``?now``, the server's ``NOW()``) and what ``guard`` adds, as one operation (plus,
    when guarded, the receipt check after it).

    >>> s, p = NamedNode("urn:s"), NamedNode("urn:p")
    >>> print(write_operation([Quad(s, p, s)], [Quad(s, p, p)], default_graph=None))
    DELETE { <urn:s> <urn:p> <urn:s> . } INSERT { <urn:s> <urn:p> <urn:p> . } WHERE {}
    """
    plain_add = [q for q in add if not has_blank(q)]
    blank_add = [q for q in add if has_blank(q)]
    deletes = [quad_data(remove, default_graph)] if remove else []
    inserts = [quad_data(plain_add, default_graph)] if plain_add else []
    if guard is None:
        if blank_add:
            inserts.append(quad_data(blank_add, default_graph))
        if change:
            inserts.append(change)
        where = "BIND(NOW() AS ?now)" if change else ""
        if not deletes and not change and not blank_add:
            return f"INSERT DATA {{ {' '.join(inserts)} }}"
        head = f"DELETE {{ {' '.join(deletes)} }} " if deletes else ""
        return f"{head}INSERT {{ {' '.join(inserts)} }} WHERE {{{where}}}"
    main = ["BIND(NOW() AS ?now)"]
    if blank_add:
        template, binds = _blank_template(blank_add, default_graph)
        inserts.append(template)
        main.append(binds)
    if change:
        inserts.append(change)
    receipt = sparql_term(guard.receipt)
    inserts.append(f"GRAPH {receipt} {{ {receipt} {APPLIED} true . }}")
    deletes += guard.deletes
    inserts += guard.inserts
    checks = []
    for i, (pattern, expected) in enumerate(guard.counts):
        checks.append(
            f"{{ SELECT (COUNT(*) AS ?n{i}) WHERE {{ {pattern} }} }} FILTER(?n{i} = {expected})"
        )
    branches = " UNION ".join(f"{{ {b} }}" for b in [" ".join(main), *guard.branches])
    head = f"DELETE {{ {' '.join(deletes)} }} " if deletes else ""
    operation = f"{head}INSERT {{ {' '.join(inserts)} }} WHERE {{ {' '.join(checks)} {branches} }}"
    gate = sparql_term(guard.gate)
    check = (
        f"INSERT {{ GRAPH {gate} {{ {gate} {APPLIED} false . }} }} WHERE {{ "
        f"{{ SELECT (COUNT(*) AS ?applied) WHERE {{ GRAPH {receipt} {{ ?s ?p ?o }} }} }} "
        "FILTER(?applied = 0) }"
    )
    return f"{operation} ;\n{check} ;\nCREATE GRAPH {gate} ;\n{guard.cleared()}"
