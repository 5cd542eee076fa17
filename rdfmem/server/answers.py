"""What the endpoint answers: queries, graph reads and updates turned into HTTP bodies.

These functions run on a query worker (see ``workers.py``), or in a child process it forked
(``isolate.py``): they evaluate, let pyoxigraph's writers produce the bytes into a buffer that
enforces the result-size cap and stops at its next write once the caller gave up.
Refusals are ``HttpError`` with the status to send.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from pyoxigraph import (
    NamedNode,
    QueryBoolean,
    QueryResultsFormat,
    QuerySolutions,
    RdfFormat,
    parse_query_results,
    serialize,
)

from rdfmem.core.errors import HttpError, QueryError, RdfMemError, Unreachable
from rdfmem.core.results import GraphResult, SelectResult
from rdfmem.core.terms import sparql_term
from rdfmem.server.negotiate import (
    DATASET_OFFERS,
    GRAPH_OFFERS,
    RESULTS_OFFERS,
    Offer,
    by_name,
    names,
    negotiate,
)
from rdfmem.store.rdfstore import RdfStore

__all__ = ["Answer", "HttpError", "choose", "graph_answer", "query_answer", "update_answer"]


@dataclass
class Answer:
    """An HTTP response body with its type."""

    body: bytes
    content_type: str
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


def choose(accept: str | None, format_name: str | None, offers: Sequence[Offer]) -> Offer:
    """The offer picked by a ``format`` parameter, else by ``Accept``.

    Raises:
        HttpError: 406 when nothing offered is acceptable.
    """
    if format_name:
        offer = by_name(format_name, offers)
        if offer is None:
            raise HttpError(406, f"format {format_name!r} is not available; use {names(offers)}")
        return offer
    offer = negotiate(accept, offers)
    if offer is None:
        raise HttpError(406, f"no acceptable media type in Accept: {accept}; use {names(offers)}")
    return offer


_ANY_OFFERS = RESULTS_OFFERS + GRAPH_OFFERS


def acceptable_at_all(accept: str | None, format_name: str | None) -> None:
    """Refuse (406) before evaluating when no kind of query result could be acceptable."""
    if format_name:
        if by_name(format_name, _ANY_OFFERS) is None:
            raise HttpError(406, f"unknown format {format_name!r}")
        return
    if negotiate(accept, _ANY_OFFERS) is None:
        raise HttpError(
            406,
            f"no acceptable media type in Accept: {accept}; "
            f"use {names(RESULTS_OFFERS)} (SELECT, ASK) or {names(GRAPH_OFFERS)} "
            "(CONSTRUCT, DESCRIBE)",
        )


def _too_big(limit: int) -> HttpError:
    return HttpError(
        422,
        f"the result is larger than the server's limit of {limit} bytes; narrow the "
        "query (LIMIT, FILTER) or start the server with a larger --max-result-bytes",
    )


class _Stopped(Exception):
    """Raised inside pyoxigraph's writer to stop it: too large, or nobody waits any more."""


class _CappedBuffer(io.BytesIO):
    """The file pyoxigraph's writers write to: refuses to grow past ``limit`` bytes and stops
    the writer once ``cancel`` is set, so a long query ends at its next write."""

    def __init__(self, limit: int, cancel: threading.Event) -> None:
        super().__init__()
        self.size = 0
        self.limit = limit
        self.cancel = cancel

    def write(self, data: Any) -> int:
        self.size += len(data)
        if self.size > self.limit:
            raise _Stopped("too large")
        if self.cancel.is_set():
            raise _Stopped("cancelled")
        return super().write(data)


def _write(write: Callable[[_CappedBuffer], object], limit: int, cancel: threading.Event) -> bytes:
    buffer = _CappedBuffer(limit, cancel)
    try:
        write(buffer)
    except _Stopped as exc:
        if buffer.size > limit:
            raise _too_big(limit) from exc
        raise HttpError(503, "the query was stopped: its time limit passed") from exc
    except OSError as exc:  # pyoxigraph may wrap the writer's exception
        if buffer.size > limit:
            raise _too_big(limit) from exc
        raise QueryError(f"the query failed while its result was written: {exc}") from exc
    return buffer.getvalue()


def _failure(exc: RdfMemError) -> HttpError:
    if isinstance(exc, HttpError):
        return exc
    if isinstance(exc, QueryError):
        return HttpError(400, str(exc))
    if isinstance(exc, Unreachable):
        return HttpError(502, f"the store's server did not answer: {exc}")
    return HttpError(500, f"the store failed: {exc}")


@cache
def _boolean(value: bool, fmt: QueryResultsFormat) -> bytes:
    doc = b'{"head":{},"boolean":' + (b"true" if value else b"false") + b"}"
    return bytes(parse_query_results(doc, QueryResultsFormat.JSON).serialize(format=fmt) or b"")


def _solutions(result: SelectResult) -> QuerySolutions:
    # Rows already read (``RdfStore.query`` reads them whole) are parsed back into
    # pyoxigraph solutions so that its writer writes them into the capped buffer.
    reparsed = parse_query_results(result.serialize("json"), QueryResultsFormat.JSON)
    assert isinstance(reparsed, QuerySolutions)
    return reparsed


def query_answer(
    store: RdfStore,
    sparql: str,
    *,
    accept: str | None,
    format_name: str | None,
    default_graph: Sequence[NamedNode] | None = None,
    named_graphs: Sequence[NamedNode] | None = None,
    bindings: Mapping[str, Any] | None = None,
    base_iri: str | None = None,
    limit: int,
    cancel: threading.Event,
) -> Answer:
    """Evaluate a query and write its result in the negotiated format, row by row: the
    result is never held whole, and writing stops at the size cap.

    Raises:
        HttpError: 400 malformed or failing, 406 not acceptable, 422 too large, 5xx store.
    """
    try:
        if bindings:
            result: Any = store.query(
                sparql,
                base_iri=base_iri,
                default_graph=list(default_graph) if default_graph else None,
                named_graphs=list(named_graphs) if named_graphs else None,
                bindings=bindings,
            )
            if isinstance(result, SelectResult):
                result = _solutions(result)
            elif isinstance(result, GraphResult):
                result = result.triples
        else:
            # The backend's own lazy result: CONSTRUCT triples and SELECT rows are produced
            # as the writer asks for them (``RdfStore.query`` would make a list first).
            result = store.stream(
                sparql,
                base_iri=base_iri,
                default_graph=list(default_graph) if default_graph else None,
                named_graphs=list(named_graphs) if named_graphs else None,
            )
        if isinstance(result, (bool, QueryBoolean)):
            offer = choose(accept, format_name, RESULTS_OFFERS)
            return Answer(_boolean(bool(result), offer.results), offer.content_type)
        if isinstance(result, QuerySolutions):
            offer = choose(accept, format_name, RESULTS_OFFERS)
            rows = result
            body = _write(lambda out: rows.serialize(out, offer.results), limit, cancel)
            return Answer(body, offer.content_type)
        offer = choose(accept, format_name, GRAPH_OFFERS)
        return Answer(_triples(store, result, offer.rdf, limit, cancel), offer.content_type)
    except HttpError:
        raise
    except RdfMemError as exc:
        raise _failure(exc) from exc


def _triples(
    store: RdfStore, triples: Iterable[Any], fmt: RdfFormat, limit: int, cancel: threading.Event
) -> bytes:
    prefixes = dict(store.prefixes) if fmt in (RdfFormat.TURTLE, RdfFormat.TRIG) else {}
    return _write(lambda out: serialize(triples, out, fmt, prefixes=prefixes), limit, cancel)


def graph_answer(
    store: RdfStore,
    graph: str | None,
    *,
    whole: bool,
    accept: str | None,
    format_name: str | None,
    limit: int,
    cancel: threading.Event,
) -> Answer:
    """A Graph Store Protocol read: one named graph, the default graph (``graph`` None), or
    every graph (``whole``).

    Raises:
        HttpError: 400 bad IRI, 404 no such graph, 406, 422 too large, 5xx store.
    """
    try:
        if whole:
            offer = choose(accept, format_name, DATASET_OFFERS)
            quads = store.stream_quads()  # streamed: stops at the size cap
            return Answer(_triples(store, quads, offer.rdf, limit, cancel), offer.content_type)
        offer = choose(accept, format_name, GRAPH_OFFERS)
        if graph is None:
            where = "?s ?p ?o"
        else:
            try:
                where = f"GRAPH {sparql_term(NamedNode(graph))} {{ ?s ?p ?o }}"
            except ValueError as exc:
                raise HttpError(400, f"graph is not an IRI: {graph!r} ({exc})") from exc
            if not store.query(f"ASK {{ {where} }}"):
                raise HttpError(404, f"no graph <{graph}> in this store")
        result = store.stream(f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ {where} }}")
        assert not isinstance(result, (bool, QueryBoolean, QuerySolutions))
        return Answer(_triples(store, result, offer.rdf, limit, cancel), offer.content_type)
    except HttpError:
        raise
    except RdfMemError as exc:
        raise _failure(exc) from exc


def update_answer(
    store: RdfStore, sparql: str, cancel: threading.Event, *, base_iri: str | None = None
) -> Answer:
    """Run a SPARQL Update; 204 on success.

    Raises:
        HttpError: 400 malformed or failing (nothing changed), 5xx store.
    """
    try:
        store.sparql_update(sparql, base_iri=base_iri)
    except HttpError:
        raise
    except RdfMemError as exc:
        raise _failure(exc) from exc
    return Answer(b"", "text/plain; charset=utf-8", status=204)
