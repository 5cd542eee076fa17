"""The store floor: ``RdfStore``, one facade over any backend.

``rdfstore`` (the facade: ``RdfStore`` and ``RemoteStore``), ``kv`` (the key/value half and
its edits), ``triples`` (the triple half and SPARQL), ``typed`` (``TypedStore``), ``twins``
(the asyncio twins), ``remote`` (what a store on a SPARQL server does on the network),
``indexes/`` (read-side indexes fed by the writes). Built on ``rdfmem.backends``
and ``rdfmem.core`` only.
"""

from rdfmem.store.rdfstore import RdfStore, RemoteStore
from rdfmem.store.remote import Endpoint, Lease
from rdfmem.store.typed import TypedStore

__all__ = ["Endpoint", "Lease", "RdfStore", "RemoteStore", "TypedStore"]
