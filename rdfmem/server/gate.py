"""Who may talk to the endpoint at all: checked before any routing.

DNS rebinding: a web page whose name the attacker re-points at 127.0.0.1 reaches the server
with its own name in ``Host``; names other than ``localhost`` and the allowed ones are refused
(421). IP addresses are accepted (rebinding needs a name). Cross-site requests: a browser
sends the page's ``Origin``; any origin other than the server's own is refused (403) unless
CORS allows it, including "simple" form POSTs that never see a CORS preflight.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from rdfmem.core.errors import HttpError

__all__ = ["Gate", "host_allowed", "host_allowed_kept"]


#: Judgements of ``Host`` headers already seen (``Gate``): clients send the same one.
_HOSTS: dict[tuple[str, tuple[str, ...]], bool] = {}


def host_allowed_kept(host: str, allowed: tuple[str, ...]) -> bool:
    """``host_allowed``, its judgement kept per ``Host`` (clients send the same one)."""
    key = (host, allowed)
    known = _HOSTS.get(key)
    if known is None:
        known = host_allowed(host, allowed)
        if len(_HOSTS) >= 256:
            _HOSTS.clear()
        _HOSTS[key] = known
    return known


def host_allowed(host: str, allowed: tuple[str, ...]) -> bool:
    """Whether a ``Host`` header names this server: an IP address (DNS rebinding needs a
    name), ``localhost``, or one of ``allowed`` (``"*"`` allows any).

    >>> host_allowed("127.0.0.1:7879", ()), host_allowed("localhost:7879", ())
    (True, True)
    >>> host_allowed("evil.example:7879", ()), host_allowed("mem.example", ("mem.example",))
    (False, True)
    """
    if "*" in allowed:
        return True
    name = host.strip().lower()
    if name.startswith("["):  # [v6]:port
        name = name[1 : name.find("]")] if "]" in name else name
    elif name.count(":") == 1:
        name = name.partition(":")[0]
    if not name:
        return False
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    return name.rstrip(".") in ("localhost", *allowed) or name in allowed


class Gate:
    """Refuses, before any routing, requests that are not the user's own: a ``Host`` the
    server does not answer to (421: DNS rebinding), and an ``Origin`` of another site that
    CORS does not allow (403: a cross-site request, even a "simple" form POST)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_hosts: tuple[str, ...],
        cors: tuple[str, ...],
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.app = app
        self.allowed_hosts = allowed_hosts
        self.cors = cors
        self.state = getattr(app, "state", None)
        self._on_close = on_close
        #: The fast lane of plain query requests (``lane.py``), set by ``create_app``.
        self.lane: Any = None

    def close(self) -> None:
        """Release what the app holds (its query worker threads); idempotent. The store
        stays open: it is the caller's."""
        if self._on_close is not None:
            self._on_close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.lower(): v for k, v in scope.get("headers", [])}
            host = headers.get(b"host", b"").decode("latin-1")
            refusal = None
            if not host_allowed_kept(host, self.allowed_hosts):
                refusal = HttpError(
                    421,
                    f"this server does not answer to the host {host!r}; start it with "
                    "--allowed-host NAME to allow a name",
                )
            else:
                origin = headers.get(b"origin")
                if origin is not None:
                    given = origin.decode("latin-1").rstrip("/").lower()
                    own = {f"{scope.get('scheme', 'http')}://{host.lower()}"}
                    cors = self.cors
                    if given not in own and "*" not in cors and given not in cors:
                        refusal = HttpError(
                            403,
                            f"cross-origin request from {given!r} refused; start the server "
                            "with --cors ORIGIN to allow that site",
                        )
            if refusal is not None:
                body = (refusal.message + "\n").encode("utf-8", "replace")
                response = Response(
                    body,
                    refusal.status,
                    {"X-Content-Type-Options": "nosniff"},
                    media_type="text/plain; charset=utf-8",
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
