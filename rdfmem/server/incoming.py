"""What a request says: its parameters, its body (capped in size and time), its media type
and its bearer token. Each refusal is an ``HttpError`` with the status to send.
"""

from __future__ import annotations

import asyncio
import hmac
from urllib.parse import parse_qsl

from pyoxigraph import NamedNode
from starlette.requests import ClientDisconnect, Request

from rdfmem.core.errors import HttpError
from rdfmem.server.negotiate import DATASET_OFFERS, GRAPH_OFFERS, RESULTS_OFFERS, by_name

__all__ = [
    "Pairs",
    "check_token",
    "format_name",
    "iris",
    "media_type",
    "one",
    "one_or_first",
    "pairs",
    "query_pairs",
    "read_body",
    "utf8",
]

Pairs = list[tuple[str, str]]
_ANY_OFFERS = RESULTS_OFFERS + GRAPH_OFFERS + DATASET_OFFERS


def utf8(data: bytes, what: str, charset: str = "utf-8") -> str:
    """``data`` as text.

    Raises:
        HttpError: 400 not valid text in ``charset``.
    """
    try:
        return data.decode(charset)
    except (UnicodeDecodeError, LookupError) as exc:
        raise HttpError(400, f"{what} is not valid {charset} text: {exc}") from exc


def pairs(raw: bytes | str, what: str) -> Pairs:
    """The name/value pairs of a query string or a form body, blank values kept.

    >>> pairs(b"query=ASK%7B%7D&default", "the URL's query string")
    [('query', 'ASK{}'), ('default', '')]

    Raises:
        HttpError: 400 not UTF-8, or malformed.
    """
    text = utf8(raw, what) if isinstance(raw, bytes) else raw
    try:
        return parse_qsl(text, keep_blank_values=True, encoding="utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise HttpError(400, f"{what} is not valid UTF-8 once percent-decoded: {exc}") from exc
    except ValueError as exc:
        raise HttpError(400, f"{what} is malformed: {exc}") from exc


def query_pairs(request: Request) -> Pairs:
    """The pairs of the request's URL query string (see ``pairs``)."""
    return pairs(request.scope.get("query_string", b""), "the URL's query string")


def format_name(given: Pairs) -> str | None:
    """The ``format`` (or ``output``) parameter; given more than once (SPARQLWrapper sends
    ``format=tsv&format=text/tab-separated-values``), the first value the server knows."""
    values = [v for k, v in given if k in ("format", "output") and v]
    for value in values:
        if by_name(value, _ANY_OFFERS) is not None:
            return value
    return values[0] if values else None


def one(given: Pairs, name: str) -> str | None:
    """The value of the parameter ``name``, or None.

    Raises:
        HttpError: 400 given more than once.
    """
    values = [v for k, v in given if k == name]
    if len(values) > 1:
        raise HttpError(400, f"the parameter {name!r} was given {len(values)} times; give it once")
    return values[0] if values else None


def one_or_first(given: Pairs, name: str) -> str | None:
    """The first value of the parameter ``name``, or None."""
    return next((v for k, v in given if k == name), None)


def iris(given: Pairs, name: str) -> list[NamedNode]:
    """Every value of the parameter ``name``, each an IRI.

    Raises:
        HttpError: 400 a value that is not an IRI.
    """
    out = []
    for key, value in given:
        if key == name:
            try:
                out.append(NamedNode(value))
            except ValueError as exc:
                raise HttpError(400, f"{name} {value!r} is not an IRI: {exc}") from exc
    return out


def media_type(request: Request) -> tuple[str, str]:
    """The body's media type (lower case) and charset (``utf-8`` when not given)."""
    header = request.headers.get("content-type", "")
    media, *params = (p.strip() for p in header.split(";"))
    charset = "utf-8"
    for param in params:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip('"') or charset
    return media.lower(), charset


async def read_body(request: Request, *, limit: int, timeout: float) -> bytes:
    """The request body, refused as soon as it passes ``limit`` bytes or ``timeout`` seconds.

    Raises:
        HttpError: 413 too large, 408 too slow, 400 the client went away.
    """
    too_big = HttpError(413, f"the request body is larger than the server's limit of {limit} bytes")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_big
    chunks: list[bytes] = []
    size = 0

    async def read() -> None:
        nonlocal size
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_big
            chunks.append(chunk)

    try:
        await asyncio.wait_for(read(), timeout)
    except asyncio.TimeoutError:
        raise HttpError(408, "the request body did not arrive in time") from None
    except ClientDisconnect:
        raise HttpError(400, "the client went away while sending its request") from None
    return b"".join(chunks)


def check_token(request: Request, *, allow_update: bool, token: str | None) -> None:
    """Let an update through only with updates allowed and the server's bearer token.

    Raises:
        HttpError: 403 updates disabled, or the token missing or wrong.
    """
    if not allow_update or not token:
        raise HttpError(403, "updates are disabled on this endpoint (start it with --allow-update)")
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    expected = token.encode("utf-8")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        given.strip().encode("utf-8"), expected
    ):
        raise HttpError(
            403,
            "updates need the server's token as 'Authorization: Bearer <token>'",
            {"WWW-Authenticate": 'Bearer realm="rdfmem"'},
        )
