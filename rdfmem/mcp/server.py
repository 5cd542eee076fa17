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
import weakref
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import anyio
import mcp.types as types
import pydantic
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from rdfmem.core.errors import RdfMemError
from rdfmem.mcp.checks import ToolInputError, check_arguments
from rdfmem.mcp.graph import Client
from rdfmem.mcp.kg_tools import KG_TOOLS, RESOURCE_URI, graph_text
from rdfmem.mcp.own_tools import OWN_TOOLS
from rdfmem.mcp.services import Services
from rdfmem.mcp.sparql import SPARQL_TOOL
from rdfmem.mcp.specs import Reply, Spec

__all__ = ["TOOLS", "build_server", "serve_http", "serve_stdio"]

logger = logging.getLogger(__name__)

#: Every tool, the official server's nine first.
TOOLS: list[Spec] = [*KG_TOOLS, *OWN_TOOLS, SPARQL_TOOL]

_INSTRUCTIONS = (
    "Long-term memory kept as RDF by rdfmem. The knowledge graph tools (create_entities, "
    "add_observations, search_nodes, open_nodes …) work as in the official memory server. "
    "memory_* keep titled notes per scope, decision_* a graph of goals and decisions, "
    "generalisation_* abstracted lessons; sparql_query reads everything."
)


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
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    if info is None:
        return Client()
    return Client(info.name or "unknown", info.version or "")


def build_server(services: Services) -> Server[Any]:
    """An MCP server over ``services`` (one store, one project)."""
    by_name = {spec.name: spec for spec in TOOLS}
    kg_names = {spec.name for spec in KG_TOOLS}
    listing = [_tool(spec) for spec in TOOLS]
    subscribers: weakref.WeakSet[Any] = weakref.WeakSet()
    check = services.limits

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listing)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        spec = by_name.get(params.name)
        if spec is None:
            return _error(f"Tool {params.name} not found; this server has: {', '.join(by_name)}")
        try:
            arguments = check_arguments(spec.input_schema, params.arguments, check)
        except ToolInputError as exc:
            return _error(f"Invalid arguments for tool {spec.name}: {exc}")
        client = _client(ctx)
        run = spec.run
        if spec.name not in kg_names and not spec.annotations["readOnlyHint"]:
            run = _elsewhere(spec)
        try:
            reply = await anyio.to_thread.run_sync(run, services, arguments, client)
        except (RdfMemError, pydantic.ValidationError) as exc:
            return _error(str(exc))
        except Exception as exc:  # a tool error, never a dead server
            logger.exception("tool %s failed", spec.name)
            return _error(f"{spec.name} failed: {type(exc).__name__}: {exc}")
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
        graph = await anyio.to_thread.run_sync(services.kg.read_graph)
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=RESOURCE_URI, mime_type="application/json", text=graph_text(graph)
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

    return Server(
        "rdfmem",
        version=_version(),
        instructions=_INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
    )


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


def _warm(services: Services) -> None:
    """Read the knowledge graph into memory on a thread while the client connects."""

    def warm() -> None:
        try:
            services.kg.warm()
        except Exception:  # the first call will report it
            logger.exception("reading the knowledge graph failed")

    threading.Thread(target=warm, name="rdfmem-mcp-warm", daemon=True).start()


def serve_stdio(services: Services) -> None:
    """Serve MCP over stdin/stdout until the client closes them."""
    server = build_server(services)
    _warm(services)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


def serve_http(services: Services, *, host: str = "127.0.0.1", port: int = 7880) -> None:
    """Serve MCP's streamable HTTP transport at ``http://host:port/mcp`` until stopped."""
    import uvicorn

    server = build_server(services)
    app = server.streamable_http_app(host=host)
    _warm(services)
    uvicorn.run(app, host=host, port=port, log_level="warning")
