"""The MCP server: the official memory server's nine tools and its
``memory://knowledge-graph`` resource, rdfmem's own tools beside them, over stdio or
streamable HTTP. Built on the official ``mcp`` SDK's low-level ``Server``, so tool schemas
and answers are exactly the official server's.

Every call is checked against its tool's input schema and the server's limits before it
runs; a bad call, a missing entity or any rdfmem error is a tool error (``isError``) with a
clear message, nothing is written, and the server keeps serving. Tool functions block, so
they run on worker threads; writes are serialised by the store (its lock, or a lease on a
SPARQL server), so concurrent clients never lose each other's writes.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import pydantic

from rdfmem.core.errors import RdfMemError
from rdfmem.mcp.advice import explain, precheck
from rdfmem.mcp.checks import ToolInputError, check_arguments
from rdfmem.mcp.sdk import (
    MCPError,
    Server,
    ServerRequestContext,
    ServerSession,
    SessionMessage,
    stdio_server,
    types,
)
from rdfmem.mcp.services import Services
from rdfmem.mcp.specs import Reply, Spec, json_text
from rdfmem.mcp.toolsets import ALL, DEFAULT, OFFICIAL, PRESETS

if TYPE_CHECKING:
    from rdfmem.mcp.graph import Client

__all__ = [
    "RESOURCE_URI",
    "TOOLS",
    "build_server",
    "prepare",
    "serve_http",
    "serve_stdio",
    "serve_streams",
]

logger = logging.getLogger(__name__)

#: Every tool's name, the official server's nine first.
TOOLS: tuple[str, ...] = ALL
#: The resource holding the whole knowledge graph as JSON.
RESOURCE_URI = "memory://knowledge-graph"

_INSTRUCTIONS_OFFICIAL = (
    "Long-term memory kept as RDF by rdfmem: a knowledge graph of entities, relations and "
    "observations, as in the official memory server."
)
_INSTRUCTIONS = (
    "Long-term memory kept as RDF by rdfmem. The knowledge graph tools (create_entities, "
    "add_observations, search_nodes, open_nodes …) work as in the official memory server. "
)
_FAMILIES = {
    "memory_": "memory_* keep titled notes per scope",
    "decision_": "decision_* a graph of goals and decisions",
    "generalisation_": "generalisation_* abstracted lessons",
    "sparql_query": "sparql_query reads everything",
}


def _version() -> str:
    try:
        return version("rdfmem")
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "0"


def _tool(spec: Spec) -> types.Tool:
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.input_schema,
        output_schema=spec.output_schema,
        annotations=types.ToolAnnotations(
            read_only_hint=spec.annotations["readOnlyHint"],
            destructive_hint=spec.annotations["destructiveHint"],
            idempotent_hint=spec.annotations["idempotentHint"],
            open_world_hint=spec.annotations["openWorldHint"],
        ),
    )


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True
    )


def _client(ctx: ServerRequestContext[Any]) -> Client:
    from rdfmem.mcp.graph import Client

    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    if info is None:
        return Client()
    return Client(info.name or "unknown", info.version or "")


class _Tools:
    """The server's tools, loaded once on first need (the tool modules import the library,
    which ``initialize`` does not need): their specs by name and their MCP listing."""

    def __init__(self, names: Sequence[str], project: bool) -> None:
        self.names = tuple(names)
        self.project = project
        self._lock = threading.Lock()
        self._loaded: tuple[dict[str, Spec], list[types.Tool]] | None = None
        #: set when a first call was answered
        self.answered = threading.Event()
        self._seen = time.monotonic()

    def load(self) -> tuple[dict[str, Spec], list[types.Tool]]:
        self._seen = time.monotonic()
        with self._lock:
            if self._loaded is None:
                from rdfmem.mcp.catalog import specs

                chosen = specs(self.names, project=self.project)
                self._loaded = ({s.name: s for s in chosen}, [_tool(s) for s in chosen])
            return self._loaded

    def seen(self) -> None:
        """A request was just answered (``load`` notes one coming too)."""
        self._seen = time.monotonic()

    def quiet(self, gap: float, most: float) -> None:
        """Return once no request came for ``gap`` seconds, or after ``most`` seconds."""
        until = time.monotonic() + most
        while (now := time.monotonic()) < until and (idle := now - self._seen) < gap:
            time.sleep(min(gap - idle, until - now))


def _missing(name: str, names: Sequence[str]) -> str:
    if name in ALL:
        return (
            f"Tool {name} is not offered by this server (started with other --tools); "
            f"call one of: {', '.join(names)}, or start rdfmem mcp with --tools all"
        )
    return f"Tool {name} not found; this server has: {', '.join(names)}"


def build_server(services: Services, tools: Sequence[str] = PRESETS[DEFAULT]) -> Server[Any]:
    """An MCP server over ``services`` (one store, one project) offering ``tools`` (names,
    see ``rdfmem.mcp.toolsets``)."""
    catalog = _Tools(tools, services.project is not None)
    subscribers: weakref.WeakSet[Any] = weakref.WeakSet()
    check = services.limits
    has_project = services.project is not None

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        _, listing = await anyio.to_thread.run_sync(catalog.load)
        catalog.seen()
        return types.ListToolsResult(tools=listing)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        by_name, _ = await anyio.to_thread.run_sync(catalog.load)
        spec = by_name.get(params.name)
        if spec is None:
            return _error(_missing(params.name, catalog.names))
        try:
            arguments = check_arguments(spec.input_schema, params.arguments, check)
            precheck(spec.name, arguments, project=has_project)
        except ToolInputError as exc:
            return _error(f"Invalid arguments for tool {spec.name}: {exc}")
        client = _client(ctx)
        run = spec.run
        if spec.name not in OFFICIAL and not spec.annotations["readOnlyHint"]:
            run = _elsewhere(spec)
        try:
            reply = await anyio.to_thread.run_sync(run, services, arguments, client)
        except (RdfMemError, pydantic.ValidationError) as exc:
            return _error(explain(spec.name, exc))
        except Exception as exc:  # a tool error, never a dead server
            logger.exception("tool %s failed", spec.name)
            return _error(f"{spec.name} failed: {type(exc).__name__}: {exc}")
        catalog.seen()
        catalog.answered.set()
        if spec.changes_graph:
            await _notify(subscribers)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=reply.text)],
            structured_content=reply.structured,
            is_error=False,
        )

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    name="knowledge-graph",
                    title="Knowledge Graph",
                    uri=RESOURCE_URI,
                    description="The full knowledge graph with all entities and relations",
                    mime_type="application/json",
                )
            ]
        )

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        if str(params.uri) != RESOURCE_URI:
            raise MCPError(types.INVALID_PARAMS, f"Resource {params.uri} not found")
        graph = await anyio.to_thread.run_sync(lambda: services.kg.read_graph())
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=RESOURCE_URI, mime_type="application/json", text=json_text(graph)
                )
            ]
        )

    async def subscribe(
        ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        if str(params.uri) == RESOURCE_URI:
            subscribers.add(_connection(ctx))
        return types.EmptyResult()

    async def unsubscribe(
        ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        subscribers.discard(_connection(ctx))
        return types.EmptyResult()

    server: Server[Any] = Server(
        "rdfmem",
        version=_version(),
        instructions=_instructions(tools),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
    )
    server_tools[server] = catalog
    return server


#: Each built server's tools, so the serving functions can load them off the request path.
server_tools: weakref.WeakKeyDictionary[Server[Any], _Tools] = weakref.WeakKeyDictionary()


def _instructions(tools: Sequence[str]) -> str:
    if all(name in OFFICIAL for name in tools):
        return _INSTRUCTIONS_OFFICIAL
    said = [text for prefix, text in _FAMILIES.items() if any(t.startswith(prefix) for t in tools)]
    return _INSTRUCTIONS + (", ".join(said) + "." if said else "")


def _elsewhere(spec: Spec) -> Callable[[Services, dict[str, Any], Client], Reply]:
    """``spec.run`` vouching that it leaves the knowledge graph alone (rdfmem's own tools
    write other graphs), so the knowledge graph's mirror is not read again after it."""

    def run(services: Services, arguments: dict[str, Any], client: Client) -> Reply:
        with services.kg.writes_elsewhere():
            return spec.run(services, arguments, client)

    return run


def _connection(ctx: ServerRequestContext[Any]) -> Any:
    """The client's connection: it outlives the request's ``ServerSession`` (one per
    request in the SDK), and sends notifications on the client's standalone channel."""
    session: ServerSession = ctx.session
    return getattr(session, "_connection", session)


async def _notify(subscribers: weakref.WeakSet[Any]) -> None:
    for connection in list(subscribers):
        try:
            await connection.send_resource_updated(RESOURCE_URI)
        except Exception:  # a client gone away: forget it
            subscribers.discard(connection)


#: Seconds the knowledge graph waits to be read into memory for a first call to be answered.
WARM_AFTER = 1.0
#: Seconds without a request after which the knowledge graph is read into memory (a host
#: sends a few requests in a row at start: ``tools/list`` after the first ``tools/call``).
QUIET = 0.2


def prepare(
    services: Services,
    server: Server[Any],
    after: threading.Event | None = None,
    stopping: threading.Event | None = None,
) -> None:
    """On a thread, once ``after`` is set (the ``initialize`` answer is out: until then the
    thread would hold the interpreter the answer needs): load the tools and open the store
    (bringing a memory.jsonl in), so the first calls do not wait for them; then, once a
    first call was answered (or after ``WARM_AFTER`` seconds), read the knowledge graph into
    memory when no request came for ``QUIET`` seconds (or after ``WARM_AFTER`` more), unless
    the server is ``stopping`` (reading it would hold up closing the store). Until then
    ``search_nodes`` and ``open_nodes`` ask the store for just what they need, and do not
    wait for the whole graph to be read."""
    tools = server_tools[server]

    def prepare() -> None:
        if after is not None:
            after.wait()
        try:
            tools.load()
            services.store  # noqa: B018 - opened here, off the request path
            tools.answered.wait(WARM_AFTER)
            tools.quiet(QUIET, most=WARM_AFTER)
            if stopping is None or not stopping.is_set():
                services.kg.warm()
        except Exception:  # the first call will report it
            logger.exception("opening the memory failed")

    threading.Thread(target=prepare, name="rdfmem-mcp-prepare", daemon=True).start()


class _Sends(Protocol):
    async def send(self, item: SessionMessage, /) -> None: ...
    async def aclose(self) -> None: ...


class _FirstSent:
    """A write stream that sets ``sent`` once its first message (the ``initialize``
    answer) is out."""

    def __init__(self, stream: _Sends, sent: threading.Event) -> None:
        self._stream = stream
        self._sent = sent

    async def send(self, item: SessionMessage, /) -> None:
        await self._stream.send(item)
        self._sent.set()

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> _FirstSent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def serve_streams(
    server: Server[Any],
    answered: threading.Event,
    stdin: anyio.AsyncFile[str] | None = None,
    stdout: anyio.AsyncFile[str] | None = None,
) -> None:
    """One MCP session over ``stdin`` and ``stdout`` (this process's when None), until the
    client closes them; ``answered`` is set once the ``initialize`` answer is out."""
    async with stdio_server(stdin=stdin, stdout=stdout) as (read, write):
        options = server.create_initialization_options()
        await server.run(read, _FirstSent(write, answered), options)


def serve_stdio(services: Services, tools: Sequence[str] = PRESETS[DEFAULT]) -> None:
    """Serve MCP over stdin/stdout until the client closes them."""
    server = build_server(services, tools)
    answered, stopping = threading.Event(), threading.Event()
    prepare(services, server, after=answered, stopping=stopping)

    async def main() -> None:
        await serve_streams(server, answered)

    try:
        anyio.run(main)  # a client gone before its answer leaves the store unopened
    finally:
        stopping.set()


def serve_http(
    services: Services,
    tools: Sequence[str] = PRESETS[DEFAULT],
    *,
    host: str = "127.0.0.1",
    port: int = 7880,
    token: str,
    allowed_hosts: Sequence[str] = (),
) -> None:
    """Serve MCP's streamable HTTP transport at ``http://host:port/mcp`` until stopped, to
    callers with ``Authorization: Bearer token`` and a ``Host`` and ``Origin`` of this
    machine or ``allowed_hosts`` (whatever ``host`` is spelt)."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    from rdfmem.mcp.http_gate import Gate

    server = build_server(services, tools)
    # The gate checks Host and Origin for every address; the SDK's own check (on only for
    # loopback spellings) would refuse the names allowed with --allowed-host.
    app = server.streamable_http_app(
        host=host,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    gated = Gate(app, token=token, allowed_hosts=(*allowed_hosts, host))
    prepare(services, server)
    uvicorn.run(gated, host=host, port=port, log_level="warning")
