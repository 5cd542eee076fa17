"""``rdfmem mcp config --client …``: the host entry printed, or merged into the host's file
in a temporary HOME (kept keys, a backup first), and the entry it writes starts a server
that answers with nothing but the host's bare PATH."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import StdioServerParameters
from test_mcp_support import call, ok, stdio_session

from rdfmem.cli import cli
from rdfmem.mcp.hosts import CLIENTS

FILES = {
    "claude-desktop": ".config/Claude/claude_desktop_config.json",
    "claude-code": ".claude.json",
    "cursor": ".cursor/mcp.json",
    "vscode": ".config/Code/User/mcp.json",
}


def _run(home: Path, *args: str) -> Any:
    env = {"HOME": str(home), "XDG_CONFIG_HOME": None, "APPDATA": None}
    return CliRunner().invoke(cli, ["mcp", "config", *args], env=env)


@pytest.mark.skipif(sys.platform != "linux", reason="the file places checked are Linux's")
@pytest.mark.parametrize("client", CLIENTS)
def test_config_prints_an_entry_with_an_absolute_command(tmp_path: Path, client: str) -> None:
    result = _run(tmp_path, "--client", client)
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    key = "servers" if client == "vscode" else "mcpServers"
    server = printed[key]["memory"]
    assert Path(server["command"]).is_absolute() and server["command"] == sys.executable
    assert server["args"] == ["-m", "rdfmem", "mcp"]
    assert str(tmp_path / FILES[client]) in result.stderr
    assert not (tmp_path / FILES[client]).exists()  # printing writes nothing


@pytest.mark.skipif(sys.platform != "linux", reason="the file places checked are Linux's")
def test_write_merges_keeps_what_is_there_and_backs_up(tmp_path: Path) -> None:
    path = tmp_path / FILES["claude-desktop"]
    path.parent.mkdir(parents=True)
    official = {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"],
                "env": {"MEMORY_FILE_PATH": "/data/memory.jsonl"}}  # fmt: skip
    before = {"globalShortcut": "Ctrl+Space",
              "mcpServers": {"memory": official, "files": {"command": "fs-server"}}}  # fmt: skip
    path.write_text(json.dumps(before, indent=2))
    result = _run(tmp_path, "--client", "claude-desktop", "--write", "--tools", "official")
    assert result.exit_code == 0, result.output
    after = json.loads(path.read_text())
    assert after["globalShortcut"] == "Ctrl+Space"
    assert after["mcpServers"]["files"] == {"command": "fs-server"}
    memory = after["mcpServers"]["memory"]
    assert memory["command"] == sys.executable
    assert memory["args"] == ["-m", "rdfmem", "mcp", "--tools", "official"]
    assert memory["env"] == {"MEMORY_FILE_PATH": "/data/memory.jsonl"}  # carried over
    backups = list(path.parent.glob("claude_desktop_config.json.bak-*"))
    assert len(backups) == 1 and json.loads(backups[0].read_text()) == before


def test_write_leaves_a_file_it_cannot_read_alone(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    text = '{\n  // comments: VS Code allows them\n  "servers": {}\n}\n'
    path.write_text(text)
    result = _run(tmp_path, "--client", "vscode", "--write", "--file", str(path))
    assert result.exit_code == 1 and "not plain JSON" in result.output
    assert path.read_text() == text


def test_the_written_entry_starts_without_the_virtualenv_on_path(tmp_path: Path) -> None:
    path = tmp_path / "cursor.json"
    store = tmp_path / "memory"
    result = _run(tmp_path, "--client", "cursor", "--write", "--file", str(path),
                  "--store", str(store))  # fmt: skip
    assert result.exit_code == 0, result.output
    entry = json.loads(path.read_text())["mcpServers"]["memory"]
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env={"PATH": "/usr/bin:/bin"}
    )

    async def main() -> None:
        async with stdio_session(params) as s:
            ok(await call(s, "create_entities", {"entities": [
                {"name": "A", "entityType": "t", "observations": []}]}))  # fmt: skip

    anyio.run(main)
    assert store.is_dir()


def test_keep_warm_is_written_into_the_entry(tmp_path: Path) -> None:
    result = _run(tmp_path, "--client", "cursor", "--keep-warm", "600")
    assert result.exit_code == 0, result.output
    server = json.loads(result.stdout)["mcpServers"]["memory"]
    assert server["args"] == ["-m", "rdfmem", "mcp", "--keep-warm", "600"]
    refused = _run(tmp_path, "--client", "cursor", "--keep-warm", "-1")
    assert refused.exit_code == 2 and "--keep-warm" in refused.output
