"""Keys and values as RDF: pure functions from the key/value contract to terms, no I/O.

A key lives in the subject IRI ``subject_prefix + escape(namespace) + ":" + escape(key)``
(without the namespace part when it is empty). ``escape`` percent-encodes everything an IRI
cannot hold plus ``%``, ``:``, ``#`` and ``?``, so the key comes back exactly and the
namespace separator is never ambiguous. A value is one ``"json"^^rdf:JSON`` literal.

>>> codec = KeyCodec("urn:rdfmem:store:", "team")
>>> codec.subject("a b:c").value
'urn:rdfmem:store:team:a%20b%3Ac'
>>> codec.key_of("urn:rdfmem:store:team:a%20b%3Ac")
'a b:c'
>>> decode_value(encode_value({"n": [1, 2.5, None]}))
{'n': [1, 2.5, None]}
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, unquote

from pyoxigraph import Literal, NamedNode

from rdfmem.core.errors import BackingError, InvalidKey, InvalidValue
from rdfmem.core.terms import RDF_JSON

__all__ = ["KeyCodec", "decode_value", "encode_value", "check_json"]

# Characters an IRI may hold unescaped, less the ones the codec reserves (':' '#' '?' '%').
_SAFE = "!$&'()*+,;=@/-._~"
_CACHE_LIMIT = 65536


class KeyCodec:
    """Turns keys of one namespace into subject IRIs and back."""

    def __init__(self, subject_prefix: str, namespace: str = "") -> None:
        self.subject_prefix = subject_prefix
        self.namespace = namespace
        self.ns_prefix = subject_prefix + (_escape(namespace) + ":" if namespace else "")
        self._subjects: dict[str, NamedNode] = {}

    def subject(self, key: object) -> NamedNode:
        """The subject IRI of ``key``.

        Raises:
            InvalidKey: the key is not a non-empty str of valid Unicode.
        """
        cached = self._subjects.get(key) if type(key) is str else None
        if cached is not None:
            return cached
        check_key(key)
        node = NamedNode(self.ns_prefix + _escape(key))  # type: ignore[arg-type]
        if len(self._subjects) >= _CACHE_LIMIT:
            self._subjects.clear()
        self._subjects[key] = node  # type: ignore[index]
        return node

    def key_of(self, iri: str) -> str | None:
        """The key of this namespace held by ``iri``, or None when it is another's."""
        if not iri.startswith(self.ns_prefix):
            return None
        rest = iri[len(self.ns_prefix) :]
        if not rest or ":" in rest:  # another namespace, or the empty namespace's view of one
            return None
        return unquote(rest)


def _escape(text: str) -> str:
    return quote(text, safe=_SAFE)


def check_key(key: object) -> None:
    """Raise ``InvalidKey`` unless ``key`` is a non-empty str of valid Unicode."""
    if not isinstance(key, str):
        raise InvalidKey(f"a key must be a str, not {type(key).__name__}: {key!r}")
    if not key:
        raise InvalidKey("a key must not be empty")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidKey(f"key {key!r} is not valid Unicode text: {exc.reason}") from exc


_fast_loads: Callable[[str], Any]
try:
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - orjson is a dependency; json still works
    _fast_loads = json.loads

_LONG_DIGITS = re.compile(r"\d{19}")
_SCALARS = (str, int, bool, type(None))
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_ASCII_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def check_json(value: Any, path: str = "value") -> None:
    """Raise ``InvalidValue`` unless ``value`` is JSON: None, bool, int, float, str, list, dict.

    Dict keys must be str (``json`` would silently turn ``1`` into ``"1"``), floats finite.
    """
    kind = type(value)
    if kind in _SCALARS:
        return
    if kind is dict:
        for k, item in value.items():
            if type(k) is not str:
                raise InvalidValue(f"{path} has a key {k!r} that is not a str")
            if type(item) not in _SCALARS:
                check_json(item, f"{path}[{k!r}]")
        return
    if kind is list or kind is tuple:
        for i, item in enumerate(value):
            if type(item) not in _SCALARS:
                check_json(item, f"{path}[{i}]")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidValue(f"{path} is {value!r}, which JSON cannot hold")
        return
    if isinstance(value, (str, int)):  # subclasses (IntEnum, str enums) encode as their base
        return
    if isinstance(value, (list, tuple, dict)):
        check_json(list(value) if not isinstance(value, dict) else dict(value), path)
        return
    raise InvalidValue(f"{path} is a {kind.__name__}, which is not JSON: {value!r}")


def dumps(value: Any) -> str:
    """Compact JSON text of a checked value (non-ASCII kept unless it is not valid UTF-8)."""
    check_json(value)
    text = _ENCODER.encode(value)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: JSON escapes keep them
            text = _ASCII_ENCODER.encode(value)
    return text


def encode_value(value: Any) -> Literal:
    """The ``rdf:JSON`` literal of a JSON value.

    Raises:
        InvalidValue: the value is not JSON.
    """
    return Literal(dumps(value), datatype=RDF_JSON)


def decode_value(term: object) -> Any:
    """The JSON value held by an entry's object term.

    Raises:
        BackingError: the stored term is not a literal holding JSON (written behind
            rdfmem's back).
    """
    if not isinstance(term, Literal):
        raise BackingError(f"stored value is not a literal: {term!r}")
    return loads(term.value)


def loads(text: str) -> Any:
    """Parse stored JSON text (orjson when it can: 5x faster; json for what orjson refuses,
    such as integers beyond 64 bits and escaped lone surrogates).

    Raises:
        BackingError: the text is not JSON.
    """
    if not _LONG_DIGITS.search(text):  # orjson would turn ints beyond 64 bits into floats
        try:
            return _fast_loads(text)
        except ValueError:
            pass
    try:
        return json.loads(text)
    except ValueError as exc:
        raise BackingError(f"stored value is not JSON: {text[:80]!r}", cause=exc) from exc
