"""A reader process of ``rdfmem serve --workers N`` (started by ``fleet.py``): it accepts
connections on the listening socket it inherited, beside its siblings, and answers them from
a read-only open of the on-disk store (``pyoxigraph.Store.read_only``).

* **Never stale after an acknowledged write.** Before each request the reader compares the
  owner's published write generation (``generation.py``) with the one it opened at; when it
  moved, it opens the store again (~20 ms) before answering. The generation is read before
  the open, so a write landing in between only causes one more open.
* **Updates go to the owner.** A ``POST /sparql`` carrying an update (a
  ``application/sparql-update`` body, or a form with ``update=``) is sent on, as it came, to
  the owner process on its private loopback port, and its answer relayed; the reader's own
  app has updates off and its store cannot write.
* **The same limits.** The reader runs the same app as the owner (the sandbox for every read
  that is not a point lookup, in children forked from this small process), the same
  connection cap and shedding (``shedding.py``).

Run as ``python -m rdfmem.server.readers``, its settings as one JSON line on stdin.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rdfmem.core.errors import HttpError
from rdfmem.server.endpoint import error_response
from rdfmem.server.generation import Published
from rdfmem.server.incoming import media_type, pairs, read_body
from rdfmem.store.readonly import ReadOnlyOpen

__all__ = ["Forwarding", "Snapshot", "main"]

#: Seconds between two looks at whether the owner process is still there.
_OWNER_POLL = 0.5
_UPDATE = "application/sparql-update"
_FORM = "application/x-www-form-urlencoded"
#: Hop-by-hop and length headers: the relay sets its own.
_DROP = {b"connection", b"keep-alive", b"transfer-encoding", b"content-length", b"host"}


class Snapshot:
    """A read-only open of the store at ``path``, opened again when the owner's published
    generation moves (``fresh``)."""

    def __init__(self, path: str, published: Published) -> None:
        self.path = path
        self.published = published
        self.seen = published.value  # read before the open: never newer than the data
        self.opened = ReadOnlyOpen(path)
        #: Opens after the first (one per write generation seen).
        self.reopened = 0

    def fresh(self) -> None:
        """Open the store again if the owner wrote since the last open."""
        now = self.published.value
        if now != self.seen:
            self.opened.reopen()  # the sandbox's children read the old open: retired
            self.seen = now
            self.reopened += 1


class Forwarding:
    """The reader's app: checks the snapshot, sends updates to the owner, the rest to
    ``app``."""

    def __init__(
        self,
        app: ASGIApp,
        snapshot: Snapshot,
        owner_url: str,
        *,
        max_body: int,
        body_timeout: float,
        timeout: float,
    ) -> None:
        self.app = app
        self.state = getattr(app, "state", None)
        self.snapshot = snapshot
        self.owner_url = owner_url
        self.max_body = max_body
        self.body_timeout = body_timeout
        self._client = httpx.AsyncClient(base_url=owner_url, timeout=timeout + 5)
        #: The app's fast lane of plain query requests (``lane.py``), the snapshot checked
        #: before each as here; the lane never takes an update.
        self.lane = getattr(app, "lane", None)
        if self.lane is not None:
            self.lane.before = snapshot.fresh

    def close(self) -> None:
        """Release the app (its query workers); idempotent."""
        closing = getattr(self.app, "close", None)
        if closing is not None:
            closing()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.snapshot.fresh()
        if scope["method"] != "POST" or scope["path"] != "/sparql":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        media, _ = media_type(request)
        if media not in (_UPDATE, _FORM):
            await self.app(scope, receive, send)
            return
        try:
            body = await read_body(request, limit=self.max_body, timeout=self.body_timeout)
            is_update = media == _UPDATE or any(k == "update" for k, _ in pairs(body, "body"))
        except HttpError as exc:
            await error_response(exc)(scope, receive, send)
            return
        if is_update:
            await self._forward(scope, body)(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    def _forward(self, scope: Scope, body: bytes) -> _Relay:
        return _Relay(self._client, scope, body)


class _Relay:
    """Sends the request on to the owner and answers with what it said."""

    def __init__(self, client: httpx.AsyncClient, scope: Scope, body: bytes) -> None:
        self.client = client
        self.scope = scope
        self.body = body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _DROP]
        host = dict(scope["headers"]).get(b"host")
        if host is not None:
            headers.append((b"host", host))  # the owner checks the name the client used
        query = scope.get("query_string", b"").decode("latin-1")
        try:
            answer = await self.client.request(
                "POST",
                scope["path"] + (f"?{query}" if query else ""),
                content=self.body,
                headers=headers,
            )
        except httpx.HTTPError as exc:
            response = error_response(HttpError(503, f"the store's owner did not answer: {exc}"))
        else:
            kept = {
                k: v
                for k, v in answer.headers.items()
                if k.lower().encode() not in _DROP and k.lower() != "content-encoding"
            }
            response = Response(answer.content, answer.status_code, kept)
        await response(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` (already read) once, then what ``receive`` gives."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


def _end_with_owner() -> None:  # pragma: no cover - runs in the reader process
    """Stop this reader (as Ctrl-C would) once the owner process is gone, however it ended:
    uvicorn ends the owner on SIGTERM by raising the signal again after its shutdown, before
    the owner could stop its readers, and an orphan would keep answering on the port."""
    owner = os.getppid()

    def watch() -> None:
        while os.getppid() == owner:
            time.sleep(_OWNER_POLL)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="rdfmem-owner-watch", daemon=True).start()


def main() -> None:  # pragma: no cover - runs in the reader process (tests/test_server_workers*)
    """Serve as one reader: settings from stdin (one JSON object), then until stopped."""
    from rdfmem.server.app import create_app
    from rdfmem.server.running import run_reader

    settings: dict[str, Any] = json.loads(sys.stdin.readline())
    _end_with_owner()
    published = Published(Path(settings["generation_file"]))
    snapshot = Snapshot(settings["path"], published)
    options = settings["options"]
    app = create_app(snapshot.opened.store, **options)
    forwarding = Forwarding(
        app,
        snapshot,
        settings["owner_url"],
        max_body=options.get("max_body", 1 << 20),
        body_timeout=options.get("body_timeout", 30.0),
        timeout=options.get("timeout", 30.0),
    )
    sock = socket.socket(fileno=settings["fd"])
    try:
        run_reader(forwarding, sock, settings["server"])
    finally:
        forwarding.close()
        published.close()


if __name__ == "__main__":  # pragma: no cover
    main()
