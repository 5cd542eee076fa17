"""``rdfmem mcp`` starts with what ``initialize`` needs: the MCP SDK's low-level server, its
stdio transport and its wire types, not the SDK's client side (httpx), its high-level
server, nor rdfmem's store, pyoxigraph or numpy; and the SDK stays whole for everything
else in the process. Speed itself is measured by ``benchmarks/bench_mcp_start.py``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import need

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

_NOT_NEEDED = (
    "mcp.client",
    "mcp.server.mcpserver",
    "httpx",
    "httpx2",
    "rdfmem.store",
    "rdfmem.backends",
    "pyoxigraph",
    "numpy",
)


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_stdio_server_imports_neither_the_sdk_client_nor_the_store() -> None:
    out = _python(
        "import sys; import rdfmem.mcp.server; "
        f"print(sorted(n for n in {_NOT_NEEDED!r} if n in sys.modules))"
    )
    assert out.strip() == "[]"


def test_the_sdk_stays_whole_after_the_server_loaded_its_parts() -> None:
    out = _python(
        "import rdfmem.mcp.server as ours\n"
        "import mcp, mcp.types\n"
        "from mcp import ClientSession, StdioServerParameters, stdio_client\n"
        "from mcp.server import MCPServer, Server\n"
        "from mcp.server.lowlevel import Server as LowLevel\n"
        "assert Server is LowLevel is ours.Server\n"
        "assert mcp.types.Tool is ours.types.Tool\n"
        "assert mcp.server.stdio.stdio_server is ours.stdio_server\n"
        "assert 'mcp.client' in __import__('sys').modules\n"
        "print(ClientSession.__name__, MCPServer.__name__, type(mcp).__name__)\n"
    )
    assert out.split() == ["ClientSession", "MCPServer", "module"]


def test_the_server_uses_the_sdk_as_it_is_when_imported_first() -> None:
    out = _python(
        "import mcp\n"
        "from mcp.server.lowlevel import Server\n"
        "import rdfmem.mcp.server as ours\n"
        "assert ours.Server is Server and ours.types.Tool is mcp.types.Tool\n"
        "print('ok')\n"
    )
    assert out.strip() == "ok"


def test_a_name_the_sdk_does_not_have_is_still_an_attribute_error() -> None:
    out = _python(
        "import rdfmem.mcp.server\n"
        "import mcp\n"
        "try:\n"
        "    mcp.no_such_name\n"
        "except AttributeError as exc:\n"
        "    print('AttributeError', 'no_such_name' in str(exc))\n"
    )
    assert out.split() == ["AttributeError", "True"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_start_benchmark_quick_run_times_both_servers_and_the_imports(
    tmp_path: Path,
) -> None:
    need(shutil.which("npm") is not None, "node and npm (the official memory server)")
    out = tmp_path / "mcp_start.md"
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_mcp_start.py"), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=BENCHMARKS.parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    table = out.read_text(encoding="utf-8")
    for row in (
        "| rdfmem `initialize` | 3 |",
        "| official `initialize` | 3 |",
        "| rdfmem first `search_nodes` | 3 |",
        "| official first `search_nodes` | 3 |",
        "| `initialize` | the SDK's wire types",
        "| first `search_nodes` | **all** |",
    ):
        assert row in table, row
    assert "load average (1 min)" in table
