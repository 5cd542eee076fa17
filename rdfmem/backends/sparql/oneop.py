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

**Literals by pattern**: Virtuoso does not remove a literal of a datatype it does not know
(``rdf:JSON``, a vector) that an operation over several graphs names to delete (a guarded
one writes its receipt; a change record goes to the log's graph), so such an operation
deletes that quad by pattern, binding its literal by text and datatype (``by_text``).

The ``WHERE`` of a guarded operation, or of one that deletes a literal by pattern, is a
``UNION`` of branches (the main one binds the server's ``NOW()`` for the change log; each
blank-node pattern, literal pattern and scratch graph has its own), so it has several
solutions; a template triple holding a blank node would be
minted once per solution, so such triples take their predicate from a variable bound in
the main branch only (Virtuoso implements no ``BNODE()``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from pyoxigraph import BlankNode, DefaultGraph, Literal, NamedNode, Quad

from rdfmem.backends.sparql.text import STAMP
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
    "by_text",
    "named_safely",
    "staged_plan",
    "write_operation",
]

#: The predicate of a receipt triple.
APPLIED = "<urn:rdfmem:applied>"
#: A staged part's mark: the server's time it arrived, and its number.
STAGED_AT = "<urn:rdfmem:stagedAt>"
STAGED_PART = "<urn:rdfmem:stagedPart>"

_XSD = "http://www.w3.org/2001/XMLSchema#"
#: The datatypes of literals that Virtuoso stores as values of its own (and plain and
#: language-tagged strings). It stores a literal of any other datatype (``rdf:JSON``: every
#: key/value entry; a vector; ``xsd:anyURI`` …) as typed text, and does not remove one that
#: an operation names to delete when the operation's templates name more than one graph,
#: or one graph in two ``GRAPH`` groups: ``DELETE DATA`` of two graphs, or a ``DELETE``
#: beside an ``INSERT`` into another graph (a change record, a receipt), even with
#: ``WHERE {}`` (Virtuoso 7.2.5). A variable bound by matching the stored quad removes it.
_NATIVE = frozenset(
    [_XSD + t for t in ("string", "boolean", "integer", "decimal", "double", "float")]
    + [_XSD + t for t in ("int", "long", "short", "byte", "dateTime", "date")]
    + [_XSD + t for t in ("nonNegativeInteger", "positiveInteger", "unsignedInt")]
    + ["http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"]
)


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


def by_text(quad: Quad) -> bool:
    """Whether the quad's object is a literal that Virtuoso keeps when an operation's
    templates name other graphs too (``_NATIVE``): such a quad is removed by
    ``blank_pattern``, its literal matched by text and datatype.

    >>> s = NamedNode("urn:s")
    >>> json = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#JSON")
    >>> by_text(Quad(s, s, Literal("{}", datatype=json))), by_text(Quad(s, s, Literal("1")))
    (True, False)
    """
    term = quad.object
    return isinstance(term, Literal) and term.datatype.value not in _NATIVE


def blank_pattern(quad: Quad, n: str, default_graph: NamedNode | None) -> tuple[str, str]:
    """The quad as a template whose blank nodes are variables ``?b{n}s`` / ``?b{n}o``, and
    as a pattern restricted to blank nodes, in its graph on the wire; an object that is a
    literal Virtuoso would keep (``by_text``) is the variable ``?b{n}o`` too, matched by
    its text and datatype.

    >>> q = Quad(BlankNode("x"), NamedNode("urn:p"), NamedNode("urn:o"), DefaultGraph())
    >>> blank_pattern(q, "0", None)
    ('?b0s <urn:p> <urn:o> .', '?b0s <urn:p> <urn:o> . FILTER(isBlank(?b0s))')
    >>> q = Quad(NamedNode("urn:s"), NamedNode("urn:p"), Literal("a", datatype=q.predicate),
    ...     NamedNode("urn:g"))
    >>> print(blank_pattern(q, "1", None)[1])  # doctest: +NORMALIZE_WHITESPACE
    GRAPH <urn:g> { <urn:s> <urn:p> ?b1o . } FILTER(isLiteral(?b1o) && STR(?b1o) = "a"
    && DATATYPE(?b1o) = <urn:p>)
    """
    parts, filters = [], []
    for slot, term in (("s", quad.subject), ("p", quad.predicate), ("o", quad.object)):
        var = f"?b{n}{slot}"
        if isinstance(term, BlankNode):
            parts.append(var)
            filters.append(f"FILTER(isBlank({var}))")
        elif isinstance(term, Literal) and slot == "o" and by_text(quad):
            parts.append(var)
            text, datatype = sparql_term(Literal(term.value)), sparql_term(term.datatype)
            filters.append(
                f"FILTER(isLiteral({var}) && STR({var}) = {text} && DATATYPE({var}) = {datatype})"
            )
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


def named_safely(
    remove: Sequence[Quad], add: Sequence[Quad], default_graph: NamedNode | None
) -> bool:
    """Whether an operation without ``WHERE`` may name the quads it removes (``DELETE
    DATA``, ``DELETE { … } INSERT { … } WHERE {}``): none holds a literal Virtuoso would
    keep (``by_text``), or the operation writes one graph, in one ``GRAPH`` group a side.
    """
    if not any(by_text(q) for q in remove):
        return True
    graphs = {graph_on_wire(q.graph_name, default_graph) for q in (*remove, *add)}
    return len(graphs) == 1 and not any(has_blank(q) for q in add)


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
    when guarded, the receipt check after it). A quad to remove whose literal Virtuoso
    would keep if named (``by_text``) is removed by pattern, unless the operation is a
    plain edit of one graph (``named_safely``).

    >>> s, p = NamedNode("urn:s"), NamedNode("urn:p")
    >>> print(write_operation([Quad(s, p, s)], [Quad(s, p, p)], default_graph=None))
    DELETE { <urn:s> <urn:p> <urn:s> . } INSERT { <urn:s> <urn:p> <urn:p> . } WHERE {}
    >>> old = Quad(s, p, Literal("1", datatype=p), NamedNode("urn:g"))
    >>> print(write_operation([old], [Quad(s, p, p)], default_graph=None))
    ... # doctest: +NORMALIZE_WHITESPACE
    DELETE { GRAPH <urn:g> { <urn:s> <urn:p> ?bt0o . } } INSERT { <urn:s> <urn:p> <urn:p> . }
    WHERE { { BIND(NOW() AS ?now) } UNION { GRAPH <urn:g> { <urn:s> <urn:p> ?bt0o . }
    FILTER(isLiteral(?bt0o) && STR(?bt0o) = "1" && DATATYPE(?bt0o) = <urn:p>) } }
    """
    matched: list[Quad] = []
    if guard is not None or change or not named_safely(remove, add, default_graph):
        matched = [q for q in remove if by_text(q)]
        remove = [q for q in remove if not by_text(q)]
    plain_add = [q for q in add if not has_blank(q)]
    blank_add = [q for q in add if has_blank(q)]
    deletes = [quad_data(remove, default_graph)] if remove else []
    inserts = [quad_data(plain_add, default_graph)] if plain_add else []
    if guard is None and not matched:
        if blank_add:
            inserts.append(quad_data(blank_add, default_graph))
        if change:
            inserts.append(change)
        where = STAMP if change else ""
        if not deletes and not change and not blank_add:
            return f"INSERT DATA {{ {' '.join(inserts)} }}"
        head = f"DELETE {{ {' '.join(deletes)} }} " if deletes else ""
        return f"{head}INSERT {{ {' '.join(inserts)} }} WHERE {{{where}}}"
    # The WHERE is a UNION: the main branch (one solution) and one branch per pattern.
    main = [STAMP if change else "BIND(NOW() AS ?now)"]
    if blank_add:
        template, binds = _blank_template(blank_add, default_graph)
        inserts.append(template)
        main.append(binds)
    if change:
        inserts.append(change)
    branches = [" ".join(main)]
    for i, quad in enumerate(matched):
        template, where = blank_pattern(quad, f"t{i}", default_graph)
        deletes.append(template)
        branches.append(where)
    checks = []
    if guard is not None:
        receipt = sparql_term(guard.receipt)
        inserts.append(f"GRAPH {receipt} {{ {receipt} {APPLIED} true . }}")
        deletes += guard.deletes
        inserts += guard.inserts
        branches += guard.branches
        for i, (pattern, expected) in enumerate(guard.counts):
            checks.append(
                f"{{ SELECT (COUNT(*) AS ?n{i}) WHERE {{ {pattern} }} }} FILTER(?n{i} = {expected})"
            )
    union = " UNION ".join(f"{{ {b} }}" for b in branches)
    head = f"DELETE {{ {' '.join(deletes)} }} " if deletes else ""
    body = f"INSERT {{ {' '.join(inserts)} }} " if inserts else ""
    operation = f"{head}{body}WHERE {{ {' '.join([*checks, union])} }}"
    if guard is None:
        return operation
    gate = sparql_term(guard.gate)
    check = (
        f"INSERT {{ GRAPH {gate} {{ {gate} {APPLIED} false . }} }} WHERE {{ "
        f"{{ SELECT (COUNT(*) AS ?applied) WHERE {{ GRAPH {receipt} {{ ?s ?p ?o }} }} }} "
        "FILTER(?applied = 0) }"
    )
    return f"{operation} ;\n{check} ;\nCREATE GRAPH {gate} ;\n{guard.cleared()}"
