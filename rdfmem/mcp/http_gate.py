"""Who may call ``rdfmem mcp --http``: checked before the MCP transport sees a request.

* A bearer token (``Authorization: Bearer TOKEN``) on every request: without it, 401 and
  nothing runs. Any local process or web page could otherwise call ``delete_entities``.
* ``Host``: an IP address, ``localhost`` or an allowed name (``--allowed-host``, and the
  ``--host`` name); anything else is a DNS-rebinding page, refused with 421. Checked whatever
  address the server listens on (``0.0.0.0`` included).
* ``Origin`` (sent by browsers): only pages of this machine or an allowed name; 403 otherwise.

>>> host_allowed("127.0.0.1:7880", ()), host_allowed("evil.example", ())
(True, False)
>>> origin_allowed("http://localhost:3000", ()), origin_allowed("https://evil.example", ())
(True, False)
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Sequence
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["Gate", "host_allowed", "origin_allowed"]


def _name(host: str) -> str:
    name = host.strip().lower()
    if name.startswith("["):  # [v6]:port
        return name[1 : name.find("]")] if "]" in name else name
    if name.count(":") == 1:
        name = name.partition(":")[0]
    return name.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def host_allowed(host: str, allowed: Sequence[str]) -> bool:
    """Whether a ``Host`` header names this server: an IP address (DNS rebinding needs a
    name), ``localhost``, or one of ``allowed`` (``"*"`` allows any)."""
    if "*" in allowed:
        return True
    name = _name(host)
    return bool(name) and (_is_ip(name) or name in ("localhost", *(a.lower() for a in allowed)))


def origin_allowed(origin: str, allowed: Sequence[str]) -> bool:
    """Whether a browser page at ``origin`` may call: a page of this machine (loopback
    address or ``localhost``) or of an allowed name."""
    if "*" in allowed:
        return True
    name = (urlsplit(origin).hostname or "").lower().rstrip(".")
    if name == "localhost" or name in (a.lower() for a in allowed):
        return True
    return _is_ip(name) and ipaddress.ip_address(name).is_loopback


class Gate:
    """The ASGI app in front of the MCP transport: token, ``Host`` and ``Origin``."""

    def __init__(self, app: ASGIApp, *, token: str, allowed_hosts: Sequence[str]) -> None:
        if not token:
            raise ValueError("the MCP HTTP server needs a token")
        self.app = app
        self.expected = f"Bearer {token}".encode()
        self.allowed = tuple(h for h in allowed_hosts if h and not _is_ip(_name(h)))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v for k, v in scope["headers"]}
        host = headers.get("host", b"").decode("latin-1")
        if not host_allowed(host, self.allowed):
            await _refuse(send, 421, f"Host {host[:100]!r} is not this server; start it with "
                          "--allowed-host NAME to answer to a name")  # fmt: skip
            return
        origin = headers.get("origin")
        if origin is not None and not origin_allowed(origin.decode("latin-1"), self.allowed):
            await _refuse(send, 403, "calls from web pages of other sites are refused")
            return
        if not hmac.compare_digest(headers.get("authorization", b""), self.expected):
            await _refuse(
                send, 401, "pass the server's token as 'Authorization: Bearer <token>'",
                ("www-authenticate", 'Bearer realm="rdfmem mcp"'),
            )  # fmt: skip
            return
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, message: str, *extra: tuple[str, str]) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
