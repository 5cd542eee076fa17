"""Backends: embedded Oxigraph (default), rdflib, and remote SPARQL 1.1 servers."""

from .base import Backend
from .oxigraph import OxigraphBackend
from .rdflib import RdflibBackend
from .sparql import SparqlBackend

__all__ = ["Backend", "OxigraphBackend", "RdflibBackend", "SparqlBackend"]
