"""MCP tool calls per second over stdio: ``rdfmem mcp`` against the official memory server.

Both servers start with the same knowledge graph already stored (N entities with three
observations each and N relations): the official server (npm
``@modelcontextprotocol/server-memory``, Node.js) in its ``memory.jsonl``, rdfmem in an
on-disk store filled by ``rdfmem import`` of that file. One client (the SDK's
``ClientSession``, the same for both) then calls each tool in turn, one call at a time, for
a few seconds: ``open_nodes`` of one random entity, ``search_nodes`` for one entity's name,
``add_observations`` of a new observation to a random entity, ``create_relations`` of a new
relation, and a mix of the four. The official server reads (and, for writes, rewrites) its
whole file on every call; rdfmem keeps the graph in memory next to the store.

Run: ``python benchmarks/bench_mcp.py [--quick]``; writes ``benchmarks/results/mcp.md``.
Needs node and npm (the official server is installed into ~/.cache/rdfmem-tests/npm).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from results_io import write_results

from rdfmem import RdfStore
from rdfmem.mcp import Entity, KnowledgeGraph, Model, Relation, write_jsonl

ROOT = Path(__file__).resolve().parent
OFFICIAL_VERSION = "2026.8.31"
PACKAGE = "@modelcontextprotocol/server-memory"
TOOLS = ["open_nodes", "search_nodes", "add_observations", "create_relations", "mix"]


def official_entry() -> Path:
    cache = Path(os.environ.get("RDFMEM_NPM_CACHE", Path.home() / ".cache/rdfmem-tests/npm"))
    folder = cache / f"server-memory-{OFFICIAL_VERSION}"
    entry = folder / "node_modules" / PACKAGE / "dist" / "index.js"
    if not entry.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder),
             f"{PACKAGE}@{OFFICIAL_VERSION}"],
            check=True, capture_output=True, timeout=600,
        )  # fmt: skip
    return entry


def knowledge(n: int) -> Model:
    model = Model()
    for i in range(n):
        observations = [f"fact {j} about entity {i}" for j in range(3)]
        model.add_entity(
            Entity(f"entity-{i:06d}", ("person", "project", "tool")[i % 3], observations)
        )
    for i in range(n):
        model.add_relation(Relation(f"entity-{i:06d}", f"entity-{(i + 1) % n:06d}", "relates_to"))
    return model


Call = Callable[[ClientSession, int], Awaitable[Any]]


def calls(n: int, rng: random.Random) -> dict[str, Call]:
    def name() -> str:
        return f"entity-{rng.randrange(n):06d}"

    async def open_nodes(s: ClientSession, i: int) -> Any:
        return await s.call_tool("open_nodes", {"names": [name()]})

    async def search_nodes(s: ClientSession, i: int) -> Any:
        return await s.call_tool("search_nodes", {"query": name().upper()})

    async def add_observations(s: ClientSession, i: int) -> Any:
        item = {"entityName": name(), "contents": [f"new observation {i} {rng.random()}"]}
        return await s.call_tool("add_observations", {"observations": [item]})

    async def create_relations(s: ClientSession, i: int) -> Any:
        relation = {"from": name(), "to": name(), "relationType": f"r{i}-{rng.random()}"}
        return await s.call_tool("create_relations", {"relations": [relation]})

    order = [open_nodes, search_nodes, add_observations, create_relations]

    async def mix(s: ClientSession, i: int) -> Any:
        return await order[i % 4](s, i)

    return dict(zip(TOOLS, [*order, mix], strict=True))


async def measure(params: StdioServerParameters, n: int, seconds: float) -> dict[str, float]:
    rates: dict[str, float] = {}
    with open(os.devnull, "w") as devnull:
        async with (
            stdio_client(params, errlog=devnull) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            table = calls(n, random.Random(7))
            for tool, fn in table.items():
                await fn(session, 0)  # warm-up
                done, start = 0, time.perf_counter()
                while True:
                    result = await fn(session, done + 1)
                    assert not result.is_error, result
                    done += 1
                    elapsed = time.perf_counter() - start
                    if elapsed >= seconds and done >= 5:
                        break
                rates[tool] = done / elapsed
    return rates


def run(n: int, seconds: float, workdir: Path) -> dict[str, dict[str, float]]:
    model = knowledge(n)
    jsonl = workdir / f"memory-{n}.jsonl"
    jsonl.write_text(write_jsonl(model), encoding="utf-8")
    folder = workdir / f"store-{n}"
    with RdfStore.open(folder) as store:
        KnowledgeGraph(store).import_model(model)
    env = {"PATH": os.environ.get("PATH", ""), "MEMORY_FILE_PATH": str(jsonl)}
    official = StdioServerParameters(command="node", args=[str(official_entry())], env=env)
    ours = StdioServerParameters(
        command=sys.executable,
        args=["-m", "rdfmem", "mcp", str(folder)],
        env={"PATH": os.environ.get("PATH", ""), "PYTHONWARNINGS": "ignore"},
    )
    return {
        "official": anyio.run(measure, official, n, seconds),
        "rdfmem": anyio.run(measure, ours, n, seconds),
    }


def report(results: dict[int, dict[str, dict[str, float]]], seconds: float) -> str:
    lines = [
        "# MCP: tool calls per second over stdio",
        "",
        f"`python benchmarks/bench_mcp.py` — one client (the MCP SDK's ClientSession) calls "
        f"each tool one call at a time for {seconds:g} s, against the official memory server "
        f"({PACKAGE} {OFFICIAL_VERSION}, Node.js {_node()}) and `rdfmem mcp` on an on-disk "
        "store, both holding N entities (3 observations each) and N relations.",
        "",
        "| entities | tool | official calls/s | rdfmem calls/s | rdfmem / official |",
        "|---:|---|---:|---:|---:|",
    ]
    for n, pair in results.items():
        for tool in TOOLS:
            theirs, ours = pair["official"][tool], pair["rdfmem"][tool]
            lines.append(f"| {n:,} | {tool} | {theirs:,.0f} | {ours:,.0f} | {ours / theirs:.1f}x |")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines += [
        "",
        "mix: open_nodes, search_nodes, add_observations and create_relations in turn.",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores (load average {load:.1f} at the "
        f"end, shared with other work), Python {platform.python_version()}. Each call is a "
        "JSON-RPC round trip through a pipe, so the client's own cost (the same for both) "
        "bounds the fastest rates.",
        "",
    ]
    return "\n".join(lines)


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        return "?"
    return subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, short runs")
    args = parser.parse_args()
    sizes, seconds = ([100, 1000], 0.5) if args.quick else ([1000, 10_000], 4.0)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            results[n] = run(n, seconds, Path(tmp))
            print(n, results[n], flush=True)
    text = report(results, seconds)
    print(text)
    write_results(ROOT / "results" / "mcp.md", text, quick=args.quick)


if __name__ == "__main__":
    main()
