"""The remote backend: any SPARQL 1.1 server over the SPARQL 1.1 Protocol.

``client`` (``SparqlBackend``), ``answers`` (HTTP answers, retries, errors), ``wire``
(requests and answers as SPARQL text and results), ``bind`` (pre-bound variables),
``text`` (the change log's SPARQL), ``changelog`` (one client's change log), ``loglines``
(a cursor's records in date order, for looks bounded by what is new), ``writes``
(a write's requests: blank node removals, staged large writes), ``leases`` (write leases
every client respects) with ``lease_steps`` (the protocol), ``lease_run`` (its runner),
``lease_kept`` (kept claims), ``lease_keepable`` (whether a claim is kept),
``lease_contention`` and ``lease_local``, and ``http`` (the lean async transport).
"""

from rdfmem.backends.sparql.client import SparqlBackend

__all__ = ["SparqlBackend"]
