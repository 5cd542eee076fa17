"""Running the endpoint with uvicorn: in the foreground (``serve``), or on a background thread
of the process that owns the store (``BackgroundServer``), so that external tools can read an
agent's memory while the agent keeps using it.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from types import TracebackType
from typing import Any

import uvicorn

from ..errors import BackingError
from ..store import RdfStore
from .app import create_app

__all__ = ["BackgroundServer", "serve"]


#: No lifespan events (the caller owns the store), no ``Server: uvicorn`` header, and no
#: ``X-Forwarded-*`` rewriting: the endpoint is not meant to sit behind a proxy by default.
_UVICORN: dict[str, Any] = {"lifespan": "off", "server_header": False, "proxy_headers": False}


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
        raise BackingError(f"cannot listen on {host}:{port}: {exc}", cause=exc) from exc
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
    **options: Any,
) -> None:
    """Serve ``store`` until interrupted (Ctrl-C). ``options`` go to ``create_app``.

    Raises:
        BackingError: the address cannot be listened on.
        ServerConfigError: options that do not fit together.
    """
    app = create_app(store, **options)
    sock = _bind(host, port)
    # This process only serves: hand the GIL between the event loop and the query workers
    # every 0.2 ms rather than 5 ms, or each worker waits for the busy loop (+30% req/s).
    sys.setswitchinterval(min(sys.getswitchinterval(), 0.0002))
    config = uvicorn.Config(app, access_log=access_log, log_level=log_level, **_UVICORN)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()


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
        **options: Any,
    ) -> None:
        self.app = create_app(store, **options)
        self._sock = _bind(host, port)
        self.host = host
        self.port = int(self._sock.getsockname()[1])
        config = uvicorn.Config(self.app, access_log=False, log_level=log_level, **_UVICORN)
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
