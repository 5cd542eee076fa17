"""rdfmem as an MCP server (``rdfmem mcp``): the official memory server's knowledge graph,
kept as RDF, and rdfmem's own memory tools beside it.

``KnowledgeGraph`` and the JSONL reader/writer need only the core install; the server
(``rdfmem.mcp.server``) needs the ``mcp`` extra: ``pip install 'rdfmem[mcp]'``. Names are
imported on first use, so the server starts without loading what its first call does not
need.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rdfmem.mcp.graph import Client, KnowledgeGraph, KnowledgeGraphError
    from rdfmem.mcp.jsonl import read_jsonl, write_jsonl
    from rdfmem.mcp.model import Entity, Model, Relation

_WHERE = {
    **dict.fromkeys(("Client", "KnowledgeGraph", "KnowledgeGraphError"), "rdfmem.mcp.graph"),
    **dict.fromkeys(("read_jsonl", "write_jsonl"), "rdfmem.mcp.jsonl"),
    **dict.fromkeys(("Entity", "Model", "Relation"), "rdfmem.mcp.model"),
}

__all__ = [
    "Client",
    "Entity",
    "KnowledgeGraph",
    "KnowledgeGraphError",
    "Model",
    "Relation",
    "read_jsonl",
    "write_jsonl",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'rdfmem.mcp' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
