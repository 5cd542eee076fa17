"""Run a W3C test case on an engine and judge the answer.

An engine loads files, runs a query or an update, and lists its quads. ``RawOxigraph`` and
``RawRdflib`` are the engines as their own libraries drive them; ``Rdfmem`` is an ``RdfStore``
(any backend, a remote one included: pass a factory of fresh stores). Answers are compared as
RDF graphs in the DAWG result-set vocabulary with ``rdflib.compare.isomorphic``, so blank
nodes match up to renaming; a query with ORDER BY also compares the order.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import rdflib
from pyoxigraph import (
    BlankNode,
    DefaultGraph,
    Literal,
    NamedNode,
    QueryBoolean,
    QueryResultsFormat,
    QuerySolutions,
    RdfFormat,
    Store,
    Variable,
    parse,
    parse_query_results,
)
from rdflib.compare import isomorphic
from rdflib.plugins.sparql import prepareUpdate

from rdfmem import RdfStore
from rdfmem.core.results import GraphResult, SelectResult
from rdfmem.core.terms import from_rdflib

from .suite import Case, rdf_format_of

__all__ = [
    "Answer",
    "Engine",
    "RawOxigraph",
    "RawRdflib",
    "RawServer",
    "Rdfmem",
    "prebound",
    "prepare",
    "run_case",
    "run_prebound",
]

RS = "http://www.w3.org/2001/sw/DataAccess/tests/result-set#"
_FROM = re.compile(r"\bFROM\s+(NAMED\s+)?<([^>]*)>", re.IGNORECASE)


@dataclass
class Answer:
    """A query's answer: ``kind`` is select, ask or graph."""

    kind: str
    variables: list[str]
    rows: list[dict[str, Any]]
    boolean: bool = False
    triples: list[tuple[Any, Any, Any]] | None = None


class Engine:
    """One fresh dataset per test case."""

    name = "engine"

    def reset(self) -> None:
        raise NotImplementedError

    def load(self, path: Path, graph: str | None) -> None:
        raise NotImplementedError

    def query(self, text: str, base: str, bindings: dict[str, Any] | None = None) -> Answer:
        """Run a query; ``bindings`` pre-bind variables (SEP-0007), where supported."""
        raise NotImplementedError

    def update(self, text: str, base: str) -> None:
        raise NotImplementedError

    def quads(self) -> list[tuple[Any, Any, Any, Any]]:
        raise NotImplementedError


class RawOxigraph(Engine):
    """pyoxigraph's ``Store``: in memory, or on disk in a fresh folder under ``folder`` per
    test case (RocksDB, as Oxigraph server stores: the same order of solutions, so the
    same ``SAMPLE``)."""

    name = "raw oxigraph"

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder
        self.cases = 0

    def reset(self) -> None:
        if self.folder is None:
            self.store = Store()
        else:
            self.cases += 1
            self.store = Store(str(self.folder / f"case{self.cases}"))

    def load(self, path: Path, graph: str | None) -> None:
        self.store.load(
            path=str(path),
            format=rdf_format_of(path),
            base_iri=path.as_uri(),
            to_graph=NamedNode(graph) if graph else DefaultGraph(),
        )

    def query(self, text: str, base: str, bindings: dict[str, Any] | None = None) -> Answer:
        subs = {Variable(k): v for k, v in bindings.items()} if bindings else None
        return _answer(self.store.query(text, base_iri=base, substitutions=subs))

    def update(self, text: str, base: str) -> None:
        self.store.update(text, base_iri=base)

    def quads(self) -> list[tuple[Any, Any, Any, Any]]:
        return [(q.subject, q.predicate, q.object, q.graph_name) for q in self.store]


class RawRdflib(Engine):
    name = "raw rdflib"

    def reset(self) -> None:
        self.dataset = rdflib.Dataset()

    def load(self, path: Path, graph: str | None) -> None:
        name = rdflib.URIRef(graph) if graph else rdflib.graph.DATASET_DEFAULT_GRAPH_ID
        fmt = {".ttl": "turtle", ".nt": "nt", ".rdf": "xml", ".trig": "trig"}.get(
            path.suffix, "turtle"
        )
        with _quiet():
            self.dataset.graph(name).parse(str(path), format=fmt, publicID=path.as_uri())

    def query(self, text: str, base: str, bindings: dict[str, Any] | None = None) -> Answer:
        if bindings:
            raise NotImplementedError("pre-bound variables are compared on Oxigraph only")
        with _quiet():
            result = self.dataset.query(text, base=base)
            if result.type == "ASK":
                return Answer("ask", [], [], boolean=bool(result.askAnswer))
            if result.type == "SELECT":
                payload = result.serialize(format="json") or b""
                return _answer(parse_query_results(payload, QueryResultsFormat.JSON))
            assert result.graph is not None
            return Answer(
                "graph",
                [],
                [],
                triples=[
                    (from_rdflib(s), from_rdflib(p), from_rdflib(o)) for s, p, o in result.graph
                ],
            )

    def update(self, text: str, base: str) -> None:
        with _quiet():
            self.dataset.update(prepareUpdate(text, base=base))

    def quads(self) -> list[tuple[Any, Any, Any, Any]]:
        out = []
        with _quiet():
            for s, p, o, g in self.dataset.quads((None, None, None, None)):
                name = g.identifier if isinstance(g, rdflib.Graph) else g
                out.append((from_rdflib(s), from_rdflib(p), from_rdflib(o), from_rdflib(name)))
        return out


class Rdfmem(Engine):
    """rdfmem's API over a store from ``make`` (a fresh, empty store each call)."""

    def __init__(self, name: str, make: Callable[[], RdfStore]) -> None:
        self.name = name
        self.make = make

    def reset(self) -> None:
        self.store = self.make()

    def load(self, path: Path, graph: str | None) -> None:
        self.store.load(path=path, format=rdf_format_of(path), graph=graph, base_iri=path.as_uri())

    def query(self, text: str, base: str, bindings: dict[str, Any] | None = None) -> Answer:
        result = self.store.query(text, base_iri=base, bindings=bindings, allow_network=True)
        if isinstance(result, bool):
            return Answer("ask", [], [], boolean=result)
        if isinstance(result, GraphResult):
            return Answer(
                "graph", [], [], triples=[(t.subject, t.predicate, t.object) for t in result]
            )
        assert isinstance(result, SelectResult)
        return Answer("select", list(result.variables), [dict(r) for r in result])

    def update(self, text: str, base: str) -> None:
        # Conformance, not policy: LOAD SILENT of an unreachable document must succeed, so
        # network access is allowed here (the refusal itself is tested elsewhere).
        self.store.sparql_update(text, base_iri=base, allow_network=True)

    def quads(self) -> list[tuple[Any, Any, Any, Any]]:
        return [(q.subject, q.predicate, q.object, q.graph_name) for q in self.store.triples()]


@contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _answer(raw: Any) -> Answer:
    if isinstance(raw, (bool, QueryBoolean)):
        return Answer("ask", [], [], boolean=bool(raw))
    if isinstance(raw, QuerySolutions):
        names = [v.value for v in raw.variables]
        rows = []
        for solution in raw:
            rows.append({n: solution[i] for i, n in enumerate(names) if solution[i] is not None})
        return Answer("select", names, rows)
    return Answer("graph", [], [], triples=[(t.subject, t.predicate, t.object) for t in raw])


# -- expected answers ---------------------------------------------------------------------


def expected_answer(path: Path) -> Answer:
    """The answer a result file states (SPARQL XML/JSON/TSV/CSV results, or RDF: a DAWG
    result set or a CONSTRUCT graph)."""
    formats = {
        ".srx": QueryResultsFormat.XML,
        ".srj": QueryResultsFormat.JSON,
        ".tsv": QueryResultsFormat.TSV,
        ".csv": QueryResultsFormat.CSV,
    }
    if path.suffix in formats:
        return _answer(parse_query_results(path=str(path), format=formats[path.suffix]))
    triples = [
        (q.subject, q.predicate, q.object)
        for q in parse(path=str(path), format=rdf_format_of(path), base_iri=path.as_uri())
    ]
    sets = [s for s, p, o in triples if p.value == RDF_TYPE and o == NamedNode(RS + "ResultSet")]
    if not sets:
        return Answer("graph", [], [], triples=triples)
    return _result_set(triples, sets[0])


RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"


def _result_set(triples: list[tuple[Any, Any, Any]], node: Any) -> Answer:
    by_subject: dict[Any, dict[str, list[Any]]] = {}
    for s, p, o in triples:
        by_subject.setdefault(s, {}).setdefault(p.value, []).append(o)
    top = by_subject.get(node, {})
    if RS + "boolean" in top:
        return Answer("ask", [], [], boolean=top[RS + "boolean"][0].value == "true")
    names = [v.value for v in top.get(RS + "resultVariable", [])]
    rows: list[tuple[int, dict[str, Any]]] = []
    for solution in top.get(RS + "solution", []):
        fields = by_subject.get(solution, {})
        row = {}
        for binding in fields.get(RS + "binding", []):
            b = by_subject.get(binding, {})
            row[b[RS + "variable"][0].value] = b[RS + "value"][0]
        index = fields.get(RS + "index")
        rows.append((int(index[0].value) if index else 0, row))
    rows.sort(key=lambda item: item[0])
    return Answer("select", names, [r for _, r in rows])


# -- judging ------------------------------------------------------------------------------


def _r(term: Any) -> Any:
    if isinstance(term, NamedNode):
        return rdflib.URIRef(term.value)
    if isinstance(term, BlankNode):
        return rdflib.BNode("b" + term.value)
    if isinstance(term, Literal):
        if term.language:
            return rdflib.Literal(term.value, lang=term.language)
        return rdflib.Literal(_canonical(term), datatype=rdflib.URIRef(term.datatype.value))
    raise TypeError(term)


_XSD = "http://www.w3.org/2001/XMLSchema#"


def _canonical(term: Literal) -> str:
    """Numbers compare by value, as the W3C test harnesses do ("1.0" and "1" decimals)."""
    kind, text = term.datatype.value, term.value
    try:
        if kind == _XSD + "decimal":
            number = format(Decimal(text).normalize(), "f")
            return number if "." in number else number + ".0"
        if kind == _XSD + "integer":
            return str(int(text))
        if kind in (_XSD + "double", _XSD + "float"):
            return repr(float(text))
    except (ArithmeticError, ValueError):
        pass
    return text


def _as_graph(answer: Answer, ordered: bool) -> rdflib.Graph:
    graph = rdflib.Graph()
    rs = rdflib.Namespace(RS)
    if answer.kind == "graph":
        for s, p, o in answer.triples or []:
            graph.add((_r(s), _r(p), _r(o)))
        return graph
    top = rdflib.BNode()
    graph.add((top, rdflib.RDF.type, rs["ResultSet"]))
    if answer.kind == "ask":
        graph.add((top, rs["boolean"], rdflib.Literal(answer.boolean)))
        return graph
    for name in answer.variables:
        graph.add((top, rs["resultVariable"], rdflib.Literal(name)))
    for i, row in enumerate(answer.rows):
        solution = rdflib.BNode()
        graph.add((top, rs["solution"], solution))
        if ordered:
            graph.add((solution, rs["index"], rdflib.Literal(i)))
        for name, value in row.items():
            binding = rdflib.BNode()
            graph.add((solution, rs["binding"], binding))
            graph.add((binding, rs["variable"], rdflib.Literal(name)))
            graph.add((binding, rs["value"], _r(value)))
    return graph


def same_answer(actual: Answer, expected: Answer, ordered: bool) -> bool:
    if actual.kind != expected.kind:
        return False
    if actual.kind == "select" and set(actual.variables) != set(expected.variables):
        # Result files list only the variables they bind in a few tests: compare rows only.
        if {k for r in actual.rows for k in r} - set(expected.variables):
            return False
        actual = Answer("select", expected.variables, actual.rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return isomorphic(_as_graph(actual, ordered), _as_graph(expected, ordered))


def same_dataset(
    actual: Iterable[tuple[Any, Any, Any, Any]], expected: Sequence[tuple[Any, Any, Any, Any]]
) -> bool:
    def graphs(quads: Iterable[tuple[Any, Any, Any, Any]]) -> dict[str, rdflib.Graph]:
        out: dict[str, rdflib.Graph] = {}
        for s, p, o, g in quads:
            key = "" if isinstance(g, DefaultGraph) else str(g)
            out.setdefault(key, rdflib.Graph()).add((_r(s), _r(p), _r(o)))
        return out

    mine, theirs = graphs(actual), graphs(expected)
    if set(mine) != set(theirs):
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return all(isomorphic(mine[k], theirs[k]) for k in mine)


def _expected_quads(case: Case) -> list[tuple[Any, Any, Any, Any]]:
    out = []
    for path in case.result_data:
        for q in parse(path=str(path), format=rdf_format_of(path), base_iri=path.as_uri()):
            out.append((q.subject, q.predicate, q.object, DefaultGraph()))
    for name, path in case.result_graphs:
        for q in parse(path=str(path), format=rdf_format_of(path), base_iri=path.as_uri()):
            out.append((q.subject, q.predicate, q.object, NamedNode(name)))
    return out


def prepare(engine: Engine, case: Case) -> tuple[str, str]:
    """A fresh dataset in ``engine`` holding the case's data: ``(request text, base IRI)``."""
    text = case.request.read_text(encoding="utf-8")
    base = case.request.as_uri()
    engine.reset()
    for path in case.data:
        engine.load(path, None)
    for name, path in case.graph_data:
        engine.load(path, name)
    if case.kind == "query":
        # Graphs a query names with FROM / FROM NAMED are test files: load them as named
        # graphs (no engine here may fetch them).
        for _named, iri in _FROM.findall(text):
            target = iri if ":" in iri else base.rsplit("/", 1)[0] + "/" + iri
            if target.startswith("file://") and Path(target[7:]).is_file():
                engine.load(Path(target[7:]), target)
    return text, base


def is_ordered(text: str) -> bool:
    return bool(re.search(r"\bORDER\s+BY\b", text, re.IGNORECASE))


def _why(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"


def run_case(engine: Engine, case: Case) -> str | None:
    """None when ``engine`` passes ``case``, else why not (one line)."""
    try:
        text, base = prepare(engine, case)
        if case.kind == "query":
            assert case.result is not None
            actual = engine.query(text, base)
            if not same_answer(actual, expected_answer(case.result), is_ordered(text)):
                return "wrong answer"
            return None
        engine.update(text, base)
        if not same_dataset(engine.quads(), _expected_quads(case)):
            return "wrong dataset after the update"
        return None
    except Exception as exc:
        return _why(exc)


def prebound(cases: Sequence[Case]) -> list[tuple[Case, str, Any]]:
    """SELECT tests with one projected variable bound: ``(case, variable, value)`` for each
    variable of each expected result, bound to its first value there (blank nodes left out,
    as a binding cannot name one)."""
    out = []
    for case in cases:
        if case.kind != "query" or case.result is None:
            continue
        try:
            expected = expected_answer(case.result)
        except Exception:  # a result format these helpers do not read
            continue
        if expected.kind != "select":
            continue
        for name in expected.variables:
            value = next((row[name] for row in expected.rows if name in row), None)
            if value is not None and not isinstance(value, BlankNode):
                out.append((case, name, value))
    return out


def run_prebound(
    engine: Engine, reference: Engine, case: Case, name: str, value: Any
) -> str | None:
    """None when ``engine`` answers the case with ``name`` bound to ``value`` as ``reference``
    does (or ``reference`` refuses it too), else why not."""
    try:
        text, base = prepare(reference, case)
        wanted = reference.query(text, base, {name: value})
    except Exception:
        return None  # the reference refuses this binding: nothing to agree with
    try:
        text, base = prepare(engine, case)
        actual = engine.query(text, base, {name: value})
    except Exception as exc:
        return _why(exc)
    return None if same_answer(actual, wanted, is_ordered(text)) else "answers differ"


class RawServer(Engine):
    """A SPARQL 1.1 server driven over the protocol alone (query, update, Graph Store)."""

    def __init__(self, name: str, query_url: str, update_url: str, store_url: str) -> None:
        self.name = name
        self.query_url, self.update_url, self.store_url = query_url, update_url, store_url

    def reset(self) -> None:
        httpx.post(self.update_url, data={"update": "DROP ALL"}, timeout=30).raise_for_status()

    def load(self, path: Path, graph: str | None) -> None:
        text = path.read_bytes()
        data = parse(text, rdf_format_of(path), base_iri=path.as_uri(), rename_blank_nodes=True)
        body = "".join(f"{q.subject} {q.predicate} {q.object} .\n" for q in data)
        params = {"graph": graph} if graph else {"default": ""}
        response = httpx.post(
            self.store_url,
            params=params,
            content=body.encode(),
            headers={"Content-Type": "application/n-triples"},
            timeout=30,
        )
        response.raise_for_status()

    def query(self, text: str, base: str, bindings: dict[str, Any] | None = None) -> Answer:
        if bindings:
            raise NotImplementedError("the protocol has no pre-bound variables")
        response = httpx.post(
            self.query_url,
            data={"query": f"BASE <{base}>\n{text}"},
            headers={"Accept": "application/sparql-results+json, application/n-triples"},
            timeout=60,
        )
        response.raise_for_status()
        if "n-triples" in response.headers.get("content-type", ""):
            triples = parse(response.content, RdfFormat.N_TRIPLES)
            return Answer(
                "graph", [], [], triples=[(t.subject, t.predicate, t.object) for t in triples]
            )
        return _answer(parse_query_results(response.content, QueryResultsFormat.JSON))

    def update(self, text: str, base: str) -> None:
        response = httpx.post(
            self.update_url, data={"update": f"BASE <{base}>\n{text}"}, timeout=60
        )
        response.raise_for_status()

    def quads(self) -> list[tuple[Any, Any, Any, Any]]:
        answer = self.query(
            "SELECT * WHERE { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o } } }", "urn:x"
        )
        return [(r["s"], r["p"], r["o"], r.get("g", DefaultGraph())) for r in answer.rows]
