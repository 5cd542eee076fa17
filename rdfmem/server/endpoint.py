"""The endpoint's handlers: each parses its request (``incoming.py``), runs its work
(``jobs.py``) and writes the ``Answer`` (``answers.py``) or the refusal as a response.
"""

from __future__ import annotations

import json
from collections.abc import Coroutine
from typing import Any

from pyoxigraph import NamedNode, QueryResultsFormat, RdfFormat, serialize
from starlette.requests import Request
from starlette.responses import Response

from rdfmem.core.errors import HttpError, QueryError
from rdfmem.server.answers import (
    Answer,
    acceptable_at_all,
    choose,
    graph_answer,
    query_answer,
    update_answer,
)
from rdfmem.server.dataset import with_using
from rdfmem.server.direct import direct_rows, parse_direct
from rdfmem.server.incoming import (
    Pairs,
    check_token,
    format_name,
    iris,
    media_type,
    one,
    one_or_first,
    pairs,
    query_pairs,
    read_body,
    utf8,
)
from rdfmem.server.jobs import Runner
from rdfmem.server.named import list_named_queries, load_named_query
from rdfmem.server.negotiate import GRAPH_OFFERS, RESULTS_OFFERS, by_name, negotiate
from rdfmem.server.page import named_index, query_page, service_description
from rdfmem.server.point import POINT, plain_query
from rdfmem.server.settings import ServerSettings
from rdfmem.store.rdfstore import RdfStore
from rdfmem.store.readonly import indexed_store, unchanged_since

__all__ = ["Endpoint", "error_response"]

#: The most a point query may write on the event loop before a child process takes over.
_POINT_BYTES = 64 << 10
_FORM = "application/x-www-form-urlencoded"
_QUERY = "application/sparql-query"
_UPDATE = "application/sparql-update"
_TEXT = "text/plain; charset=utf-8"
_SAFE_HEADERS = {"X-Content-Type-Options": "nosniff"}


def _kind(store: RdfStore) -> str:
    """What ``/health`` says the store is: its kind only, never a path or a URL (which may
    carry a password)."""
    caps = store.capabilities
    if caps.kind == "oxigraph":
        return "oxigraph (on disk)" if caps.persistent else "oxigraph (in memory)"
    if caps.kind == "rdflib":
        return "rdflib"
    return "remote SPARQL endpoint"


def _response(answer: Answer) -> Response:
    headers = {**_SAFE_HEADERS, **answer.headers}
    if answer.status == 200:
        headers["Vary"] = "Accept"
    return Response(answer.body, answer.status, headers, media_type=answer.content_type)


def error_response(exc: HttpError) -> Response:
    """The plain-text response refusing a request with ``exc``'s status and headers."""
    body = (exc.message.rstrip() + "\n").encode("utf-8", "replace")
    return Response(body, exc.status, {**_SAFE_HEADERS, **exc.headers}, media_type=_TEXT)


#: Service URLs already built (``_base``), by what they are built from.
_BASES: dict[tuple[Any, ...], str] = {}


def _base(request: Request) -> str:
    """The service URL, the base IRI of relative IRIs in queries and updates (kept per
    scheme, ``Host`` and path: building it costs more than a point query's lookup)."""
    scope = request.scope
    server = scope.get("server")
    key = (
        scope.get("scheme"),
        tuple(server) if server else None,  # a list from some servers and test clients
        scope.get("root_path", ""),
        scope["path"],
        *(v for k, v in scope["headers"] if k == b"host"),
    )
    base = _BASES.get(key)
    if base is None:
        base = str(request.url.replace(query="", fragment=""))
        if len(_BASES) >= 256:
            _BASES.clear()
        _BASES[key] = base
    return base


class Endpoint:
    """The handlers, sharing one store, one worker pool and the settings."""

    def __init__(self, store: RdfStore, settings: ServerSettings) -> None:
        self.store = store
        self.settings = settings
        self.runner = Runner(store, settings)
        self.pool = self.runner.pool
        #: Point queries (``point.py``) on embedded Oxigraph, whose results are lazy, may be
        #: answered on the event loop instead (``jobs.py``).
        self.points = store.capabilities.kind == "oxigraph"

    # -- SPARQL 1.1 Protocol ------------------------------------------------------------

    async def sparql(self, request: Request) -> Response:
        try:
            return _response(await self._sparql(request))
        except HttpError as exc:
            return error_response(exc)

    async def _sparql(self, request: Request) -> Answer:
        given = query_pairs(request)
        query: str | None
        update: str | None
        if request.method in ("GET", "HEAD"):
            if one(given, "update") is not None:
                raise HttpError(405, "updates must be sent by POST", {"Allow": "POST"})
            query = one(given, "query")
            if query is None:
                return self._description(request, given)
            update = None
        else:
            media, charset = media_type(request)
            if charset.lower() not in ("utf-8", "utf8", "us-ascii", "ascii"):
                raise HttpError(
                    415, f"the body must be UTF-8 text (SPARQL 1.1 Protocol), not {charset}"
                )
            body = await read_body(
                request, limit=self.settings.max_body, timeout=self.settings.body_timeout
            )
            if media == _FORM:
                given = given + pairs(body, "the form body")
                query, update = one(given, "query"), one(given, "update")
            elif media == _QUERY:
                query, update = utf8(body, "the query", charset), None
            elif media == _UPDATE:
                query, update = None, utf8(body, "the update", charset)
            else:
                raise HttpError(
                    415,
                    f"POST a body of type {_QUERY}, {_UPDATE} or {_FORM}, "
                    f"not {media or 'nothing'!r}",
                )
            if query is not None and update is not None:
                raise HttpError(400, "give either a query or an update, not both")
        if update is not None:
            return await self._update(request, update, given)
        if query is None:
            raise HttpError(400, "no query: give the parameter 'query' (or 'update' by POST)")
        return await self._query(request, query, given)

    async def _query(self, request: Request, query: str, given: Pairs) -> Answer:
        started = self.start_query(
            query,
            accept=request.headers.get("accept"),
            fmt=format_name(given),
            defaults=iris(given, "default-graph-uri"),
            named=iris(given, "named-graph-uri"),
            base=_base(request),
        )
        return started if isinstance(started, Answer) else await started

    def start_query(
        self,
        query: str,
        *,
        accept: str | None,
        base: str,
        fmt: str | None = None,
        defaults: list[NamedNode] | None = None,
        named: list[NamedNode] | None = None,
    ) -> Answer | Coroutine[Any, Any, Answer]:
        """The answer to ``query`` at once when it is a point query answered on the event
        loop, else the coroutine that answers it (the guard, then the sandbox).

        Raises:
            HttpError: a refusal known at once (406, 403, 400, 503 …).
        """
        acceptable_at_all(accept, fmt)
        cap = self.settings.max_result_bytes
        if self.points and not defaults and not named:
            direct = self._direct(query, accept, fmt, min(cap, _POINT_BYTES))
            if direct is not None:
                return direct
        kwargs: dict[str, Any] = {
            "sparql": query,
            "accept": accept,
            "format_name": fmt,
            "default_graph": defaults or None,
            "named_graphs": named or None,
            "base_iri": base,
        }
        # A plain query (``point.py``: triple patterns only) has nothing the guard would
        # refuse, which spares it the guard's parse; every other text is judged first.
        plain = plain_query(query)  # one pass over at most MAX_TEXT characters
        guard = None if plain is not None else query
        if self.points and plain == POINT:
            # Every row one index step: answered on the event loop up to a small result,
            # a bounded amount of work; a bigger result goes to a child process.
            small = min(cap, _POINT_BYTES)
            try:
                return self.runner.run_now(
                    query_answer, {**kwargs, "limit": small}, guard=guard, query=True
                )
            except HttpError as exc:
                if exc.status != 422 or cap <= small:
                    raise
        return self.runner.run(query_answer, {**kwargs, "limit": cap}, guard=guard, query=True)

    def _direct(self, query: str, accept: str | None, fmt: str | None, cap: int) -> Answer | None:
        """The answer read straight from the store's indexes (``direct.py``), or None."""
        plan = parse_direct(query)
        if plan is None:
            return None
        offer = by_name(fmt, RESULTS_OFFERS) if fmt else negotiate(accept, RESULTS_OFFERS)
        if offer is None or offer.format != QueryResultsFormat.JSON:
            return None
        store = indexed_store(self.store)
        if store is None or self.runner.pool.closed:
            return None
        runner = self.runner
        steady = unchanged_since(self.store)
        if len(plan.patterns) > 1 and (runner.writing or steady is None):
            return None  # two reads could see two states: one snapshot, the usual way

        def unchanged() -> bool:
            return not runner.writing and steady is not None and steady()

        body = direct_rows(store, plan, cap, unchanged)
        return None if body is None else Answer(body, offer.content_type)

    async def _update(self, request: Request, update: str, given: Pairs) -> Answer:
        check_token(request, allow_update=self.settings.allow_update, token=self.settings.token)
        using = iris(given, "using-graph-uri")
        using_named = iris(given, "using-named-graph-uri")
        return await self.runner.run(
            update_answer,
            {"sparql": with_using(update, using, using_named), "base_iri": _base(request)},
            guard=update,
            read=False,
        )

    def close(self) -> None:
        """End the worker threads once their jobs are done (the app is stopping)."""
        self.runner.close()

    def _description(self, request: Request, given: Pairs) -> Answer:
        offer = choose(request.headers.get("accept"), format_name(given), GRAPH_OFFERS)
        endpoint = str(request.url.replace(query=""))
        triples = service_description(endpoint, allow_update=self.settings.allow_update)
        prefixes = {"sd": "http://www.w3.org/ns/sparql-service-description#"}
        if offer.format != RdfFormat.TURTLE:
            prefixes = {}
        body = serialize(triples, None, offer.rdf, prefixes=prefixes) or b""
        return Answer(bytes(body), offer.content_type)

    # -- Graph Store Protocol, named queries, health, page -------------------------------

    async def graph_store(self, request: Request) -> Response:
        try:
            given = query_pairs(request)
            graph = one(given, "graph")
            default = any(k == "default" for k, _ in given)
            if graph is not None and default:
                raise HttpError(400, "give either ?default or ?graph=IRI, not both")
            accept = request.headers.get("accept")
            fmt = format_name(given)
            answer = await self.runner.run(
                graph_answer,
                {
                    "graph": graph,
                    "whole": graph is None and not default,
                    "accept": accept,
                    "format_name": fmt,
                    "limit": self.settings.max_result_bytes,
                },
            )
            return _response(answer)
        except HttpError as exc:
            return error_response(exc)

    async def named_queries(self, request: Request) -> Response:
        base = str(request.base_url).rstrip("/")
        body = named_index(list_named_queries(), base)
        return Response(body, 200, _SAFE_HEADERS, media_type="application/json")

    async def named_query(self, request: Request) -> Response:
        try:
            name = request.path_params["name"]
            try:
                named = load_named_query(name)
            except KeyError as exc:
                raise HttpError(404, str(exc.args[0])) from exc
            given = query_pairs(request)
            fmt = format_name(given)
            values: dict[str, str] = {}
            for key, value in given:
                if key in ("format", "output"):
                    continue
                if key in values:
                    raise HttpError(400, f"the parameter {key!r} was given more than once")
                values[key] = value
            try:
                text, bindings = named.prepare(values)
            except QueryError as exc:
                raise HttpError(400, str(exc)) from exc
            accept = request.headers.get("accept")
            acceptable_at_all(accept, fmt)
            answer = await self.runner.run(
                query_answer,
                {
                    "sparql": text,
                    "accept": accept,
                    "format_name": fmt,
                    "bindings": bindings,
                    "limit": self.settings.max_result_bytes,
                },
                guard=text,
                query=True,
            )
            return _response(answer)
        except HttpError as exc:
            return error_response(exc)

    async def health(self, request: Request) -> Response:
        doc = {
            "status": "ok",
            "store": _kind(self.store),
            "queries_running": self.pool.running + self.runner.sandboxed,
            "max_concurrent": self.pool.size,
            "updates": self.settings.allow_update,
        }
        return Response(json.dumps(doc), 200, _SAFE_HEADERS, media_type="application/json")

    async def page(self, request: Request) -> Response:
        given = query_pairs(request)
        body = query_page(list_named_queries(), query=one_or_first(given, "query"))
        return Response(body, 200, _SAFE_HEADERS, media_type="text/html; charset=utf-8")
