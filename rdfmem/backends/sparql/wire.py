"""What a remote store sends and reads: terms, quad patterns and edits as SPARQL text, and
the server's answers read back as pyoxigraph results.

Pure functions, no I/O (``SparqlBackend`` sends what they write). Every term is written with
``sparql_term`` (N-Triples escaping). Blank nodes are written as blank nodes, and a blank
node in a pattern stands as a variable restricted by ``isBlank``, since SPARQL cannot name
an existing blank node (see ``rdfmem.backends.sparql.client`` for the rule).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyoxigraph import (
    BlankNode,
    DefaultGraph,
    NamedNode,
    Quad,
    QueryBoolean,
    QueryResultsFormat,
    QuerySolutions,
    RdfFormat,
    Triple,
    parse,
    parse_query_results,
)

from rdfmem.backends.base import Graph, Object, RawResult, Subject
from rdfmem.core.errors import BackingError, FormatError, InvalidTerm
from rdfmem.core.formats import check_rdfxml
from rdfmem.core.terms import sparql_term

__all__ = [
    "STAGING_PREFIX",
    "blanks_match",
    "chunks",
    "compile_blank_delete",
    "compile_match",
    "dataset_form",
    "edit_requests",
    "graph_on_wire",
    "has_blank",
    "is_scratch",
    "normalized_json",
    "prefetched_quads",
    "quad_data",
    "read_answer",
    "row_quads",
    "stage_quads",
    "staged_edit",
    "to_wire",
    "with_base",
]


# -- terms on the wire ----------------------------------------------------------------------


def to_wire(term: Any, default_graph: NamedNode | None = None) -> Any:
    """The term as it is written to the server: the default graph named when rdfmem's
    default graph is a named graph there (``default_graph``); any other term as it is."""
    if isinstance(term, DefaultGraph):
        return term if default_graph is None else default_graph
    return term


def graph_on_wire(graph: Any, default_graph: NamedNode | None) -> NamedNode | DefaultGraph:
    """A graph name as written to the server.

    Raises:
        InvalidTerm: a blank node: SPARQL Update cannot write a graph named by one.
    """
    if isinstance(graph, BlankNode):
        raise InvalidTerm("a blank node cannot name a graph on a remote store: use an IRI")
    wire: NamedNode | DefaultGraph = to_wire(graph, default_graph)
    return wire


def dataset_form(
    default_graph: Sequence[Graph] | None,
    named_graphs: Sequence[NamedNode | BlankNode] | None,
    *,
    ours: NamedNode | None,
) -> dict[str, list[str]]:
    """A query's dataset chosen by the caller, as the protocol's ``default-graph-uri`` and
    ``named-graph-uri`` parameters (``ours``: rdfmem's default graph on the server).

    >>> dataset_form([NamedNode("urn:g")], None, ours=None)
    {'default-graph-uri': ['urn:g']}

    Raises:
        InvalidTerm: the server's own default graph is named (no IRI names it), or a
            graph is not a graph name.
    """
    defaults = [DefaultGraph()] if default_graph is None else default_graph
    wire = [graph_on_wire(g, ours) for g in defaults]
    named = [graph_on_wire(g, None) for g in named_graphs or ()]
    iris = [g.value for g in wire if isinstance(g, NamedNode)]
    if len(iris) < len(wire):
        raise InvalidTerm(
            "the server's default graph cannot be named in a dataset: it is the "
            "default graph of a query that names none"
        )
    form = {"default-graph-uri": iris}
    if named_graphs is not None:
        form["named-graph-uri"] = [g.value for g in named if isinstance(g, NamedNode)]
    return form


def with_base(sparql: str, base_iri: str | None) -> str:
    """``sparql`` with a ``BASE`` declaration before it (as written when ``base_iri`` is
    None).

    >>> with_base("SELECT * {}", "http://example.com/")
    'BASE <http://example.com/>\\nSELECT * {}'

    Raises:
        InvalidTerm: ``base_iri`` is not an IRI.
    """
    if base_iri is None:
        return sparql
    try:
        return f"BASE {sparql_term(NamedNode(base_iri))}\n{sparql}"
    except ValueError as exc:
        raise InvalidTerm(f"base_iri is not an IRI: {base_iri!r}") from exc


def has_blank(quad: Quad) -> bool:
    """Whether the quad's subject or object is a blank node."""
    return isinstance(quad.subject, BlankNode) or isinstance(quad.object, BlankNode)


def blanks_match(row: Mapping[str, Any], subject: Any, object: Any) -> bool:
    """Whether a row of ``compile_match`` holds the pattern's blank nodes themselves (the
    query asked for any blank node in their place)."""
    return all(
        row.get(name) == term
        for name, term in (("s", subject), ("o", object))
        if isinstance(term, BlankNode)
    )


# -- pure compilers: matches and edits ------------------------------------------------------


def _slots(subject: Any, predicate: Any, object: Any, names: list[str]) -> tuple[str, list[str]]:
    """The triple pattern (a blank node stands as a variable: SPARQL cannot name an
    existing one) and its ``FILTER(isBlank(…))`` conditions."""
    parts, filters = [], []
    for name, term in (("s", subject), ("p", predicate), ("o", object)):
        if term is None or isinstance(term, BlankNode):
            names.append(name)
            parts.append("?" + name)
            if term is not None:
                filters.append(f"FILTER(isBlank(?{name}))")
        else:
            parts.append(sparql_term(term))
    return " ".join(parts), filters


def compile_match(
    subject: Subject | None,
    predicate: NamedNode | None,
    object: Object | None,
    graph: Graph | None,
    *,
    default_graph: NamedNode | None,
    hidden: Sequence[NamedNode] = (),
) -> tuple[str, list[str]]:
    """The query answering a quad pattern, and the variables it binds (``ASK`` when none).
    ``default_graph`` None: the server's default graph is rdfmem's (rows without ``?g``).
    A blank node of the pattern asks for every blank node in its place: keep the rows that
    hold it (``blanks_match``).

    >>> q, names = compile_match(None, NamedNode("urn:p"), None, None,
    ...     default_graph=NamedNode("urn:d"), hidden=[NamedNode("urn:l")])
    >>> print(q)
    SELECT ?s ?o ?g WHERE { GRAPH ?g { ?s <urn:p> ?o } FILTER(?g NOT IN (<urn:l>)) }
    >>> print(compile_match(None, NamedNode("urn:p"), None, DefaultGraph(),
    ...     default_graph=None)[0])
    SELECT ?s ?o WHERE { ?s <urn:p> ?o }
    >>> print(compile_match(NamedNode("urn:s"), None, None, None, default_graph=None)[0])
    SELECT ?p ?o ?g WHERE { { <urn:s> ?p ?o } UNION { GRAPH ?g { <urn:s> ?p ?o } } }
    >>> print(compile_match(BlankNode("b1"), None, None, DefaultGraph(), default_graph=None)[0])
    SELECT ?s ?p ?o WHERE { ?s ?p ?o FILTER(isBlank(?s)) }

    Raises:
        InvalidTerm: a graph named by a blank node.
    """
    names: list[str] = []
    triple, filters = _slots(subject, predicate, object, names)
    if graph is None:
        names.append("g")
        body = f"GRAPH ?g {{ {triple} }}"
        if hidden:
            body += f" FILTER(?g NOT IN ({', '.join(sparql_term(h) for h in hidden)}))"
        if default_graph is None:
            body = f"{{ {triple} }} UNION {{ {body} }}"
    else:
        target = graph_on_wire(graph, default_graph)
        if isinstance(target, DefaultGraph):
            body = triple
        else:
            body = f"GRAPH {sparql_term(target)} {{ {triple} }}"
    body = " ".join([body, *filters])
    if not names:
        return f"ASK {{ {body} }}", names
    return f"SELECT {' '.join('?' + n for n in names)} WHERE {{ {body} }}", names


def compile_blank_delete(quad: Quad, *, default_graph: NamedNode | None) -> tuple[str, str]:
    """For a quad holding blank nodes: the query listing the blank nodes that could stand
    in their places, and the update deleting the quad when the quad's own are the only ones
    (SPARQL cannot name an existing blank node, only match it).

    >>> q = Quad(BlankNode("b1"), NamedNode("urn:p"), NamedNode("urn:o"), DefaultGraph())
    >>> ask, delete = compile_blank_delete(q, default_graph=None)
    >>> print(ask)
    SELECT DISTINCT ?s WHERE { ?s <urn:p> <urn:o> FILTER(isBlank(?s)) }
    >>> print(delete)
    DELETE { ?s <urn:p> <urn:o> } WHERE { ?s <urn:p> <urn:o> FILTER(isBlank(?s)) }
    """
    names: list[str] = []
    triple, filters = _slots(quad.subject, quad.predicate, quad.object, names)
    graph = graph_on_wire(quad.graph_name, default_graph)
    if not isinstance(graph, DefaultGraph):
        triple = f"GRAPH {sparql_term(graph)} {{ {triple} }}"
    where = " ".join([triple, *filters])
    select = f"SELECT DISTINCT {' '.join('?' + n for n in names)} WHERE {{ {where} }}"
    return select, f"DELETE {{ {triple} }} WHERE {{ {where} }}"


def _data(quads: Sequence[Quad], default_graph: NamedNode | None) -> str:
    groups: dict[str, list[str]] = {}
    for q in quads:
        triple = f"{sparql_term(q.subject)} {sparql_term(q.predicate)} {sparql_term(q.object)} ."
        graph = graph_on_wire(q.graph_name, default_graph)
        name = "" if isinstance(graph, DefaultGraph) else sparql_term(graph)
        groups.setdefault(name, []).append(triple)
    return " ".join(
        f"GRAPH {g} {{ {' '.join(ts)} }}" if g else " ".join(ts) for g, ts in groups.items()
    )


def quad_data(quads: Sequence[Quad], default_graph: NamedNode | None) -> str:
    """Quads as the triples of a data block or template (``GRAPH`` groups for named
    graphs; the default graph's triples outside, or in ``GRAPH default_graph``).

    >>> quad_data([Quad(NamedNode("urn:s"), NamedNode("urn:p"), NamedNode("urn:o"),
    ...     NamedNode("urn:g"))], None)
    'GRAPH <urn:g> { <urn:s> <urn:p> <urn:o> . }'
    """
    return _data(quads, default_graph)


def _chunks(quads: Sequence[Quad], limit: int) -> list[list[Quad]]:
    """``quads`` in chunks of at most ``limit``, the quads of one blank node in one chunk
    (the server mints one node per label per request), unless they alone exceed it."""
    owner: dict[str, str] = {}

    def find(label: str) -> str:
        while owner.setdefault(label, label) != label:
            label = owner[label]
        return label

    for q in quads:
        labels = [t.value for t in (q.subject, q.object) if isinstance(t, BlankNode)]
        for other in labels[1:]:
            owner[find(other)] = find(labels[0])
    groups: dict[str, list[Quad]] = {}
    for i, q in enumerate(quads):
        blank = next((t.value for t in (q.subject, q.object) if isinstance(t, BlankNode)), None)
        groups.setdefault(find(blank) if blank else f" {i}", []).append(q)
    chunks: list[list[Quad]] = [[]]
    for group in groups.values():
        if chunks[-1] and len(chunks[-1]) + len(group) > limit:
            chunks.append([])
        chunks[-1].extend(group)
    return [c for c in chunks if c]


def chunks(quads: Sequence[Quad], limit: int) -> list[list[Quad]]:
    """``quads`` in chunks of at most ``limit``, the quads of one blank node in one chunk
    (the server mints one node per label per request), unless they alone exceed it."""
    return _chunks(quads, limit)


def _insert(quads: Sequence[Quad], default_graph: NamedNode | None) -> str:
    # Blank nodes: an INSERT template (Virtuoso refuses them in INSERT DATA); the empty
    # WHERE has one solution, so one fresh node per label, as INSERT DATA would mint.
    if any(has_blank(q) for q in quads):
        return f"INSERT {{ {_data(quads, default_graph)} }} WHERE {{}}"
    return f"INSERT DATA {{ {_data(quads, default_graph)} }}"


def edit_requests(
    remove: Sequence[Quad],
    add: Sequence[Quad],
    *,
    default_graph: NamedNode | None,
    limit: int | None = None,
) -> list[str]:
    """``INSERT DATA`` then ``DELETE DATA`` (the default graph's triples outside ``GRAPH``,
    or in ``GRAPH default_graph`` when that is a named graph): one request,
    or several of at most ``limit`` quads. Inserting first means that a reader of a server
    with weak isolation (Virtuoso reads committed rows) sees the old quads, the new ones,
    or both, but never neither.

    Blank nodes are written as blank nodes (in ``INSERT { … } WHERE {}``): the server
    mints one node for each label of the request. Quads to remove must hold none
    (``compile_blank_delete`` removes those).

    >>> q = Quad(NamedNode("urn:s"), NamedNode("urn:p"), BlankNode("b1"), DefaultGraph())
    >>> edit_requests([], [q], default_graph=NamedNode("urn:d"))
    ['INSERT { GRAPH <urn:d> { <urn:s> <urn:p> _:b1 . } } WHERE {}']
    >>> q = Quad(NamedNode("urn:s"), NamedNode("urn:p"), NamedNode("urn:o"), DefaultGraph())
    >>> edit_requests([q], [], default_graph=None)
    ['DELETE DATA { <urn:s> <urn:p> <urn:o> . }']

    Raises:
        InvalidTerm: a quad to remove holds a blank node; a graph named by a blank node.
    """
    both = set(remove) & set(add)
    if both:  # kept as they are: inserting, then deleting, would lose them
        remove = [q for q in remove if q not in both]
        add = [q for q in add if q not in both]
    if any(has_blank(q) for q in remove):
        raise InvalidTerm("DELETE DATA cannot name a blank node: see compile_blank_delete")
    if limit is None or len(remove) + len(add) <= limit:
        ops = []
        if add:
            ops.append(_insert(add, default_graph))
        if remove:
            ops.append(f"DELETE DATA {{ {_data(remove, default_graph)} }}")
        return [" ; ".join(ops)] if ops else []
    requests = []
    for chunk in _chunks(add, limit):
        requests.append(_insert(chunk, default_graph))
    for i in range(0, len(remove), limit):
        requests.append(f"DELETE DATA {{ {_data(remove[i : i + limit], default_graph)} }}")
    return requests


#: Scratch graphs of a write staged in parts (``staged_edit``), hidden from rdfmem's reads.
STAGING_PREFIX = "urn:rdfmem:graph:staging:"


def is_scratch(graph: Any) -> bool:
    """Whether a graph is a scratch graph of a staged write (hidden from reads).

    >>> is_scratch(NamedNode(STAGING_PREFIX + "t:0")), is_scratch(DefaultGraph())
    (True, False)
    """
    return isinstance(graph, NamedNode) and graph.value.startswith(STAGING_PREFIX)


def stage_quads(
    remove: Sequence[Quad], add: Sequence[Quad], default_graph: NamedNode | None, token: str
) -> tuple[list[Quad], dict[tuple[str, str], NamedNode]]:
    """``add`` then ``remove`` moved into scratch graphs (one per verb and target graph,
    named ``STAGING_PREFIX + token:n``), and those graphs by (verb, target).

    Raises:
        InvalidTerm: a quad to remove holds a blank node; a graph named by a blank node.
    """
    if any(has_blank(q) for q in remove):
        raise InvalidTerm("DELETE DATA cannot name a blank node: see compile_blank_delete")
    scratch: dict[tuple[str, str], NamedNode] = {}

    def stage(verb: str, quad: Quad) -> Quad:
        target = graph_on_wire(quad.graph_name, default_graph)
        key = (verb, "" if isinstance(target, DefaultGraph) else sparql_term(target))
        graph = scratch.get(key)
        if graph is None:
            graph = scratch[key] = NamedNode(f"{STAGING_PREFIX}{token}:{len(scratch)}")
        return Quad(quad.subject, quad.predicate, quad.object, graph)

    return [stage("INSERT", q) for q in add] + [stage("DELETE", q) for q in remove], scratch


def staged_edit(
    remove: Sequence[Quad],
    add: Sequence[Quad],
    *,
    default_graph: NamedNode | None,
    limit: int,
    token: str,
) -> tuple[list[str], str, list[NamedNode]]:
    """A write too large for one request (Virtuoso compiles an update to SQL and refuses
    one of ~1,500 quads), made visible at once: the requests that copy it, ``limit`` quads
    at a time, into scratch graphs (``STAGING_PREFIX`` + ``token``), and the one update
    that applies it from there and drops them (``INSERT … WHERE`` and ``DELETE … WHERE``
    on the scratch graphs: a few lines of SQL however many quads). Quads to remove must
    hold no blank node; those of one blank node are staged in one request.

    >>> add = [Quad(NamedNode("urn:s"), NamedNode("urn:p"), NamedNode(f"urn:o{i}"),
    ...     NamedNode("urn:g")) for i in range(3)]
    >>> parts, apply, scratch = staged_edit([], add, default_graph=None, limit=2, token="t")
    >>> len(parts), [g.value for g in scratch]
    (2, ['urn:rdfmem:graph:staging:t:0'])
    >>> insert, drop = apply.split(" ; ")
    >>> for part in insert.split(" WHERE "):
    ...     print(part)
    INSERT { GRAPH <urn:g> { ?s ?p ?o } }
    { GRAPH <urn:rdfmem:graph:staging:t:0> { ?s ?p ?o } }
    >>> drop
    'DROP SILENT GRAPH <urn:rdfmem:graph:staging:t:0>'

    Raises:
        InvalidTerm: a quad to remove holds a blank node; a graph named by a blank node.
    """
    staged, scratch = stage_quads(remove, add, default_graph, token)
    parts = [_insert(chunk, None) for chunk in _chunks(staged, limit)]
    ops = []
    for (verb, target), graph in sorted(scratch.items(), key=lambda item: item[0][0] != "INSERT"):
        into = f"GRAPH {target} {{ ?s ?p ?o }}" if target else "?s ?p ?o"
        ops.append(f"{verb} {{ {into} }} WHERE {{ GRAPH {sparql_term(graph)} {{ ?s ?p ?o }} }}")
    ops += [f"DROP SILENT GRAPH {sparql_term(g)}" for g in scratch.values()]
    return parts, " ; ".join(ops), list(scratch.values())


def read_answer(media: str, body: bytes) -> RawResult:
    """A server's answer (``media``: its Content-Type) as pyoxigraph results, fully
    validated, blank node labels made valid (Virtuoso's ``nodeID://…``).

    Raises:
        BackingError: an unexpected media type, or a body that does not parse.
    """
    rdf = RdfFormat.from_media_type(media) if media else None
    if rdf is not None:
        if rdf == RdfFormat.RDF_XML:
            try:  # a hostile server's entity bomb must not exhaust this process
                check_rdfxml(body)
            except FormatError as exc:
                raise BackingError(f"refused RDF/XML from the server: {exc}") from exc
        try:
            return [Triple(t.subject, t.predicate, t.object) for t in parse(body, rdf)]
        except (SyntaxError, ValueError) as exc:
            raise BackingError(f"malformed {rdf.name} from the server: {exc}", cause=exc) from exc
    fmt = QueryResultsFormat.from_media_type(media) if media else None
    if fmt is None:
        raise BackingError(f"unexpected answer from the server ({media or 'no type'})")
    if fmt == QueryResultsFormat.JSON and b"bnode" in body:
        body = normalized_json(body)
    try:
        parsed = parse_query_results(body, fmt)
        if isinstance(parsed, QueryBoolean):
            return bool(parsed)
        width = len(parsed.variables)
        for solution in parsed:  # validates every term
            [solution[i] for i in range(width)]
    except (SyntaxError, ValueError) as exc:
        raise BackingError(f"malformed {fmt.name} from the server: {exc}", cause=exc) from exc
    solutions = parse_query_results(body, fmt)
    assert isinstance(solutions, QuerySolutions)
    return solutions


# -- answers ------------------------------------------------------------------------------


def row_quads(
    rows: Sequence[Mapping[str, Any]],
    subject: Any,
    predicate: Any,
    object: Any,
    graph: Any,
    *,
    default_graph: NamedNode | None,
) -> list[Quad]:
    """The quads of a match's rows (``compile_match``): a term the pattern fixed is not
    in the rows; ``default_graph`` (rdfmem's default graph on the server) reads back as
    ``DefaultGraph()``.

    Raises:
        BackingError: a row does not make a quad.
    """
    quads = []
    for row in rows:
        try:
            g: Any = row.get("g", graph if graph is not None else DefaultGraph())
            s: Any = row.get("s", subject)
            p: Any = row.get("p", predicate)
            o: Any = row.get("o", object)
            quads.append(Quad(s, p, o, DefaultGraph() if g == default_graph else g))
        except (TypeError, ValueError) as exc:
            raise BackingError(f"the server returned a malformed quad: {row}") from exc
    return quads


def prefetched_quads(
    rows: Sequence[Mapping[str, Any]],
    subject: NamedNode,
    predicate: Any,
    object: Any,
    graph: Any,
    *,
    default_graph: NamedNode | None,
    hidden: Sequence[NamedNode],
) -> list[Quad]:
    """The quads of ``subject`` that match a pattern, among those read along with a lease
    on it (rows of ``?pp ?po ?pg``), leaving out the ``hidden`` graphs and scratch graphs.

    Raises:
        BackingError: a row does not make a quad.
    """
    found = row_quads(
        [{"s": subject, "p": r["pp"], "o": r["po"], "g": r["pg"]} for r in rows],
        subject,
        predicate,
        object,
        graph,
        default_graph=default_graph,
    )
    left_out = set(hidden)
    return [
        q
        for q in found
        if q.graph_name not in left_out
        and not is_scratch(q.graph_name)
        and (predicate is None or q.predicate == predicate)
        and (object is None or q.object == object)
        and (graph is None or q.graph_name == graph)
    ]


def _bnode_id(value: str) -> str:
    try:
        return BlankNode(value).value
    except ValueError:  # Virtuoso's "nodeID://b1001": a stable id that pyoxigraph accepts
        return "x" + value.encode("utf-8").hex()


def normalized_json(body: bytes) -> bytes:
    """SPARQL JSON results with blank node labels made valid (Virtuoso's ``nodeID://…``).

    Raises:
        BackingError: the body is not SPARQL JSON results.
    """
    try:
        doc = json.loads(body)
        for binding in doc["results"]["bindings"]:
            for term in binding.values():
                if term.get("type") == "bnode":
                    term["value"] = _bnode_id(term.get("value", ""))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BackingError(f"malformed SPARQL JSON results from the server: {exc}") from exc
    return json.dumps(doc, ensure_ascii=False).encode("utf-8")
