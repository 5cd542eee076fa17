"""Memory with time over MCP (issue 24): ``KnowledgeGraph`` reads as of a moment and tells
an entity's history; an MCP server on a store keeping history attributes every write to
the calling client (its ``clientInfo``), answers ``history`` and ``read_graph_as_of``, and
its read tools take ``asOf``. Through the SDK's ``ClientSession`` over stdio to a real
server process, on an on-disk store and on an Oxigraph server."""

from __future__ import annotations

import datetime as dt
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import StoreFactory
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import Implementation
from servers import Server
from test_mcp_support import call, ok, rdfmem_params, text_of
from test_mcp_support import stdio_session as stdio_session_of

from rdfmem.core.errors import HistoryUnavailable
from rdfmem.mcp.client import Client
from rdfmem.mcp.graph import KnowledgeGraph
from rdfmem.mcp.toolsets import ALL, MEMORY, OFFICIAL

UTC = dt.timezone.utc
CLIENT = "urn:rdfmem:mcp:client:history-test/1.0"
SERVER_AGENT = "urn:agent:mcp-server"

#: A server process over a store keeping history (as ``rdfmem mcp`` opens it by default).
SERVE = """
import sys
from rdfmem import RdfStore
from rdfmem.mcp.server import serve_stdio
from rdfmem.mcp.services import Services
from rdfmem.mcp.toolsets import ALL
spec, history = sys.argv[1], sys.argv[2] == "on"
options = {"history": history, "agent": "urn:agent:mcp-server"} if history else {}
if spec.startswith("http"):
    store = RdfStore.connect(spec, sys.argv[3], **options)
else:
    store = RdfStore.open(spec, **options)
serve_stdio(Services(store, "web"), ALL)
"""


def now() -> dt.datetime:
    return dt.datetime.now(UTC)


def stamp(moment: dt.datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


@asynccontextmanager
async def session(*args: str) -> AsyncIterator[ClientSession]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")}
    params = StdioServerParameters(
        command=sys.executable, args=["-c", SERVE, *args], env={**env, "PYTHONWARNINGS": "ignore"}
    )
    info = Implementation(name="history-test", version="1.0")
    with open(os.devnull, "w") as devnull:
        async with (
            stdio_client(params, errlog=devnull) as (read, write),
            ClientSession(read, write, client_info=info) as s,
        ):
            await s.initialize()
            yield s


# -- the library: KnowledgeGraph ----------------------------------------------------------


@pytest.mark.kv_contract  # also on Virtuoso (tests/servers.py)
def test_the_knowledge_graph_as_it_was_and_an_entitys_history(make_store: StoreFactory) -> None:
    kg = KnowledgeGraph(make_store(history=True, agent=SERVER_AGENT))
    claude = Client("claude-code", "1.2")
    people = [
        {"name": "Alice", "entityType": "person", "observations": ["Likes tea"]},
        {"name": "Acme", "entityType": "company", "observations": []},
    ]
    kg.create_entities(people, claude)
    kg.create_relations([{"from": "Alice", "to": "Acme", "relationType": "works_at"}], claude)
    then = now()
    kg.add_observations([{"entityName": "Alice", "contents": ["Speaks Dutch"]}])
    kg.delete_observations([{"entityName": "Alice", "observations": ["Likes tea"]}], claude)
    kg.delete_entities(["Acme"], claude)

    alice_then = {"name": "Alice", "entityType": "person", "observations": ["Likes tea"]}
    works = {"from": "Alice", "to": "Acme", "relationType": "works_at"}
    past = kg.read_graph(as_of=then)
    assert sorted(e["name"] for e in past["entities"]) == ["Acme", "Alice"]
    assert alice_then in past["entities"] and past["relations"] == [works]
    assert kg.read_graph()["entities"] == [
        {"name": "Alice", "entityType": "person", "observations": ["Speaks Dutch"]}
    ]
    assert kg.search_nodes("tea", as_of=then) == {"entities": [alice_then], "relations": [works]}
    assert kg.search_nodes("tea") == {"entities": [], "relations": []}
    assert kg.open_nodes(["Acme"], as_of=then)["entities"] == [people[1]]
    assert kg.open_nodes(["Acme"]) == {"entities": [], "relations": []}

    events = kg.history("Alice")
    assert [(e["action"], e["by"]) for e in events] == [
        ("create_entities", "urn:rdfmem:mcp:client:claude-code/1.2"),
        ("create_relations", "urn:rdfmem:mcp:client:claude-code/1.2"),
        ("add_observations", SERVER_AGENT),  # no client named: the store's agent
        ("delete_observations", "urn:rdfmem:mcp:client:claude-code/1.2"),
        ("delete_relations", "urn:rdfmem:mcp:client:claude-code/1.2"),
    ]
    assert events[0]["entityType"] == "person" and events[0]["observations"] == ["Likes tea"]
    assert events[1]["relations"] == [works]
    assert events[2]["observations"] == ["Speaks Dutch"]
    assert events[3]["observations"] == ["Likes tea"]
    assert [e["at"] for e in events] == sorted(e["at"] for e in events)
    assert dt.datetime.fromisoformat(events[2]["at"].replace("Z", "+00:00")) > then
    acme = kg.history("Acme")
    assert [e["action"] for e in acme] == ["create_entities", "create_relations", "delete_entities"]
    assert acme[-1]["relations"] == [works]
    assert kg.history("Nobody") == []


def test_the_knowledge_graph_without_history_says_how_to_get_it(make_store: StoreFactory) -> None:
    kg = KnowledgeGraph(make_store())
    kg.create_entities([{"name": "A", "entityType": "t", "observations": []}])
    with pytest.raises(HistoryUnavailable, match="history=True"):
        kg.history("A")
    with pytest.raises(HistoryUnavailable):
        kg.read_graph(as_of=now())
    assert kg.read_graph()["entities"][0]["name"] == "A"


# -- the tool lists -------------------------------------------------------------------------


def test_history_tools_are_in_all_and_the_default_list_stays_short() -> None:
    assert ALL[: len(OFFICIAL)] == OFFICIAL
    assert "history" in ALL and "read_graph_as_of" in ALL
    assert "history" not in MEMORY and "read_graph_as_of" not in MEMORY


# -- through MCP ------------------------------------------------------------------------------


async def _script(s: ClientSession) -> None:
    people = [{"name": "Alice", "entityType": "person", "observations": ["Likes tea"]}]
    ok(await call(s, "create_entities", {"entities": people}))
    note = {"scope": "project", "title": "Deploy Steps", "content": "Run the migration."}
    ok(await call(s, "memory_save", note))
    ok(await call(s, "decision_add_node", {"id": "ship", "type": "goal", "label": "Ship v1"}))
    then = stamp(now())
    ok(await call(s, "add_observations", {"observations": [
        {"entityName": "Alice", "contents": ["Speaks Dutch"]}]}))  # fmt: skip
    ok(await call(s, "delete_observations", {"deletions": [
        {"entityName": "Alice", "observations": ["Likes tea"]}]}))  # fmt: skip
    ok(await call(s, "memory_save", {**note, "content": "Migrate, then flip the flag."}))
    ok(await call(s, "decision_update_node", {"id": "ship", "status": "completed"}))

    # the official read tools answer the present; rdfmem's read the past
    assert ok(await call(s, "open_nodes", {"names": ["Alice"]}))["entities"][0]["observations"] == [
        "Speaks Dutch"
    ]
    past = ok(await call(s, "read_graph_as_of", {"asOf": then}))
    assert past["entities"] == people
    read = {"scope": "project", "title": "Deploy Steps"}
    assert ok(await call(s, "memory_read", {**read, "asOf": then}))["content"] == (
        "Run the migration."
    )
    assert ok(await call(s, "memory_read", read))["content"] == "Migrate, then flip the flag."
    assert ok(await call(s, "memory_list", {"asOf": then}))["titles"] == ["Deploy Steps"]
    early = stamp(dt.datetime(2000, 1, 1, tzinfo=UTC))
    assert ok(await call(s, "memory_list", {"asOf": early}))["titles"] == []
    hits = ok(await call(s, "memory_search", {"query": "migration", "asOf": then}))["memories"]
    assert hits[0]["content"] == "Run the migration."
    assert ok(await call(s, "decision_get", {"id": "ship", "asOf": then}))["status"] == "active"
    goals = ok(await call(s, "decision_query", {"name": "active_goals", "asOf": then}))
    assert [n["id"] for n in goals["nodes"]] == ["ship"]
    assert ok(await call(s, "decision_query", {"name": "active_goals"}))["nodes"] == []

    # history: every write attributed to this client (its clientInfo)
    entity = ok(await call(s, "history", {"entity": "Alice"}))["events"]
    assert [(e["action"], e["by"]) for e in entity] == [
        ("create_entities", CLIENT),
        ("add_observations", CLIENT),
        ("delete_observations", CLIENT),
    ]
    assert entity[2]["observations"] == ["Likes tea"]
    memory = ok(await call(s, "history", read))["events"]
    assert [(e["action"], e["memory"]["content"], e["by"]) for e in memory] == [
        ("memory_save", "Run the migration.", CLIENT),
        ("memory_save", "Migrate, then flip the flag.", CLIENT),
    ]
    assert memory[1]["changed"] == ["content"]
    node = ok(await call(s, "history", {"node_id": "ship"}))["events"]
    assert [(e["action"], e["node"]["status"]) for e in node] == [
        ("decision_add_node", "active"),
        ("decision_update_node", "completed"),
    ]
    assert node[1]["changed"] == ["status"]

    # bad input: a tool error saying what to pass
    bad = await call(s, "memory_read", {**read, "asOf": "last tuesday"})
    assert bad.is_error and "ISO 8601" in text_of(bad)
    both = await call(s, "history", {"entity": "Alice", "node_id": "ship"})
    assert both.is_error and "pass one of" in text_of(both)


def test_mcp_history_on_an_on_disk_store(tmp_path: Path) -> None:
    async def main() -> None:
        async with session(str(tmp_path / "memory"), "on") as s:
            await _script(s)

    anyio.run(main)


def test_mcp_history_on_an_oxigraph_server(oxigraph_server: Server) -> None:
    oxigraph_server.wipe()

    async def main() -> None:
        async with session(oxigraph_server.query_url, "on", oxigraph_server.update_url) as s:
            await _script(s)

    anyio.run(main)


def test_mcp_without_history_says_how_to_keep_it(tmp_path: Path) -> None:
    async def main() -> None:
        async with session(str(tmp_path / "memory"), "off") as s:
            ok(await call(s, "create_entities", {"entities": [
                {"name": "A", "entityType": "t", "observations": []}]}))  # fmt: skip
            result = await call(s, "history", {"entity": "A"})
            assert result.is_error and "history" in text_of(result)
            past = await call(s, "read_graph_as_of", {"asOf": stamp(now())})
            assert past.is_error and "history" in text_of(past)
            graph: Any = ok(await call(s, "read_graph", {}))
            assert graph["entities"][0]["name"] == "A"

    anyio.run(main)


def _cli_keeps_history() -> bool:
    from click.testing import CliRunner

    from rdfmem.cli.group import cli

    return "--no-history" in CliRunner().invoke(cli, ["mcp", "--help"]).output


def test_rdfmem_mcp_keeps_history_by_default(tmp_path: Path) -> None:
    if not _cli_keeps_history():
        pytest.skip("rdfmem mcp has no --history/--no-history option yet (docs/history.md)")

    async def main() -> None:
        params = rdfmem_params(str(tmp_path / "memory"))
        info = Implementation(name="history-test", version="1.0")
        with open(os.devnull, "w") as devnull:
            async with (
                stdio_client(params, errlog=devnull) as (read, write),
                ClientSession(read, write, client_info=info) as s,
            ):
                await s.initialize()
                ok(await call(s, "create_entities", {"entities": [
                    {"name": "A", "entityType": "t", "observations": []}]}))  # fmt: skip
                events = ok(await call(s, "history", {"entity": "A"}))["events"]
                assert [(e["action"], e["by"]) for e in events] == [("create_entities", CLIENT)]
        off = rdfmem_params(str(tmp_path / "memory"), "--no-history")
        async with stdio_session_of(off) as s:
            result = await call(s, "history", {"entity": "A"})
            assert result.is_error and "history" in text_of(result)

    anyio.run(main)
