"""The lane's query-string decoding (``rdfmem.server.lane.unquoted``) gives what
``urllib.parse.unquote`` gives (``+`` a space first), or refuses what it refuses (not UTF-8), on every text a
client may send: so a query reaches the same parse by the lane and the full path.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from urllib.parse import quote, quote_plus, unquote

import pytest

from rdfmem.server.lane import unquoted

_ALPHABET = "aZ09 ?{}<>.:#/\\%+&=\"'\n\té😀\x00\x7f"


def _expected(raw: bytes) -> str:
    return unquote(raw.decode("ascii").replace("+", " "), errors="strict")


def _outcome(decode: Callable[[bytes], str], raw: bytes) -> str | type[Exception]:
    try:
        return decode(raw)
    except UnicodeDecodeError:
        return UnicodeDecodeError


def test_quoted_texts_decode_as_urllib_decodes_them() -> None:
    rng = random.Random(23)
    for _ in range(2000):
        text = "".join(rng.choice(_ALPHABET) for _ in range(rng.randrange(0, 40)))
        for raw in (quote(text, safe=""), quote_plus(text), quote(text, safe="\\+%")):
            data = raw.encode("ascii")
            assert _outcome(unquoted, data) == _outcome(_expected, data), raw


@pytest.mark.parametrize(
    "raw", [b"%zz", b"100%", b"%4", b"a%2", b"%%41", b"%5Cx41", b"\\x41%41", b"%2B+%20"]
)
def test_broken_escapes_are_kept_as_urllib_keeps_them(raw: bytes) -> None:
    assert unquoted(raw) == _expected(raw)


@pytest.mark.parametrize("raw", [b"%e9", b"%C3", b"caf\xc3\xa9"])
def test_what_is_not_utf8_or_not_ascii_is_refused(raw: bytes) -> None:
    with pytest.raises(UnicodeDecodeError):
        unquoted(raw)
