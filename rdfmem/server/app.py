"""The Starlette application: SPARQL 1.1 Protocol, Graph Store reads, named queries, health.

Routes::

    GET  /                 an HTML query page
    GET  /sparql           a query (``?query=``), or the service description without one
    POST /sparql           a query or an update: form-encoded, or a direct
                           ``application/sparql-query`` / ``application/sparql-update`` body
    GET  /store            Graph Store Protocol read: ``?default``, ``?graph=IRI``, or every graph
    GET  /queries          the named queries and their parameters (JSON)
    GET  /queries/{name}   run a named query, parameters from the query string
    GET  /health           ``{"status": "ok", …}``, answered without a query worker

Status codes: 400 malformed request or query (with the parser's message), 403 SERVICE or
LOAD, an update that is disabled or lacks the right bearer token, or a cross-site request,
404 unknown graph or named query, 405 wrong method, 406 no acceptable format, 408 body not
sent in time, 413 body too large, 415 unknown body type or a body not in UTF-8, 421 a
``Host`` the server does not answer to, 422 result larger than ``max_result_bytes``, 503 time
limit exceeded or every worker busy (with ``Retry-After``).

Nothing that grows with the request runs on the event loop: the body is capped first, then
the SPARQL guard (linear time) and the query run on a bounded pool of worker threads
(``workers.py``). On embedded Oxigraph and rdflib every read is evaluated in a forked child
process that is killed at the time limit (``isolate.py``), so a runaway query stops using the
CPU when its caller gets the 503; the one exception is a point query on embedded Oxigraph
(``point.py``: one triple pattern, each row one index step), answered on the worker thread up
to 64 KiB of result, a bounded amount of work. Results are written row by row and stop at
the size cap.

Requests whose ``Host`` is not one of the names the server answers to (IP addresses,
``localhost`` and ``allowed_hosts``) are refused with 421 (DNS rebinding), and any request
carrying an ``Origin`` of another site unless ``cors`` allows it with 403 (``gate.py``).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from pyoxigraph import NamedNode, RdfFormat, serialize
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from rdfmem.backends import OxigraphBackend, RdflibBackend
from rdfmem.core.errors import QueryError, ServerConfigError
from rdfmem.core.guard import find_forbidden
from rdfmem.server.answers import (
    Answer,
    HttpError,
    acceptable_at_all,
    choose,
    graph_answer,
    query_answer,
    update_answer,
)
from rdfmem.server.dataset import with_using
from rdfmem.server.gate import Gate
from rdfmem.server.isolate import ChildFailed, run_forked
from rdfmem.server.named import list_named_queries, load_named_query
from rdfmem.server.negotiate import DATASET_OFFERS, GRAPH_OFFERS, RESULTS_OFFERS, by_name
from rdfmem.server.page import named_index, query_page, service_description
from rdfmem.server.point import is_point_query
from rdfmem.server.workers import Busy, TimedOut, WorkerPool, drop_locals
from rdfmem.store.rdfstore import RdfStore

__all__ = ["ServerConfigError", "ServerSettings", "create_app"]

_log = logging.getLogger("rdfmem.server")
#: The most a point query may write on a worker thread before a child process takes over.
_POINT_BYTES = 64 << 10
#: The cancel flag of work done in a child process: the parent kills it instead.
_NEVER = threading.Event()
_FORM = "application/x-www-form-urlencoded"
_QUERY = "application/sparql-query"
_UPDATE = "application/sparql-update"
_TEXT = "text/plain; charset=utf-8"
_SAFE_HEADERS = {"X-Content-Type-Options": "nosniff"}


_Handler = Callable[[Request], Awaitable[Response]]
_ANY_OFFERS = RESULTS_OFFERS + GRAPH_OFFERS + DATASET_OFFERS


def _kind(store: RdfStore) -> str:
    """What ``/health`` says the store is: its kind only, never a path or a URL (which may
    carry a password)."""
    backend = store.backend
    if isinstance(backend, OxigraphBackend):
        return "oxigraph (on disk)" if backend.persistent else "oxigraph (in memory)"
    if isinstance(backend, RdflibBackend):
        return "rdflib"
    return "remote SPARQL endpoint"


def _one_or_first(pairs: list[tuple[str, str]], name: str) -> str | None:
    return next((v for k, v in pairs if k == name), None)


@dataclass(frozen=True)
class ServerSettings:
    """The endpoint's limits and permissions (see ``create_app``)."""

    allow_update: bool = False
    token: str | None = None
    cors: tuple[str, ...] = ()
    timeout: float = 30.0
    max_concurrent: int = 4
    max_waiting: int = 64
    max_result_bytes: int = 64 << 20
    max_body: int = 1 << 20
    allowed_hosts: tuple[str, ...] = ()
    isolate: bool = True
    body_timeout: float = 30.0


def _response(answer: Answer) -> Response:
    headers = {**_SAFE_HEADERS, **answer.headers}
    if answer.status == 200:
        headers["Vary"] = "Accept"
    return Response(answer.body, answer.status, headers, media_type=answer.content_type)


def _error(exc: HttpError) -> Response:
    body = (exc.message.rstrip() + "\n").encode("utf-8", "replace")
    return Response(body, exc.status, {**_SAFE_HEADERS, **exc.headers}, media_type=_TEXT)


def _utf8(data: bytes, what: str, charset: str = "utf-8") -> str:
    try:
        return data.decode(charset)
    except (UnicodeDecodeError, LookupError) as exc:
        raise HttpError(400, f"{what} is not valid {charset} text: {exc}") from exc


def _pairs(raw: bytes | str, what: str) -> list[tuple[str, str]]:
    text = _utf8(raw, what) if isinstance(raw, bytes) else raw
    try:
        return parse_qsl(text, keep_blank_values=True, encoding="utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise HttpError(400, f"{what} is not valid UTF-8 once percent-decoded: {exc}") from exc
    except ValueError as exc:
        raise HttpError(400, f"{what} is malformed: {exc}") from exc


def _format(pairs: list[tuple[str, str]]) -> str | None:
    """The ``format`` (or ``output``) parameter; given more than once (SPARQLWrapper sends
    ``format=tsv&format=text/tab-separated-values``), the first value the server knows."""
    values = [v for k, v in pairs if k in ("format", "output") and v]
    for value in values:
        if by_name(value, _ANY_OFFERS) is not None:
            return value
    return values[0] if values else None


def _one(pairs: list[tuple[str, str]], name: str) -> str | None:
    values = [v for k, v in pairs if k == name]
    if len(values) > 1:
        raise HttpError(400, f"the parameter {name!r} was given {len(values)} times; give it once")
    return values[0] if values else None


def _iris(pairs: list[tuple[str, str]], name: str) -> list[NamedNode]:
    out = []
    for key, value in pairs:
        if key == name:
            try:
                out.append(NamedNode(value))
            except ValueError as exc:
                raise HttpError(400, f"{name} {value!r} is not an IRI: {exc}") from exc
    return out


def _media_type(request: Request) -> tuple[str, str]:
    header = request.headers.get("content-type", "")
    media, *params = (p.strip() for p in header.split(";"))
    charset = "utf-8"
    for param in params:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip('"') or charset
    return media.lower(), charset


@dataclass(frozen=True)
class _Refusal:
    """An ``HttpError`` as plain data, to carry from a worker to the event loop."""

    status: int
    message: str
    headers: dict[str, str]


def _contained(
    job: Callable[[Any], Answer | _Refusal], *, log: bool = True
) -> Callable[[Any], Answer | _Refusal]:
    """``job``, answering with plain data only: an exception raised on a worker keeps
    pyoxigraph results alive in its frames, and those may only be freed on that worker
    (pyo3 raises otherwise), so no exception leaves it. ``log=False`` in a child process,
    where a lock held by another thread at the fork could block the logger."""

    def run(cancel: Any) -> Answer | _Refusal:
        try:
            return job(cancel)
        except HttpError as exc:
            refusal = _Refusal(exc.status, exc.message, exc.headers)
            drop_locals(exc)
            return refusal
        except TimedOut as exc:
            drop_locals(exc)
            return _Refusal(503, str(exc), {"Retry-After": "5"})
        except Exception as exc:
            if log:
                _log.exception("the store failed while answering")
            refusal = _Refusal(500, f"the server failed: {type(exc).__name__}: {exc}", {})
            drop_locals(exc)
            return refusal

    return run


class _Endpoint:
    """The handlers, sharing one store, one worker pool and the settings."""

    def __init__(self, store: RdfStore, settings: ServerSettings) -> None:
        self.store = store
        self.settings = settings
        embedded = isinstance(store.backend, OxigraphBackend)
        # rdflib evaluates one query at a time (its backend holds a lock), so one worker;
        # other backends build their results in Python and leave garbage cycles to collect.
        size = 1 if isinstance(store.backend, RdflibBackend) else settings.max_concurrent
        self.pool = WorkerPool(size, max_waiting=settings.max_waiting, collect=not embedded)
        #: Reads evaluated in a killable child process: the backends that use this CPU
        #: (a remote store's queries run on its server, which enforces its own limits).
        self.isolate = settings.isolate and isinstance(
            store.backend, (OxigraphBackend, RdflibBackend)
        )
        #: Point queries (``point.py``) on embedded Oxigraph, whose results are lazy, may be
        #: answered on a worker thread instead.
        self.points = embedded

    # -- plumbing -----------------------------------------------------------------------

    async def _body(self, request: Request) -> bytes:
        limit = self.settings.max_body
        too_big = HttpError(
            413, f"the request body is larger than the server's limit of {limit} bytes"
        )
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise too_big
        chunks: list[bytes] = []
        size = 0

        async def read() -> None:
            nonlocal size
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise too_big
                chunks.append(chunk)

        try:
            await asyncio.wait_for(read(), self.settings.body_timeout)
        except asyncio.TimeoutError:
            raise HttpError(408, "the request body did not arrive in time") from None
        except ClientDisconnect:
            raise HttpError(400, "the client went away while sending its request") from None
        return b"".join(chunks)

    async def _run(
        self, job: Callable[[Any], Answer], *, guard: str | None = None, read: bool = True
    ) -> Answer:
        """``job`` on a worker, after the guard has judged ``guard`` there (off the event
        loop); a read on a local backend in a child process killed at the time limit."""
        timeout = self.settings.timeout
        deadline = time.monotonic() + timeout
        isolate = read and self.isolate
        # What a child may send back: the capped result plus room for its envelope.
        room = self.settings.max_result_bytes + (1 << 16)

        def work(cancel: threading.Event) -> Answer | _Refusal:
            if guard is not None:
                self._guard(guard)
            if not isolate:
                return job(cancel)
            try:
                outcome: Answer | _Refusal = run_forked(
                    lambda: _contained(job, log=False)(_NEVER),
                    deadline=deadline,
                    cancel=cancel,
                    max_bytes=room,
                )
            except ChildFailed as exc:
                raise HttpError(500, f"the query failed: {exc}") from exc
            return outcome

        try:
            outcome = await self.pool.run(_contained(work), timeout=timeout)
        except TimedOut as exc:
            raise HttpError(503, str(exc), {"Retry-After": "5"}) from exc
        except Busy as exc:
            raise HttpError(503, str(exc), {"Retry-After": "1"}) from exc
        if isinstance(outcome, _Refusal):
            raise HttpError(outcome.status, outcome.message, outcome.headers)
        return outcome

    @staticmethod
    def _guard(sparql: str) -> None:
        found = find_forbidden(sparql)
        if found is not None:
            raise HttpError(
                403,
                f"{found.keyword} is not allowed on this endpoint (line {found.line}, column "
                f"{found.column}): it would make the server fetch a remote URL",
            )

    def _check_token(self, request: Request) -> None:
        if not self.settings.allow_update or not self.settings.token:
            raise HttpError(
                403, "updates are disabled on this endpoint (start it with --allow-update)"
            )
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        expected = self.settings.token.encode("utf-8")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode("utf-8"), expected
        ):
            raise HttpError(
                403,
                "updates need the server's token as 'Authorization: Bearer <token>'",
                {"WWW-Authenticate": 'Bearer realm="rdfmem"'},
            )

    # -- handlers -----------------------------------------------------------------------

    async def sparql(self, request: Request) -> Response:
        try:
            return _response(await self._sparql(request))
        except HttpError as exc:
            return _error(exc)

    @staticmethod
    def _base(request: Request) -> str:
        """The service URL, the base IRI of relative IRIs in queries and updates."""
        return str(request.url.replace(query="", fragment=""))

    async def _sparql(self, request: Request) -> Answer:
        pairs = _pairs(request.scope.get("query_string", b""), "the URL's query string")
        query: str | None
        update: str | None
        if request.method in ("GET", "HEAD"):
            if _one(pairs, "update") is not None:
                raise HttpError(405, "updates must be sent by POST", {"Allow": "POST"})
            query = _one(pairs, "query")
            if query is None:
                return self._description(request, pairs)
            update = None
        else:
            media, charset = _media_type(request)
            if charset.lower() not in ("utf-8", "utf8", "us-ascii", "ascii"):
                raise HttpError(
                    415, f"the body must be UTF-8 text (SPARQL 1.1 Protocol), not {charset}"
                )
            body = await self._body(request)
            if media == _FORM:
                pairs = pairs + _pairs(body, "the form body")
                query, update = _one(pairs, "query"), _one(pairs, "update")
            elif media == _QUERY:
                query, update = _utf8(body, "the query", charset), None
            elif media == _UPDATE:
                query, update = None, _utf8(body, "the update", charset)
            else:
                raise HttpError(
                    415,
                    f"POST a body of type {_QUERY}, {_UPDATE} or {_FORM}, "
                    f"not {media or 'nothing'!r}",
                )
            if query is not None and update is not None:
                raise HttpError(400, "give either a query or an update, not both")
        if update is not None:
            return await self._update(request, update, pairs)
        if query is None:
            raise HttpError(400, "no query: give the parameter 'query' (or 'update' by POST)")
        return await self._query(request, query, pairs)

    async def _query(self, request: Request, query: str, pairs: list[tuple[str, str]]) -> Answer:
        accept = request.headers.get("accept")
        format_name = _format(pairs)
        acceptable_at_all(accept, format_name)
        defaults = _iris(pairs, "default-graph-uri")
        named = _iris(pairs, "named-graph-uri")
        store, cap, base = self.store, self.settings.max_result_bytes, self._base(request)

        def job(limit: int) -> Callable[[threading.Event], Answer]:
            return lambda cancel: query_answer(
                store,
                query,
                accept=accept,
                format_name=format_name,
                default_graph=defaults or None,
                named_graphs=named or None,
                base_iri=base,
                limit=limit,
                cancel=cancel,
            )

        if self.points and is_point_query(query):  # bounded: at most MAX_TEXT characters
            # Every row one index step: answered on a worker thread up to a small result,
            # a bounded amount of work; a bigger result goes to a child process.
            small = min(cap, _POINT_BYTES)
            try:
                return await self._run(job(small), guard=query, read=False)
            except HttpError as exc:
                if exc.status != 422 or cap <= small:
                    raise
        return await self._run(job(cap), guard=query)

    async def _update(self, request: Request, update: str, pairs: list[tuple[str, str]]) -> Answer:
        self._check_token(request)
        using = _iris(pairs, "using-graph-uri")
        using_named = _iris(pairs, "using-named-graph-uri")
        store, base = self.store, self._base(request)
        return await self._run(
            lambda cancel: update_answer(
                store, with_using(update, using, using_named), cancel, base_iri=base
            ),
            guard=update,
            read=False,
        )

    def _description(self, request: Request, pairs: list[tuple[str, str]]) -> Answer:
        offer = choose(request.headers.get("accept"), _format(pairs), GRAPH_OFFERS)
        endpoint = str(request.url.replace(query=""))
        triples = service_description(endpoint, allow_update=self.settings.allow_update)
        prefixes = {"sd": "http://www.w3.org/ns/sparql-service-description#"}
        if offer.format != RdfFormat.TURTLE:
            prefixes = {}
        body = serialize(triples, None, offer.rdf, prefixes=prefixes) or b""
        return Answer(bytes(body), offer.content_type)

    async def graph_store(self, request: Request) -> Response:
        try:
            pairs = _pairs(request.scope.get("query_string", b""), "the URL's query string")
            graph = _one(pairs, "graph")
            default = any(k == "default" for k, _ in pairs)
            if graph is not None and default:
                raise HttpError(400, "give either ?default or ?graph=IRI, not both")
            accept = request.headers.get("accept")
            format_name = _format(pairs)
            store, cap = self.store, self.settings.max_result_bytes
            whole = graph is None and not default
            answer = await self._run(
                lambda cancel: graph_answer(
                    store,
                    graph,
                    whole=whole,
                    accept=accept,
                    format_name=format_name,
                    limit=cap,
                    cancel=cancel,
                )
            )
            return _response(answer)
        except HttpError as exc:
            return _error(exc)

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
            pairs = _pairs(request.scope.get("query_string", b""), "the URL's query string")
            format_name = _format(pairs)
            given: dict[str, str] = {}
            for key, value in pairs:
                if key in ("format", "output"):
                    continue
                if key in given:
                    raise HttpError(400, f"the parameter {key!r} was given more than once")
                given[key] = value
            try:
                text, bindings = named.prepare(given)
            except QueryError as exc:
                raise HttpError(400, str(exc)) from exc
            accept = request.headers.get("accept")
            acceptable_at_all(accept, format_name)
            store, cap = self.store, self.settings.max_result_bytes
            answer = await self._run(
                lambda cancel: query_answer(
                    store,
                    text,
                    accept=accept,
                    format_name=format_name,
                    bindings=bindings,
                    limit=cap,
                    cancel=cancel,
                ),
                guard=text,
            )
            return _response(answer)
        except HttpError as exc:
            return _error(exc)

    async def health(self, request: Request) -> Response:
        doc = {
            "status": "ok",
            "store": _kind(self.store),
            "queries_running": self.pool.running,
            "max_concurrent": self.pool.size,
            "updates": self.settings.allow_update,
        }
        return Response(json.dumps(doc), 200, _SAFE_HEADERS, media_type="application/json")

    async def page(self, request: Request) -> Response:
        pairs = _pairs(request.scope.get("query_string", b""), "the URL's query string")
        body = query_page(list_named_queries(), query=_one_or_first(pairs, "query"))
        return Response(body, 200, _SAFE_HEADERS, media_type="text/html; charset=utf-8")


def create_app(
    store: RdfStore,
    *,
    allow_update: bool = False,
    token: str | None = None,
    cors: tuple[str, ...] | list[str] = (),
    timeout: float = 30.0,
    max_concurrent: int = 4,
    max_waiting: int = 64,
    max_result_bytes: int = 64 << 20,
    max_body: int = 1 << 20,
    allowed_hosts: tuple[str, ...] | list[str] = (),
    isolate: bool = True,
    body_timeout: float = 30.0,
) -> ASGIApp:
    """An ASGI app serving ``store`` over the SPARQL 1.1 Protocol (see the module docstring).

    Args:
        store: the store to serve; the caller keeps owning (and closes) it.
        allow_update: accept SPARQL Update by POST, from callers that send ``token``.
        token: the bearer token updates must carry.
        cors: origins allowed to call from a browser (``"*"`` for any); none by default.
        timeout: seconds a request may wait for and run its query.
        max_concurrent: queries evaluated at once (the worker threads).
        max_waiting: requests that may wait for a worker before 503s start.
        max_result_bytes: bytes a result may take once written (422 beyond).
        max_body: bytes a request body may hold (413 beyond).
        allowed_hosts: host names the server answers to besides ``localhost`` and IP
            addresses (which DNS rebinding cannot use); ``"*"`` turns the check off.
        isolate: evaluate reads on embedded Oxigraph and rdflib in a child process killed
            at the time limit (on by default; off only to measure what it costs).
        body_timeout: seconds a client may take to send its request body (408 beyond).

    >>> from starlette.testclient import TestClient
    >>> from rdfmem import RdfStore
    >>> store = RdfStore()
    >>> store.assert_("urn:a", "urn:says", "hi")
    >>> with TestClient(create_app(store), base_url="http://localhost") as client:
    ...     response = client.get("/sparql", params={"query": "SELECT ?o { ?s ?p ?o }"},
    ...                           headers={"Accept": "text/csv"})
    >>> response.text.splitlines()
    ['o', 'hi']

    Raises:
        ServerConfigError: updates allowed without a token, or a limit below 1.
    """
    if allow_update and not token:
        raise ServerConfigError("allow_update needs a token that updates must carry")
    for name, value in (
        ("timeout", timeout),
        ("max_concurrent", max_concurrent),
        ("max_result_bytes", max_result_bytes),
        ("max_body", max_body),
    ):
        if value <= 0:
            raise ServerConfigError(f"{name} must be positive, not {value!r}")
    settings = ServerSettings(
        allow_update=allow_update,
        token=token,
        cors=tuple(cors),
        timeout=timeout,
        max_concurrent=max_concurrent,
        max_waiting=max_waiting,
        max_result_bytes=max_result_bytes,
        max_body=max_body,
        allowed_hosts=tuple(h.lower() for h in allowed_hosts),
        isolate=isolate,
        body_timeout=body_timeout,
    )
    endpoint = _Endpoint(store, settings)
    routes: list[tuple[str, _Handler, list[str]]] = [
        ("/", endpoint.page, ["GET"]),
        ("/sparql", endpoint.sparql, ["GET", "POST"]),
        ("/store", endpoint.graph_store, ["GET"]),
        ("/queries", endpoint.named_queries, ["GET"]),
        ("/queries/{name}", endpoint.named_query, ["GET"]),
        ("/health", endpoint.health, ["GET"]),
    ]
    middleware = []
    if settings.cors:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(settings.cors),
                allow_methods=["GET", "POST"],
                allow_headers=["Accept", "Content-Type", "Authorization"],
                max_age=600,
            )
        )
    app = Starlette(
        routes=[Route(path, fn, methods=methods) for path, fn, methods in routes],
        middleware=middleware,
    )
    app.state.endpoint = endpoint
    inner: ASGIApp = app if settings.cors else _Shortcut(app, endpoint)
    return Gate(inner, allowed_hosts=settings.allowed_hosts, cors=settings.cors)


class _Shortcut:
    """``GET``/``POST /sparql`` straight to its handler, everything else through Starlette:
    routing and middleware cost a fifth of a point query's time in this process."""

    def __init__(self, app: Starlette, endpoint: _Endpoint) -> None:
        self.app = app
        self.state = app.state
        self._endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["path"] != "/sparql"
            or scope["method"] not in ("GET", "POST")
        ):
            await self.app(scope, receive, send)
            return
        try:
            response = await self._endpoint.sparql(Request(scope, receive))
        except Exception:
            _log.exception("the endpoint failed")
            response = _error(HttpError(500, "the server failed; see its log"))
        await response(scope, receive, send)
