"""``bench_processes.py``'s MCP part: two ``rdfmem mcp STORE`` stdio servers on one folder.

Each server runs in its own process, spawned and spoken to by the MCP SDK's own stdio client
(``ClientSession``), as two MCP hosts would. The first creates an entity; then both add
``count`` observations to it at the same time, one call at a time each; then each reads the
entity back with ``open_nodes`` (both stay up until both have read). A server that cannot start, or a call that fails, is
recorded with its error (and the server's stderr), never raised.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import TextContent

ENTITY = "shared-entity"


def params(folder: Path) -> StdioServerParameters:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONWARNINGS": "ignore"}
    return StdioServerParameters(
        command=sys.executable, args=["-m", "rdfmem", "mcp", str(folder)], env=env
    )


def text_of(result: Any) -> str:
    block = result.content[0] if result.content else None
    return block.text if isinstance(block, TextContent) else str(result)


def observations_seen(result: Any) -> int:
    data = result.structured_content
    if data is None:
        import json

        data = json.loads(text_of(result))
    return sum(len(e.get("observations", [])) for e in data.get("entities", []))


async def one_server(
    k: int,
    folder: Path,
    count: int,
    timeout: float,
    stat: dict[str, Any],
    ready: list[anyio.Event],
    added: list[anyio.Event],
    read_back: list[anyio.Event],
    errlog: TextIO,
) -> None:
    seconds: list[float] = stat.setdefault("seconds", [])
    try:
        with anyio.fail_after(timeout):
            async with (
                stdio_client(params(folder), errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                t0 = time.perf_counter()
                await session.initialize()
                stat["init_s"] = time.perf_counter() - t0
                if k == 0:
                    entity = {"name": ENTITY, "entityType": "topic", "observations": []}
                    made = await session.call_tool("create_entities", {"entities": [entity]})
                    if made.is_error:
                        raise RuntimeError(f"create_entities: {text_of(made)}")
                ready[k].set()
                for event in ready:
                    await event.wait()
                for i in range(count):
                    item = {"entityName": ENTITY, "contents": [f"server {k + 1} note {i}"]}
                    t0 = time.perf_counter()
                    result = await session.call_tool("add_observations", {"observations": [item]})
                    if result.is_error:
                        stat["error"] = f"add_observations: {text_of(result)}"
                    else:
                        seconds.append(time.perf_counter() - t0)
                added[k].set()
                for event in added:
                    await event.wait()
                seen = await session.call_tool("open_nodes", {"names": [ENTITY]})
                if seen.is_error:
                    stat["error"] = f"open_nodes: {text_of(seen)}"
                else:
                    stat["sees"] = observations_seen(seen)
                read_back[k].set()
                for event in read_back:  # both servers stay up until both have read
                    await event.wait()
    except Exception as exc:  # what the user would see is the measurement
        errlog.flush()
        errlog.seek(0)
        tail = " ".join(errlog.read().split())[-300:]
        stat["error"] = f"{type(exc).__name__}: {exc}" + (
            f"; server stderr: {tail}" if tail else ""
        )
    finally:
        for events in (ready, added, read_back):
            events[k].set()


def two_servers(folder: Path, count: int, timeout: float) -> dict[str, Any]:
    stats: list[dict[str, Any]] = [{}, {}]

    async def main() -> None:
        ready, added, read_back = ([anyio.Event(), anyio.Event()] for _ in range(3))
        with tempfile.TemporaryFile("w+") as log0, tempfile.TemporaryFile("w+") as log1:
            async with anyio.create_task_group() as group:
                args = (folder, count, timeout)
                group.start_soon(one_server, 0, *args, stats[0], ready, added, read_back, log0)
                await ready[0].wait()  # the first server holds the store before the second starts
                group.start_soon(one_server, 1, *args, stats[1], ready, added, read_back, log1)

    anyio.run(main)
    print("mcp", [(s.get("sees"), s.get("error")) for s in stats], flush=True)
    return {"count": count, "servers": stats}
