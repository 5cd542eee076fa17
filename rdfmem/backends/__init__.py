"""Backends: embedded Oxigraph (default), rdflib, and remote SPARQL 1.1 servers."""

from rdfmem.backends.base import Backend
from rdfmem.backends.oxigraph import OxigraphBackend
from rdfmem.backends.rdflib import RdflibBackend
from rdfmem.backends.sparql import SparqlBackend

__all__ = ["Backend", "OxigraphBackend", "RdflibBackend", "SparqlBackend"]
