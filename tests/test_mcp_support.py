"""Helpers of the ``rdfmem mcp`` tests (no tests here): real servers, real MCP clients.

Every session is the SDK's own ``mcp.ClientSession``, over stdio to a spawned
``python -m rdfmem mcp …`` or over streamable HTTP to a served process.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolResult, TextContent

__all__ = [
    "HOSTILE",
    "TOKEN",
    "call",
    "every_tool",
    "free_port",
    "http_server",
    "http_session",
    "ok",
    "rdfmem_params",
    "stdio_session",
    "text_of",
]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")}
    env["PYTHONWARNINGS"] = "ignore"  # a server's warnings go to its stderr, not the protocol
    return env


def rdfmem_params(*args: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    """``python -m rdfmem mcp ARGS`` as an MCP stdio server, offering every tool unless
    ARGS say ``--tools`` (``env`` adds to the environment)."""
    tools = [] if "--tools" in args else ["--tools", "all"]
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "rdfmem", "mcp", *args, *tools],
        env={**_env(), **(env or {})},
    )


@asynccontextmanager
async def stdio_session(
    params: StdioServerParameters, errlog: Any = None
) -> AsyncIterator[ClientSession]:
    """An initialised client session with a stdio server process."""
    with open(os.devnull, "w") as devnull:
        async with (
            stdio_client(params, errlog=errlog or devnull) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


#: The bearer token of the servers ``http_server`` starts.
TOKEN = "test-token-of-rdfmem-mcp"


@asynccontextmanager
async def http_session(url: str, token: str | None = TOKEN) -> AsyncIterator[ClientSession]:
    """An initialised client session with a streamable HTTP server, sending ``token``."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with (
        create_mcp_http_client(headers=headers) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def http_server(store: str, *args: str, log: Path) -> Iterator[str]:
    """``rdfmem mcp STORE --http`` on a free loopback port; yields its /mcp URL."""
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rdfmem",
                "mcp",
                store,
                "--http",
                "--port",
                str(port),
                "--tools",
                "all",
                *args,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**_env(), "RDFMEM_TOKEN": TOKEN},
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"rdfmem mcp --http exited: {log.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"rdfmem mcp --http did not start: {log.read_text()}"
                    ) from exc
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def call(session: ClientSession, name: str, arguments: dict[str, Any]) -> CallToolResult:
    """A tool call (the SDK checks structured results against the tool's output schema)."""
    return await session.call_tool(name, arguments)


def text_of(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def ok(result: CallToolResult) -> Any:
    """The structured result of a successful call (or its JSON text when unstructured)."""
    assert not result.is_error, text_of(result)
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(text_of(result))


HOSTILE = 'Robert"); DROP } <x> .\n# "" \\u0000'


async def every_tool(s: ClientSession) -> None:
    """Every tool once, and the resource, as a model would call them."""
    people = [
        {"name": "Alice", "entityType": "person", "observations": ["Likes tea"]},
        {"name": HOSTILE, "entityType": "person", "observations": [HOSTILE]},
    ]
    assert ok(await call(s, "create_entities", {"entities": people})) == {"entities": people}
    relation = {"from": "Alice", "to": HOSTILE, "relationType": "knows"}
    assert ok(await call(s, "create_relations", {"relations": [relation]})) == {
        "relations": [relation]
    }
    added = await call(
        s,
        "add_observations",
        {"observations": [{"entityName": HOSTILE, "contents": ["x"]}]},
    )
    assert ok(added) == {"results": [{"entityName": HOSTILE, "addedObservations": ["x"]}]}
    found = ok(await call(s, "search_nodes", {"query": "TEA"}))
    assert [e["name"] for e in found["entities"]] == ["Alice"]
    assert found["relations"] == [relation]
    opened = ok(await call(s, "open_nodes", {"names": [HOSTILE]}))
    assert opened["entities"][0]["observations"] == [HOSTILE, "x"]
    resource = await s.read_resource("memory://knowledge-graph")
    graph = ok(await call(s, "read_graph", {}))
    assert json.loads(resource.contents[0].text) == graph  # type: ignore[union-attr]
    deletion = {"entityName": HOSTILE, "observations": ["x"]}
    done = ok(await call(s, "delete_observations", {"deletions": [deletion]}))
    assert done == {"success": True, "message": "Observations deleted successfully"}
    ok(await call(s, "delete_relations", {"relations": [relation]}))
    ok(await call(s, "delete_entities", {"entityNames": [HOSTILE]}))
    assert ok(await call(s, "read_graph", {})) == {
        "entities": [people[0]],
        "relations": [],
    }

    note = {"scope": "global", "title": "Build steps", "content": "run make test"}
    assert ok(await call(s, "memory_save", note))["slug"] == "build-steps"
    hits = ok(await call(s, "memory_search", {"query": "make test"}))["memories"]
    assert hits[0]["title"] == "Build steps" and hits[0]["score"] > 0
    read = ok(await call(s, "memory_read", {"scope": "global", "title": "Build steps"}))
    assert read["content"] == "run make test"
    assert ok(await call(s, "memory_list", {}))["titles"] == ["Build steps"]
    ok(await call(s, "memory_forget", {"scope": "global", "title": "Build steps"}))
    gone = await call(s, "memory_read", {"scope": "global", "title": "Build steps"})
    assert gone.is_error

    goal = ok(await call(s, "decision_add_node", {"type": "goal", "label": "Ship", "id": "g"}))
    assert goal["status"] == "active"
    ok(await call(s, "decision_add_node", {"type": "decision", "label": "Use RDF", "id": "d"}))
    ok(await call(s, "decision_add_node", {"type": "decision", "label": "Use X", "id": "x"}))
    ok(await call(s, "decision_add_edge", {"from_id": "g", "to_id": "d", "type": "leads_to"}))
    ok(await call(s, "decision_update_node", {"id": "d", "confidence": 0.9}))
    ok(await call(s, "decision_supersede", {"old_id": "x", "new_id": "d"}))
    got = ok(await call(s, "decision_get", {"id": "d"}))
    assert got["confidence"] == 0.9 and len(got["incoming"]) == 1
    path = ok(
        await call(s, "decision_query", {"name": "path_between", "from_id": "g", "to_id": "d"})
    )
    assert [n["id"] for n in path["nodes"]] == ["g", "d"]
    goals = ok(await call(s, "decision_query", {"name": "active_goals"}))
    assert [n["id"] for n in goals["nodes"]] == ["g"]

    lesson = {"id": "g1", "content": "Tea in the morning", "level": 0, "confidence": 0.7}
    ok(await call(s, "generalisation_save", lesson))
    ok(
        await call(
            s,
            "generalisation_save",
            {"id": "g2", "content": "Hot drinks", "level": 1, "confidence": 0.8,
             "generalises": ["g1"]},
        )
    )  # fmt: skip
    hits = ok(await call(s, "generalisation_search", {"text": "tea"}))["generalisations"]
    assert hits[0]["id"] == "g1"
    lineage = ok(await call(s, "generalisation_list", {"id": "g2"}))["generalisations"]
    assert [g["id"] for g in lineage] == ["g1"]

    rows = ok(
        await call(
            s,
            "sparql_query",
            # The memory as it is now: its history graphs (kept by default) left out.
            {"query": "PREFIX rm: <https://w3id.org/rdfmem#> SELECT ?n WHERE { GRAPH ?g "
             "{ ?e rm:entityName ?n } FILTER(!STRSTARTS(STR(?g), 'urn:rdfmem:history:')) }"},
        )
    )  # fmt: skip
    bindings = rows["results"]["bindings"]
    assert [b["n"]["value"] for b in bindings] == ["Alice"] and rows["truncated"] is False
    stats = ok(await call(s, "stats", {}))
    assert stats["knowledge_graph"]["entities"] == 1
