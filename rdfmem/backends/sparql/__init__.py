"""The remote backend: any SPARQL 1.1 server over the SPARQL 1.1 Protocol.

``client`` (``SparqlBackend``), ``wire`` (requests and answers), ``bind`` (pre-bound
variables), ``text`` (SPARQL text the client builds), ``writes`` (staged large writes),
``leases``/``lease_steps``/``lease_kept`` (write leases every client respects), ``http``
(the lean async transport).
"""

from rdfmem.backends.sparql.client import SparqlBackend

__all__ = ["SparqlBackend"]
