"""MCP start: from spawning a stdio server to its ``initialize`` answer and to its first
``search_nodes`` answer, ``rdfmem mcp`` beside the official memory server on one memory.jsonl.

The memory: N entities with three observations each and N relations (N = 10,000; 1,000
with ``--quick``), written as the official server's memory.jsonl. Each run spawns a fresh
server with only ``MEMORY_FILE_PATH`` set, through the MCP SDK's stdio client (the same
client for both), and times, from just before the spawn:

* ``initialize``: the answer to ``initialize``;
* ``first search``: the answer to the first ``search_nodes`` (one entity's name), sent
  right after ``initialize`` (as a host does, after ``notifications/initialized``).

rdfmem with ``--keep-warm 600`` (a warm holder process serves the sessions that later
starts hand over; ``rdfmem.mcp.handoff``) is measured on its own copy of the file: the
first start (it spawns the holder, which imports the file), a start that spawns a holder
on the imported store, and later starts, interleaved with the others.

rdfmem is measured twice: its **first start** on the file (the one-time import into
``memory.jsonl.rdfmem/``, done once, then never again; one run) and **later starts** (the
store beside the file). The official server reads its whole file on every call. Every run
counts: p50, p99 and the slowest over the runs, nothing left out (the first run included).
The floor: ``python -c pass`` and ``node -e 0`` spawned and waited for (interpreter start),
and ``python -c "import mcp.types"``: what any server on the official Python SDK pays
before it can answer, against the official server's first answer.

Run: ``python benchmarks/bench_mcp_start.py [--quick] [--runs 20] [--entities 10000]``;
writes ``benchmarks/results/mcp_start.md`` (a quick run writes to a temp file). Needs node
and npm for the official server (installed into ~/.cache/rdfmem-tests/npm on first use).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from results_io import write_results

ROOT = Path(__file__).resolve().parent
OFFICIAL_VERSION = "2026.8.31"
PACKAGE = "@modelcontextprotocol/server-memory"


def official_entry() -> Path | None:
    """The official server's script, installed by npm into the tests' cache folder."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return None
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


def write_memory(path: Path, n: int) -> str:
    """N entities (three observations each) and N relations; returns a name to search."""
    with path.open("w", encoding="utf-8") as out:
        lines = []
        for i in range(n):
            lines.append(json.dumps({
                "type": "entity", "name": f"entity-{i}", "entityType": f"type-{i % 20}",
                "observations": [f"observation {j} of entity {i}" for j in range(3)],
            }))  # fmt: skip
        for i in range(n):
            lines.append(json.dumps({
                "type": "relation", "from": f"entity-{i}", "to": f"entity-{(i * 7 + 1) % n}",
                "relationType": f"rel-{i % 10}",
            }))  # fmt: skip
        out.write("\n".join(lines))  # the official server's file has no last newline
    return f"entity-{n // 2}"


def _env(memory: Path) -> dict[str, str]:
    return {"MEMORY_FILE_PATH": str(memory), "PATH": os.environ.get("PATH", ""),
            "PYTHONWARNINGS": "ignore"}  # fmt: skip


async def one_run(params: StdioServerParameters, name: str) -> tuple[float, float]:
    """Seconds from spawn to the initialize answer and to the first search_nodes answer."""
    with open(os.devnull, "w") as devnull:
        start = time.perf_counter()
        async with (
            stdio_client(params, errlog=devnull) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            ready = time.perf_counter() - start
            found = await session.call_tool("search_nodes", {"query": name})
            first = time.perf_counter() - start
            assert not found.is_error, found
            entities = (found.structured_content or {}).get("entities", [])
            assert any(e["name"] == name for e in entities), "the search found nothing"
    return ready, first


#: Module groups of the import breakdown: a module's first dotted part, or these prefixes.
_GROUPS = (
    ("mcp_types", "the SDK's wire types (pydantic models of two protocol versions)"),
    ("mcp", "the rest of the MCP SDK"),
    ("pydantic", "pydantic"),
    ("anyio", "anyio and asyncio"),
    ("asyncio", "anyio and asyncio"),
    ("starlette", "starlette, uvicorn and the SDK's other HTTP parts"),
    ("uvicorn", "starlette, uvicorn and the SDK's other HTTP parts"),
    ("sse_starlette", "starlette, uvicorn and the SDK's other HTTP parts"),
    ("numpy", "numpy"),
    ("httpx", "httpx (and its command line: rich, pygments), h11"),
    ("rich", "httpx (and its command line: rich, pygments), h11"),
    ("pygments", "httpx (and its command line: rich, pygments), h11"),
    ("h11", "httpx (and its command line: rich, pygments), h11"),
    ("pyoxigraph", "pyoxigraph"),
    ("rdfmem", "rdfmem"),
)
_MARK = "--after--"


def import_shares(code: str, before: str = "", repeat: int = 5) -> list[tuple[str, float]]:
    """Milliseconds ``code`` spends importing, by group (``python -X importtime``: each
    module's own time, the least of ``repeat`` fresh processes), after ``before`` ran."""
    least: dict[str, int] = {}
    script = f"{before}\nimport sys\nsys.stderr.write({_MARK!r} + '\\n')\n{code}"
    for _ in range(repeat):
        err = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", script],
            capture_output=True, text=True, check=True, cwd=ROOT.parent,
        ).stderr  # fmt: skip
        for line in err.split(_MARK, 1)[1].splitlines():
            parts = line.removeprefix("import time:").split("|")
            if len(parts) != 3 or not parts[0].strip().isdigit():
                continue
            name = parts[2].strip()
            least[name] = min(least.get(name, 1 << 62), int(parts[0]))
    groups: dict[str, float] = {}
    for name, micros in least.items():
        top = name.split(".")[0]
        label = next((text for key, text in _GROUPS if top == key), "other")
        groups[label] = groups.get(label, 0.0) + micros / 1000
    return sorted(groups.items(), key=lambda item: -item[1])


def end_holders(runtime: Path) -> None:
    """End the ``--keep-warm`` holders whose sockets are in ``runtime`` (SIGTERM: each
    closes its store) and wait for them."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--hold-at" in argv and any(a.startswith(str(runtime).encode()) for a in argv):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGTERM)  # it closes the store and exits
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                try:
                    if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                        break
                except OSError:
                    break  # reaped
                time.sleep(0.01)
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(entry.name), signal.SIGKILL)


def floor(command: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return times


def summary(times: list[float]) -> tuple[float, float, float]:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered), p99, ordered[-1]


def row(label: str, times: list[float], peer: list[float] | None) -> str:
    p50, p99, worst = summary(times)
    cells = f"| {label} | {len(times)} | {p50 * 1000:.0f} | {p99 * 1000:.0f} | {worst * 1000:.0f} |"
    if peer:
        q50, q99, qworst = summary(peer)
        cells += f" {p50 / q50:.2f}x / {p99 / q99:.2f}x / {worst / qworst:.2f}x |"
    else:
        cells += " - |"
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 entities, 3 runs")
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--entities", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    n = args.entities or (1000 if args.quick else 10_000)
    runs = args.runs or (3 if args.quick else 20)
    folder = Path(tempfile.mkdtemp(prefix="rdfmem-bench-mcp-start-"))
    try:
        text = measure(folder, n, runs)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    out = args.out or ROOT / "results" / "mcp_start.md"
    written = write_results(out, text, quick=args.quick and args.out is None)
    print(text)
    print(f"written to {written}", file=sys.stderr)


def measure(folder: Path, n: int, runs: int) -> str:
    ours_file, theirs_file = folder / "ours" / "memory.jsonl", folder / "theirs" / "memory.jsonl"
    ours_file.parent.mkdir()
    theirs_file.parent.mkdir()
    name = write_memory(ours_file, n)
    shutil.copy(ours_file, theirs_file)
    ours = StdioServerParameters(
        command=sys.executable, args=["-m", "rdfmem", "mcp"], env=_env(ours_file)
    )
    # ``--keep-warm``: its own copy of the memory (a holder owns its store while it lives).
    warm_file = folder / "warm" / "memory.jsonl"
    warm_file.parent.mkdir()
    shutil.copy(ours_file, warm_file)
    runtime = Path(tempfile.mkdtemp(prefix="rdfmem-kw-"))  # short: it holds a socket
    warm = StdioServerParameters(
        command=sys.executable,
        args=["-m", "rdfmem", "mcp", "--keep-warm", "600"],
        env={**_env(warm_file), "XDG_RUNTIME_DIR": str(runtime)},
    )
    load_before = os.getloadavg()
    results: dict[str, list[tuple[float, float]]] = {
        "first": [], "ours": [], "theirs": [], "warm": [], "warm_first": [], "warm_spawn": []
    }  # fmt: skip
    try:
        results["first"].append(anyio.run(one_run, ours, name))
        results["warm_first"].append(anyio.run(one_run, warm, name))
        end_holders(runtime)  # the next start spawns a holder on the imported store
        results["warm_spawn"].append(anyio.run(one_run, warm, name))
        entry = official_entry()
        for _ in range(runs):  # interleaved, so all see the same machine
            results["ours"].append(anyio.run(one_run, ours, name))
            results["warm"].append(anyio.run(one_run, warm, name))
            if entry is not None:
                theirs = StdioServerParameters(
                    command="node", args=[str(entry)], env=_env(theirs_file)
                )
                results["theirs"].append(anyio.run(one_run, theirs, name))
    finally:
        end_holders(runtime)
        shutil.rmtree(runtime, ignore_errors=True)
    load_after = os.getloadavg()
    python_floor = floor([sys.executable, "-c", "pass"], runs)
    # What any Python server on the official SDK pays before it can answer at all.
    sdk_floor = floor([sys.executable, "-c", "import mcp.types"], runs)
    node_floor = floor(["node", "-e", "0"], runs) if entry is not None else []

    def col(key: str, i: int) -> list[float]:
        return [r[i] for r in results[key]]

    theirs_init, theirs_search = col("theirs", 0), col("theirs", 1)
    lines = [
        "# MCP start: spawn to `initialize` and to the first `search_nodes`",
        "",
        f"{n:,} entities (3 observations each) and {n:,} relations in one memory.jsonl; each "
        "run spawns a fresh stdio server with only `MEMORY_FILE_PATH` set, through the MCP "
        "SDK's stdio client. Milliseconds; ratios are rdfmem ÷ the official server (p50 / p99 "
        "/ slowest). Every run counts, the first included.",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, official server {PACKAGE}@{OFFICIAL_VERSION}"
        + ("" if entry else " (not run: node/npm missing)")
        + f"; load average (1 min) {load_before[0]:.1f} before the runs, "
        f"{load_after[0]:.1f} after",
        "",
        "| what | runs | p50 ms | p99 ms | slowest ms | vs official |",
        "|---|---|---|---|---|---|",
        row("rdfmem `initialize`", col("ours", 0), theirs_init),
    ]
    if theirs_init:
        lines.append(row("official `initialize`", theirs_init, None))
    lines.append(row("rdfmem first `search_nodes`", col("ours", 1), theirs_search))
    if theirs_search:
        lines.append(row("official first `search_nodes`", theirs_search, None))
    warm_label = "rdfmem `--keep-warm`, later starts (a warm holder serves them)"
    lines += [
        row(f"{warm_label}: `initialize`", col("warm", 0), theirs_init),
        row(f"{warm_label}: first `search_nodes`", col("warm", 1), theirs_search),
        row(
            "rdfmem `--keep-warm`, a start that spawns the holder: first `search_nodes`",
            col("warm_spawn", 1),
            None,
        ),
        row(
            "rdfmem `--keep-warm`, first start (spawns the holder, imports the file): "
            "first `search_nodes`",
            col("warm_first", 1),
            None,
        ),
        row("rdfmem first start (imports the file once): `initialize`", col("first", 0), None),
        row("rdfmem first start: first `search_nodes`", col("first", 1), None),
        row("floor: `python -c pass`", python_floor, None),
        row(
            "floor: `python -c 'import mcp.types'` (the SDK's wire types)", sdk_floor, theirs_search
        ),
    ]
    if node_floor:
        lines.append(row("floor: `node -e 0`", node_floor, None))
    lines += ["", *_where_the_time_goes()]
    return "\n".join(lines)


def _where_the_time_goes() -> list[str]:
    """The import breakdown of the two paths, after the runs."""
    lines = [
        "## Where the time goes: imports",
        "",
        "`python -X importtime`, each module's own time, the least of 5 fresh processes "
        "(milliseconds). Before `initialize`: `import rdfmem.mcp.server` (the CLI adds "
        "click). Then, for the first `search_nodes` (the tools and the store, loaded once "
        "`initialize` is answered): the modules that the tool catalog and opening the store "
        "add.",
        "",
        "| path | group | ms |",
        "|---|---|---|",
    ]
    server = "import rdfmem.mcp.server"
    search = (
        "import rdfmem.mcp.catalog, rdfmem.cli.stores, rdfmem.store.rdfstore, "
        "rdfmem.backends.oxigraph, rdfmem.backends.attached"
    )
    for path, shares in (
        ("`initialize`", import_shares(server)),
        ("first `search_nodes`", import_shares(search, before=server)),
    ):
        total = sum(ms for _, ms in shares)
        lines.append(f"| {path} | **all** | **{total:.0f}** |")
        lines += [f"| {path} | {label} | {ms:.0f} |" for label, ms in shares if ms >= 1]
    lines.append("")
    return lines


if __name__ == "__main__":
    main()
