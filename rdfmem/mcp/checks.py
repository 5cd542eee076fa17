"""Checking tool arguments against their JSON Schema before a tool runs.

The schemas of the tools use a small part of JSON Schema (``type``, ``properties``,
``required``, ``items``, ``enum``, ``minimum``/``maximum``, ``additionalProperties``), so the
check is a short walk that names the first bad place, as a model needs to fix its call. It
also bounds what one call may carry: strings, arrays and the whole call.

>>> schema = {"type": "object", "properties": {"names": {"type": "array",
...           "items": {"type": "string"}}}, "required": ["names"]}
>>> check_arguments(schema, {"names": ["a", 1]})
Traceback (most recent call last):
rdfmem.core.errors.ToolInputError: names[1]: expected a string, received a number
>>> check_arguments(schema, {})
Traceback (most recent call last):
rdfmem.core.errors.ToolInputError: names: required, but missing
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rdfmem.core.errors import ToolInputError

__all__ = ["Limits", "ToolInputError", "check_arguments"]


@dataclass(frozen=True)
class Limits:
    """The most one tool call may carry."""

    #: characters in one string
    max_string: int = 100_000
    #: items in one array
    max_items: int = 10_000
    #: characters in all strings of one call together
    max_total: int = 8_000_000


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__  # pragma: no cover - JSON has no other kinds


def _fits(kind: str, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and (not isinstance(value, float) or math.isfinite(value))
        )
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return kind == "null" and value is None


_ARTICLE = {"integer": "an integer", "array": "an array", "object": "an object", "null": "null"}


class _Walk:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.total = 0

    def check(self, schema: Mapping[str, Any], value: Any, path: str) -> None:
        where = path or "arguments"
        kinds = schema.get("type")
        if kinds is not None:
            options = [kinds] if isinstance(kinds, str) else list(kinds)
            if not any(_fits(k, value) for k in options):
                wanted = " or ".join(_ARTICLE.get(k, f"a {k}") for k in options)
                raise ToolInputError(f"{where}: expected {wanted}, received {_kind(value)}")
        if "enum" in schema and value not in schema["enum"]:
            allowed = ", ".join(repr(v) for v in schema["enum"])
            raise ToolInputError(f"{where}: must be one of {allowed}, not {value!r}")
        if isinstance(value, str):
            self.string(value, where)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            if "minimum" in schema and value < schema["minimum"]:
                raise ToolInputError(f"{where}: must be at least {schema['minimum']}")
            if "maximum" in schema and value > schema["maximum"]:
                raise ToolInputError(f"{where}: must be at most {schema['maximum']}")
        elif isinstance(value, list):
            if len(value) > self.limits.max_items:
                raise ToolInputError(
                    f"{where}: {len(value)} items; one call takes at most {self.limits.max_items}"
                )
            items = schema.get("items")
            for i, item in enumerate(value):
                self.check(items or {}, item, f"{path}[{i}]")
        elif isinstance(value, dict):
            self.mapping(schema, value, path)

    def mapping(self, schema: Mapping[str, Any], value: dict[str, Any], path: str) -> None:
        props: Mapping[str, Any] = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                raise ToolInputError(f"{path + '.' if path else ''}{name}: required, but missing")
        for name, item in value.items():
            here = f"{path}.{name}" if path else str(name)
            if name in props:
                self.check(props[name], item, here)
            elif schema.get("additionalProperties") is False:
                known = ", ".join(props) or "none"
                raise ToolInputError(f"{here}: unknown argument (known: {known})")
            else:
                self.check({}, item, here)

    def string(self, value: str, where: str) -> None:
        if len(value) > self.limits.max_string:
            raise ToolInputError(
                f"{where}: {len(value):,} characters; a string may have at most "
                f"{self.limits.max_string:,}"
            )
        self.total += len(value)
        if self.total > self.limits.max_total:
            raise ToolInputError(
                f"the call carries more than {self.limits.max_total:,} characters of text; "
                "split it into smaller calls"
            )
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ToolInputError(
                f"{where}: not valid Unicode (a lone surrogate at {exc.start})"
            ) from exc


def check_arguments(
    schema: Mapping[str, Any], arguments: Any, limits: Limits = Limits()
) -> dict[str, Any]:
    """``arguments`` when they fit ``schema`` and ``limits``.

    Raises:
        ToolInputError: the first place that does not fit, named by its path
            (``entities[0].name``).
    """
    if arguments is None:
        arguments = {}
    walk = _Walk(limits)
    walk.check(schema, arguments, "")
    assert isinstance(arguments, dict)
    return arguments
