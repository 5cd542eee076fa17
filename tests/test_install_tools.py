"""Installing rdfmem from a checkout as a host would: ``pipx install PATH[mcp]`` and
``uvx --from PATH[mcp] rdfmem``, each into a temporary home, then the installed command run
with a bare PATH (no venv on it, as desktop hosts start servers) and spoken to by the MCP
SDK's stdio client, as a host configured with that command would.

pipx and uv come from PyPI (``pip install pipx uv``): locally a missing one skips its test, in
CI (``CI=true``) it fails. Measured on the 2-core machine: pipx 8 s (pip's cache warm), uvx
16 s (a fresh uv cache: its packages downloaded from PyPI); 27 s for the file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from conftest import need
from mcp import StdioServerParameters
from test_mcp_support import stdio_session

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

#: The checkout these tests install.
ROOT = Path(__file__).resolve().parents[1]
#: The official server's nine tools, which ``--tools official`` offers.
OFFICIAL = {
    "create_entities",
    "create_relations",
    "add_observations",
    "delete_entities",
    "delete_observations",
    "delete_relations",
    "read_graph",
    "search_nodes",
    "open_nodes",
}


def _tool(name: str) -> str:
    """The path of ``name`` (from PATH, or beside this Python)."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    need(found is not None, f"{name} is not installed (pip install pipx uv)")
    assert found is not None
    return found


def _bare_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A host's environment: system PATH only, a HOME of its own, no virtualenv."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    for name in ("PIP_FIND_LINKS", "PIP_CERT", "SSL_CERT_FILE", "PIP_INDEX_URL"):
        if name in os.environ:  # how this machine reaches PyPI, if it is told
            env[name] = os.environ[name]
    return {**env, **extra}


def _run(args: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(
        args, env=env, cwd=cwd, capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _answers_as_a_host(command: str, args: list[str], env: dict[str, str]) -> set[str]:
    """The tool names a stdio session with ``command args mcp :memory:`` lists."""
    params = StdioServerParameters(
        command=command, args=[*args, "mcp", ":memory:", "--tools", "official"], env=env
    )
    names: set[str] = set()

    async def main() -> None:
        async with stdio_session(params) as session:
            names.update(t.name for t in (await session.list_tools()).tools)

    anyio.run(main)
    return names


def test_pipx_install_from_a_checkout(tmp_path: Path) -> None:
    pipx = _tool("pipx")
    where = {n: str(tmp_path / n) for n in ("pipx-home", "pipx-bin", "pipx-man")}
    env = _bare_env(
        tmp_path,
        PIPX_HOME=where["pipx-home"],
        PIPX_BIN_DIR=where["pipx-bin"],
        PIPX_MAN_DIR=where["pipx-man"],
        PIPX_DEFAULT_PYTHON=sys.executable,
    )
    _run([pipx, "install", f"{ROOT}[mcp]"], env, tmp_path)
    rdfmem = Path(where["pipx-bin"]) / "rdfmem"
    assert rdfmem.exists()
    host = _bare_env(tmp_path)  # a host's PATH: neither pipx's bin nor this venv on it
    assert "Commands:" in _run([str(rdfmem), "--help"], host, tmp_path)
    assert "--embedder SPEC" in _run([str(rdfmem), "mcp", "--help"], host, tmp_path)
    assert _answers_as_a_host(str(rdfmem), [], host) == OFFICIAL


def test_uvx_from_a_checkout(tmp_path: Path) -> None:
    uvx = _tool("uvx")
    env = _bare_env(
        tmp_path,
        UV_CACHE_DIR=str(tmp_path / "uv-cache"),
        UV_TOOL_DIR=str(tmp_path / "uv-tools"),
        UV_PYTHON=sys.executable,
        UV_NO_PROGRESS="1",
    )
    source = ["--from", f"{ROOT}[mcp]", "rdfmem"]
    assert "Commands:" in _run([uvx, *source, "--help"], env, tmp_path)
    assert "--embedder SPEC" in _run([uvx, *source, "mcp", "--help"], env, tmp_path)
    # A host's configuration: {"command": "/abs/path/uvx", "args": ["--from", ..., "mcp"]}.
    assert _answers_as_a_host(uvx, source, env) == OFFICIAL
