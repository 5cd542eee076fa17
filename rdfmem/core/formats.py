"""Names of RDF and SPARQL results formats, as users write them, mapped to pyoxigraph's.

>>> rdf_format("ttl")
<RdfFormat Turtle>
>>> results_format("application/sparql-results+json")
<QueryResultsFormat SPARQL Results in JSON>
"""

from __future__ import annotations

import re
from pathlib import Path

from pyoxigraph import QueryResultsFormat, RdfFormat

from rdfmem.core.errors import FormatError

__all__ = [
    "MAX_ENTITY_EXPANSION",
    "RDF_FORMAT_NAMES",
    "RESULTS_FORMAT_NAMES",
    "check_rdf",
    "check_rdfxml",
    "rdf_format",
    "results_format",
]

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


#: The most characters that internal DTD entities of one RDF/XML document may expand to
#: (or ten times the document's size, whichever is larger).
MAX_ENTITY_EXPANSION = 16 << 20

_DOCTYPE = re.compile(rb"<!DOCTYPE\b")
_SUBSET_OPEN = re.compile(rb"[\[>]")
_DECLARATION = re.compile(
    rb"<!ENTITY\s+(%\s+)?([^\s%\"'>]+)\s+(?:\"([^\"]*)\"|'([^']*)'|(SYSTEM|PUBLIC)\b)"
)
# The internal subset up to its closing "]": quoted literals and comments may hold "]".
_SUBSET = re.compile(rb"(?:<!--.*?-->|\"[^\"]*\"|'[^']*'|[^\]\"'<]|<(?!!--))*\]", re.DOTALL)
_REFERENCE = re.compile(rb"&([A-Za-z_:][\w.:\-]*);")


def check_rdfxml(data: bytes) -> None:
    """Refuse RDF/XML whose DTD entities would expand without bound ("billion laughs").

    Internal entities (``<!ENTITY ex "http://example.org/">``, common in OWL files) are
    allowed while the whole document expands them to at most ``MAX_ENTITY_EXPANSION``
    characters (or ten times its size). Parameter entities and entities that refer to
    themselves are refused. The check is linear in the size of ``data``; parsers still refuse
    to fetch external entities.

    >>> check_rdfxml(b'<!DOCTYPE r [<!ENTITY ex "http://example.org/">]><r a="&ex;x"/>')
    >>> lol = b'<!ENTITY a "aaaaaaaaaa">' + b"".join(
    ...     b'<!ENTITY a%d "%s">' % (i, (b"&a%d;" % (i - 1) if i > 1 else b"&a;") * 10)
    ...     for i in range(1, 9)
    ... )
    >>> check_rdfxml(b"<!DOCTYPE r [" + lol + b"]><r>&a8;</r>")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    rdfmem.core.errors.FormatError: RDF/XML entities would expand to 1000000000 characters ...

    Raises:
        FormatError: the document's entities expand beyond the limit, are recursive, or are
            parameter entities.
    """
    doctype = _DOCTYPE.search(data)
    if doctype is None:
        return
    opened = _SUBSET_OPEN.search(data, doctype.end())
    if opened is None or opened.group() != b"[":
        return  # no internal subset: no internal entities to expand
    closed = _SUBSET.match(data, opened.end())
    if closed is None:
        raise FormatError("RDF/XML: the DOCTYPE's internal subset is not closed")
    end = closed.end() - 1
    subset = data[opened.end() : end]
    values: dict[bytes, bytes] = {}
    for match in _DECLARATION.finditer(subset):
        if match.group(1):
            raise FormatError("RDF/XML: parameter entities are not accepted")
        name = match.group(2)
        value = match.group(3) if match.group(3) is not None else match.group(4)
        if value is not None and name not in values:  # the first declaration wins
            values[name] = value
    if not values:
        return
    sizes: dict[bytes, int] = {}

    def size(name: bytes, active: tuple[bytes, ...]) -> int:
        if name in sizes:
            return sizes[name]
        if name in active:
            raise FormatError(f"RDF/XML: entity {name.decode(errors='replace')!r} refers to itself")
        value = values[name]
        total = len(value)
        for ref in _REFERENCE.finditer(value):
            if ref.group(1) in values:
                total += size(ref.group(1), (*active, name)) - len(ref.group())
        sizes[name] = total
        return total

    limit = max(MAX_ENTITY_EXPANSION, 10 * len(data))
    expanded = 0
    for ref in _REFERENCE.finditer(data, end):
        if ref.group(1) in values:
            expanded += size(ref.group(1), ())
            if expanded > limit:
                break
    if expanded > limit:
        raise FormatError(f"RDF/XML entities would expand to {expanded} characters (limit {limit})")


def check_rdf(data: bytes, format: RdfFormat) -> None:
    """The safety checks for ``data`` in ``format`` before a parser reads it
    (``check_rdfxml`` for RDF/XML; nothing for the other formats).

    Raises:
        FormatError: the data is refused.
    """
    if format == RdfFormat.RDF_XML:
        check_rdfxml(data)
