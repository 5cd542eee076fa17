"""The core floor: pure functions and data, no I/O.

``errors`` (the one error tree), ``terms`` (Python values and RDF terms), ``keys`` (the
key/value codec), ``formats`` (RDF and result format names), ``results`` (what queries
return), ``guard`` (the SPARQL text guard), ``ontology`` (vocabulary constants and where the
shipped ontology, shapes and named queries live). Every other floor may import these;
nothing here imports another floor.
"""
