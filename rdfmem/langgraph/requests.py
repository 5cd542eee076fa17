"""SPARQL Update requests for LangGraph store writes, built by pure functions.

Every term goes through ``sparql_term`` (pyoxigraph's N-Triples escaping), so no label, key
or value can break out of its place in a request. One request carries a whole batch and
runs atomically: an item's old triples and vectors go, its new ones come, and its
``dcterms:created`` time stays when it already had one.

>>> from pyoxigraph import NamedNode
>>> request = delete_request(NamedNode("urn:g"), [NamedNode("urn:i")])
>>> print(request)  # doctest: +NORMALIZE_WHITESPACE
DELETE { GRAPH <urn:g> { ?v ?p ?o } }
WHERE { VALUES ?s { <urn:i> } GRAPH <urn:g> { ?v <https://w3id.org/rdfmem#vectorOf> ?s ; ?p ?o } } ;
DELETE { GRAPH <urn:g> { ?s ?p ?o } } WHERE { VALUES ?s { <urn:i> } GRAPH <urn:g> { ?s ?p ?o } }
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pyoxigraph import Literal, NamedNode

from rdfmem.core.terms import RDF_JSON, sparql_term
from rdfmem.domain.embeddings import EMBEDDING
from rdfmem.langgraph.vocab import (
    CREATED,
    EXPIRES,
    FIELD,
    ITEM,
    KEY,
    MODIFIED,
    NAMESPACE,
    RDF_TYPE,
    TTL_MINUTES,
    VALUE,
    VECTOR,
    VECTOR_OF,
    datetime_literal,
    item_iri,
    namespace_text,
    vector_iri,
)

__all__ = [
    "ItemWrite",
    "delete_request",
    "namespace_filter",
    "put_request",
    "refresh_request",
]

_XSD_DOUBLE = NamedNode("http://www.w3.org/2001/XMLSchema#double")


@dataclass(frozen=True, slots=True)
class ItemWrite:
    """One item to (re)write: its JSON text, times, TTL and vectors by field path."""

    namespace: tuple[str, ...]
    key: str
    text: str
    now: datetime
    expires: datetime | None
    ttl: float | None
    vectors: Sequence[tuple[str, Literal]]
    subject: NamedNode
    #: The item's creation time when the writer knows it (None: keep the stored one, or
    #: ``now`` for a new item), and whether an older version may be stored.
    created: datetime | None = None
    replaces: bool = True

    @classmethod
    def of(
        cls,
        namespace: tuple[str, ...],
        key: str,
        text: str,
        now: datetime,
        *,
        ttl: float | None = None,
        vectors: Sequence[tuple[str, Literal]] = (),
        created: datetime | None = None,
        replaces: bool = True,
    ) -> ItemWrite:
        """The write of one item at ``now`` (expiring ``ttl`` minutes later when given).

        A writer that knows the item's creation time (and whether it is stored at all)
        says so with ``created`` and ``replaces``, and the request is a plain insert."""
        expires = None if ttl is None else now + timedelta(minutes=ttl)
        subject = item_iri(namespace, key)
        return cls(namespace, key, text, now, expires, ttl, vectors, subject, created, replaces)


def _values(subjects: Sequence[NamedNode]) -> str:
    return " ".join(sparql_term(s) for s in subjects)


def _drop(
    graph: NamedNode,
    subjects: Sequence[NamedNode],
    *,
    keep_created: bool,
    expired_before: datetime | None = None,
) -> str:
    g, values = sparql_term(graph), _values(subjects)
    keep = f" FILTER(?p != {sparql_term(CREATED)})" if keep_created else ""
    expired = ""
    if expired_before is not None:
        moment = sparql_term(datetime_literal(expired_before))
        expired = f"?s {sparql_term(EXPIRES)} ?expires FILTER(?expires < {moment}) "
    return (
        f"DELETE {{ GRAPH {g} {{ ?v ?p ?o }} }}\n"
        f"WHERE {{ VALUES ?s {{ {values} }} "
        f"GRAPH {g} {{ {expired}?v {sparql_term(VECTOR_OF)} ?s ; ?p ?o }} }} ;\n"
        f"DELETE {{ GRAPH {g} {{ ?s ?p ?o }} }} "
        f"WHERE {{ VALUES ?s {{ {values} }} GRAPH {g} {{ {expired}?s ?p ?o{keep} }} }}"
    )


def delete_request(
    graph: NamedNode, subjects: Sequence[NamedNode], *, expired_before: datetime | None = None
) -> str:
    """Remove items and their vectors (only those still expired at ``expired_before`` when
    given: another client may have read, and so refreshed, one meanwhile)."""
    return _drop(graph, subjects, keep_created=False, expired_before=expired_before)


def _item_lines(write: ItemWrite) -> list[str]:
    s = sparql_term(write.subject)

    def line(subject: str, predicate: NamedNode, term: NamedNode | Literal) -> str:
        return f"{subject} {sparql_term(predicate)} {sparql_term(term)} ."

    lines = [
        line(s, RDF_TYPE, ITEM),
        line(s, NAMESPACE, Literal(namespace_text(write.namespace))),
        line(s, KEY, Literal(write.key)),
        line(s, VALUE, Literal(write.text, datatype=RDF_JSON)),
        line(s, MODIFIED, datetime_literal(write.now)),
    ]
    if write.created is not None:
        lines.append(line(s, CREATED, datetime_literal(write.created)))
    if write.expires is not None and write.ttl is not None:
        lines.append(line(s, EXPIRES, datetime_literal(write.expires)))
        lines.append(line(s, TTL_MINUTES, Literal(repr(float(write.ttl)), datatype=_XSD_DOUBLE)))
    for path, vector in write.vectors:
        v = sparql_term(vector_iri(write.subject, path))
        lines.append(line(v, RDF_TYPE, VECTOR))
        lines.append(line(v, VECTOR_OF, write.subject))
        lines.append(line(v, FIELD, Literal(path)))
        lines.append(line(v, EMBEDDING, vector))
    return lines


def put_request(graph: NamedNode, writes: Sequence[ItemWrite], deletes: Sequence[NamedNode]) -> str:
    """One request writing ``writes`` (keeping each item's creation time) and removing the
    items ``deletes``."""
    g = sparql_term(graph)
    parts = []
    if deletes:
        parts.append(delete_request(graph, deletes))
    unknown = [w for w in writes if w.created is None]
    if unknown:
        parts.append(_drop(graph, [w.subject for w in unknown], keep_created=True))
        created = " ".join(
            f"({sparql_term(w.subject)} {sparql_term(datetime_literal(w.now))})" for w in unknown
        )
        parts.append(
            f"INSERT {{ GRAPH {g} {{ ?s {sparql_term(CREATED)} ?now }} }}\n"
            f"WHERE {{ VALUES (?s ?now) {{ {created} }} "
            f"FILTER NOT EXISTS {{ GRAPH {g} {{ ?s {sparql_term(CREATED)} ?c }} }} }}"
        )
    replaced = [w.subject for w in writes if w.created is not None and w.replaces]
    if replaced:
        parts.append(_drop(graph, replaced, keep_created=False))
    if writes:
        body = "\n".join(line for w in writes for line in _item_lines(w))
        parts.append(f"INSERT DATA {{ GRAPH {g} {{\n{body}\n}} }}")
    return " ;\n".join(parts)


def refresh_request(graph: NamedNode, expiries: Sequence[tuple[NamedNode, datetime]]) -> str:
    """Move the expiry of items that have one (a TTL read refresh)."""
    g, p = sparql_term(graph), sparql_term(EXPIRES)
    values = " ".join(f"({sparql_term(s)} {sparql_term(datetime_literal(t))})" for s, t in expiries)
    return (
        f"DELETE {{ GRAPH {g} {{ ?s {p} ?old }} }} INSERT {{ GRAPH {g} {{ ?s {p} ?new }} }}\n"
        f"WHERE {{ VALUES (?s ?new) {{ {values} }} GRAPH {g} {{ ?s {p} ?old }} }}"
    )


def namespace_filter(variable: str, prefix: tuple[str, ...]) -> str:
    """A SPARQL FILTER keeping namespaces (``rm:namespace`` texts bound to ``?variable``)
    equal to or under ``prefix``; empty for the empty prefix.

    >>> namespace_filter("ns", ("a", 'b"c'))
    'FILTER(?ns = "a.b\\\\"c" || STRSTARTS(?ns, "a.b\\\\"c."))'
    """
    if not prefix:
        return ""
    text = namespace_text(prefix)
    exact, under = sparql_term(Literal(text)), sparql_term(Literal(text + "."))
    return f"FILTER(?{variable} = {exact} || STRSTARTS(?{variable}, {under}))"
