"""The remote backend: any SPARQL 1.1 server over the SPARQL 1.1 Protocol.

``client`` (``SparqlBackend``), ``answers`` (HTTP answers, retries, errors), ``wire``
(requests and answers as SPARQL text and results), ``bind`` (pre-bound variables),
``text`` (the change log's SPARQL), ``changelog`` (one client's change log), ``writes``
(a write's requests: blank node removals, staged large writes), ``leases`` (write leases
every client respects) with ``lease_steps`` (the protocol), ``lease_run`` (its runner),
``lease_kept`` (kept claims), ``lease_contention`` and ``lease_local``, and ``http`` (the
lean async transport).
"""

from rdfmem.backends.sparql.client import SparqlBackend

__all__ = ["SparqlBackend"]
