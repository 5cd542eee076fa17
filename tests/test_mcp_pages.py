"""Bounded reads over stdio: ``read_graph_page`` beside the official ``read_graph``, and
rdfmem's own read tools with ``limit``, ``cursor`` and ``max_tokens``, each cut saying how
to get the rest."""

from __future__ import annotations

from typing import Any

import anyio
from mcp import ClientSession
from test_mcp_support import call, ok, rdfmem_params, stdio_session, text_of


async def _pages(s: ClientSession, tool: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    pages = []
    cursor = None
    while True:
        args = dict(arguments, **({"cursor": cursor} if cursor else {}))
        page = ok(await call(s, tool, args))
        pages.append(page)
        cursor = page.get("next_cursor")
        if cursor is None:
            return pages
        assert f"cursor {cursor!r}" in page["note"] and tool in page["note"]


def test_read_graph_page_covers_the_graph_once_and_read_graph_is_whole() -> None:
    async def main() -> None:
        async with stdio_session(rdfmem_params(":memory:")) as s:
            entities = [{"name": f"e{i:02}", "entityType": "t", "observations": [f"o{i}"]}
                        for i in range(25)]  # fmt: skip
            relations = [{"from": f"e{i:02}", "to": f"e{i + 1:02}", "relationType": "next"}
                         for i in range(24)]  # fmt: skip
            ok(await call(s, "create_entities", {"entities": entities}))
            ok(await call(s, "create_relations", {"relations": relations}))
            whole = ok(await call(s, "read_graph", {}))
            assert whole == {"entities": entities, "relations": relations}
            pages = await _pages(s, "read_graph_page", {"limit": 10})
            assert len(pages) == 5 and [len(p["entities"]) for p in pages] == [10, 10, 5, 0, 0]
            assert [e for p in pages for e in p["entities"]] == entities
            assert [r for p in pages for r in p["relations"]] == relations
            assert pages[0]["total"] == {"entities": 25, "relations": 24}
            small = ok(await call(s, "read_graph_page", {"max_tokens": 100}))
            assert 1 <= len(small["entities"]) < 10
            assert "max_tokens" in small["note"] and small["next_cursor"]
            bad = await s.call_tool("read_graph_page", {"cursor": "abc"})
            assert bad.is_error and "cursor: 'abc' is not a cursor" in text_of(bad)
            assert "next_cursor" in text_of(bad)

    anyio.run(main)


def test_own_read_tools_take_limit_cursor_and_max_tokens() -> None:
    async def main() -> None:
        async with stdio_session(rdfmem_params(":memory:")) as s:
            for i in range(5):
                note = {"scope": "global", "title": f"Tea note {i}", "content": f"tea {i} " * 40}
                ok(await call(s, "memory_save", note))
            pages = await _pages(s, "memory_list", {"limit": 2})
            titles = [t for p in pages for t in p["titles"]]
            assert sorted(titles) == [f"Tea note {i}" for i in range(5)] and len(pages) == 3
            first = ok(await call(s, "memory_search", {"query": "tea", "limit": 2}))
            assert len(first["memories"]) == 2 and first["next_cursor"] == "2"
            rest = await _pages(s, "memory_search", {"query": "tea", "limit": 2})
            found = [m["title"] for p in rest for m in p["memories"]]
            assert sorted(found) == sorted(titles)
            cut = ok(await call(s, "memory_search", {"query": "tea", "limit": 5,
                                                     "max_tokens": 150}))  # fmt: skip
            assert len(cut["memories"]) < 5 and "max_tokens" in cut["note"]
            for i in range(4):
                ok(await call(s, "decision_add_node", {"type": "decision", "label": f"d{i}"}))
            recent = await _pages(s, "decision_query", {"name": "recent_decisions", "limit": 3})
            assert [len(p["nodes"]) for p in recent] == [3, 1]

    anyio.run(main)
