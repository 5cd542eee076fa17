"""The server's HTTP answers: which succeeded, which failed requests are sent again, how
failures become rdfmem errors, what an answer's body holds, and how one cut at a server's
row limit is read in pages (``paged``).

Shared by the sync client (``SparqlBackend``) and the async twins of the remote store, so
that both retry and translate errors alike. No I/O: a retry loop sleeps ``retry_pause``
between attempts of its own. Errors are translated here (``raise … from exc``): a transport
failure is ``Unreachable`` (``unreachable``), HTTP 400 is ``QueryError`` with the server's
message, any other failure or a malformed body is ``BackingError``. A request the server
rolled back (SQLSTATE 40001, a deadlock: Virtuoso under concurrent writes) is sent again,
up to ``RETRIES`` times.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any, TypeVar

import httpx
from pyoxigraph import QueryResultsFormat, QuerySolutions, parse_query_results

from rdfmem.backends.base import RawResult
from rdfmem.backends.sparql.wire import normalized_json, read_answer
from rdfmem.core.errors import BackingError, QueryError, Unreachable

__all__ = [
    "ACCEPT",
    "RESULTS",
    "RETRIES",
    "TSV_RESULTS",
    "answer_rows",
    "answer_table",
    "answered",
    "paged",
    "results",
    "retry_pause",
    "rows_accept",
    "truncated",
    "unreachable",
]

#: The media type rdfmem asks for its own SELECT and ASK queries.
RESULTS = "application/sparql-results+json"
#: What rdfmem's own SELECTs ask an Oxigraph server for (``rows_accept``).
TSV_RESULTS = "text/tab-separated-values"
#: By query form: Virtuoso answers CONSTRUCT with SELECT-style rows if results come first.
ACCEPT = {
    "SELECT": "application/sparql-results+json, application/sparql-results+xml;q=0.8",
    "ASK": "application/sparql-results+json, application/sparql-results+xml;q=0.8",
    "GRAPH": "application/n-triples, text/turtle;q=0.9, application/rdf+xml;q=0.8",
}
#: A row of an answer, as ``answer_rows`` or ``answer_table`` makes it.
R = TypeVar("R")
#: How many times a rolled-back request is sent again.
RETRIES = 6
# SQLSTATE 40001 (serialization failure, deadlock): the request was rolled back.
_ROLLED_BACK = re.compile(r"\b40001\b|deadlock", re.IGNORECASE)


def answered(response: httpx.Response, attempt: int) -> bool:
    """True on success; False when the server rolled the request back (SQLSTATE 40001,
    Virtuoso's "Transaction deadlocked": nothing of it happened, so it is safe to send it
    again) and attempts remain (``attempt`` counts from 0).

    Raises:
        QueryError: the server refused the request (HTTP 400), with its message.
        BackingError: any other failure.
    """
    if response.is_success:
        return True
    message = response.text.strip()[:2000] or response.reason_phrase
    if attempt < RETRIES and _ROLLED_BACK.search(message):
        return False
    url = str(response.request.url)
    what = "update" if response.request.content.startswith(b"update=") else "query"
    if response.status_code == 400:
        raise QueryError(f"the server refused the {what}: {message}")
    verb = "refused" if response.status_code in (401, 403) else "failed"
    raise BackingError(
        f"{url} {verb} the {what} (HTTP {response.status_code}): {message}",
        cause=response.status_code,
    )


def unreachable(url: str, exc: Exception) -> Unreachable:
    """The error for a request to ``url`` that got no answer (``exc``: httpx's error)."""
    return Unreachable(
        f"{url} did not answer: {type(exc).__name__}: {exc}", endpoint=url, cause=exc
    )


def retry_pause(attempt: int) -> float:
    """Seconds to wait before sending a rolled-back request again."""
    return float(0.005 * 2**attempt * random.uniform(0.5, 1.5))


def results(response: httpx.Response) -> RawResult:
    """The body as pyoxigraph results, fully validated, blank nodes restored.

    Raises:
        BackingError: an unexpected media type, or a body that does not parse.
    """
    return read_answer(response.headers.get("content-type", ""), response.content)


def answer_rows(response: httpx.Response) -> tuple[list[str], list[dict[str, Any]]]:
    """A SELECT answer's variables and rows as Python objects, parsed once (every term
    validated as it is read, as ``results`` does). No frame keeps the parsed solutions:
    pyoxigraph refuses to free them on another thread, and a frame kept by an exception's
    traceback could be collected on any thread.

    Raises:
        BackingError: the answer is not SELECT results, or does not parse.
    """
    return _solutions(
        response,
        lambda names, parsed: [
            {n: t for n, t in zip(names, s, strict=True) if t is not None} for s in parsed
        ],
    )


def answer_table(response: httpx.Response) -> tuple[list[str], list[tuple[Any, ...]]]:
    """As ``answer_rows``, each row a tuple of terms in the order of the variables (None
    where unbound): no dict a row, for a follower's whole reads (10,000-20,000 rows, each
    read once by position; a dict a row cost as much again as the tuples).

    Raises:
        BackingError: the answer is not SELECT results, or does not parse.
    """
    return _solutions(response, lambda _, parsed: list(map(tuple, parsed)))


def _solutions(
    response: httpx.Response, rows_of: Callable[[list[str], Any], list[R]]
) -> tuple[list[str], list[R]]:
    # The answer parsed and read whole by ``rows_of(variables, solutions)``.
    media = response.headers.get("content-type", "")
    fmt = QueryResultsFormat.from_media_type(media) if media else None
    if fmt is None:  # a graph, or no results at all: ``results`` says which
        raise BackingError(f"expected SELECT results, got {type(results(response)).__name__}")
    body = response.content
    if fmt == QueryResultsFormat.JSON and b"bnode" in body:
        body = normalized_json(body)
    parsed: Any = None
    try:
        parsed = parse_query_results(body, fmt)
        if not isinstance(parsed, QuerySolutions):
            raise BackingError(f"expected SELECT results, got {type(bool(parsed)).__name__}")
        variables = [v.value for v in parsed.variables]
        rows = rows_of(variables, parsed)
    except (SyntaxError, ValueError) as exc:
        raise BackingError(f"malformed {fmt.name} from the server: {exc}", cause=exc) from exc
    finally:
        del parsed
    return variables, rows


def paged(
    sparql: str, variables: list[str], rows: list[R], limit: int, fetch: Callable[[str], list[R]]
) -> list[R]:
    """The rows of ``sparql``: ``rows`` as answered, or, when the server cut them at its row
    ``limit`` (``truncated``), all of them read again in pages (``fetch(page)``: a page's
    rows), in a stable order. (The sort sits in a sub-select: Virtuoso refuses to sort for
    a deep OFFSET.)"""
    if not limit or len(rows) < limit:
        return rows
    rows, order = [], " ".join("?" + v for v in variables)
    while True:
        page = (
            f"SELECT {order} WHERE {{ {{ {sparql} ORDER BY {order} }} }} "
            f"LIMIT {limit} OFFSET {len(rows)}"
        )
        batch = fetch(page)
        rows.extend(batch)
        if len(batch) < limit:
            return rows


def rows_accept(server: str) -> str:
    """The results format to ask for rdfmem's own SELECTs (``SparqlBackend.select_rows``):
    TSV from an Oxigraph server, which writes it faster than JSON and whose rows parse in
    less than half the time (the whole reads of a follower: 30 MB of vectors at 10,000
    memories); JSON from any other server (or before the server is known).

    >>> rows_accept("oxigraph/0.4"), rows_accept("Virtuoso/07.20")
    ('text/tab-separated-values', 'application/sparql-results+json')
    """
    return TSV_RESULTS if server.lower().startswith("oxigraph") else RESULTS


def truncated(response: httpx.Response) -> int:
    """The server's row limit when it cut this result at it (``X-SPARQL-MaxRows``), else 0."""
    limit = response.headers.get("x-sparql-maxrows")
    return int(limit) if limit and limit.isdigit() else 0
