"""The store floor: ``RdfStore``, one facade over any backend.

``rdfstore`` (the facade), ``kv`` (the key/value half), ``triples`` (the triple half and
SPARQL), ``typed`` (``TypedStore``), ``remote`` (``RemoteStore``, a store on a SPARQL
server), ``indexes/`` (read-side indexes fed by the writes). Built on ``rdfmem.backends``
and ``rdfmem.core`` only.
"""

from rdfmem.store.rdfstore import RdfStore, RemoteStore
from rdfmem.store.remote import Endpoint, Lease
from rdfmem.store.typed import TypedStore

__all__ = ["Endpoint", "Lease", "RdfStore", "RemoteStore", "TypedStore"]
