"""Errors an agent can act on: checks a tool's arguments need beyond its schema, and the
words added to a failed call, always in the tool's own argument names.

>>> precheck("decision_query", {"name": "path_between", "from_id": "g"}, project=False)
Traceback (most recent call last):
rdfmem.core.errors.ToolInputError: to_id: path_between needs from_id and to_id; pass both
>>> precheck("memory_read", {"scope": "session"}, project=False)
Traceback (most recent call last):
rdfmem.core.errors.ToolInputError: session: scope 'session' needs session (a conversation id)...
"""

from __future__ import annotations

from typing import Any

from rdfmem.core.errors import (
    GeneralisationNotFound,
    InvalidKey,
    InvalidTitle,
    MemoryNotFound,
    NodeNotFound,
    ToolInputError,
)

__all__ = ["explain", "precheck"]

_NEEDS = {
    "path_between": ("from_id", "to_id"),
    "descendants": ("node_id",),
    "ancestors": ("node_id",),
}


def _scope(arguments: dict[str, Any], project: bool) -> None:
    scope = arguments.get("scope")
    if scope == "project" and not project:
        raise ToolInputError(
            "scope: 'project' needs a server started with --project NAME, and this one has "
            "none; pass scope 'global', or 'session' with session"
        )
    if scope == "session" and not arguments.get("session"):
        raise ToolInputError(
            "session: scope 'session' needs session (a conversation id); pass session, or "
            "scope 'global'"
        )


def precheck(tool: str, arguments: dict[str, Any], *, project: bool) -> None:
    """Refuse, before anything runs, arguments that fit the schema but not each other.

    Raises:
        ToolInputError: what is missing or does not go together, and what to pass.
    """
    if tool.startswith("memory_"):
        _scope(arguments, project)
    elif tool == "decision_query":
        name = arguments.get("name", "")
        needed = _NEEDS.get(name, ())
        for arg in needed:
            if not arguments.get(arg):
                both = " and ".join(needed)
                raise ToolInputError(
                    f"{arg}: {name} needs {both}; pass {'both' if len(needed) > 1 else arg}"
                )
    elif tool == "generalisation_list" and "id" not in arguments and "level" not in arguments:
        raise ToolInputError(
            "pass id (that generalisation's lineage) or level (every generalisation of that level)"
        )


def _validation(exc: Any) -> str:
    parts = []
    for error in exc.errors()[:5]:
        where = ".".join(str(p) for p in error.get("loc", ())) or "arguments"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return "; ".join(parts)


def explain(tool: str, exc: Exception) -> str:
    """The message of a failed call of ``tool``, with what to pass instead."""
    if type(exc).__name__ == "ValidationError" and hasattr(exc, "errors"):
        return f"{_validation(exc)}; change those arguments of {tool}"
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    if isinstance(exc, MemoryNotFound):
        return f"{text}; memory_list gives the titles of each scope (pass scope and title)"
    if isinstance(exc, NodeNotFound):
        return (
            f"no decision node with id {exc.node_id!r}; pass the id of an existing node "
            "(decision_query with name recent_decisions or active_goals lists them)"
        )
    if isinstance(exc, GeneralisationNotFound):
        return f"{text}; generalisation_search finds the ids (pass id and, if any, group)"
    if isinstance(exc, InvalidTitle):
        return f"title: {text}; pass a title of letters, digits and single separators"
    if isinstance(exc, InvalidKey) and tool.startswith("generalisation_"):
        return f"group: {text}; pass group with letters, digits, - and _ only"
    return text
