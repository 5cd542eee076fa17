"""The store floor: ``RdfStore``, one facade over any backend.

``rdfstore`` (the facade: ``RdfStore`` and ``RemoteStore``), ``kv`` (the key/value half and
its edits), ``triples`` (the triple half and SPARQL), ``typed`` (``TypedStore``), ``twins``
(the asyncio twins), ``remote`` (what a store on a SPARQL server does on the network),
``indexes/`` (read-side indexes fed by the writes), ``history`` (what a store with
``history=True`` records: clock, attribution), ``history_reads``, ``history_compact``,
``history_api`` (``RdfStore``'s history methods), ``history_wire`` (a versioned write on a
SPARQL server), ``sandbox`` (kept children that run other people's queries), ``readonly``
(read-only opens for ``rdfmem serve --workers``). Built on ``rdfmem.backends`` and
``rdfmem.core`` only.
"""

from rdfmem.store.rdfstore import RdfStore, RemoteStore
from rdfmem.store.remote import Endpoint, Lease
from rdfmem.store.typed import TypedStore

__all__ = ["Endpoint", "Lease", "RdfStore", "RemoteStore", "TypedStore"]
