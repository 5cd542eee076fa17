"""rdflib: an rdflib ``Dataset``, so any rdflib store plugin can hold rdfmem's data."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import rdflib
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
from rdflib.plugins.sparql import prepareUpdate
from rdflib.plugins.sparql.update import evalUpdate

from ..errors import BackingError, InvalidTerm, QueryError
from ..terms import from_rdflib
from .base import Backend, Graph, Object, RawResult, Subject

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


class RdflibBackend(Backend):
    """An rdflib ``Dataset`` (in memory unless you pass one over another store plugin).

    >>> backend = RdflibBackend()
    >>> backend.dataset.default_union
    False

    Every call holds the backend lock: rdflib's stores are not safe for concurrent use.
    """

    def __init__(self, dataset: rdflib.Dataset | None = None) -> None:
        super().__init__()
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
        if default_graph is not None or named_graphs is not None:
            raise QueryError(
                "the rdflib backend cannot narrow the dataset of a query; "
                "use FROM / FROM NAMED in the query, or the Oxigraph backend"
            )
        bindings = {k: _to_rdflib(v) for k, v in (substitutions or {}).items()}
        with self.lock, _quiet_rdflib():
            try:
                result = self.dataset.query(sparql, initBindings=bindings, base=base_iri)
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
            except QueryError:
                raise
            except Exception as exc:  # rdflib raises pyparsing and plain errors
                raise QueryError(f"SPARQL query failed: {exc}") from exc

    def update(self, sparql: str, *, base_iri: str | None = None) -> None:
        with self.lock:
            try:
                prepared = prepareUpdate(sparql, base=base_iri)
            except Exception as exc:
                raise QueryError(f"SPARQL Update syntax error: {exc}") from exc
            for op in prepared.algebra:
                # rdflib issue 2019: INSERT DATA into the default graph of a Dataset tries
                # to add triples as quads. Route those triples to the default graph by name.
                if op.name == "InsertData" and op.triples:
                    quads = dict(op.quads or {})
                    quads.setdefault(DATASET_DEFAULT_GRAPH_ID, []).extend(op.triples)
                    op["quads"] = quads
                    op["triples"] = []
            try:
                with _quiet_rdflib():
                    evalUpdate(self.dataset, prepared)
            except Exception as exc:
                raise QueryError(f"SPARQL Update failed: {exc}") from exc

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
        with self.lock:
            for q in remove:
                self.dataset.remove(
                    (
                        _to_rdflib(q.subject),
                        _to_rdflib(q.predicate),
                        _to_rdflib(q.object),
                        _to_rdflib(q.graph_name),
                    )
                )
            if add:
                self.dataset.addN(
                    (
                        _to_rdflib(q.subject),
                        _to_rdflib(q.predicate),
                        _to_rdflib(q.object),
                        self.dataset.graph(_to_rdflib(q.graph_name)),
                    )
                    for q in add
                )

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
