"""uvicorn's HTTP protocols with what they lack: a time limit on a request's line and headers,
and a cap on open connections that sheds the slowest waiting one (``shedding.py``).

Each connection tells its server's ``Shedder`` when it starts waiting (connected, a request
begun, an answer sent on a kept-alive connection) and when it becomes busy (a request arrived
whole): the shedder closes the connection waiting longest when a new one passes the cap.
Pipelined requests are not told apart: a connection that begins a second request while its
first is answered counts as waiting again.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from rdfmem.server.answers import Answer
from rdfmem.server.lane import Lane, Started, response_bytes
from rdfmem.server.shedding import Shedder

__all__ = ["LISTEN_BACKLOG", "ShedServer", "bounded_protocol"]

_log = logging.getLogger("rdfmem.server")

#: Connections the kernel holds for the server before it accepts them.
LISTEN_BACKLOG = 2048
#: Seconds between two warnings that the process ran out of descriptors.
_WARN_EVERY = 10.0


class _Limits:
    """Mixed into uvicorn's httptools protocol (when installed) or its h11 protocol.

    The header time limit is kept lazily: arming and disarming only note when the wait
    began (a request's line and headers are awaited since ``_since``); one timer per
    connection, set when none is, looks at that note when it fires and sets itself again
    for what is left, so a kept-alive connection does not set and cancel a timer for every
    request it sends."""

    shedder: Shedder
    header_timeout: float
    _header_timer: asyncio.TimerHandle | None = None
    _since: float | None = None  # waiting for a request's headers since (loop time)
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport

    def _admit(self) -> None:
        if self.shedder.opened(self):
            self._arm()

    def shed(self) -> None:
        """Close at once (the shedder chose this connection); its descriptor is released."""
        self._stop_timer()
        self.transport.abort()

    def _arm(self) -> None:
        if self._since is None:
            self._since = self.loop.time()
        if self._header_timer is None and not self.transport.is_closing():
            self._header_timer = self.loop.call_later(self.header_timeout, self._too_slow)

    def _disarm(self) -> None:
        self._since = None

    def _stop_timer(self) -> None:
        self._since = None
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _too_slow(self) -> None:
        self._header_timer = None
        since = self._since
        if since is None or self.transport.is_closing():
            return  # not waiting for headers now: the next wait sets a timer again
        left = since + self.header_timeout - self.loop.time()
        if left > 0:
            self._header_timer = self.loop.call_later(left, self._too_slow)
            return
        self.transport.close()

    def _gone(self) -> None:
        self._stop_timer()
        self.shedder.closed(self)


class _BoundedH11(_Limits, H11Protocol):
    conn: h11.Connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._admit()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        state = self.conn.their_state
        if state is h11.IDLE:  # still waiting for a request's headers
            self._arm()
        else:
            self._disarm()
        if state is h11.IDLE or state is h11.SEND_BODY:
            pass  # still waiting: its place in the shedder's line stays
        else:
            self.shedder.busy(self)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self.shedder.waiting(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._gone()
        super().connection_lost(exc)


class _OneWrite:
    """A transport whose write of a response's head (``hold`` set) waits to go out with the
    next write, its body; every other call goes to the transport itself."""

    __slots__ = ("_held", "_transport", "hold")

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._held = b""
        self.hold = False

    def write(self, data: bytes) -> None:
        if self.hold:
            self._held += data
            return
        if self._held:
            data, self._held = self._held + data, b""
        self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def flush(self) -> None:
        """Write what is held (a head with no body to follow)."""
        if self._held:
            held, self._held = self._held, b""
            self._transport.write(held)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _head_with_body(
    send: Callable[[Any], Awaitable[None]], transport: _OneWrite
) -> Callable[[Any], Awaitable[None]]:
    """uvicorn's ``send`` of one response, its status line and headers written with the
    body's first bytes: one write, one TCP segment for a small answer instead of two (and
    one wake-up of the client instead of two)."""

    async def holding(message: Any) -> None:
        if message["type"] != "http.response.start":
            await send(message)
            transport.flush()  # a body uvicorn does not write (HEAD) leaves the head held
            return
        transport.hold = True
        try:
            await send(message)
        finally:
            transport.hold = False

    return holding


_PROTOCOLS: list[type[Any]] = [_BoundedH11]
try:  # uvicorn's faster parser, when installed
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class _Queued:
        """Stands for the lane's answer in progress: uvicorn queues a request behind it."""

        response_complete = False

    _QUEUED = _Queued()

    class _BoundedHttpTools(_Limits, HttpToolsProtocol):
        #: Plain ``GET /sparql?query=`` requests answered without the ASGI stack (``lane.py``).
        lane: Lane | None = None
        _job: Started | None = None
        _pending = False  # the lane's answer to this connection's request is being made
        _close_after = False  # the server is stopping: close once that answer is written
        _held = False  # reading paused by the lane until the client reads its answers

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.transport = _OneWrite(transport)  # type: ignore[assignment]
            self._admit()

        def on_message_begin(self) -> None:
            # uvicorn's, but for its ASGI scope: made in ``on_headers_complete`` only for a
            # request that goes the full way.
            self.url = b""
            self.expect_100_continue = False
            self.headers = []
            self.shedder.waiting(self)  # a request begun: its wait starts now
            self._arm()

        def on_headers_complete(self) -> None:
            self._disarm()
            if self.lane is not None and self._plain():
                job = self.lane.take(self.url, self.headers)
                if job is not None:
                    self._job = job
                    return
            url, headers, expect = self.url, self.headers, self.expect_100_continue
            HttpToolsProtocol.on_message_begin(self)  # the scope, as uvicorn makes it
            self.url, self.headers, self.expect_100_continue = url, headers, expect
            self.scope["headers"] = headers
            if self._pending:  # pipelined behind the lane's answer: uvicorn queues it
                self.cycle = _QUEUED  # type: ignore[assignment]
            super().on_headers_complete()
            cycle = self.cycle
            if cycle is not None and isinstance(self.transport, _OneWrite):
                cycle.send = _head_with_body(cycle.send, self.transport)

        def _plain(self) -> bool:
            """Nothing before this request still being answered, and a kept-alive GET."""
            parser = self.parser
            return (
                not self._pending
                and not self.pipeline
                and (self.cycle is None or self.cycle.response_complete)
                and parser.get_method() == b"GET"
                and parser.get_http_version() == "1.1"
                and parser.should_keep_alive()
                and not parser.should_upgrade()
            )

        def on_body(self, body: bytes) -> None:
            if self._job is None:
                super().on_body(body)

        def on_message_complete(self) -> None:
            job, self._job = self._job, None
            if job is None:
                super().on_message_complete()
            self.shedder.busy(self)
            if job is None:
                return
            if isinstance(job, tuple):
                self._respond(job)
                return
            self._pending = True
            task = self.loop.create_task(job)
            self.tasks.add(cast(Any, task))
            task.add_done_callback(self._finished)

        def _finished(self, task: asyncio.Task[Answer]) -> None:
            self.tasks.discard(cast(Any, task))
            self._pending = False
            if task.cancelled():
                self.transport.close()
                return
            outcome = task.exception() or task.result()
            self._respond(Lane.finish(outcome))

        def _respond(self, response: tuple[int, str, bytes, dict[str, str]]) -> None:
            if self.transport.is_closing():
                return  # the client went away meanwhile
            status, content_type, body, headers = response
            defaults = self.server_state.default_headers
            self.transport.write(response_bytes(status, content_type, body, headers, defaults))
            if self.access_log:
                client = f"{self.client[0]}:{self.client[1]}" if self.client else ""
                line = '%s - "GET %s HTTP/1.1" %d'
                self.access_logger.info(line, client, self.url.decode("ascii"), status)
            if self._close_after:
                self.transport.close()
                return
            self.on_response_complete()
            if self.flow.write_paused:  # the client reads slower than it asks: wait for it
                self._held = True
                self.flow.pause_reading()

        def resume_writing(self) -> None:
            super().resume_writing()
            if self._held:
                self._held = False
                self.flow.resume_reading()

        def shutdown(self) -> None:
            if self._pending:
                self._close_after = True
                return
            super().shutdown()

        _idle_since: float | None = None  # kept alive with no request since (loop time)

        def on_response_complete(self) -> None:
            # uvicorn's, its keep-alive time limit kept lazily as the header one (``_Limits``):
            # the idle wait is noted, and one timer, set when none is, looks at the note.
            self.server_state.total_requests += 1
            if self.transport.is_closing():
                return
            self._idle_since = None
            self.flow.resume_reading()
            if self.pipeline:
                cycle, app = self.pipeline.pop()
                self._start_asgi_task(cycle, app)
            else:
                self._idle_since = self.loop.time()
                if self.timeout_keep_alive_task is None:
                    self.timeout_keep_alive_task = self.loop.call_later(
                        self.timeout_keep_alive, self._idle_too_long
                    )
            self.shedder.waiting(self)

        def _unset_keepalive_if_required(self) -> None:
            self._idle_since = None  # data came: no longer idle (the timer stays)

        def _idle_too_long(self) -> None:
            self.timeout_keep_alive_task = None
            since = self._idle_since
            if since is None or self.transport.is_closing():
                return
            left = since + self.timeout_keep_alive - self.loop.time()
            if left > 0:
                self.timeout_keep_alive_task = self.loop.call_later(left, self._idle_too_long)
                return
            self.timeout_keep_alive_handler()

        def connection_lost(self, exc: Exception | None) -> None:
            self._gone()
            self._idle_since = None
            if self.timeout_keep_alive_task is not None:
                self.timeout_keep_alive_task.cancel()
                self.timeout_keep_alive_task = None
            super().connection_lost(exc)

    _PROTOCOLS.insert(0, _BoundedHttpTools)
except ImportError:  # pragma: no cover - httptools is optional
    pass


def bounded_protocol(
    shedder: Shedder, header_timeout: float, lane: Lane | None = None
) -> type[Any]:
    """uvicorn's HTTP protocol class, its connections counted by ``shedder`` and given
    ``header_timeout`` seconds to send a request's line and headers; with httptools, plain
    query requests are answered by ``lane`` (``lane.py``)."""
    return type(
        "BoundedHttp",
        (_PROTOCOLS[0],),
        {"shedder": shedder, "header_timeout": header_timeout, "lane": lane},
    )


class ShedServer(uvicorn.Server):
    """uvicorn's server, accepting ``burst`` connections at most per wake-up of the event loop
    (asyncio's loop; uvloop accepts what is there) while the kernel keeps a long queue, and
    shedding waiting connections when the process runs out of descriptors anyway."""

    def __init__(self, config: uvicorn.Config, shedder: Shedder, burst: int) -> None:
        super().__init__(config)
        self.shedder = shedder
        self.burst = burst
        self._warned = float("-inf")

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        loop = asyncio.get_running_loop()
        previous = loop.get_exception_handler()

        def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            if context.get("message") == "socket.accept() out of system resource":
                self._out_of_descriptors()  # asyncio accepts again in a second
                return
            if previous is not None:
                previous(loop, context)
            else:
                loop.default_exception_handler(context)

        loop.set_exception_handler(handler)
        await super().startup(sockets)
        for sock in sockets or ():
            sock.listen(LISTEN_BACKLOG)  # asyncio listened with ``burst``: the queue stays long

    def _out_of_descriptors(self) -> None:
        shed = self.shedder.relieve(self.burst)
        now = time.monotonic()
        if now - self._warned >= _WARN_EVERY:
            self._warned = now
            _log.warning(
                "out of file descriptors with %d connections open: shed %d waiting ones; "
                "raise the limit (ulimit -n) or lower --max-connections",
                self.shedder.open,
                shed,
            )
