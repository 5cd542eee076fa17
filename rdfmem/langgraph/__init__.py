"""rdfmem as a LangGraph store: ``RdfBaseStore`` (``pip install 'rdfmem[langgraph]'``).

``builder.compile(store=RdfBaseStore(...))`` gives a graph's nodes long-term memory kept as
RDF on any rdfmem backend: embedded Oxigraph (in memory or on disk), rdflib, or a SPARQL
server that other tools read. See ``rdfmem.langgraph.vocab`` for how items look in RDF.
"""

from __future__ import annotations

try:
    import langgraph.store.base  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("rdfmem.langgraph needs LangGraph: pip install 'rdfmem[langgraph]'") from exc

from rdfmem.langgraph.store import RdfBaseStore

__all__ = ["RdfBaseStore"]
