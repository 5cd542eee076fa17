"""The domain floor: the agent's knowledge, written over ``RdfStore``'s public API only.

``decisions`` (the decision graph and its named queries), ``memories`` (scoped memories),
``generalisations``, ``embeddings`` (embedders and vector search), ``context`` (context
updates), ``checkpoint``. Each runs unchanged on every backend, embedded or remote. The
public import paths are ``rdfmem.decisions``, ``rdfmem.memories`` … (thin re-exports).
"""
