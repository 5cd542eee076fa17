"""rdfmem as an MCP server (``rdfmem mcp``): the official memory server's knowledge graph,
kept as RDF, and rdfmem's own memory tools beside it.

``KnowledgeGraph`` and the JSONL reader/writer need only the core install; the server
(``rdfmem.mcp.server``) needs the ``mcp`` extra: ``pip install 'rdfmem[mcp]'``.
"""

from rdfmem.mcp.graph import Client, KnowledgeGraph, KnowledgeGraphError
from rdfmem.mcp.jsonl import read_jsonl, write_jsonl
from rdfmem.mcp.model import Entity, Model, Relation

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
