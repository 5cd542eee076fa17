"""Bounded reads: a page of a list (``limit``, ``cursor``) within a token budget
(``max_tokens``), with a note saying how to get the rest; and ``read_graph_page``, the
knowledge graph in pages beside the official ``read_graph`` (which keeps its shape and
answers everything).

A cursor is the position of the next item (an opaque string to a model); items are counted
in a stable order (entities by insertion, then relations), so pages read one after another
cover the list once as long as nobody writes in between. Tokens are estimated as the JSON
characters divided by 4.

>>> page = bounded([{"n": i} for i in range(5)], limit=2, cursor=None, max_tokens=None)
>>> page.items, page.next_cursor
([{'n': 0}, {'n': 1}], '2')
>>> bounded([{"n": i} for i in range(5)], limit=10, cursor="4", max_tokens=None).items
[{'n': 4}]
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rdfmem.core.errors import ToolInputError
from rdfmem.mcp.specs import READ, Reply, Spec, json_text, obj, string

if TYPE_CHECKING:
    from rdfmem.mcp.graph import Client
    from rdfmem.mcp.services import Services

__all__ = [
    "DEFAULT_LIMIT",
    "PAGE_ARGUMENTS",
    "PAGE_TOOLS",
    "Page",
    "bounded",
    "estimate_tokens",
    "page_of",
    "page_start",
]

#: Items a page holds when ``limit`` is not given.
DEFAULT_LIMIT = 100
#: The schema of the paging arguments every bounded read takes.
PAGE_ARGUMENTS: dict[str, Any] = {
    "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
    "cursor": string("A previous answer's next_cursor"),
    "max_tokens": {"type": "integer", "minimum": 100},
}


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` as estimated here: characters / 4, rounded up."""
    return (len(text) + 3) // 4


@dataclass(frozen=True)
class Page:
    """One page: its ``items``, the cursor of the rest (None: nothing left) and a note."""

    items: list[Any]
    next_cursor: str | None
    note: str | None


def page_start(cursor: str | None, tool: str) -> int:
    """The position a ``cursor`` of ``tool`` stands for (0: none)."""
    if cursor is None or cursor == "":
        return 0
    if not cursor.isdigit():
        raise ToolInputError(
            f"cursor: {cursor[:40]!r} is not a cursor of {tool}; pass the next_cursor of its "
            "previous answer, or leave cursor out for the first page"
        )
    return int(cursor)


def bounded(
    items: Sequence[Any],
    *,
    limit: int | None,
    cursor: str | None,
    max_tokens: int | None,
    tool: str = "this tool",
) -> Page:
    """The page of ``items`` at ``cursor``: at most ``limit`` items, fewer when their JSON
    would pass ``max_tokens`` (always at least one item, so paging moves on)."""
    start = page_start(cursor, tool)
    end = min(len(items), start + (limit or DEFAULT_LIMIT))
    chosen = list(items[start:end])
    note = None
    if max_tokens is not None:
        used = 0
        for i, item in enumerate(chosen):
            used += estimate_tokens(json.dumps(item, ensure_ascii=False)) + 1
            if used > max_tokens and i > 0:
                chosen = chosen[:i]
                note = f"cut at about {max_tokens} tokens (max_tokens)"
                break
    following = start + len(chosen)
    if following >= len(items):
        return Page(chosen, None, None)
    more = f"{len(items) - following} more"
    reason = f"{note}; {more}" if note else more
    return Page(
        chosen,
        str(following),
        f"{reason}: call {tool} again with cursor {str(following)!r} for the rest",
    )


def page_of(items: Sequence[Any], key: str, arguments: dict[str, Any], tool: str) -> Reply:
    """A tool's answer holding one page of ``items`` under ``key``, with ``next_cursor`` and
    ``note`` when there is more."""
    page = bounded(
        items,
        limit=arguments.get("limit"),
        cursor=arguments.get("cursor"),
        max_tokens=arguments.get("max_tokens"),
        tool=tool,
    )
    out: dict[str, Any] = {key: page.items}
    if page.next_cursor is not None:
        out["next_cursor"] = page.next_cursor
        out["note"] = page.note
    return Reply(out, json_text(out))


def _read_graph_page(s: Services, a: dict[str, Any], c: Client) -> Reply:
    graph = s.kg.read_graph()
    items = [{"entity": e} for e in graph["entities"]]
    items += [{"relation": r} for r in graph["relations"]]
    page = bounded(
        items,
        limit=a.get("limit"),
        cursor=a.get("cursor"),
        max_tokens=a.get("max_tokens"),
        tool="read_graph_page",
    )
    out: dict[str, Any] = {
        "entities": [i["entity"] for i in page.items if "entity" in i],
        "relations": [i["relation"] for i in page.items if "relation" in i],
        "total": {"entities": len(graph["entities"]), "relations": len(graph["relations"])},
    }
    if page.next_cursor is not None:
        out["next_cursor"] = page.next_cursor
        out["note"] = page.note
    return Reply(out, json_text(out))


PAGE_TOOLS = [
    Spec(
        "read_graph_page",
        "Read Graph Page",
        "read_graph in pages: entities, then relations; pass next_cursor for the next page.",
        obj(dict(PAGE_ARGUMENTS), closed=True),
        READ,
        _read_graph_page,
    ),
]
