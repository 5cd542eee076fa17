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
from mcp.types import CallToolResult, TextContent

__all__ = [
    "call",
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


def rdfmem_params(*args: str) -> StdioServerParameters:
    """``python -m rdfmem mcp ARGS`` as an MCP stdio server."""
    return StdioServerParameters(
        command=sys.executable, args=["-m", "rdfmem", "mcp", *args], env=_env()
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


@asynccontextmanager
async def http_session(url: str) -> AsyncIterator[ClientSession]:
    """An initialised client session with a streamable HTTP server."""
    async with (
        streamable_http_client(url) as (read, write),
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
            [sys.executable, "-m", "rdfmem", "mcp", store, "--http", "--port", str(port), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_env(),
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
