"""How the MCP knowledge graph is written in RDF: graphs, IRIs and predicates, no I/O.

Each project is one named graph (``urn:rdfmem:graph:knowledge`` without a project,
``urn:rdfmem:graph:knowledge:{project}`` with one). Inside it::

    <G/entity/Alice> a rm:KnowledgeEntity ;
        rm:entityName "Alice" ; rm:entityType "person" ;
        rm:hasObservation <G/entity/Alice/observation/3f2a…> ;
        prov:generatedAtTime "2026-01-01T10:00:00.000001+00:00"^^xsd:dateTime ;
        prov:wasAttributedTo <urn:rdfmem:mcp:client:claude-code/1.0> .

    <G/entity/Alice/observation/3f2a…> a rm:EntityObservation ;
        rm:observationText "Speaks Dutch" ; prov:generatedAtTime … ; prov:wasAttributedTo … .

    <G/relation/Alice/works_at/Acme> a rm:KnowledgeRelation ;
        rm:relationFrom <G/entity/Alice> ; rm:relationTo <G/entity/Acme> ;
        rm:relationType "works_at" ; prov:generatedAtTime … ; prov:wasAttributedTo … .

Names are percent-encoded in IRIs (everything but ``A-Z a-z 0-9 - _ . ~``), so any text is a
safe name and an IRI gives its name back; an observation's IRI ends in a hash of its text,
so the same text on one entity is one resource however many writers add it.

>>> graph_iri(None).value, graph_iri("web app").value
('urn:rdfmem:graph:knowledge', 'urn:rdfmem:graph:knowledge:web%20app')
>>> entity_iri(graph_iri(None), 'a "b" }>').value
'urn:rdfmem:graph:knowledge/entity/a%20%22b%22%20%7D%3E'
>>> name_of(graph_iri(None), entity_iri(graph_iri(None), "x/y"))
'x/y'
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from urllib.parse import quote, unquote

from pyoxigraph import Literal, NamedNode

from rdfmem.core.ontology import PREFIXES, RDFMEM

__all__ = [
    "CLIENT_PREFIX",
    "DEFAULT_GRAPH",
    "ENTITY",
    "ENTITY_NAME",
    "ENTITY_TYPE",
    "GENERATED",
    "HAS_OBSERVATION",
    "LABEL",
    "OBSERVATION",
    "OBSERVATION_TEXT",
    "RDF_TYPE",
    "RELATION",
    "RELATION_FROM",
    "RELATION_TO",
    "RELATION_TYPE",
    "SOFTWARE_AGENT",
    "ATTRIBUTED",
    "client_iri",
    "entity_iri",
    "graph_iri",
    "name_of",
    "observation_iri",
    "relation_iri",
    "time_literal",
]

#: The named graph of the knowledge graph when no project is given.
DEFAULT_GRAPH = "urn:rdfmem:graph:knowledge"
#: The IRI prefix of the MCP clients that wrote (``prov:SoftwareAgent``).
CLIENT_PREFIX = "urn:rdfmem:mcp:client:"

_PROV = PREFIXES["prov"]
RDF_TYPE = NamedNode(PREFIXES["rdf"] + "type")
LABEL = NamedNode(PREFIXES["rdfs"] + "label")
ENTITY = NamedNode(RDFMEM + "KnowledgeEntity")
OBSERVATION = NamedNode(RDFMEM + "EntityObservation")
RELATION = NamedNode(RDFMEM + "KnowledgeRelation")
ENTITY_NAME = NamedNode(RDFMEM + "entityName")
ENTITY_TYPE = NamedNode(RDFMEM + "entityType")
HAS_OBSERVATION = NamedNode(RDFMEM + "hasObservation")
OBSERVATION_TEXT = NamedNode(RDFMEM + "observationText")
RELATION_FROM = NamedNode(RDFMEM + "relationFrom")
RELATION_TO = NamedNode(RDFMEM + "relationTo")
RELATION_TYPE = NamedNode(RDFMEM + "relationType")
GENERATED = NamedNode(_PROV + "generatedAtTime")
ATTRIBUTED = NamedNode(_PROV + "wasAttributedTo")
SOFTWARE_AGENT = NamedNode(_PROV + "SoftwareAgent")
_DATETIME = NamedNode(PREFIXES["xsd"] + "dateTime")


def _escape(text: str) -> str:
    return quote(text, safe="-_.~")


def graph_iri(project: str | None) -> NamedNode:
    """The named graph of ``project`` (the knowledge graph without a project when None)."""
    if project is None:
        return NamedNode(DEFAULT_GRAPH)
    return NamedNode(f"{DEFAULT_GRAPH}:{_escape(project)}")


def entity_iri(graph: NamedNode, name: str) -> NamedNode:
    """The IRI of entity ``name`` in ``graph``."""
    return NamedNode(f"{graph.value}/entity/{_escape(name)}")


def name_of(graph: NamedNode, entity: NamedNode) -> str | None:
    """The entity name an IRI of ``graph`` stands for, or None for another IRI."""
    prefix = f"{graph.value}/entity/"
    rest = entity.value
    if not rest.startswith(prefix) or "/" in rest[len(prefix) :]:
        return None
    return unquote(rest[len(prefix) :])


def observation_iri(entity: NamedNode, text: str) -> NamedNode:
    """The IRI of observation ``text`` of ``entity`` (a hash of the text)."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
    return NamedNode(f"{entity.value}/observation/{digest}")


def relation_iri(graph: NamedNode, source: str, relation_type: str, target: str) -> NamedNode:
    """The IRI of the relation ``source --relation_type--> target`` in ``graph``."""
    parts = "/".join(_escape(p) for p in (source, relation_type, target))
    return NamedNode(f"{graph.value}/relation/{parts}")


def client_iri(name: str, version: str) -> NamedNode:
    """The ``prov:SoftwareAgent`` of an MCP client, from its ``clientInfo``."""
    return NamedNode(f"{CLIENT_PREFIX}{_escape(name)}/{_escape(version)}")


def time_literal(moment: datetime) -> Literal:
    """An ``xsd:dateTime`` with microseconds, so its text sorts as the times do."""
    return Literal(moment.isoformat(timespec="microseconds"), datatype=_DATETIME)
