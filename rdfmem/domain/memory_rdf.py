"""How a memory is written in RDF, and read back (``rdfmem.domain.memories`` uses it).

::

    <urn:rdfmem:memory:global:api-v2-0> a rm:Memory ; rm:scope "global" ;
        dcterms:title "API v2.0" ; rm:slug "api-v2-0" ; rm:content "…" ; rm:topic "api" ;
        rm:embedding "…"^^rm:float32Vector ; dcterms:created … ; dcterms:modified … ;
        rm:validFrom …  ; rm:validUntil … .     # world time, when given
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import numpy as np
from pydantic import ValidationError
from pyoxigraph import Literal as RdfLiteral
from pyoxigraph import NamedNode, Quad

from rdfmem.core.errors import InvalidValue
from rdfmem.core.ontology import PREFIXES, RDFMEM
from rdfmem.core.results import SelectResult
from rdfmem.core.terms import RDF_JSON, from_literal, sparql_term, to_object
from rdfmem.domain.embeddings import EMBEDDING, literal_vector
from rdfmem.domain.memory_model import Memory

_RDF_TYPE = NamedNode(PREFIXES["rdf"] + "type")
_CLASS = NamedNode(RDFMEM + "Memory")
_SCOPE = NamedNode(RDFMEM + "scope")
_TITLE = NamedNode(PREFIXES["dcterms"] + "title")
_SLUG = NamedNode(RDFMEM + "slug")
_CONTENT = NamedNode(RDFMEM + "content")
_TOPIC = NamedNode(RDFMEM + "topic")
_TOPIC_ORDER = NamedNode(RDFMEM + "topicsInOrder")
_CREATED = NamedNode(PREFIXES["dcterms"] + "created")
_MODIFIED = NamedNode(PREFIXES["dcterms"] + "modified")
_GRAPH_PREFIX = "urn:rdfmem:memories:"
_SUBJECT_PREFIX = "urn:rdfmem:memory:"


_VALID_FROM = NamedNode(RDFMEM + "validFrom")
_VALID_UNTIL = NamedNode(RDFMEM + "validUntil")


def _embedding_text(memory: Memory) -> str:
    return "\n".join([memory.title, " ".join(memory.topics), memory.content])


def _vector_list(literal: RdfLiteral) -> list[float]:
    values: list[float] = literal_vector(literal).astype(np.float64).tolist()
    return values


def _triples(subject: NamedNode, m: Memory, embedding: RdfLiteral) -> list[str]:
    s = sparql_term(subject)

    def line(predicate: NamedNode, term: Any) -> str:
        return f"{s} {sparql_term(predicate)} {sparql_term(term)} ."

    out = [
        line(_RDF_TYPE, _CLASS),
        line(_SCOPE, RdfLiteral(m.scope)),
        line(_TITLE, RdfLiteral(m.title)),
        line(_SLUG, RdfLiteral(m.slug)),
        line(_CONTENT, RdfLiteral(m.content)),
        line(EMBEDDING, embedding),
        line(_CREATED, to_object(m.inserted_at)),
        line(_MODIFIED, to_object(m.updated_at)),
    ]
    out.extend(line(_TOPIC, RdfLiteral(t)) for t in m.topics)
    if m.valid_from is not None:
        out.append(line(_VALID_FROM, to_object(m.valid_from)))
    if m.valid_until is not None:
        out.append(line(_VALID_UNTIL, to_object(m.valid_until)))
    if len(m.topics) > 1:
        order = RdfLiteral(json.dumps(m.topics, ensure_ascii=False), datatype=RDF_JSON)
        out.append(line(_TOPIC_ORDER, order))
    return out


def _delete_request(graph: NamedNode, subject: NamedNode) -> str:
    g, s = sparql_term(graph), sparql_term(subject)
    return f"DELETE {{ GRAPH {g} {{ {s} ?p ?o }} }} WHERE {{ GRAPH {g} {{ {s} ?p ?o }} }}"


def _from_rdf(p: dict[str, list[Any]]) -> Memory | None:
    """A memory from its properties, or None when they do not make one."""

    def one(predicate: NamedNode) -> Any:
        terms = p.get(predicate.value) or []
        term = terms[0] if terms else None
        return from_literal(term) if isinstance(term, RdfLiteral) else None

    if _CLASS not in (p.get(_RDF_TYPE.value) or []):
        return None
    topics = [t.value for t in p.get(_TOPIC.value, []) if isinstance(t, RdfLiteral)]
    order = one(_TOPIC_ORDER)
    have = set(topics)
    ordered = [t for t in (order if isinstance(order, list) else []) if t in have]
    topics = list(dict.fromkeys(ordered)) + sorted(have.difference(ordered))
    vectors = [t for t in p.get(EMBEDDING.value, []) if isinstance(t, RdfLiteral)]
    try:
        embeddings = _vector_list(vectors[0]) if vectors else None
    except InvalidValue:
        embeddings = None
    try:
        return Memory(
            scope=one(_SCOPE),
            title=one(_TITLE),
            content=one(_CONTENT),
            topics=topics,
            embeddings=embeddings,
            slug=one(_SLUG),
            inserted_at=one(_CREATED),
            updated_at=one(_MODIFIED),
            valid_from=one(_VALID_FROM),
            valid_until=one(_VALID_UNTIL),
        )
    except ValidationError:
        return None  # written by someone else and incomplete: not a memory


def _column(rows: Any, name: str) -> list[NamedNode]:
    assert isinstance(rows, SelectResult)
    return [row[name] for row in rows if isinstance(row.get(name), NamedNode)]  # type: ignore[misc]


def memory_from_quads(quads: Iterable[Quad]) -> Memory | None:
    """The memory a subject's quads make (as ``history_of`` and ``as_of_quads`` give
    them), or None when they do not make one (none, or an incomplete record)."""
    props: dict[str, list[Any]] = {}
    for quad in quads:
        props.setdefault(quad.predicate.value, []).append(quad.object)
    return _from_rdf(props) if props else None
