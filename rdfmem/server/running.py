"""Running the endpoint with uvicorn: in the foreground (``serve``), or on a background thread
of the process that owns the store (``BackgroundServer``), so that external tools can read an
agent's memory while the agent keeps using it.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from rdfmem.core.errors import BackingError
from rdfmem.server.app import create_app
from rdfmem.store.rdfstore import RdfStore

__all__ = ["BackgroundServer", "serve"]


#: No lifespan events (the caller owns the store), no ``Server: uvicorn`` header, and no
#: ``X-Forwarded-*`` rewriting: the endpoint is not meant to sit behind a proxy by default.
_UVICORN: dict[str, Any] = {
    "lifespan": "off",
    "server_header": False,
    "proxy_headers": False,
    "timeout_keep_alive": 5,
}
#: Connections open at once; more are closed as soon as they are accepted.
MAX_CONNECTIONS = 256
#: Seconds a client may take to send a request's line and headers.
HEADER_TIMEOUT = 10.0


class _Limits:
    """The two limits uvicorn's HTTP protocols lack: a cap on open connections, and a time
    limit on receiving a request's line and headers (slow clients cannot hold descriptors).
    Mixed into uvicorn's httptools protocol (when installed) or its h11 protocol."""

    max_connections = MAX_CONNECTIONS
    header_timeout = HEADER_TIMEOUT
    _header_timer: asyncio.TimerHandle | None = None
    connections: set[Any]
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport

    def _admit(self, transport: asyncio.Transport) -> None:
        if len(self.connections) > self.max_connections:
            transport.abort()  # over the cap: refuse at once, keep answering the others
            return
        self._arm()

    def _arm(self) -> None:
        if self._header_timer is None and not self.transport.is_closing():
            self._header_timer = self.loop.call_later(self.header_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


class _BoundedH11(_Limits, H11Protocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._admit(transport)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:  # still waiting for a request's headers
            self._arm()
        else:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


_PROTOCOLS: list[type[Any]] = [_BoundedH11]
try:  # uvicorn's faster parser, when installed
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class _BoundedHttpTools(_Limits, HttpToolsProtocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._admit(transport)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm()

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    _PROTOCOLS.insert(0, _BoundedHttpTools)
except ImportError:  # pragma: no cover - httptools is optional
    pass


def _bounded(max_connections: int, header_timeout: float) -> type[Any]:
    return type(
        "BoundedHttp",
        (_PROTOCOLS[0],),
        {"max_connections": max_connections, "header_timeout": header_timeout},
    )


def _names(host: str, allowed: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The host names the server answers to: ``allowed``, plus the bound name if it is one
    (an IP address is always accepted; see ``app._host_allowed``)."""
    names = list(allowed)
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        names.append(host)
    return tuple(names)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio turns Nagle off (TCP_NODELAY) only on sockets that say
    # they are TCP; without it every response waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            message = (
                f"cannot listen on {host}:{port}: the port is in use by another program; "
                "stop it or choose another port (--port)"
            )
        else:
            message = f"cannot listen on {host}:{port}: {exc.strerror or exc}"
        raise BackingError(message, cause=exc) from exc
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def serve(
    store: RdfStore,
    *,
    host: str = "127.0.0.1",
    port: int = 7879,
    access_log: bool = True,
    log_level: str = "info",
    allowed_hosts: tuple[str, ...] | list[str] = (),
    max_connections: int = MAX_CONNECTIONS,
    header_timeout: float = HEADER_TIMEOUT,
    announce: Callable[[str], object] | None = None,
    **options: Any,
) -> None:
    """Serve ``store`` until interrupted (Ctrl-C). ``options`` go to ``create_app``.

    ``allowed_hosts`` are host names besides ``localhost`` and IP addresses that the server
    answers to (the bound name is added); ``max_connections`` caps open connections and
    ``header_timeout`` is how long a client may take to send its request headers.
    ``announce`` is called with the server's URL once the address is listened on, and only
    then (a busy port raises before anything says "serving").

    Raises:
        BackingError: the address cannot be listened on.
        ServerConfigError: options that do not fit together.
    """
    app = create_app(store, allowed_hosts=_names(host, allowed_hosts), **options)
    sock = _bind(host, port)
    if announce is not None:
        announce(_url(host, int(sock.getsockname()[1])))
    # This process only serves: hand the GIL between the event loop and the query workers
    # every 0.2 ms rather than 5 ms, or each worker waits for the busy loop (+30% req/s).
    sys.setswitchinterval(min(sys.getswitchinterval(), 0.0002))
    config = uvicorn.Config(
        app,
        access_log=access_log,
        log_level=log_level,
        http=_bounded(max_connections, header_timeout),
        **_UVICORN,
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        app.close()


class BackgroundServer:
    """The endpoint on a daemon thread of this process; ``port=0`` picks a free port.

    >>> from rdfmem import RdfStore
    >>> import httpx
    >>> with BackgroundServer(RdfStore()) as server:
    ...     httpx.get(server.url + "/health").json()["status"]
    'ok'

    Raises:
        BackingError: the address cannot be listened on, or the server did not start.
    """

    def __init__(
        self,
        store: RdfStore,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        log_level: str = "warning",
        allowed_hosts: tuple[str, ...] | list[str] = (),
        max_connections: int = MAX_CONNECTIONS,
        header_timeout: float = HEADER_TIMEOUT,
        **options: Any,
    ) -> None:
        self.app = create_app(store, allowed_hosts=_names(host, allowed_hosts), **options)
        self._sock = _bind(host, port)
        self.host = host
        self.port = int(self._sock.getsockname()[1])
        config = uvicorn.Config(
            self.app,
            access_log=False,
            log_level=log_level,
            http=_bounded(max_connections, header_timeout),
            **_UVICORN,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._sock]},
            name=f"rdfmem-serve-{self.port}",
            daemon=True,
        )

    @property
    def url(self) -> str:
        """The server's base URL (``http://127.0.0.1:PORT``)."""
        return _url(self.host, self.port)

    @property
    def sparql_url(self) -> str:
        """The SPARQL endpoint (``…/sparql``)."""
        return self.url + "/sparql"

    def start(self, timeout: float = 10.0) -> BackgroundServer:
        """Start serving; returns once the server accepts connections."""
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise BackingError(f"the server on {self.url} did not start", cause=None)
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and release the port (idempotent). Queries still running on a
        worker finish in the background."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._sock.close()
        self.app.close()  # its worker threads end once their jobs are done

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"BackgroundServer({self.url!r})"
