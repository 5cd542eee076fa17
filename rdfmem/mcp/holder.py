"""The warm holder of ``rdfmem mcp --keep-warm`` (the starting side is
``rdfmem.mcp.handoff``): one process, everything imported and the memory open, that
serves every stdio session handed to it, each over the descriptors its starter passed.

All sessions share one ``Services`` (one store, one knowledge-graph mirror), as the
clients of ``rdfmem mcp --http`` do; each has its own MCP session, so each client's name is
its own in the history. The holder listens on a socket it made before importing anything
heavy (so a starter can connect and queue at once), takes a session by answering ``TAKEN``,
says ``DONE`` when it ended, and exits once no session has been open for ``idle_s``,
removing its socket first (a starter that arrives then spawns a new holder); on SIGTERM
it ends the sessions still open and does the same.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import socket
import struct
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from rdfmem.mcp.handoff import DONE, HELLO, TAKEN
from rdfmem.mcp.server import build_server, prepare, serve_streams
from rdfmem.mcp.services import Services

__all__ = ["hold"]

logger = logging.getLogger(__name__)
_ACCEPT_POLL_S = 0.2


def _same_user(conn: socket.socket) -> bool:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", creds)
    return bool(uid == os.getuid())


class _Holder:
    def __init__(
        self, services: Services, tools: Sequence[str], listener: socket.socket, path: Path
    ) -> None:
        self.services = services
        self.tools = tools
        self.listener = listener
        self.path = path
        self.inode = os.stat(path).st_ino
        self.open = 0
        self.last = time.monotonic()
        self.stopping = threading.Event()
        self.prepared = False
        #: Threads that only wait on sockets (accepting, a session's starter): their own
        #: pool, so many open sessions never take the tool calls' worker threads.
        self.waits = anyio.CapacityLimiter(10_000)

    def accept(self) -> socket.socket | None:
        self.listener.settimeout(_ACCEPT_POLL_S)
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return None
            conn.settimeout(None)
            if _same_user(conn):
                return conn
            conn.close()
        return None

    async def main(self, idle_s: float) -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(self.idle, idle_s)
            while True:
                conn = await anyio.to_thread.run_sync(self.accept, limiter=self.waits)
                if conn is None:
                    break
                group.start_soon(self.session, conn)
            self.unlink()
            group.cancel_scope.cancel()  # stopping: the sessions still open end now

    async def idle(self, idle_s: float) -> None:
        while True:
            await anyio.sleep(min(1.0, idle_s / 4))
            if self.open == 0 and time.monotonic() - self.last >= idle_s:
                self.unlink()
                self.stopping.set()
                return

    def unlink(self) -> None:
        """Remove the socket, while it is still this holder's: new starters spawn a new
        holder from here."""
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_ino == self.inode:
                self.path.unlink()

    async def session(self, conn: socket.socket) -> None:
        self.open += 1
        files: list[Any] = []
        try:
            message, fds, _, _ = await anyio.to_thread.run_sync(
                socket.recv_fds, conn, 256, 2, limiter=self.waits
            )
            if message != HELLO or len(fds) != 2 or self.stopping.is_set():
                for fd in fds:
                    os.close(fd)
                return
            reader = io.TextIOWrapper(os.fdopen(fds[0], "rb"), encoding="utf-8", errors="replace")
            writer = io.TextIOWrapper(os.fdopen(fds[1], "wb"), encoding="utf-8")
            files = [reader, writer]
            conn.sendall(TAKEN)
            await self.serve(conn, anyio.wrap_file(reader), anyio.wrap_file(writer))
        except Exception:  # one session's failure is not the holder's end
            logger.exception("an MCP session failed")
        finally:
            for file in files:
                with contextlib.suppress(OSError, ValueError):
                    file.close()
            with contextlib.suppress(OSError):
                conn.sendall(DONE)
            conn.close()
            self.open -= 1
            self.last = time.monotonic()

    async def serve(
        self, conn: socket.socket, stdin: anyio.AsyncFile[str], stdout: anyio.AsyncFile[str]
    ) -> None:
        server = build_server(self.services, self.tools)
        answered = threading.Event()
        if not self.prepared:  # the first session opens the memory, as a fresh server does
            self.prepared = True
            prepare(self.services, server, after=answered, stopping=self.stopping)
        async with anyio.create_task_group() as group:

            async def starter_gone() -> None:
                # The starter's end of the socket closed: its host is gone too.
                await anyio.to_thread.run_sync(
                    conn.recv, 1, abandon_on_cancel=True, limiter=self.waits
                )
                group.cancel_scope.cancel()

            group.start_soon(starter_gone)
            await serve_streams(server, answered, stdin, stdout)
            group.cancel_scope.cancel()


def hold(
    services: Services,
    tools: Sequence[str],
    listener: socket.socket,
    path: Path,
    idle_s: float,
) -> None:
    """Serve the sessions handed over at ``path`` until none was open for ``idle_s``."""
    holder = _Holder(services, tools, listener, path)
    # SIGTERM (a shutdown, a user's kill): end the open sessions, remove the socket, close
    # the memory (the caller does), as after the idle time.
    signal.signal(signal.SIGTERM, lambda *_: holder.stopping.set())
    try:
        anyio.run(holder.main, idle_s)
    finally:
        listener.close()
