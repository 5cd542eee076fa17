"""Backends: embedded Oxigraph (default), rdflib, and remote SPARQL 1.1 servers.

The names are loaded when first used (``from rdfmem.backends import RdflibBackend`` imports
rdflib then, not before): a process that never uses rdflib never pays its import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rdfmem.backends.base import Backend
    from rdfmem.backends.oxigraph import OxigraphBackend
    from rdfmem.backends.rdflib import RdflibBackend
    from rdfmem.backends.sparql import SparqlBackend

__all__ = ["Backend", "OxigraphBackend", "RdflibBackend", "SparqlBackend"]

_WHERE = {
    "Backend": "rdfmem.backends.base",
    "OxigraphBackend": "rdfmem.backends.oxigraph",
    "RdflibBackend": "rdfmem.backends.rdflib",
    "SparqlBackend": "rdfmem.backends.sparql",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'rdfmem.backends' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
