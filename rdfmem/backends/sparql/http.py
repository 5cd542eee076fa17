"""A lean ``httpx`` transport for the remote store's asyncio calls: HTTP/1.1 on asyncio
streams, connections kept alive, parsed by ``h11`` (httpx's own parser).

Why: on one event loop, httpx's default async transport (httpcore on anyio) spent about
twice the CPU per request of the sync client (measured: 5.5 ms against 3.1 ms of client
CPU per ``update`` + ``get`` pair), and with one loop the client's CPU is the limit. This
transport keeps httpx's client (auth, headers, cookies, the ``Response``) and replaces what
sits under it for ``http://`` URLs; ``https://`` goes through httpx's own transport.

Transport failures are ``httpx.TransportError`` (the caller makes them ``Unreachable``).
A request that finds its kept-alive connection closed by the server before any answer
arrived is sent again on a new connection only when it is a query (``query=``): an update
is never sent twice.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import Any, TypeVar

import h11
import httpx

__all__ = ["LeanTransport"]

T = TypeVar("T")
_CHUNK = 1 << 16


class _Closed(Exception):
    """The server closed a kept-alive connection before any byte of an answer."""


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.h11 = h11.Connection(h11.CLIENT)
        self.used = False

    def usable(self) -> bool:
        return not (self.reader.at_eof() or self.writer.is_closing())

    async def exchange(self, request: httpx.Request, body: bytes) -> httpx.Response:
        conn = self.h11
        target = request.url.raw_path
        head = [(k, v) for k, v in request.headers.raw]
        out = conn.send(h11.Request(method=request.method, target=target, headers=head)) or b""
        if body:
            out += conn.send(h11.Data(data=body)) or b""
        out += conn.send(h11.EndOfMessage()) or b""
        self.writer.write(out)
        await self.writer.drain()
        status, headers, parts, got = 0, [], [], False
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                chunk = await self.reader.read(_CHUNK)
                if not chunk and not got and self.used:
                    raise _Closed
                got = got or bool(chunk)
                conn.receive_data(chunk)
            elif isinstance(event, h11.Response):
                status, headers = event.status_code, list(event.headers)
            elif isinstance(event, h11.Data):
                parts.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed):
                raise httpx.RemoteProtocolError("the server closed the connection mid-answer")
        self.used = True
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()
        else:
            self.close()
        return httpx.Response(
            status,
            headers=headers,
            content=b"".join(parts),
            request=request,
            extensions={"http_version": b"HTTP/1.1"},
        )

    def close(self) -> None:
        self.writer.close()


class LeanTransport(httpx.AsyncBaseTransport):
    """Plain-HTTP keep-alive connections on the running event loop (the caller bounds how
    many requests are in flight); other schemes go to ``fallback``."""

    def __init__(self, fallback: httpx.AsyncBaseTransport) -> None:
        self._fallback = fallback
        self._idle: dict[tuple[str, int], list[_Connection]] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http":
            return await self._fallback.handle_async_request(request)
        body = await request.aread()
        timeouts: dict[str, Any] = request.extensions.get("timeout", {})
        key = (url.host, url.port or 80)
        idle = self._idle.setdefault(key, [])
        while True:
            conn = None
            while idle and conn is None:
                conn = idle.pop()
                if not conn.usable():
                    conn.close()
                    conn = None
            if conn is None:
                conn = await _within(timeouts.get("connect"), self._open(key), "connect")
            try:
                response = await _within(timeouts.get("read"), conn.exchange(request, body))
            except _Closed:
                conn.close()
                if body.startswith(b"query="):
                    continue  # a query, never answered: send it again on a new connection
                raise httpx.RemoteProtocolError(
                    "the server closed a kept-alive connection before answering an update "
                    "(not sent again: it may have been applied)"
                ) from None
            except BaseException as exc:
                conn.close()
                if isinstance(exc, httpx.TransportError):
                    raise
                if isinstance(exc, (OSError, h11.ProtocolError, EOFError)):
                    raise httpx.ReadError(f"{type(exc).__name__}: {exc}") from exc
                raise
            if conn.h11.our_state is h11.IDLE:
                idle.append(conn)
            return response

    async def _open(self, key: tuple[str, int]) -> _Connection:
        try:
            reader, writer = await asyncio.open_connection(key[0], key[1])
        except OSError as exc:
            raise httpx.ConnectError(f"{type(exc).__name__}: {exc}") from exc
        return _Connection(reader, writer)

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()
        await self._fallback.aclose()


async def _within(seconds: float | None, work: Awaitable[T], what: str = "read") -> T:
    """``work``, or ``httpx.ConnectTimeout`` / ``ReadTimeout`` past ``seconds``."""
    if seconds is None:
        return await work
    error = httpx.ConnectTimeout if what == "connect" else httpx.ReadTimeout
    try:
        if sys.version_info >= (3, 11):
            async with asyncio.timeout(seconds):
                return await work
        return await asyncio.wait_for(work, seconds)
    except (asyncio.TimeoutError, TimeoutError) as exc:
        raise error(f"no answer within {seconds} s") from exc
