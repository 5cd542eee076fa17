"""Switching a host from the official memory server to ``rdfmem mcp`` is one changed
``command``: with only ``MEMORY_FILE_PATH`` set (the official server's variable), the SDK's
stdio client spawns ``rdfmem mcp`` with no STORE; the memory.jsonl is brought in once into
``memory.jsonl.rdfmem/`` beside it, never changed, never imported again, and a later start
finds the same memory."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
from mcp import StdioServerParameters
from test_mcp_support import call, ok, stdio_session

LINES = [
    {"type": "entity", "name": "Alice", "entityType": "person", "observations": ["Likes tea"]},
    {"type": "entity", "name": "Acme", "entityType": "organization", "observations": []},
    {"type": "relation", "from": "Alice", "to": "Acme", "relationType": "works_at"},
]


def _host(env: dict[str, str], *args: str) -> StdioServerParameters:
    """What a host starts: the same entry as for the official server, its command changed
    (here this Python with -m rdfmem, as ``rdfmem mcp config`` writes it)."""
    return StdioServerParameters(
        command=sys.executable, args=["-m", "rdfmem", "mcp", *args], env=env, cwd=os.getcwd()
    )


def _jsonl(folder: Path) -> Path:
    path = folder / "memory.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in LINES), encoding="utf-8")
    return path


def test_memory_file_path_alone_brings_the_official_memory_in_once(tmp_path: Path) -> None:
    path = _jsonl(tmp_path)
    before = path.read_bytes(), path.stat().st_mtime_ns
    env = {"MEMORY_FILE_PATH": str(path), "PYTHONWARNINGS": "ignore"}

    async def main() -> None:
        async with stdio_session(_host(env)) as s:
            found = ok(await call(s, "search_nodes", {"query": "tea"}))
            alice = {"name": "Alice", "entityType": "person", "observations": ["Likes tea"]}
            assert found["entities"] == [alice]
            assert found["relations"] == [{"from": "Alice", "to": "Acme",
                                           "relationType": "works_at"}]  # fmt: skip
            ok(await call(s, "delete_entities", {"entityNames": ["Acme"]}))
            bob = {"name": "Bob", "entityType": "person", "observations": []}
            ok(await call(s, "create_entities", {"entities": [bob]}))
        # a later start: the same memory, the import not done again (Acme stays deleted)
        async with stdio_session(_host(env)) as s:
            graph = ok(await call(s, "read_graph", {}))
            assert [e["name"] for e in graph["entities"]] == ["Alice", "Bob"]
            assert graph["relations"] == []

    anyio.run(main)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before  # the jsonl never changed
    assert (tmp_path / "memory.jsonl.rdfmem").is_dir()


def test_a_jsonl_store_argument_works_the_same(tmp_path: Path) -> None:
    path = _jsonl(tmp_path)

    async def main() -> None:
        async with stdio_session(_host({}, str(path))) as s:
            opened = ok(await call(s, "open_nodes", {"names": ["Acme"]}))
            assert [e["name"] for e in opened["entities"]] == ["Acme"]

    anyio.run(main)
    assert (tmp_path / "memory.jsonl.rdfmem").is_dir()


def test_without_store_or_variable_the_memory_is_in_the_home_folder(tmp_path: Path) -> None:
    async def main() -> None:
        async with stdio_session(_host({"HOME": str(tmp_path)})) as s:
            ok(await call(s, "create_entities", {"entities": [
                {"name": "Kept", "entityType": "t", "observations": []}]}))  # fmt: skip

    anyio.run(main)
    assert (tmp_path / ".rdfmem" / "memory").is_dir()


def test_a_broken_jsonl_is_reported_on_each_call_and_nothing_is_imported(tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    path.write_text('{"type":"entity","name":"A","entityType":"t","observations":[]}\n{oops\n')

    async def main() -> None:
        async with stdio_session(_host({"MEMORY_FILE_PATH": str(path)})) as s:
            result = await s.call_tool("read_graph", {})
            assert result.is_error
            assert "memory.jsonl" in result.content[0].text  # type: ignore[union-attr]

    anyio.run(main)
