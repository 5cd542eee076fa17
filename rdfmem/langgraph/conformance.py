"""Run LangGraph's own store tests against ``RdfBaseStore``: a pytest plugin.

LangGraph ships no conformance suite for stores; its tests of the reference
``InMemoryStore`` (``tests/test_store.py`` in the langgraph-checkpoint source distribution)
are the specification. This plugin puts a subclass of ``RdfBaseStore`` named
``InMemoryStore`` in ``langgraph.store.memory`` before those tests are imported, so they run
unchanged against rdfmem::

    RDFMEM_LANGGRAPH_BACKEND=disk \
        python -m pytest -p rdfmem.langgraph.conformance tests/test_store.py

``RDFMEM_LANGGRAPH_BACKEND`` picks where each store lives: ``memory`` (the default), ``disk``
(a fresh on-disk Oxigraph store each), ``rdflib``, or ``remote`` (a fresh named graph each on
the SPARQL server at ``RDFMEM_LANGGRAPH_QUERY_URL`` / ``RDFMEM_LANGGRAPH_UPDATE_URL``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import weakref
from typing import Any

from rdfmem.backends.rdflib import RdflibBackend
from rdfmem.core.errors import InvalidValue
from rdfmem.langgraph.store import RdfBaseStore
from rdfmem.store.rdfstore import RdfStore

__all__ = [
    "BACKENDS",
    "make_rdf_store",
    "pytest_configure",
    "pytest_report_header",
    "swap_in_memory_store",
]

#: The values ``RDFMEM_LANGGRAPH_BACKEND`` may take.
BACKENDS = ("memory", "disk", "rdflib", "remote")


def make_rdf_store(kind: str) -> tuple[RdfStore, str | None, str | None]:
    """A fresh ``RdfStore`` of ``kind``, the graph to use (remote) and a folder to delete.

    Raises:
        InvalidValue: an unknown kind, or ``remote`` without a query URL.
    """
    if kind == "memory":
        return RdfStore(), None, None
    if kind == "disk":
        folder = tempfile.mkdtemp(prefix="rdfmem-langgraph-")
        return RdfStore.open(os.path.join(folder, "store")), None, folder
    if kind == "rdflib":
        return RdfStore(RdflibBackend()), None, None
    if kind == "remote":
        query_url = os.environ.get("RDFMEM_LANGGRAPH_QUERY_URL")
        if not query_url:
            raise InvalidValue("RDFMEM_LANGGRAPH_BACKEND=remote needs RDFMEM_LANGGRAPH_QUERY_URL")
        store = RdfStore.connect(query_url, os.environ.get("RDFMEM_LANGGRAPH_UPDATE_URL"))
        return store, f"urn:rdfmem:test:{uuid.uuid4().hex}", None
    raise InvalidValue(f"RDFMEM_LANGGRAPH_BACKEND is one of {BACKENDS}, not {kind!r}")


class InMemoryStore(RdfBaseStore):
    """``RdfBaseStore`` under the reference store's name and signature (``index=``)."""

    def __init__(self, *, index: Any = None, ttl: Any = None) -> None:
        kind = os.environ.get("RDFMEM_LANGGRAPH_BACKEND", "memory")
        store, graph, folder = make_rdf_store(kind)
        if graph is None:
            super().__init__(store, index=index, ttl=ttl)
        else:
            super().__init__(store, index=index, ttl=ttl, graph=graph)
        self._owns_store = True
        if folder is not None:
            weakref.finalize(self, _remove, store, folder)


def _remove(store: RdfStore, folder: str) -> None:
    store.close()
    shutil.rmtree(folder, ignore_errors=True)


def swap_in_memory_store() -> None:
    """Make ``langgraph.store.memory.InMemoryStore`` an ``RdfBaseStore``."""
    import langgraph.store.memory as memory

    memory.InMemoryStore = InMemoryStore  # type: ignore[misc,assignment]


def pytest_configure(config: Any) -> None:
    """pytest hook: swap the store before any test module is imported."""
    swap_in_memory_store()


def pytest_report_header(config: Any) -> str:
    """pytest hook: say which store the tests run against."""
    kind = os.environ.get("RDFMEM_LANGGRAPH_BACKEND", "memory")
    return f"rdfmem: langgraph.store.memory.InMemoryStore is RdfBaseStore on {kind}"
