"""rdflib: an rdflib ``Dataset``, so any rdflib store plugin can hold rdfmem's data.

rdflib's SPARQL engine can fetch (``SERVICE``, ``LOAD``, and ``FROM``/``USING`` of a graph it
does not hold). This backend never lets it: requests are parsed and translated here, refused
when they hold ``SERVICE`` or ``LOAD`` (``NetworkAccessRefused``), and their dataset
(``FROM``, ``FROM NAMED``, ``USING``, ``USING NAMED``) is built from graphs already in the
store, as Oxigraph does, an unknown graph being empty. rdflib also expands ``\\u`` escapes
everywhere before parsing, so ``"a\\\\u0022b"`` would lose its backslash; here escapes are
read as Oxigraph reads them (inside strings and IRIs, after ``\\\\``), so every backend
sees the same text.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import rdflib
import rdflib.plugins.sparql.update as rdflib_update
from pyoxigraph import (
    BlankNode,
    DefaultGraph,
    Literal,
    NamedNode,
    Quad,
    QueryResultsFormat,
    Triple,
    parse_query_results,
)
from rdflib.graph import DATASET_DEFAULT_GRAPH_ID
from rdflib.plugins.sparql.algebra import translateQuery, translateUpdate
from rdflib.plugins.sparql.evaluate import evalPart, evalQuery
from rdflib.plugins.sparql.parser import Query as QueryGrammar
from rdflib.plugins.sparql.parser import UpdateUnit
from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.plugins.sparql.processor import SPARQLResult
from rdflib.plugins.sparql.sparql import QueryContext
from rdflib.plugins.sparql.sparql import Update as RdflibUpdate
from rdflib.plugins.sparql.update import evalUpdate

from rdfmem.backends.base import Backend, Graph, Object, RawResult, Subject
from rdfmem.core.errors import (
    BackingError,
    InvalidTerm,
    NetworkAccessRefused,
    QueryError,
    RdfMemError,
)
from rdfmem.core.outline import check_bindings
from rdfmem.core.terms import from_rdflib

__all__ = ["RdflibBackend"]


_XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"


def _to_rdflib(term: Any) -> Any:
    if term is None:
        return None
    if isinstance(term, NamedNode):
        return rdflib.URIRef(term.value)
    if isinstance(term, BlankNode):
        return rdflib.BNode(term.value)
    if isinstance(term, Literal):
        if term.language:
            return rdflib.Literal(term.value, lang=term.language)
        if term.datatype.value == _XSD_STRING:  # RDF 1.1: a simple literal is an xsd:string
            return rdflib.Literal(term.value)
        return rdflib.Literal(term.value, datatype=rdflib.URIRef(term.datatype.value))
    if isinstance(term, DefaultGraph):
        return DATASET_DEFAULT_GRAPH_ID
    raise InvalidTerm(f"rdflib backend cannot hold {term!r}")


def _rdflib_quad(quad: Quad) -> tuple[Any, Any, Any, Any]:
    return (
        _to_rdflib(quad.subject),
        _to_rdflib(quad.predicate),
        _to_rdflib(quad.object),
        _to_rdflib(quad.graph_name),
    )


def _from_rdflib_quad(s: Any, p: Any, o: Any, g: Any) -> Quad:
    graph = from_rdflib(g.identifier if isinstance(g, rdflib.Graph) else g)
    return Quad(from_rdflib(s), from_rdflib(p), from_rdflib(o), graph)  # type: ignore[arg-type]


@contextmanager
def _quiet_rdflib() -> Iterator[None]:
    """rdflib 7.6's SPARQL engine calls its own deprecated Dataset API; hide only those."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"rdflib\.")
        warnings.filterwarnings("ignore", message=r"Dataset\.\w+ is deprecated")
        yield


# A string (long ones first), an IRI, a comment, or a run of anything else.
_TOKENS = re.compile(
    r"""(?P<string>'''(?:(?:''|')?(?:[^'\\]|\\.))*'''|\"\"\"(?:(?:\"\"|\")?(?:[^\"\\]|\\.))*\"\"\"
    |'(?:[^'\\\n\r]|\\.)*'|"(?:[^"\\\n\r]|\\.)*")
    |(?P<iri><[^<>"{}|^`\x00-\x20]*>)
    |(?P<comment>\#[^\n\r]*)
    |[^'"<\#]+|.""",
    re.VERBOSE | re.DOTALL,
)
_ESCAPE = re.compile(r"\\\\|\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})")
_ECHAR = {"\\": "\\\\", "\n": "\\n", "\r": "\\r"}


def _decode(token: str, quote: str) -> str:
    def one(match: re.Match[str]) -> str:
        digits = match.group(1) or match.group(2)
        if digits is None:
            return match.group()  # an escaped backslash stays as written
        code = int(digits, 16)
        if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
            raise QueryError(f"invalid escape {match.group()!r}: not a Unicode character")
        char = chr(code)
        if char in _ECHAR:
            return _ECHAR[char]
        return "\\" + char if quote and char == quote else char

    return _ESCAPE.sub(one, token)


def read_escapes(sparql: str) -> str:
    r"""SPARQL text with its ``\u``/``\U`` escapes read as Oxigraph reads them, for rdflib.

    Escapes are decoded inside strings and IRIs only, never after an escaped backslash; a
    decoded quote, backslash or line break is written back as an ECHAR, so rdflib's parser
    reads the same string as Oxigraph's. Elsewhere (keywords, comments) text is unchanged:
    Oxigraph refuses escapes there, and so does rdflib's parser once rdflib's own expansion
    is skipped.

    >>> print(read_escapes(r'SELECT * { ?s ?p "say\\u0022hi", "a\u0022b", <urn:\u0078> }'))
    SELECT * { ?s ?p "say\\u0022hi", "a\"b", <urn:x> }

    Raises:
        QueryError: an escape that names no Unicode character.
    """
    if "\\" not in sparql:
        return sparql
    out = []
    for match in _TOKENS.finditer(sparql):
        token = match.group()
        if match.group("string") is not None:
            out.append(_decode(token, token[0]))
        elif match.group("iri") is not None:
            out.append(_decode(token, ""))
        else:
            out.append(token)
    return "".join(out)


def _nodes(tree: object) -> Iterator[CompValue]:
    """Every ``CompValue`` in an rdflib algebra tree (iteratively: trees can be deep)."""
    todo = [tree]
    seen: set[int] = set()
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, CompValue):
            yield node
            todo.extend(node.values())
        elif isinstance(node, Mapping):
            todo.extend(node.values())
        elif isinstance(node, (list, tuple)) or type(node).__name__ == "ParseResults":
            todo.extend(node)  # type: ignore[arg-type]


def _refuse_fetching(tree: object, what: str) -> None:
    for node in list(_nodes(tree)):
        if node.name == "ServiceGraphPattern" and "silent" in node:
            # SERVICE SILENT: a call that fails gives one empty solution, and here every
            # call fails unmade. The pattern becomes the empty group, which gives just that.
            node.clear()
            node.name = "BGP"
            node["triples"] = []
        elif node.name == "ServiceGraphPattern":
            raise NetworkAccessRefused(
                f"{what} uses SERVICE: the rdflib backend never reaches the network"
            )
        if node.name == "Load":
            raise NetworkAccessRefused(
                f"{what} uses LOAD: the rdflib backend never reaches the network"
            )


@contextmanager
def translated(what: str) -> Iterator[None]:
    """rdflib's failures as ``QueryError``, at this boundary: rdflib has no error tree of
    its own (pyparsing's ``ParseException``, ``Exception``, ``AssertionError`` …), so this
    one place catches broadly; rdfmem's own errors pass through.

    >>> with translated("SPARQL syntax error"):
    ...     raise ValueError("bad")
    Traceback (most recent call last):
    ...
    rdfmem.core.errors.QueryError: SPARQL syntax error: bad
    """
    try:
        yield
    except RdfMemError:
        raise
    except Exception as exc:
        raise QueryError(f"{what}: {exc}") from exc


class RdflibBackend(Backend):
    """An rdflib ``Dataset`` (in memory unless you pass one over another store plugin).

    >>> backend = RdflibBackend()
    >>> backend.dataset.default_union
    False

    Every call holds the backend lock: rdflib's stores are not safe for concurrent use.
    """

    kind = "rdflib"
    concurrent_reads = False

    def __init__(self, dataset: rdflib.Dataset | None = None) -> None:
        # A Dataset handed in may be written around this object (another backend, the
        # caller): nothing above caches.
        super().__init__(exclusive_writer=dataset is None)
        self.dataset = dataset if dataset is not None else rdflib.Dataset()
        self.persistent = type(self.dataset.store).__name__ != "Memory"

    def query(
        self,
        sparql: str,
        *,
        base_iri: str | None = None,
        default_graph: Sequence[Graph] | None = None,
        named_graphs: Sequence[NamedNode | BlankNode] | None = None,
        substitutions: Mapping[str, Object] | None = None,
    ) -> RawResult:
        if substitutions:  # the one rule of every backend (rdfmem.core.outline)
            check_bindings(sparql, substitutions)
        text = read_escapes(sparql)
        with self.lock, _quiet_rdflib():
            with translated("SPARQL syntax error"):
                parsed = translateQuery(QueryGrammar.parse_string(text, parse_all=True), base_iri)
            _refuse_fetching(parsed.algebra, "the query")
            clause = parsed.algebra.datasetClause
            parsed.algebra["datasetClause"] = None
            target = self.dataset
            if default_graph is not None or named_graphs is not None:
                target = self._narrowed(
                    [_to_rdflib(g) for g in default_graph or ()],
                    [_to_rdflib(g) for g in named_graphs or ()],
                )
            elif clause:
                target = self._narrowed(
                    [d.default for d in clause if "default" in d],
                    [d.named for d in clause if "named" in d],
                )
            bindings = {k: _to_rdflib(v) for k, v in (substitutions or {}).items()}
            with translated("SPARQL query failed"):
                result = SPARQLResult(evalQuery(target, parsed, bindings, base_iri))
                if result.type == "ASK":
                    return bool(result.askAnswer)
                if result.type == "SELECT":
                    payload = result.serialize(format="json")
                    return parse_query_results(payload or b"", QueryResultsFormat.JSON)
                graph = result.graph
                assert graph is not None
                return [
                    Triple(from_rdflib(s), from_rdflib(p), from_rdflib(o))  # type: ignore[arg-type]
                    for s, p, o in graph
                ]

    def _narrowed(self, defaults: Iterable[Any], named: Iterable[Any]) -> rdflib.Dataset:
        """A dataset of graphs already held: the union of ``defaults`` as its default graph,
        and ``named``; a graph the store does not hold is empty (nothing is fetched)."""
        narrowed = rdflib.Dataset()
        quads: list[tuple[Any, Any, Any, Any]] = []
        target = narrowed.graph(DATASET_DEFAULT_GRAPH_ID)
        for name in defaults:
            quads.extend((s, p, o, target) for s, p, o in self.dataset.get_context(name))
        for name in named:
            graph = narrowed.graph(name)
            quads.extend((s, p, o, graph) for s, p, o in self.dataset.get_context(name))
        narrowed.addN(quads)
        return narrowed

    def update(self, sparql: str, *, base_iri: str | None = None) -> None:
        try:
            self._update(sparql, base_iri)
        finally:
            self.wrote()

    def _update(self, sparql: str, base_iri: str | None) -> None:
        text = read_escapes(sparql)
        with self.lock, _quiet_rdflib():
            with translated("SPARQL Update syntax error"):
                prepared = translateUpdate(
                    UpdateUnit.parse_string(text, parse_all=True)[0], base_iri
                )
            # LOAD SILENT: a load that fails is no error, and here every load fails unfetched.
            operations = [
                op for op in prepared.algebra if not (op.name == "Load" and "silent" in op)
            ]
            _refuse_fetching(operations, "the update")
            for op in operations:
                # rdflib issue 2019: INSERT DATA into the default graph of a Dataset tries
                # to add triples as quads. Route those triples to the default graph by name.
                if op.name == "InsertData" and op.triples:
                    quads = dict(op.quads or {})
                    quads.setdefault(DATASET_DEFAULT_GRAPH_ID, []).extend(op.triples)
                    op["quads"] = quads
                    op["triples"] = []
            with translated("SPARQL Update failed"):
                for op in operations:
                    if op.name == "Modify" and op.using:
                        self._modify_using(op)
                    else:
                        evalUpdate(self.dataset, RdflibUpdate(op.prologue, [op]))

    def _modify_using(self, op: CompValue) -> None:
        """DELETE/INSERT … USING: the WHERE clause reads a dataset of held graphs (rdflib's
        own evaluation would fetch each USING graph from the network)."""
        narrowed = self._narrowed(
            [d.default for d in op.using if "default" in d],
            [d.named for d in op.using if "named" in d],
        )
        where = QueryContext(narrowed)
        where.prologue = op.prologue
        solutions = list(evalPart(where, op.where))
        ctx = QueryContext(self.dataset)
        ctx.prologue = op.prologue
        if op.withClause:
            ctx = ctx.pushGraph(ctx.dataset.get_context(op.withClause))
        default = ctx.graph if type(ctx.graph) is rdflib.Graph else ctx.dataset.default_context
        # As the standard says: every deletion, then every insertion.
        for template, sign in ((op.delete, -1), (op.insert, 1)):
            if not template:
                continue
            for solution in solutions:
                graphs = [(default, template.triples)] + [
                    (ctx.dataset.get_context(solution.get(g)), q) for g, q in template.quads.items()
                ]
                for graph, triples in graphs:
                    filled = list(rdflib_update._fillTemplate(triples, solution))  # type: ignore[attr-defined]
                    if sign < 0:
                        for triple in filled:
                            graph.remove(triple)
                    else:
                        graph.addN((s, p, o, graph) for s, p, o in filled)

    def match(
        self,
        subject: Subject | None = None,
        predicate: NamedNode | None = None,
        object: Object | None = None,
        graph: Graph | None = None,
    ) -> Iterator[Quad]:
        pattern = (_to_rdflib(subject), _to_rdflib(predicate), _to_rdflib(object))
        with self.lock:
            if graph is None:
                found = [
                    _from_rdflib_quad(s, p, o, g) for s, p, o, g in self.dataset.quads(pattern)
                ]
            else:
                context = self.dataset.graph(_to_rdflib(graph))
                name = graph
                found = [
                    Quad(from_rdflib(s), from_rdflib(p), from_rdflib(o), name)  # type: ignore[arg-type]
                    for s, p, o in context.triples(pattern)
                ]
        return iter(found)

    def apply(self, remove: Sequence[Quad], add: Sequence[Quad]) -> None:
        # Convert everything first: a quad rdflib cannot hold (an RDF 1.2 triple term)
        # raises before anything changes.
        removed = [_rdflib_quad(q) for q in remove]
        added = [_rdflib_quad(q) for q in add]
        with self.lock:
            try:
                for quad in removed:
                    self.dataset.remove(quad)
                if added:
                    graphs: dict[Any, rdflib.Graph] = {}
                    for *_, g in added:
                        if g not in graphs:
                            graphs[g] = self.dataset.graph(g)
                    self.dataset.addN((s, p, o, graphs[g]) for s, p, o, g in added)
            finally:
                self.wrote()

    def close(self) -> None:
        if "dataset" in self.__dict__:
            self.__dict__.pop("dataset").close()

    def __getattr__(self, name: str) -> object:
        if name == "dataset":
            raise BackingError("this backend is closed", cause=None)
        raise AttributeError(name)

    def __repr__(self) -> str:
        dataset = self.__dict__.get("dataset")
        return f"RdflibBackend({type(dataset.store).__name__ if dataset is not None else 'closed'})"
