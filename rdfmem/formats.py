"""Names of RDF and SPARQL results formats, as users write them, mapped to pyoxigraph's.

>>> rdf_format("ttl")
<RdfFormat Turtle>
>>> results_format("application/sparql-results+json")
<QueryResultsFormat SPARQL Results in JSON>
"""

from __future__ import annotations

from pathlib import Path

from pyoxigraph import QueryResultsFormat, RdfFormat

from .errors import FormatError

__all__ = ["rdf_format", "results_format", "RDF_FORMAT_NAMES", "RESULTS_FORMAT_NAMES"]

RDF_FORMAT_NAMES: dict[str, RdfFormat] = {
    "turtle": RdfFormat.TURTLE,
    "ttl": RdfFormat.TURTLE,
    "trig": RdfFormat.TRIG,
    "ntriples": RdfFormat.N_TRIPLES,
    "n-triples": RdfFormat.N_TRIPLES,
    "nt": RdfFormat.N_TRIPLES,
    "nquads": RdfFormat.N_QUADS,
    "n-quads": RdfFormat.N_QUADS,
    "nq": RdfFormat.N_QUADS,
    "xml": RdfFormat.RDF_XML,
    "rdfxml": RdfFormat.RDF_XML,
    "rdf/xml": RdfFormat.RDF_XML,
    "rdf": RdfFormat.RDF_XML,
    "owl": RdfFormat.RDF_XML,
    "json-ld": RdfFormat.JSON_LD,
    "jsonld": RdfFormat.JSON_LD,
    "n3": RdfFormat.N3,
}

RESULTS_FORMAT_NAMES: dict[str, QueryResultsFormat] = {
    "json": QueryResultsFormat.JSON,
    "srj": QueryResultsFormat.JSON,
    "xml": QueryResultsFormat.XML,
    "srx": QueryResultsFormat.XML,
    "csv": QueryResultsFormat.CSV,
    "tsv": QueryResultsFormat.TSV,
}


def rdf_format(value: str | RdfFormat) -> RdfFormat:
    """An RDF format from a name (``turtle``, ``nt``, ``json-ld`` …), a media type or a file name.

    Raises:
        FormatError: the name is none of those.
    """
    if isinstance(value, RdfFormat):
        return value
    name = value.strip().lower()
    if name in RDF_FORMAT_NAMES:
        return RDF_FORMAT_NAMES[name]
    by_type = RdfFormat.from_media_type(name)
    if by_type is not None:
        return by_type
    suffix = Path(name).suffix.lstrip(".")
    if suffix in RDF_FORMAT_NAMES:
        return RDF_FORMAT_NAMES[suffix]
    known = ", ".join(sorted(set(RDF_FORMAT_NAMES)))
    raise FormatError(f"unknown RDF format {value!r}; use one of {known} or a media type")


def results_format(value: str | QueryResultsFormat) -> QueryResultsFormat:
    """A SPARQL results format from a name (``json``, ``xml``, ``csv``, ``tsv``) or media type.

    Raises:
        FormatError: the name is none of those.
    """
    if isinstance(value, QueryResultsFormat):
        return value
    name = value.strip().lower()
    if name in RESULTS_FORMAT_NAMES:
        return RESULTS_FORMAT_NAMES[name]
    by_type = QueryResultsFormat.from_media_type(name)
    if by_type is not None:
        return by_type
    raise FormatError(f"unknown SPARQL results format {value!r}; use json, xml, csv or tsv")
