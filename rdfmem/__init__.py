"""rdfmem: an AI agent's memory in RDF.

``RdfStore`` is a key/value Store and a TripleStore over embedded Oxigraph (default), rdflib,
or any SPARQL 1.1 server; the decision graph, generalisations and scoped memories on top of it
are plain RDF that any SPARQL tool can read.
"""

from rdfmem.backends import Backend, OxigraphBackend, RdflibBackend, SparqlBackend
from rdfmem.core.errors import (
    BackingError,
    CheckpointError,
    DecisionGraphError,
    FormatError,
    GeneralisationNotFound,
    GeneralisationParseError,
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
from rdfmem.store.rdfstore import RdfStore, RemoteStore
from rdfmem.store.remote import Endpoint, Lease
from rdfmem.store.typed import TypedStore

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
    "ontology_path",
]
