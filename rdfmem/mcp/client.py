"""The MCP client a write is attributed to, and the history attribution of its writes.

>>> from rdfmem import RdfStore
>>> store = RdfStore(history=True, agent="urn:agent:server")
>>> with attributed_to(store, Client("claude-code", "1.0")):
...     store.set("k", 1)
>>> with attributed_to(store, Client()):  # no clientInfo: the store's own agent
...     store.set("k", 2)
>>> [v.by for v in store.history("k")]
['urn:rdfmem:mcp:client:claude-code/1.0', 'urn:agent:server']
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from pyoxigraph import Literal, NamedNode, Quad

from rdfmem.mcp.vocab import LABEL, RDF_TYPE, SOFTWARE_AGENT, client_iri
from rdfmem.store.rdfstore import RdfStore

__all__ = ["NOBODY", "UNKNOWN", "Client", "attributed_to"]

#: The name of a client that sent no ``clientInfo``.
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Client:
    """The MCP client a write is attributed to (from its ``clientInfo``)."""

    name: str = UNKNOWN
    version: str = ""

    def quads(self, graph: NamedNode) -> list[Quad]:
        iri = client_iri(self.name, self.version)
        label = f"{self.name} {self.version}".strip()
        return [
            Quad(iri, RDF_TYPE, SOFTWARE_AGENT, graph),
            Quad(iri, LABEL, Literal(label), graph),
        ]


#: A client that sent no ``clientInfo`` (the default of ``KnowledgeGraph``'s writes).
NOBODY = Client()


def attributed_to(store: RdfStore, client: Client) -> AbstractContextManager[None]:
    """A block whose writes the history of ``store`` attributes to ``client``
    (``urn:rdfmem:mcp:client:NAME/VERSION``, the IRI its quads carry); to the store's own
    agent (its ``agent=``) when the client sent no name, or the store keeps no history."""
    if not store.keeps_history or not client.name or client.name == UNKNOWN:
        return nullcontext()
    return store.attributed(by=client_iri(client.name, client.version))
