"""Content negotiation: the ``Accept`` header, with q-values, against what a response can be.

>>> offer = negotiate("text/csv;q=0.5, application/sparql-results+xml", RESULTS_OFFERS)
>>> offer.media_type
'application/sparql-results+xml'
>>> negotiate("text/html", RESULTS_OFFERS) is None
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache

from pyoxigraph import QueryResultsFormat, RdfFormat

from rdfmem.core.errors import FormatError
from rdfmem.core.formats import rdf_format, results_format

__all__ = [
    "DATASET_OFFERS",
    "GRAPH_OFFERS",
    "RESULTS_OFFERS",
    "Offer",
    "by_name",
    "names",
    "negotiate",
    "parse_accept",
]


@dataclass(frozen=True, eq=False)
class Offer:
    """One media type a response can be written in, and the pyoxigraph format that writes it.

    Offers are compared and hashed by identity: each is one constant of the tables below.
    """

    media_type: str
    format: QueryResultsFormat | RdfFormat

    @cached_property
    def content_type(self) -> str:
        """The ``Content-Type`` header value (text types say they are UTF-8)."""
        if self.media_type.startswith("text/") or self.media_type.endswith("+json"):
            return f"{self.media_type}; charset=utf-8"
        return self.media_type

    @property
    def rdf(self) -> RdfFormat:
        """The format, for an offer of RDF."""
        assert isinstance(self.format, RdfFormat), self
        return self.format

    @property
    def results(self) -> QueryResultsFormat:
        """The format, for an offer of SPARQL results."""
        assert isinstance(self.format, QueryResultsFormat), self
        return self.format


_R = QueryResultsFormat
#: SELECT and ASK results; the first is the default.
RESULTS_OFFERS: tuple[Offer, ...] = (
    Offer("application/sparql-results+json", _R.JSON),
    Offer("application/sparql-results+xml", _R.XML),
    Offer("text/csv", _R.CSV),
    Offer("text/tab-separated-values", _R.TSV),
    Offer("application/json", _R.JSON),
    Offer("application/xml", _R.XML),
    Offer("text/xml", _R.XML),
)
#: CONSTRUCT and DESCRIBE results, and one graph of the Graph Store; the first is the default.
GRAPH_OFFERS: tuple[Offer, ...] = (
    Offer("text/turtle", RdfFormat.TURTLE),
    Offer("application/n-triples", RdfFormat.N_TRIPLES),
    Offer("application/rdf+xml", RdfFormat.RDF_XML),
    Offer("application/ld+json", RdfFormat.JSON_LD),
    Offer("application/n-quads", RdfFormat.N_QUADS),
    Offer("application/trig", RdfFormat.TRIG),
    Offer("text/n3", RdfFormat.N3),
    Offer("application/x-turtle", RdfFormat.TURTLE),
    Offer("text/plain", RdfFormat.N_TRIPLES),
    Offer("application/xml", RdfFormat.RDF_XML),
)
#: The whole dataset (every graph) of the Graph Store; the first is the default.
DATASET_OFFERS: tuple[Offer, ...] = (
    Offer("application/trig", RdfFormat.TRIG),
    Offer("application/n-quads", RdfFormat.N_QUADS),
    Offer("application/ld+json", RdfFormat.JSON_LD),
)


@dataclass(frozen=True)
class _Range:
    type: str
    subtype: str
    q: float

    @property
    def specificity(self) -> int:
        return (self.type != "*") + (self.subtype != "*")

    def matches(self, media_type: str) -> bool:
        kind, _, sub = media_type.partition("/")
        return self.type in ("*", kind) and self.subtype in ("*", sub)


def parse_accept(header: str | None) -> list[_Range]:
    """The media ranges of an ``Accept`` header; malformed entries are skipped, as the
    HTTP spec lets a server do. No header (or an empty one) accepts anything.

    >>> [(r.type, r.subtype, r.q) for r in parse_accept("text/*;q=0.3, */*;q=0.1")]
    [('text', '*', 0.3), ('*', '*', 0.1)]
    """
    if header is None or not header.strip():
        return [_Range("*", "*", 1.0)]
    ranges: list[_Range] = []
    for item in header.split(","):
        media, *params = (part.strip() for part in item.split(";"))
        kind, slash, sub = media.lower().partition("/")
        if not slash or not kind or not sub:
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = min(max(float(value), 0.0), 1.0)
                except ValueError:
                    q = 0.0
        ranges.append(_Range(kind, sub, q))
    return ranges


def _quality(ranges: Sequence[_Range], media_type: str) -> float:
    best: _Range | None = None
    for r in ranges:
        if r.matches(media_type) and (best is None or r.specificity > best.specificity):
            best = r
    return 0.0 if best is None else best.q


def negotiate(header: str | None, offers: Sequence[Offer]) -> Offer | None:
    """The offer the client prefers (highest q, the most specific range deciding each
    offer's q); ties go to the earlier offer. None when nothing is acceptable (406)."""
    if len(header or "") > 1024:  # not worth remembering
        return _negotiate(header, tuple(offers))
    return _remembered(header, tuple(offers))


def _negotiate(header: str | None, offers: tuple[Offer, ...]) -> Offer | None:
    ranges = parse_accept(header)
    chosen: Offer | None = None
    chosen_q = 0.0
    for offer in offers:
        q = _quality(ranges, offer.media_type)
        if q > chosen_q:
            chosen, chosen_q = offer, q
    return chosen


#: Clients send the same few Accept headers over and over.
_remembered = lru_cache(maxsize=256)(_negotiate)


def by_name(name: str, offers: Sequence[Offer]) -> Offer | None:
    """The offer named by a ``format`` parameter (``json``, ``csv``, ``ttl``, a media type
    …), or None when it is not among ``offers``."""
    for offer in offers:
        if offer.media_type == name.strip().lower():
            return offer
    wanted: QueryResultsFormat | RdfFormat | None = None
    for parse in (results_format, rdf_format):
        try:
            wanted = parse(name)
        except FormatError:
            continue
        for offer in offers:
            if offer.format == wanted:
                return offer
    return None


def names(offers: Sequence[Offer]) -> str:
    """The media types of ``offers``, for a 406 message."""
    return ", ".join(dict.fromkeys(o.media_type for o in offers))
