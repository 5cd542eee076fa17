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

Nothing that grows with the request runs on the event loop: the body is capped first; a
text longer than 4 KiB is judged by the SPARQL guard (linear time) on a bounded pool of worker
threads (``jobs.py``, ``workers.py``), a shorter one on the loop (the judgement kept per
text), and a plain one (triple patterns only, ``point.py``) needs none. On a backend
evaluated in this process (embedded Oxigraph, rdflib) every read is evaluated in the sandbox
(``rdfmem.store.sandbox``): a kept child process, killed at the time limit and capped in
memory, whose answer the event loop waits for on a pipe, so a runaway query stops using the
CPU when its caller gets the 503. The one exception is a point query on embedded Oxigraph
(one triple pattern, each row one index step), answered on the event loop itself up to
64 KiB of result, a bounded amount of work; a larger result goes to the sandbox. Results are
written row by row and stop at the size cap; a small answer leaves in one write
(``protocols.py``).

Requests whose ``Host`` is not one of the names the server answers to (IP addresses,
``localhost`` and ``allowed_hosts``) are refused with 421 (DNS rebinding), and any request
carrying an ``Origin`` of another site unless ``cors`` allows it with 403 (``gate.py``).

The handlers are in ``endpoint.py``, request parsing in ``incoming.py``, where work runs in
``jobs.py``, the bodies in ``answers.py`` and the settings in ``settings.py``; this module
assembles them into one ASGI app.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from rdfmem.core.errors import HttpError
from rdfmem.server.endpoint import Endpoint, error_response
from rdfmem.server.gate import Gate
from rdfmem.server.graphview import page_routes
from rdfmem.server.lane import Lane
from rdfmem.server.settings import ServerConfigError, ServerSettings, checked
from rdfmem.store.rdfstore import RdfStore

__all__ = ["ServerConfigError", "ServerSettings", "create_app"]

_log = logging.getLogger("rdfmem.server")
_Handler = Callable[[Request], Awaitable[Response]]


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
    sandbox: str = "pool",
    memory_cap: int = 1 << 30,
) -> Gate:
    """An ASGI app serving ``store`` over the SPARQL 1.1 Protocol (see the module docstring).

    Args:
        store: the store to serve; the caller keeps owning (and closes) it.
        allow_update: accept SPARQL Update by POST, from callers that send ``token``.
        token: the bearer token updates must carry.
        cors: origins allowed to call from a browser (``"*"`` for any); none by default.
        timeout: seconds a request may wait for and run its query.
        max_concurrent: queries evaluated at once: the worker threads, and the query child
            processes (reads from the event loop beyond them queue behind busy children;
            see docs/sandbox.md).
        max_waiting: requests that may wait for a worker before 503s start.
        max_result_bytes: bytes a result may take once written (422 beyond).
        max_body: bytes a request body may hold (413 beyond).
        allowed_hosts: host names the server answers to besides ``localhost`` and IP
            addresses (which DNS rebinding cannot use); ``"*"`` turns the check off.
        isolate: evaluate reads on a backend evaluated in this process (embedded Oxigraph,
            rdflib) in a child process killed at the time limit (on by default; off only
            to measure what it costs).
        body_timeout: seconds a client may take to send its request body (408 beyond).
        sandbox: ``"pool"`` (isolated reads in child processes kept from one read to the
            next until a write) or ``"fork"`` (a child per read, to compare).
        memory_cap: bytes one isolated read may allocate (its child's ``RLIMIT_AS``);
            a read past it is answered 500.

    >>> from starlette.testclient import TestClient
    >>> from rdfmem import RdfStore
    >>> store = RdfStore()
    >>> store.assert_("urn:a", "urn:says", "hi")
    >>> with TestClient(create_app(store), base_url="http://localhost") as client:
    ...     response = client.get("/sparql", params={"query": "SELECT ?o { ?s ?p ?o }"},
    ...                           headers={"Accept": "text/csv"})
    >>> response.text.splitlines()
    ['o', 'hi']

    The app holds query worker threads: call its ``close()`` when you stop serving it
    (``serve`` and ``BackgroundServer.stop`` do); the store stays open, it is yours.

    Raises:
        ServerConfigError: updates allowed without a token, or a limit below 1.
    """
    settings = checked(
        ServerSettings(
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
            sandbox=sandbox,
            memory_cap=memory_cap,
        )
    )
    endpoint = Endpoint(store, settings)
    routes: list[tuple[str, _Handler, list[str]]] = [
        *page_routes(endpoint),
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
    gate = Gate(
        inner, allowed_hosts=settings.allowed_hosts, cors=settings.cors, on_close=endpoint.close
    )
    if not settings.cors:  # plain GET /sparql?query= answered without the ASGI stack
        gate.lane = Lane(endpoint, settings.allowed_hosts)
    return gate


class _Shortcut:
    """``GET``/``POST /sparql`` straight to its handler, everything else through Starlette:
    routing and middleware cost a fifth of a point query's time in this process."""

    def __init__(self, app: Starlette, endpoint: Endpoint) -> None:
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
            response = error_response(HttpError(500, "the server failed; see its log"))
        await response(scope, receive, send)
