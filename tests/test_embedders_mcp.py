"""``rdfmem mcp --embedder SPEC`` (and ``RDFMEM_EMBEDDER``) over stdio, through the MCP SDK's
own client: the named embedder ranks ``memory_search``; a store searched with an embedder of
another dimension says what to pass; a wrong spec stops the command before it serves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from test_mcp_support import call, ok, rdfmem_params, stdio_session, text_of

TESTS = str(Path(__file__).parent)  # toy_embedder.py, put on the server's PYTHONPATH
NOTES = [
    ("Pet", "the kitten purrs on the sofa"),
    ("Garage", "the sedan needs a new gearbox"),
    ("Kitchen", "bread and soup for dinner"),
]


def _env(**extra: str) -> dict[str, str]:
    return {"PYTHONPATH": TESTS, **extra}


async def _save_notes(session: Any) -> None:
    for title, content in NOTES:
        ok(
            await call(
                session, "memory_save", {"scope": "global", "title": title, "content": content}
            )
        )


async def _first(session: Any, query: str) -> str | None:
    found = ok(await call(session, "memory_search", {"query": query, "limit": 3}))["memories"]
    return found[0]["title"] if found else None


def test_embedder_module_attribute_ranks_memory_search(tmp_path: Path) -> None:
    folder = str(tmp_path / "memory")

    async def main() -> None:
        params = rdfmem_params(folder, "--embedder", "toy_embedder:ToyEmbedder", env=_env())
        async with stdio_session(params) as s:
            await _save_notes(s)
            # No memory holds these words: the toy embedder's meanings rank them.
            assert await _first(s, "feline") == "Pet"
            assert await _first(s, "vehicle") == "Garage"
            assert await _first(s, "a meal") == "Kitchen"
        # The same store, the embedder named by the environment (a LangChain-style one).
        env = _env(RDFMEM_EMBEDDER="toy_embedder:LangChainStyle")
        async with stdio_session(rdfmem_params(folder, env=env)) as s:
            assert await _first(s, "feline") == "Pet"

    anyio.run(main)


def test_a_store_saved_with_another_dimension_says_what_to_pass(tmp_path: Path) -> None:
    folder = str(tmp_path / "memory")

    async def main() -> None:
        params = rdfmem_params(folder, "--embedder", "toy_embedder:make_embedder", env=_env())
        async with stdio_session(params) as s:
            await _save_notes(s)
        async with stdio_session(rdfmem_params(folder, env=_env())) as s:  # hashing, 512
            result = await call(s, "memory_search", {"query": "feline"})
            assert result.is_error
            message = text_of(result)
            assert "3-dimension vectors" in message and "makes 512" in message
            assert "--embedder SPEC" in message and "RDFMEM_EMBEDDER" in message
            # The knowledge graph's tools do not depend on the embedder.
            assert ok(await call(s, "read_graph", {})) == {"entities": [], "relations": []}

    anyio.run(main)


def test_a_wrong_spec_stops_the_command_with_what_to_pass() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rdfmem", "mcp", ":memory:", "--embedder", "nowhere_xyz:Thing"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--embedder" in done.stderr and "no module named nowhere_xyz" in done.stderr
    assert "module:attribute" in done.stderr
