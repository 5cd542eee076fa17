"""rdfmem: an AI agent's memory in RDF.

``RdfStore`` is a key/value Store and a TripleStore over embedded Oxigraph (default), rdflib,
or any SPARQL 1.1 server; the decision graph, generalisations and scoped memories on top of it
are plain RDF that any SPARQL tool can read.

Names are imported on first use (``rdfmem.RdfStore`` imports the store, not the MCP server
or rdflib), so ``import rdfmem`` and the command line start fast.
"""

from importlib import import_module as _import_module
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

if _TYPE_CHECKING:
    from rdfmem.backends import Backend, OxigraphBackend, RdflibBackend, SparqlBackend
    from rdfmem.core.errors import (
        BackingError,
        CheckpointError,
        DecisionGraphError,
        FormatError,
        GeneralisationNotFound,
        GeneralisationParseError,
        HistoryUnavailable,
        IncompatibleSnapshot,
        InvalidKey,
        InvalidTerm,
        InvalidTitle,
        InvalidValue,
        KeyNotFound,
        LeaseDenied,
        LeaseExpired,
        MemoryNotFound,
        MemoryScopeError,
        NetworkAccessRefused,
        NodeNotFound,
        NotAGeneralisation,
        QueryError,
        RdfMemError,
        SchemaError,
        StoreAlreadyOpen,
        StoreError,
        Unreachable,
    )
    from rdfmem.core.ontology import ontology_path
    from rdfmem.core.results import GraphResult, SelectResult
    from rdfmem.domain.checkpoint import Checkpoint
    from rdfmem.domain.context import ContextUpdate
    from rdfmem.domain.decisions import DecisionGraph, Edge, Node
    from rdfmem.domain.generalisations import Generalisation, Generalisations
    from rdfmem.domain.memories import Memories, Memory
    from rdfmem.store.history_reads import Version
    from rdfmem.store.rdfstore import RdfStore, RemoteStore
    from rdfmem.store.remote import Endpoint, Lease
    from rdfmem.store.typed import TypedStore

#: Where each public name lives.
_WHERE: dict[str, str] = {
    **dict.fromkeys(
        ("Backend", "OxigraphBackend", "RdflibBackend", "SparqlBackend"), "rdfmem.backends"
    ),
    **dict.fromkeys(
        (
            "BackingError",
            "CheckpointError",
            "DecisionGraphError",
            "FormatError",
            "GeneralisationNotFound",
            "GeneralisationParseError",
            "HistoryUnavailable",
            "IncompatibleSnapshot",
            "InvalidKey",
            "InvalidTerm",
            "InvalidTitle",
            "InvalidValue",
            "KeyNotFound",
            "LeaseDenied",
            "LeaseExpired",
            "MemoryNotFound",
            "MemoryScopeError",
            "NetworkAccessRefused",
            "NodeNotFound",
            "NotAGeneralisation",
            "QueryError",
            "RdfMemError",
            "SchemaError",
            "StoreAlreadyOpen",
            "StoreError",
            "Unreachable",
        ),
        "rdfmem.core.errors",
    ),
    **dict.fromkeys(("ontology_path",), "rdfmem.core.ontology"),
    **dict.fromkeys(("GraphResult", "SelectResult"), "rdfmem.core.results"),
    **dict.fromkeys(("Checkpoint",), "rdfmem.domain.checkpoint"),
    **dict.fromkeys(("ContextUpdate",), "rdfmem.domain.context"),
    **dict.fromkeys(("DecisionGraph", "Edge", "Node"), "rdfmem.domain.decisions"),
    **dict.fromkeys(("Generalisation", "Generalisations"), "rdfmem.domain.generalisations"),
    **dict.fromkeys(("Memories", "Memory"), "rdfmem.domain.memories"),
    **dict.fromkeys(("RdfStore", "RemoteStore"), "rdfmem.store.rdfstore"),
    **dict.fromkeys(("Endpoint", "Lease"), "rdfmem.store.remote"),
    **dict.fromkeys(("TypedStore",), "rdfmem.store.typed"),
    **dict.fromkeys(("Version",), "rdfmem.store.history_reads"),
}

__all__ = [
    "Backend",
    "BackingError",
    "Checkpoint",
    "CheckpointError",
    "ContextUpdate",
    "DecisionGraph",
    "DecisionGraphError",
    "Edge",
    "Endpoint",
    "FormatError",
    "Generalisation",
    "GeneralisationNotFound",
    "GeneralisationParseError",
    "Generalisations",
    "GraphResult",
    "HistoryUnavailable",
    "IncompatibleSnapshot",
    "InvalidKey",
    "InvalidTerm",
    "InvalidTitle",
    "InvalidValue",
    "KeyNotFound",
    "Lease",
    "LeaseDenied",
    "LeaseExpired",
    "Memories",
    "Memory",
    "MemoryNotFound",
    "MemoryScopeError",
    "NetworkAccessRefused",
    "Node",
    "NodeNotFound",
    "NotAGeneralisation",
    "OxigraphBackend",
    "QueryError",
    "RdfMemError",
    "RdfStore",
    "RdflibBackend",
    "RemoteStore",
    "SchemaError",
    "SelectResult",
    "SparqlBackend",
    "StoreAlreadyOpen",
    "StoreError",
    "TypedStore",
    "Unreachable",
    "Version",
    "ontology_path",
]


def __getattr__(name: str) -> _Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'rdfmem' has no attribute {name!r}")
    value = getattr(_import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
