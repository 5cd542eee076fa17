"""``rdfmem mcp --tools``: what a server offers, schemas that offer only what it can do, and
tool errors that say what to pass instead, in the tool's own argument names. Through the
SDK's ``ClientSession`` over stdio to a spawned ``python -m rdfmem mcp``."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import anyio
from mcp import ClientSession
from test_mcp_support import call, ok, rdfmem_params, stdio_session, text_of

from rdfmem.mcp.pages import estimate_tokens
from rdfmem.mcp.toolsets import ALL, MEMORY, OFFICIAL


async def _names(*args: str) -> list[str]:
    async with stdio_session(rdfmem_params(":memory:", *args)) as s:
        return [t.name for t in (await s.list_tools()).tools]


def _listing_tokens(tools: list[Any]) -> int:
    dumped = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
    text = json.dumps(dumped, separators=(",", ":"), ensure_ascii=False)
    return estimate_tokens(text)


def test_presets_and_names_choose_the_tools() -> None:
    async def main() -> None:
        assert await _names("--tools", "official") == list(OFFICIAL)
        assert await _names("--tools", "memory") == list(MEMORY)
        assert await _names("--tools", "all") == list(ALL)
        assert await _names("--tools", "stats, read_graph") == ["read_graph", "stats"]
        params = rdfmem_params(":memory:", "--tools", "official")
        params.args.remove("--tools")  # the default: no --tools at all
        params.args.remove("official")
        async with stdio_session(params) as s:
            assert [t.name for t in (await s.list_tools()).tools] == list(MEMORY)

    anyio.run(main)


def test_an_unknown_tool_name_is_a_usage_error_listing_the_names() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rdfmem", "mcp", ":memory:", "--tools", "read_graph,nope"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2
    assert "unknown tool 'nope'" in done.stderr and "official, memory, all" in done.stderr


def test_a_tool_left_out_says_how_to_offer_it() -> None:
    async def main() -> None:
        async with stdio_session(rdfmem_params(":memory:", "--tools", "official")) as s:
            result = await s.call_tool("memory_save", {"scope": "global"})
            assert result.is_error and "--tools all" in text_of(result)
            assert "read_graph" in text_of(result)

    anyio.run(main)


def test_the_tool_list_is_short_for_each_preset() -> None:
    async def main() -> dict[str, int]:
        sizes = {}
        for preset in ("official", "memory", "all"):
            async with stdio_session(rdfmem_params(":memory:", "--tools", preset)) as s:
                sizes[preset] = _listing_tokens((await s.list_tools()).tools)
        return sizes

    sizes = anyio.run(main)
    # chars/4 estimates of the tools/list answer (docs/mcp.md has the figures)
    assert sizes["official"] < sizes["memory"] < sizes["all"]
    # rdfmem's five memory_* tools add about a third to the official nine; every tool is
    # about twice the official list (the official schemas, kept byte for byte, are long)
    assert sizes["memory"] <= 1.35 * sizes["official"], sizes
    assert sizes["all"] <= 2.25 * sizes["official"], sizes


def _scope(tools: dict[str, Any], name: str) -> list[str]:
    enum: list[str] = tools[name].input_schema["properties"]["scope"]["enum"]
    return enum


def test_schemas_offer_the_project_scope_only_with_a_project() -> None:
    async def main() -> None:
        async with stdio_session(rdfmem_params(":memory:")) as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            for name in ("memory_save", "memory_read", "memory_list", "memory_forget"):
                assert _scope(tools, name) == ["global", "session"], name
            refused = await s.call_tool(
                "memory_save", {"scope": "project", "title": "A", "content": "x"}
            )
            assert refused.is_error
            assert "scope: must be one of 'global', 'session'" in text_of(refused)
        async with stdio_session(rdfmem_params(":memory:", "--project", "web")) as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert _scope(tools, "memory_save") == ["global", "project", "session"]
            saved = ok(
                await call(s, "memory_save", {"scope": "project", "title": "A", "content": "x"})
            )
            assert saved["scope"] == "project"

    anyio.run(main)


async def _error(s: ClientSession, tool: str, arguments: dict[str, Any]) -> str:
    result = await s.call_tool(tool, arguments)
    assert result.is_error, (tool, arguments, text_of(result))
    return text_of(result)


def test_errors_name_the_tools_arguments_and_what_to_pass() -> None:
    async def main() -> None:
        async with stdio_session(rdfmem_params(":memory:")) as s:
            text = await _error(s, "memory_save", {"scope": "session", "title": "A",
                                                   "content": "x"})  # fmt: skip
            assert text.endswith("session: scope 'session' needs session (a conversation id); "
                                 "pass session, or scope 'global'")  # fmt: skip
            text = await _error(s, "memory_read", {"scope": "global", "title": "Nothing"})
            assert "memory_list gives the titles" in text
            text = await _error(s, "decision_query", {"name": "path_between", "from_id": "a"})
            assert "to_id: path_between needs from_id and to_id" in text
            text = await _error(s, "decision_query", {"name": "ancestors"})
            assert "node_id: ancestors needs node_id; pass node_id" in text
            text = await _error(s, "decision_get", {"id": "ghost"})
            assert "no decision node with id 'ghost'; pass the id of an existing node" in text
            text = await _error(s, "generalisation_list", {})
            assert "pass id" in text and "or level" in text
            text = await _error(s, "memory_save", {"scope": "global", "title": "--",
                                                   "content": "x"})  # fmt: skip
            assert text.startswith("title:") and "pass a title" in text
            for text in [
                await _error(s, "decision_add_edge", {"from_id": "a", "to_id": "b",
                                                      "type": "leads_to"}),
                await _error(s, "memory_search", {"query": "x", "limit": 0}),
                await _error(s, "read_graph_page", {"cursor": "zz"}),
            ]:  # fmt: skip
                assert "Make" not in text and "Memories(" not in text and "()" not in text

    anyio.run(main)
