"""Running the endpoint with uvicorn: in the foreground (``serve``), or on a background thread
of the process that owns the store (``BackgroundServer``), so that external tools can read an
agent's memory while the agent keeps using it.
"""

from __future__ import annotations

import errno
import gc
import ipaddress
import socket
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import uvicorn

from rdfmem.core.errors import BackingError
from rdfmem.server.app import create_app
from rdfmem.server.fleet import Fleet, readable_folder
from rdfmem.server.protocols import LISTEN_BACKLOG, ShedServer, bounded_protocol
from rdfmem.server.shedding import Room, Shedder, connection_room
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
#: Seconds a client may take to send a request's line and headers.
HEADER_TIMEOUT = 10.0


def _server(app: Any, room: Room, header_timeout: float, **config: Any) -> ShedServer:
    """uvicorn serving ``app`` with the connection cap of ``room`` (see ``shedding.py``)."""
    shedder = Shedder(room.cap)
    settings = uvicorn.Config(
        app,
        http=bounded_protocol(shedder, header_timeout, getattr(app, "lane", None)),
        backlog=room.burst,  # connections accepted per wake-up; the kernel's queue stays long
        **_UVICORN,
        **config,
    )
    return ShedServer(settings, shedder, room.burst)


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
    sock.listen(LISTEN_BACKLOG)
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
    max_connections: int | None = None,
    header_timeout: float = HEADER_TIMEOUT,
    announce: Callable[[str], object] | None = None,
    workers: int = 0,
    **options: Any,
) -> None:
    """Serve ``store`` until interrupted (Ctrl-C). ``options`` go to ``create_app``.

    ``allowed_hosts`` are host names besides ``localhost`` and IP addresses that the server
    answers to (the bound name is added); ``max_connections`` caps open connections (the cap
    derived from the descriptor limit when None, and never above it: ``shedding.py``; at the
    cap the slowest waiting connection is closed to admit a new one) and ``header_timeout``
    is how long a client may take to send its request headers.
    ``workers``: answer from that many reader processes on the one listening socket, each
    with a read-only open of the store (an on-disk store this process owns; ``fleet.py``),
    this process keeping the writes.
    ``announce`` is called with the server's URL once the address is listened on, and only
    then (a busy port raises before anything says "serving").

    Raises:
        BackingError: the address cannot be listened on.
        ServerConfigError: options that do not fit together.
    """
    names = _names(host, allowed_hosts)
    if workers:
        readable_folder(store)  # before anything listens: an unfit store is refused
    app = create_app(store, allowed_hosts=names, **options)
    sock = _bind(host, port)
    if announce is not None:
        announce(_url(host, int(sock.getsockname()[1])))
    if workers:
        _serve_with_readers(
            store,
            app,
            sock,
            workers,
            names,
            header_timeout,
            options,
            {
                "max_connections": max_connections,
                "header_timeout": header_timeout,
                "access_log": access_log,
                "log_level": log_level,
            },
        )
        return
    # This process only serves: hand the GIL between the event loop and the query workers
    # every 0.2 ms rather than 5 ms, or each worker waits for the busy loop (+30% req/s).
    sys.setswitchinterval(min(sys.getswitchinterval(), 0.0002))
    _settle_heap()
    room = connection_room(max_connections)
    server = _server(app, room, header_timeout, access_log=access_log, log_level=log_level)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        app.close()


def _serve_with_readers(
    store: RdfStore,
    app: Any,
    sock: socket.socket,
    workers: int,
    names: tuple[str, ...],
    header_timeout: float,
    options: dict[str, Any],
    server_options: dict[str, Any],
) -> None:
    """The owner's side of ``serve(workers=N)``: the readers take the public socket, this
    process answers only the updates they send on, on a private loopback port."""
    private = _bind("127.0.0.1", 0)
    reader_options = {k: v for k, v in options.items() if k not in ("allow_update", "token")}
    reader_options["allowed_hosts"] = list(names)
    fleet = Fleet(
        store,
        workers,
        listen_fd=sock.fileno(),
        owner_url=_url("127.0.0.1", int(private.getsockname()[1])),
        app_options=reader_options,
        server_options=server_options,
    )
    room = connection_room(server_options["max_connections"])
    server = _server(
        app,
        room,
        header_timeout,
        access_log=server_options["access_log"],
        log_level=server_options["log_level"],
    )
    fleet.start()
    try:
        server.run(sockets=[private])
    finally:
        fleet.stop()
        private.close()
        sock.close()
        app.close()


def _settle_heap() -> None:
    """Leave what this serving-only process holds after its start (modules, the app, the
    store) out of the garbage collector's full passes: each would walk every one of those
    objects again, a pause of milliseconds in the middle of answering."""
    gc.collect()
    gc.freeze()


def run_reader(app: Any, sock: socket.socket, settings: dict[str, Any]) -> None:
    """Serve ``app`` on the inherited listening ``sock`` until stopped (a reader process of
    ``serve(workers=N)``; ``readers.py``)."""
    sys.setswitchinterval(min(sys.getswitchinterval(), 0.0002))
    _settle_heap()
    room = connection_room(settings["max_connections"])
    server = _server(
        app,
        room,
        settings["header_timeout"],
        access_log=settings["access_log"],
        log_level=settings["log_level"],
    )
    try:
        server.run(sockets=[sock])
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
        allowed_hosts: tuple[str, ...] | list[str] = (),
        max_connections: int | None = None,
        header_timeout: float = HEADER_TIMEOUT,
        **options: Any,
    ) -> None:
        self.app = create_app(store, allowed_hosts=_names(host, allowed_hosts), **options)
        self._sock = _bind(host, port)
        self.host = host
        self.port = int(self._sock.getsockname()[1])
        room = connection_room(max_connections)
        self._server = _server(
            self.app, room, header_timeout, access_log=False, log_level=log_level
        )
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
