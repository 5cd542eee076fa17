"""The store floor: ``RdfStore``, one facade over any backend.

``rdfstore`` (the facade: ``RdfStore`` and ``RemoteStore``), ``kv`` (the key/value half and
its edits), ``triples`` (the triple half and SPARQL), ``typed`` (``TypedStore``), ``twins``
(the asyncio twins), ``remote`` (what a store on a SPARQL server does on the network),
``indexes/`` (read-side indexes fed by the writes), ``history`` (what a store with
``history=True`` records: clock, attribution), ``history_reads``, ``history_compact``,
``history_api`` (``RdfStore``'s history methods), ``history_wire`` (a versioned write on a
SPARQL server), ``sandbox`` (kept children that run other people's queries), ``readonly``
(read-only opens for ``rdfmem serve --workers``), ``owner_reads`` (queries other
processes send with a time limit, run in the sandbox), ``attached_indexes`` (an attached
process starts from the owner's indexes, handed over at its first look). Built on
``rdfmem.backends`` and ``rdfmem.core`` only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rdfmem.store import attached_indexes as _attached_indexes  # noqa: F401  (RdfStore.opened_hooks)
from rdfmem.store import owner_reads as _owner_reads  # noqa: F401  (RdfStore.opened_hooks)
from rdfmem.store.rdfstore import RdfStore, RemoteStore
from rdfmem.store.remote import Endpoint, Lease

if TYPE_CHECKING:
    from rdfmem.store.typed import TypedStore

__all__ = ["Endpoint", "Lease", "RdfStore", "RemoteStore", "TypedStore"]


def __getattr__(name: str) -> Any:
    # ``TypedStore`` brings pydantic (a quarter of a second): loaded when first asked for,
    # so a process that opens a store (``rdfmem mcp``, the CLI) does not pay for it.
    if name == "TypedStore":
        from rdfmem.store.typed import TypedStore

        return TypedStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
