"""``rdfmem mcp STORE --http`` (streamable HTTP at /mcp) through the SDK's ``ClientSession``,
and concurrent writers: many clients of one server, and many servers on one SPARQL server
lose nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from servers import Server
from test_mcp_support import (
    call,
    every_tool,
    http_server,
    http_session,
    ok,
    rdfmem_params,
    stdio_session,
    text_of,
)

CLIENTS = 4
CALLS = 40
ENTITY = {"name": "Shared", "entityType": "thing", "observations": []}


def test_tools_resource_and_errors_over_http(tmp_path: Path) -> None:
    async def main(url: str) -> None:
        async with http_session(url) as s:
            tools = [t.name for t in (await s.list_tools()).tools]
            assert tools[:3] == ["create_entities", "create_relations", "add_observations"]
            alice = {"name": 'A "}>', "entityType": "person", "observations": ["x\ny"]}
            assert ok(await call(s, "create_entities", {"entities": [alice]})) == {
                "entities": [alice]
            }
            graph = ok(await call(s, "search_nodes", {"query": "X\nY"}))
            assert graph == {"entities": [alice], "relations": []}
            resource = await s.read_resource("memory://knowledge-graph")
            assert json.loads(resource.contents[0].text) == graph  # type: ignore[union-attr]
            bad = await s.call_tool(
                "add_observations", {"observations": [{"entityName": 3, "contents": []}]}
            )
            assert bad.is_error and "entityName: expected a string" in text_of(bad)
            missing = await s.call_tool("nope", {})
            assert missing.is_error and "Tool nope not found" in text_of(missing)
            assert ok(await call(s, "open_nodes", {"names": ['A "}>']}))["entities"] == [alice]
        async with http_session(url) as again:  # a second client sees the first one's write
            assert ok(await call(again, "read_graph", {}))["entities"] == [alice]

    with http_server(str(tmp_path / "mem"), log=tmp_path / "server.log") as url:
        anyio.run(main, url)


def test_every_tool_over_http(tmp_path: Path) -> None:
    async def main(url: str) -> None:
        async with http_session(url) as s:
            await every_tool(s)

    with http_server(str(tmp_path / "mem"), log=tmp_path / "server.log") as url:
        anyio.run(main, url)


async def _writer(session: Any, client: int) -> None:
    for i in range(CALLS):
        contents = [f"client {client} observation {i}"]
        result = ok(
            await call(
                session,
                "add_observations",
                {"observations": [{"entityName": "Shared", "contents": contents}]},
            )
        )
        assert result["results"][0]["addedObservations"] == contents


async def _observations(session: Any) -> list[str]:
    opened = ok(await call(session, "open_nodes", {"names": ["Shared"]}))
    observations: list[str] = opened["entities"][0]["observations"]
    return observations


def test_four_http_clients_lose_nothing(tmp_path: Path) -> None:
    async def client(url: str, n: int) -> None:
        async with http_session(url) as s:
            await _writer(s, n)

    async def main(url: str) -> None:
        async with http_session(url) as s:
            ok(await call(s, "create_entities", {"entities": [ENTITY]}))
        async with anyio.create_task_group() as group:
            for n in range(CLIENTS):
                group.start_soon(client, url, n)
        async with http_session(url) as s:
            observations = await _observations(s)
        assert len(observations) == CLIENTS * CALLS == 160
        assert len(set(observations)) == 160

    with http_server(str(tmp_path / "mem"), log=tmp_path / "server.log") as url:
        anyio.run(main, url)


def test_several_servers_on_one_oxigraph_server_lose_nothing(oxigraph_server: Server) -> None:
    oxigraph_server.wipe()
    params = rdfmem_params(oxigraph_server.query_url, "--update-url", oxigraph_server.update_url)

    async def client(n: int) -> None:
        async with stdio_session(params) as s:
            await _writer(s, n)

    async def main() -> None:
        async with stdio_session(params) as s:
            ok(await call(s, "create_entities", {"entities": [ENTITY]}))
        async with anyio.create_task_group() as group:
            for n in range(CLIENTS):
                group.start_soon(client, n)
        async with stdio_session(params) as s:
            observations = await _observations(s)
            assert len(observations) == len(set(observations)) == CLIENTS * CALLS
            again = await call(
                s, "create_entities", {"entities": [ENTITY | {"observations": ["x"]}]}
            )
            assert ok(again) == {"entities": []}  # one entity, however many servers

    anyio.run(main)
