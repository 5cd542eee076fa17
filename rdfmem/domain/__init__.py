"""The domain floor: the agent's knowledge, written over ``RdfStore``'s public API only.

``decisions`` (the decision graph: ``decision_models`` its pydantic models,
``decision_reader`` its reads and named queries, ``decision_graph`` its writes,
``decision_queries`` the SPARQL they build), ``memories`` (scoped memories),
``generalisations``, ``embeddings`` (embedders and vector search), ``context`` (context
updates), ``checkpoint``. Each runs unchanged on every backend, embedded or remote. The
public import paths are ``rdfmem.decisions``, ``rdfmem.memories`` … (thin re-exports).
"""
