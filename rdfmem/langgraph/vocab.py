"""How a LangGraph store item is written in RDF: IRIs, predicates and literals, no I/O.

An item is one resource in the store's named graph (``urn:rdfmem:graph:langgraph`` unless
told another)::

    <urn:rdfmem:langgraph:item:users.123:prefs> a rm:StoreItem ;
        rm:namespace "users.123" ;        # the labels joined by '.', as LangGraph's SQL stores
        rm:key "prefs" ;
        rm:value "{\\"theme\\": \\"dark\\"}"^^rdf:JSON ;
        dcterms:created "2026-01-01T10:00:00+00:00"^^xsd:dateTime ;
        dcterms:modified "2026-01-01T10:05:00+00:00"^^xsd:dateTime ;
        rm:ttlMinutes 30.0 ; rm:expires "…"^^xsd:dateTime .   # only with a TTL

    <urn:rdfmem:langgraph:item:users.123:prefs#theme> a rm:StoreItemVector ;
        rm:vectorOf <urn:rdfmem:langgraph:item:users.123:prefs> ; rm:field "theme" ;
        rm:embedding "…"^^rm:float32Vector .

Labels and keys are percent-encoded in IRIs (every character but ``A-Z a-z 0-9 - _ ~``, and
``.`` between labels, which no label may hold), so distinct items never share an IRI.

>>> item_iri(("users", "a b"), "k:1").value
'urn:rdfmem:langgraph:item:users.a%20b:k%3A1'
>>> vector_iri(item_iri(("users",), "k"), "notes[*].text.0").value
'urn:rdfmem:langgraph:item:users:k#notes%5B%2A%5D.text.0'
"""

from __future__ import annotations

import re
from datetime import datetime
from urllib.parse import quote

from pyoxigraph import Literal, NamedNode

from rdfmem.core.ontology import PREFIXES, RDFMEM

__all__ = [
    "CREATED",
    "DEFAULT_GRAPH",
    "EXPIRES",
    "FIELD",
    "ITEM",
    "ITEM_PREFIX",
    "KEY",
    "MODIFIED",
    "NAMESPACE",
    "RDF_TYPE",
    "TTL_MINUTES",
    "VALUE",
    "VECTOR",
    "VECTOR_OF",
    "datetime_literal",
    "item_iri",
    "namespace_text",
    "vector_iri",
]

#: The named graph that holds a LangGraph store's items unless told another.
DEFAULT_GRAPH = "urn:rdfmem:graph:langgraph"
#: The IRI prefix of items.
ITEM_PREFIX = "urn:rdfmem:langgraph:item:"

RDF_TYPE = NamedNode(PREFIXES["rdf"] + "type")
ITEM = NamedNode(RDFMEM + "StoreItem")
VECTOR = NamedNode(RDFMEM + "StoreItemVector")
NAMESPACE = NamedNode(RDFMEM + "namespace")
KEY = NamedNode(RDFMEM + "key")
VALUE = NamedNode(RDFMEM + "value")
CREATED = NamedNode(PREFIXES["dcterms"] + "created")
MODIFIED = NamedNode(PREFIXES["dcterms"] + "modified")
EXPIRES = NamedNode(RDFMEM + "expires")
TTL_MINUTES = NamedNode(RDFMEM + "ttlMinutes")
VECTOR_OF = NamedNode(RDFMEM + "vectorOf")
FIELD = NamedNode(RDFMEM + "field")

_XSD_DATETIME = NamedNode(PREFIXES["xsd"] + "dateTime")


_UNRESERVED = re.compile(r"[A-Za-z0-9_~-]*")


def _escape(text: str) -> str:
    if _UNRESERVED.fullmatch(text):  # most labels and keys: nothing to escape
        return text
    return quote(text, safe="-_~")


def namespace_text(namespace: tuple[str, ...]) -> str:
    """The labels joined by ``.`` (no label holds one), as LangGraph's SQL stores write them.

    >>> namespace_text(("users", "123"))
    'users.123'
    """
    return ".".join(namespace)


def item_iri(namespace: tuple[str, ...], key: str) -> NamedNode:
    """The IRI of the item ``key`` in ``namespace``."""
    labels = ".".join(_escape(label) for label in namespace)
    return NamedNode(f"{ITEM_PREFIX}{labels}:{_escape(key)}")


def vector_iri(item: NamedNode, field: str) -> NamedNode:
    """The IRI of the vector of ``item`` made from the text at ``field``."""
    return NamedNode(f"{item.value}#{_escape(field)}")


def datetime_literal(moment: datetime) -> Literal:
    """An ``xsd:dateTime`` literal keeping the microseconds and the offset."""
    return Literal(moment.isoformat(), datatype=_XSD_DATETIME)
