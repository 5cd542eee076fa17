"""``rdfmem mcp --http`` takes calls only with its bearer token, and only from this machine's
names (or ``--allowed-host``), whatever ``--host`` is spelt: a real server process, real HTTP
requests (httpx) and the SDK's client."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from test_mcp_support import TOKEN, _env, call, free_port, http_server, http_session, ok

from rdfmem.mcp.toolsets import ALL

_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
_ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _post(url: str, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(url, content=json.dumps(body), headers={**_ACCEPT, **headers}, timeout=30)


def _call(name: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": name, "arguments": {}}}  # fmt: skip


def test_without_the_token_every_tool_is_401(tmp_path: Path) -> None:
    with http_server(str(tmp_path / "mem"), log=tmp_path / "server.log") as url:
        for token in (None, "wrong", TOKEN + "x"):
            auth = {"Authorization": f"Bearer {token}"} if token else {}
            assert _post(url, _INIT, **auth).status_code == 401
            for name in ALL:
                answer = _post(url, _call(name), **auth)
                assert answer.status_code == 401, name
                assert "Bearer" in answer.headers["www-authenticate"]
        assert _post(url, _INIT, Authorization=f"Bearer {TOKEN}").status_code == 200

        async def main() -> None:
            with pytest.raises(Exception):  # noqa: B017 - the SDK's own error for a 401
                async with http_session(url, token=None):
                    pass
            async with http_session(url) as s:  # the token: every tool answers
                assert ok(await call(s, "read_graph", {})) == {"entities": [], "relations": []}

        anyio.run(main)


def test_on_every_address_a_foreign_host_or_origin_is_refused(tmp_path: Path) -> None:
    with http_server(
        str(tmp_path / "mem"), "--host", "0.0.0.0", "--allowed-host", "memory.example",
        log=tmp_path / "server.log",
    ) as url:  # fmt: skip
        port = url.split(":")[2].split("/")[0]
        auth = {"Authorization": f"Bearer {TOKEN}"}
        refused = _post(url, _INIT, **auth, Host=f"evil.example:{port}")
        assert refused.status_code == 421 and "--allowed-host" in refused.text
        refused = _post(url, _INIT, **auth, Origin="http://evil.example")
        assert refused.status_code == 403
        refused = _post(url, _INIT, **auth, Host=f"localhost:{port}", Origin="http://evil.example")
        assert refused.status_code == 403
        # this machine's names, and the allowed one, are served
        assert _post(url, _INIT, **auth, Host=f"localhost:{port}").status_code == 200
        assert _post(url, _INIT, **auth, Host=f"memory.example:{port}").status_code == 200
        assert _post(url, _INIT, **auth, Origin=f"http://127.0.0.1:{port}").status_code == 200
        assert _post(url, _INIT, **auth, Origin="https://memory.example").status_code == 200


def test_a_token_is_generated_and_printed_when_none_is_given(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in _env().items() if k != "RDFMEM_TOKEN"}
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "rdfmem", "mcp", str(tmp_path / "mem"), "--http",
             "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while "Bearer " not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        token = log.read_text().split("Bearer ", 1)[1].split()[0]
        assert len(token) >= 24
        url = f"http://127.0.0.1:{port}/mcp"
        while time.monotonic() < deadline:
            try:
                answer = _post(url, _INIT, Authorization=f"Bearer {token}")
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert answer.status_code == 200
        assert _post(url, _INIT).status_code == 401
    finally:
        process.terminate()
        process.wait(10)
