"""The fast lane: ``GET /sparql?query=…``, the one request shape SPARQL clients send most,
answered straight from the HTTP parser's callbacks instead of through the ASGI stack.

A request on the lane skips what the full path spends per answer on objects it does not need
(uvicorn's request cycle and its task, the ASGI scope and messages, Starlette's request and
response): a point query is answered inside the parser's callback, any other query runs as
one task that writes its bytes when the answer is there. The answer is the one the full path
gives (the same ``Endpoint.start_query``: the guard, the sandbox, the limits, the same status
codes, headers and body). Only plain requests take the lane: ``GET`` on HTTP/1.1, kept alive,
no body, the path ``/sparql`` with one parameter ``query``, a ``Host`` the server answers to
and no ``Origin`` (``gate.py`` judges those), CORS off. Anything else (and any doubt) goes the
full way, where it is answered or refused as before.
"""

from __future__ import annotations

import codecs
import logging
from collections.abc import Callable, Coroutine
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

from rdfmem.core.errors import HttpError
from rdfmem.server.answers import Answer
from rdfmem.server.endpoint import Endpoint
from rdfmem.server.gate import host_allowed_kept

__all__ = ["Lane", "Started", "response_bytes", "unquoted"]

_log = logging.getLogger("rdfmem.server")
_PREFIX = b"/sparql?query="
_TEXT = "text/plain; charset=utf-8"
#: Status lines, as uvicorn writes them.
_STATUS = {
    code: f"HTTP/1.1 {code} {HTTPStatus(code).phrase}\r\n".encode("ascii")
    for code in (200, 204, 400, 403, 404, 405, 406, 408, 413, 415, 421, 422, 500, 502, 503)
}
#: Headers that make a request not plain (a body, a cross-site caller, an upgrade …);
#: ``Connection`` is judged by the parser (kept alive or not).
_NOT_PLAIN = frozenset((b"origin", b"content-length", b"transfer-encoding", b"expect", b"upgrade"))


def response_bytes(
    status: int,
    content_type: str,
    body: bytes,
    headers: dict[str, str],
    default_headers: list[tuple[bytes, bytes]],
) -> bytes:
    """A whole HTTP/1.1 response, as the full path writes it (uvicorn's default headers, then
    the handler's, then Starlette's ``content-length`` and ``content-type``)."""
    line = _STATUS.get(status) or f"HTTP/1.1 {status} \r\n".encode("ascii")
    parts = [line]
    for name, value in default_headers:
        parts += [name, b": ", value, b"\r\n"]
    for key, text in headers.items():
        parts += [key.lower().encode("latin-1"), b": ", text.encode("latin-1"), b"\r\n"]
    parts += [b"content-length: ", str(len(body)).encode("ascii"), b"\r\n"]
    parts += [b"content-type: ", content_type.encode("latin-1"), b"\r\n\r\n", body]
    return b"".join(parts)


def unquoted(raw: bytes) -> str:
    """A query string's value, ``+`` and ``%XX`` decoded as ``urllib.parse.unquote`` does
    (a ``%`` not followed by two hex digits kept as it is), in C for the common case.

    >>> unquoted(b"SELECT+%3Fo+%7B%7D%20%zz")
    'SELECT ?o {} %zz'

    Raises:
        UnicodeDecodeError: bytes that are not ASCII, or escapes that are not UTF-8.
    """
    text = raw.decode("ascii").replace("+", " ")
    if "%" not in text:
        return text
    spaced = raw.replace(b"+", b" ")
    try:  # every backslash doubled: only the \xXX made of %XX are escapes
        data = codecs.escape_decode(spaced.replace(b"\\", b"\\\\").replace(b"%", b"\\x"))[0]
    except ValueError:  # a % not followed by two hex digits
        return unquote(text, errors="strict")
    return bytes(data).decode("utf-8")


def _answered(answer: Answer) -> tuple[int, str, bytes, dict[str, str]]:
    headers = {"X-Content-Type-Options": "nosniff", **answer.headers}
    if answer.status == 200:
        headers["Vary"] = "Accept"
    return answer.status, answer.content_type, answer.body, headers


def _refused(exc: HttpError) -> tuple[int, str, bytes, dict[str, str]]:
    body = (exc.message.rstrip() + "\n").encode("utf-8", "replace")
    return exc.status, _TEXT, body, {"X-Content-Type-Options": "nosniff", **exc.headers}


#: What ``Lane.take`` hands back: the response now, or the coroutine that makes it.
Started = tuple[int, str, bytes, dict[str, str]] | Coroutine[Any, Any, Answer]


class Lane:
    """Takes the plain query requests of one endpoint (see the module docstring)."""

    def __init__(self, endpoint: Endpoint, allowed_hosts: tuple[str, ...]) -> None:
        self.endpoint = endpoint
        self.allowed_hosts = allowed_hosts
        self._bases: dict[bytes, str] = {}
        self.taken = 0  # requests taken so far (tests, benchmarks)
        #: Called before a request taken is answered (a reader process opens its store
        #: again there when the owner wrote: ``readers.py``).
        self.before: Callable[[], None] | None = None

    def take(self, url: bytes, headers: list[tuple[bytes, bytes]]) -> Started | None:
        """The response to a ``GET`` of ``url`` with ``headers`` (names in lower case):
        ``(status, content type, body, headers)`` at once, a coroutine making the ``Answer``
        (``finish`` turns its outcome into the response), or None when the request is not
        plain and must go the full way."""
        if not url.startswith(_PREFIX) or b"&" in url or b"#" in url:
            return None
        host = None
        accept = None
        for name, value in headers:
            if name == b"host":
                if host is not None:
                    return None
                host = value
            elif name == b"accept":
                if accept is not None:
                    return None
                accept = value
            elif name in _NOT_PLAIN:
                return None
        if host is None:
            return None
        base = self._bases.get(host)
        if base is None:
            text = host.decode("latin-1")
            if not host_allowed_kept(text, self.allowed_hosts):
                return None
            base = f"http://{text}/sparql"
            if len(self._bases) >= 256:
                self._bases.clear()
            self._bases[host] = base
        try:
            query = unquoted(url[len(_PREFIX) :])
        except UnicodeDecodeError:
            return None  # the full path says what is wrong with it
        if not query:
            return None
        self.taken += 1
        if self.before is not None:
            self.before()
        try:
            started = self.endpoint.start_query(
                query, accept=None if accept is None else accept.decode("latin-1"), base=base
            )
        except HttpError as exc:
            return _refused(exc)
        except Exception as exc:  # as the full path (``app._Shortcut``) answers it
            return self.finish(exc)
        if isinstance(started, Answer):
            return _answered(started)
        return started

    @staticmethod
    def finish(outcome: Answer | BaseException) -> tuple[int, str, bytes, dict[str, str]]:
        """The response to a request whose coroutine (``take``) ended with ``outcome``."""
        if isinstance(outcome, Answer):
            return _answered(outcome)
        if isinstance(outcome, HttpError):
            return _refused(outcome)
        _log.error("the endpoint failed", exc_info=outcome)
        return _refused(HttpError(500, "the server failed; see its log"))
