"""What a tool is to the server, without the MCP SDK: name, schemas, hints and a function.

A tool's function is plain and blocking: it gets the server's ``Services``, the checked
arguments and the calling ``Client``, and returns a ``Reply`` (the structured result and
the text a model reads). The server runs it on a worker thread.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rdfmem.mcp.graph import Client
    from rdfmem.mcp.services import Services

__all__ = ["READ", "WRITE", "DELETE", "Reply", "Spec", "json_text", "obj", "array", "string"]

#: ``readOnlyHint``, ``destructiveHint``, ``idempotentHint``, ``openWorldHint``
READ = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True,
        "openWorldHint": False}  # fmt: skip
WRITE = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False,
         "openWorldHint": False}  # fmt: skip
DELETE = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True,
          "openWorldHint": False}  # fmt: skip
_DRAFT7 = "http://json-schema.org/draft-07/schema#"


@dataclass(frozen=True)
class Reply:
    """A tool's answer: ``structured`` (None for text only) and ``text``."""

    structured: dict[str, Any] | None
    text: str


@dataclass(frozen=True)
class Spec:
    """One tool."""

    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, bool]
    run: Callable[[Services, dict[str, Any], Client], Reply]
    output_schema: dict[str, Any] | None = None
    changes_graph: bool = field(default=False)


def json_text(value: Any) -> str:
    """JSON as the official server prints it (``JSON.stringify(value, null, 2)``)."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def string(description: str | None = None, **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", **extra}
    if description:
        schema["description"] = description
    return schema


def array(items: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array", "items": items}
    if description:
        schema["description"] = description
    return schema


def obj(
    properties: dict[str, Any],
    required: list[str] | None = None,
    *,
    closed: bool = False,
    top: bool = False,
) -> dict[str, Any]:
    """An object schema; ``top`` adds ``$schema`` (draft 7, as the official server's),
    ``closed`` forbids other properties."""
    schema: dict[str, Any] = {"$schema": _DRAFT7} if top else {}
    schema["type"] = "object"
    schema["properties"] = properties
    if required:
        schema["required"] = required
    if closed:
        schema["additionalProperties"] = False
    return schema
