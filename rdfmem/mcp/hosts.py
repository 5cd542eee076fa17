"""MCP hosts' configuration files, and the entry that starts ``rdfmem mcp`` from them.

Desktop hosts do not inherit a shell's PATH (or an activated virtualenv), so the entry's
command is the absolute path of the Python running rdfmem (``sys.executable -m rdfmem``),
which works wherever the host starts it.

Where each host keeps its user-wide file (``config_path``), and the key of its servers:

* claude-desktop: ``Claude/claude_desktop_config.json`` in the application-data folder
  (macOS ``~/Library/Application Support``, Windows ``%APPDATA%``, Linux ``~/.config``);
  ``mcpServers``.
* claude-code: ``~/.claude.json``; ``mcpServers``.
* cursor: ``~/.cursor/mcp.json``; ``mcpServers``.
* vscode: ``Code/User/mcp.json`` in the application-data folder; ``servers``, each with
  ``"type": "stdio"``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from rdfmem.core.errors import FormatError

__all__ = ["CLIENTS", "config_path", "entry", "merge", "write_config"]

CLIENTS = ("claude-desktop", "claude-code", "cursor", "vscode")


def _app_dir(home: Path, platform: str, env: Mapping[str, str]) -> Path:
    if platform == "darwin":
        return home / "Library" / "Application Support"
    if platform.startswith("win"):
        return Path(env.get("APPDATA") or home / "AppData" / "Roaming")
    return Path(env.get("XDG_CONFIG_HOME") or home / ".config")


def config_path(
    client: str,
    *,
    home: Path | None = None,
    platform: str = sys.platform,
    env: Mapping[str, str] = os.environ,
) -> Path:
    """The user-wide configuration file of ``client`` (one of ``CLIENTS``).

    >>> config_path("cursor", home=Path("/h")).as_posix()
    '/h/.cursor/mcp.json'
    >>> config_path("claude-desktop", home=Path("/h"), platform="darwin", env={}).as_posix()
    '/h/Library/Application Support/Claude/claude_desktop_config.json'
    """
    home = home or Path.home()
    if client == "claude-desktop":
        return _app_dir(home, platform, env) / "Claude" / "claude_desktop_config.json"
    if client == "claude-code":
        return home / ".claude.json"
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    if client == "vscode":
        return _app_dir(home, platform, env) / "Code" / "User" / "mcp.json"
    raise ValueError(f"unknown client {client!r}; one of {', '.join(CLIENTS)}")


def _key(client: str) -> str:
    return "servers" if client == "vscode" else "mcpServers"


def entry(client: str, args: Sequence[str], env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The server entry starting ``python -m rdfmem mcp ARGS`` with this Python."""
    out: dict[str, Any] = {"command": sys.executable, "args": ["-m", "rdfmem", "mcp", *args]}
    if client == "vscode":
        out = {"type": "stdio", **out}
    if env:
        out["env"] = dict(env)
    return out


def merge(
    client: str, current: Mapping[str, Any], name: str, new: Mapping[str, Any]
) -> dict[str, Any]:
    """``current`` (a host's configuration) with server ``name`` set to ``new``; every other
    key and server kept. An ``env`` the old entry had (e.g. the official server's
    ``MEMORY_FILE_PATH``) is kept under the new one's.

    >>> old = {"theme": "dark", "mcpServers": {"memory": {"command": "npx",
    ...        "env": {"MEMORY_FILE_PATH": "/m.jsonl"}}, "other": {"command": "x"}}}
    >>> new = merge("cursor", old, "memory", {"command": "/py", "args": []})
    >>> new["theme"], sorted(new["mcpServers"]), new["mcpServers"]["memory"]["env"]
    ('dark', ['memory', 'other'], {'MEMORY_FILE_PATH': '/m.jsonl'})
    """
    out = dict(current)
    servers = dict(out.get(_key(client)) or {})
    old = servers.get(name)
    fresh = dict(new)
    if isinstance(old, Mapping) and isinstance(old.get("env"), Mapping):
        fresh["env"] = {**old["env"], **fresh.get("env", {})}
    servers[name] = fresh
    out[_key(client)] = servers
    return out


def write_config(client: str, path: Path, name: str, new: Mapping[str, Any]) -> Path | None:
    """Merge server ``name`` into the file at ``path`` (created when missing), after copying
    the file to ``path.bak-TIME``; returns the backup (None when there was no file).

    Raises:
        FormatError: the file is not a JSON object (comments included); it is left as is.
    """
    current: dict[str, Any] = {}
    backup = None
    if path.exists():
        text = path.read_text(encoding="utf-8")
        try:
            loaded = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError as exc:
            raise FormatError(
                f"{path} is not plain JSON ({exc.msg}, line {exc.lineno}); nothing written: "
                "add the entry printed by `rdfmem mcp config` by hand"
            ) from exc
        if not isinstance(loaded, dict):
            raise FormatError(f"{path} does not hold a JSON object; nothing written")
        current = loaded
        backup = path.with_name(f"{path.name}.bak-{datetime.now():%Y%m%d-%H%M%S}")
        shutil.copy2(path, backup)
    merged = merge(client, current, name, new)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.rdfmem-tmp")
    temporary.write_text(json.dumps(merged, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(temporary, path)
    return backup


def snippet(client: str, name: str, new: Mapping[str, Any]) -> str:
    """What to put in the host's file, as JSON."""
    return json.dumps({_key(client): {name: dict(new)}}, indent=2, ensure_ascii=False)
