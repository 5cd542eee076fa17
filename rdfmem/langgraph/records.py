"""Stored items as Python records, and the matching rules of LangGraph's ``InMemoryStore``.

Pure functions: a record from an item's RDF properties, ``filter`` and namespace matching.

>>> matches_filter({"score": 4.5, "tags": {"lang": "en"}},
...                {"score": {"$gte": 4}, "tags": {"lang": "en"}})
True
>>> namespace_matches(("a", "b", "f"), "suffix", ("*", "f"))
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pyoxigraph import Literal, NamedNode

from rdfmem.core.errors import InvalidValue
from rdfmem.core.keys import loads
from rdfmem.core.terms import from_literal
from rdfmem.langgraph.vocab import (
    CREATED,
    EXPIRES,
    FIELD,
    ITEM,
    KEY,
    MODIFIED,
    NAMESPACE,
    RDF_TYPE,
    TTL_MINUTES,
    VALUE,
    VECTOR_OF,
)

__all__ = [
    "Record",
    "matches_filter",
    "namespace_matches",
    "record_from_properties",
    "split_namespace",
]


@dataclass(slots=True)
class Record:
    """One item as stored: ``text`` is its JSON, ``value`` the parsed copy used for
    filtering (never handed to callers), ``fields`` its vectors by field path."""

    namespace: tuple[str, ...]
    key: str
    text: str
    value: dict[str, Any]
    created: datetime
    updated: datetime
    expires: datetime | None = None
    ttl: float | None = None
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def order(self) -> tuple[datetime, tuple[str, ...], str]:
        """Where the item comes in an unranked search: oldest first."""
        return (self.created, self.namespace, self.key)


def split_namespace(text: str) -> tuple[str, ...]:
    """The labels of a namespace written as ``rm:namespace``.

    >>> split_namespace("users.123"), split_namespace("")
    (('users', '123'), ())
    """
    return tuple(text.split(".")) if text else ()


def _one(props: Mapping[str, Sequence[Any]], predicate: NamedNode) -> Any:
    terms = props.get(predicate.value) or ()
    for term in terms:
        if isinstance(term, Literal):
            return from_literal(term)
    return None


def record_from_properties(props: Mapping[str, Sequence[Any]]) -> Record | None:
    """The record of an item from its properties (predicate IRI -> objects), or None when
    they do not make an item (another writer's triples, or half an item)."""
    if ITEM not in (props.get(RDF_TYPE.value) or ()):
        return None
    ns, key, created, updated = (
        _one(props, NAMESPACE),
        _one(props, KEY),
        _one(props, CREATED),
        _one(props, MODIFIED),
    )
    texts = [t.value for t in props.get(VALUE.value) or () if isinstance(t, Literal)]
    if not isinstance(ns, str) or not isinstance(key, str) or not texts:
        return None
    if not isinstance(created, datetime) or not isinstance(updated, datetime):
        return None
    try:
        value = loads(texts[0])
    except (ValueError, InvalidValue):
        return None
    if not isinstance(value, dict):
        return None
    expires = _one(props, EXPIRES)
    ttl = _one(props, TTL_MINUTES)
    return Record(
        namespace=split_namespace(ns),
        key=key,
        text=texts[0],
        value=value,
        created=created,
        updated=updated,
        expires=expires if isinstance(expires, datetime) else None,
        ttl=float(ttl) if isinstance(ttl, (int, float)) and not isinstance(ttl, bool) else None,
    )


def vector_owner(props: Mapping[str, Sequence[Any]]) -> tuple[str, str] | None:
    """``(item IRI, field)`` of a vector node's properties, or None."""
    owners = [t for t in props.get(VECTOR_OF.value) or () if isinstance(t, NamedNode)]
    name = _one(props, FIELD)
    if not owners or not isinstance(name, str):
        return None
    return owners[0].value, name


# -- matching, as InMemoryStore does ----------------------------------------------------------


def namespace_matches(namespace: tuple[str, ...], kind: str, path: Sequence[str]) -> bool:
    """Whether ``namespace`` starts (``prefix``) or ends (``suffix``) with ``path``, where a
    ``*`` label matches any label.

    Raises:
        InvalidValue: ``kind`` is neither ``prefix`` nor ``suffix``.
    """
    if len(namespace) < len(path):
        return False
    if kind == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif kind == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise InvalidValue(f"a namespace match is 'prefix' or 'suffix', not {kind!r}")
    return all(want == "*" or have == want for have, want in pairs)


def matches_filter(value: Mapping[str, Any], conditions: Mapping[str, Any]) -> bool:
    """Whether an item's value passes a search ``filter``: each key's value must equal the
    filter's, a nested mapping matches nested fields, and ``{"$eq"|"$ne"|"$gt"|"$gte"|
    "$lt"|"$lte": x}`` compares (numbers for the order operators; a missing or non-numeric
    field does not match them).

    Raises:
        InvalidValue: an operator other than those six.
    """
    return all(_compare(value.get(k), want) for k, want in conditions.items())


def _compare(have: Any, want: Any) -> bool:
    if isinstance(want, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in want):
            return all(_operator(have, op, arg) for op, arg in want.items())
        if not isinstance(have, Mapping):
            return False
        return all(_compare(have.get(k), v) for k, v in want.items())
    if isinstance(want, (list, tuple)):
        return (
            isinstance(have, (list, tuple))
            and len(have) == len(want)
            and all(_compare(h, w) for h, w in zip(have, want, strict=True))
        )
    return bool(have == want)


_ORDER = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def _operator(have: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return bool(have == arg)
    if op == "$ne":
        return bool(have != arg)
    compare = _ORDER.get(op)
    if compare is None:
        raise InvalidValue(
            f"unsupported filter operator {op!r}: use $eq, $ne, $gt, $gte, $lt or $lte"
        )
    try:
        return bool(compare(float(have), float(arg)))
    except (TypeError, ValueError):
        return False
