"""``rdfmem mcp`` is a drop-in for the official MCP memory server: the same script of calls,
run against both through the SDK's ``ClientSession``, gets the same answers call by call,
and the nine tools are listed with the same schemas, titles and hints.

The official server (npm ``@modelcontextprotocol/server-memory``) is installed by npm into a
cache folder (``RDFMEM_NPM_CACHE``, default ``~/.cache/rdfmem-tests/npm``) on first use.
Without node and npm the test skips locally and fails in CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import need
from mcp import ClientSession, StdioServerParameters
from mcp.types import CallToolResult
from test_mcp_support import rdfmem_params, stdio_session, text_of

#: The official server's version this comparison was written against.
OFFICIAL_VERSION = "2026.8.31"
PACKAGE = "@modelcontextprotocol/server-memory"
NINE = [
    "create_entities",
    "create_relations",
    "add_observations",
    "delete_entities",
    "delete_observations",
    "delete_relations",
    "read_graph",
    "search_nodes",
    "open_nodes",
]
ODD = 'Qu"ote }> \n\t naïve ÄÖ 東京 \\ {x}'


def _entity(name: str, kind: str, *observations: str) -> dict[str, Any]:
    return {"name": name, "entityType": kind, "observations": list(observations)}


def _relation(source: str, target: str, kind: str) -> dict[str, str]:
    return {"from": source, "to": target, "relationType": kind}


#: (tool, arguments, compare text): the text of validation errors differs (each SDK words
#: its own), everything else must be the same.
SCRIPT: list[tuple[str, dict[str, Any], bool]] = [
    ("read_graph", {}, True),
    ("create_entities", {"entities": [_entity("Alice", "person", "Likes tea", "Reads"),
                                      _entity("Acme", "Organization"),
                                      _entity(ODD, ODD, ODD)]}, True),
    ("create_entities", {"entities": [_entity("Alice", "robot", "x"), _entity("Bob", "person")]},
     True),
    ("create_relations", {"relations": [_relation("Alice", "Acme", "works_at"),
                                        _relation("Bob", "Alice", "knows"),
                                        _relation(ODD, "Nobody", ODD)]}, True),
    ("create_relations", {"relations": [_relation("Alice", "Acme", "works_at"),
                                        _relation("Acme", "Bob", "employs")]}, True),
    ("add_observations", {"observations": [{"entityName": "Alice",
                                            "contents": ["Reads", "Speaks Dutch"]},
                                           {"entityName": "Bob", "contents": ["Tall"]}]}, True),
    ("add_observations", {"observations": [{"entityName": "Bob", "contents": ["Short"]},
                                           {"entityName": "Ghost", "contents": ["x"]}]}, True),
    ("read_graph", {}, True),
    ("search_nodes", {"query": "alice"}, True),
    ("search_nodes", {"query": "ORGANIZ"}, True),
    ("search_nodes", {"query": "dutch"}, True),
    ("search_nodes", {"query": "äö"}, True),
    ("search_nodes", {"query": "nothing matches this"}, True),
    ("search_nodes", {"query": ""}, True),
    ("open_nodes", {"names": ["Bob", "Nobody", ODD]}, True),
    ("open_nodes", {"names": []}, True),
    ("delete_observations", {"deletions": [{"entityName": "Alice", "observations": ["Reads",
                                                                                    "never"]},
                                           {"entityName": "Ghost", "observations": ["x"]}]}, True),
    ("delete_relations", {"relations": [_relation("Bob", "Alice", "knows"),
                                        _relation("No", "Such", "thing")]}, True),
    ("read_graph", {}, True),
    ("delete_entities", {"entityNames": ["Acme", "Ghost"]}, True),
    ("read_graph", {}, True),
    ("create_entities", {"entities": [{"name": 1, "entityType": "t", "observations": []}]},
     False),
    ("add_observations", {"observations": "Alice"}, False),
    ("search_nodes", {}, False),
    ("no_such_tool", {}, False),
    ("open_nodes", {"names": ["Alice", "Bob"]}, True),
]  # fmt: skip


def _official(tmp_path: Path) -> StdioServerParameters:
    need(
        shutil.which("node") is not None and shutil.which("npm") is not None,
        "node and npm (the official MCP memory server runs on Node.js)",
    )
    cache = Path(os.environ.get("RDFMEM_NPM_CACHE", Path.home() / ".cache/rdfmem-tests/npm"))
    folder = cache / f"server-memory-{OFFICIAL_VERSION}"
    entry = folder / "node_modules" / PACKAGE / "dist" / "index.js"
    if not entry.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder),
             f"{PACKAGE}@{OFFICIAL_VERSION}"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        need(done.returncode == 0, f"npm install {PACKAGE}: {done.stderr[-500:]}")
    env = {"PATH": os.environ.get("PATH", ""), "MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}
    return StdioServerParameters(command="node", args=[str(entry)], env=env)


def _answer(result: CallToolResult, compare_text: bool) -> dict[str, Any]:
    answer: dict[str, Any] = {"error": bool(result.is_error)}
    if not result.is_error or compare_text:
        answer["text"] = text_of(result)
        answer["structured"] = result.structured_content
    return answer


async def _run(params: StdioServerParameters) -> dict[str, Any]:
    async with stdio_session(params) as session:
        return await _script(session)


async def _script(session: ClientSession) -> dict[str, Any]:
    tools = {t.name: t for t in (await session.list_tools()).tools}
    listing = {
        name: tools[name].model_dump(
            mode="json", by_alias=True, exclude_none=True, exclude={"execution", "meta"}
        )
        for name in NINE
    }
    answers = []
    for name, arguments, compare_text in SCRIPT:
        answers.append(_answer(await session.call_tool(name, arguments), compare_text))
    resources = (await session.list_resources()).resources
    resource = await session.read_resource("memory://knowledge-graph")
    return {
        "tools": listing,
        "answers": answers,
        "resources": [r.model_dump(mode="json", exclude_none=True) for r in resources],
        "resource": [c.model_dump(mode="json", exclude_none=True) for c in resource.contents],
    }


@pytest.mark.timeout(600)
def test_same_answers_as_the_official_server(tmp_path: Path) -> None:
    official = anyio.run(_run, _official(tmp_path))
    ours = anyio.run(_run, rdfmem_params(":memory:"))
    assert ours["tools"] == official["tools"]
    for i, (step, theirs, mine) in enumerate(
        zip(SCRIPT, official["answers"], ours["answers"], strict=True)
    ):
        assert mine == theirs, f"call {i}: {step[0]}({step[1]})"
    assert ours["resources"] == official["resources"]
    assert ours["resource"] == official["resource"]
    # The official server's file reads back through rdfmem import as the same graph.
    assert (tmp_path / "memory.jsonl").is_file()


async def _listing(params: StdioServerParameters) -> list[dict[str, Any]]:
    async with stdio_session(params) as session:
        return [
            t.model_dump(
                mode="json", by_alias=True, exclude_none=True, exclude={"execution", "meta"}
            )
            for t in (await session.list_tools()).tools
        ]


@pytest.mark.timeout(600)
def test_tools_official_lists_exactly_the_official_servers_tools(tmp_path: Path) -> None:
    """``rdfmem mcp --tools official``: the official server's tools/list answer, tool for
    tool (names, titles, descriptions, input and output schemas, hints), nothing more."""
    theirs = anyio.run(_listing, _official(tmp_path))
    ours = anyio.run(_listing, rdfmem_params(":memory:", "--tools", "official"))
    assert [t["name"] for t in theirs] == NINE
    assert ours == theirs
