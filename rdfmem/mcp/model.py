"""The knowledge graph of the MCP memory server as plain Python data, and its RDF reading.

Entities, their observations and relations keep the order they were created in (by
``prov:generatedAtTime``), as the official server keeps the order of its JSONL file. The
search and the selection of relations follow the official server: a case-insensitive
substring of name, type or an observation; relations with at least one end among the
entities found.

>>> kg = Model()
>>> kg.add_entity(Entity("Alice", "person", ["Likes tea"]))
>>> kg.add_entity(Entity("Acme", "company", []))
>>> kg.add_relation(Relation("Alice", "Acme", "works_at"))
>>> list(kg.search("TEA").entities)
['Alice']
>>> kg.search("tea").to_json()["relations"]
[{'from': 'Alice', 'to': 'Acme', 'relationType': 'works_at'}]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyoxigraph import Literal, NamedNode, Quad

from .vocab import (
    ENTITY,
    ENTITY_NAME,
    ENTITY_TYPE,
    GENERATED,
    HAS_OBSERVATION,
    OBSERVATION_TEXT,
    RDF_TYPE,
    RELATION,
    RELATION_FROM,
    RELATION_TO,
    RELATION_TYPE,
    name_of,
)

__all__ = ["Entity", "Model", "Relation", "RelationKey", "model_from_quads"]

RelationKey = tuple[str, str, str]


@dataclass
class Entity:
    """An entity: its name, its type and its observations in the order they were added."""

    name: str
    entity_type: str
    observations: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The official server's shape: ``name``, ``entityType``, ``observations``."""
        return {
            "name": self.name,
            "entityType": self.entity_type,
            "observations": list(self.observations),
        }

    def matches(self, lowered: str) -> bool:
        """True when ``lowered`` is in the name, type or an observation, case ignored."""
        return (
            lowered in self.name.lower()
            or lowered in self.entity_type.lower()
            or any(lowered in o.lower() for o in self.observations)
        )


@dataclass(frozen=True)
class Relation:
    """A directed, typed relation between two entity names (either end may not exist)."""

    source: str
    target: str
    relation_type: str

    @property
    def key(self) -> RelationKey:
        return (self.source, self.target, self.relation_type)

    def to_json(self) -> dict[str, Any]:
        """The official server's shape: ``from``, ``to``, ``relationType``."""
        return {"from": self.source, "to": self.target, "relationType": self.relation_type}


class Model:
    """Entities by name and relations by key, each in creation order."""

    def __init__(self) -> None:
        self.entities: dict[str, Entity] = {}
        self.relations: dict[RelationKey, Relation] = {}

    def add_entity(self, entity: Entity) -> None:
        self.entities[entity.name] = entity

    def add_relation(self, relation: Relation) -> None:
        self.relations[relation.key] = relation

    def remove_entity(self, name: str) -> None:
        """Forget entity ``name`` and every relation with an end at it."""
        self.entities.pop(name, None)
        for key in [k for k in self.relations if name in (k[0], k[1])]:
            del self.relations[key]

    def subgraph(self, names: Iterable[str]) -> Model:
        """The named entities (in creation order) and the relations touching them."""
        wanted = set(names)
        part = Model()
        for name, entity in self.entities.items():
            if name in wanted:
                part.entities[name] = entity
        found = set(part.entities)
        for key, relation in self.relations.items():
            if key[0] in found or key[1] in found:
                part.relations[key] = relation
        return part

    def search(self, query: str) -> Model:
        """Entities whose name, type or an observation holds ``query`` (case ignored), and
        the relations touching them."""
        lowered = query.lower()
        return self.subgraph(e.name for e in self.entities.values() if e.matches(lowered))

    def to_json(self) -> dict[str, Any]:
        """``{"entities": [...], "relations": [...]}``, as the official server answers."""
        return {
            "entities": [e.to_json() for e in self.entities.values()],
            "relations": [r.to_json() for r in self.relations.values()],
        }


def _text(term: Any) -> str | None:
    return term.value if isinstance(term, Literal) else None


def model_from_quads(graph: NamedNode, quads: Iterable[Quad | Sequence[Any]]) -> Model:
    """The knowledge graph held by ``quads`` of ``graph`` (quads or ``(s, p, o)`` rows).
    Resources that are not complete entities, observations or relations are left out."""
    props: dict[str, dict[str, list[Any]]] = {}
    for item in quads:
        s, p, o = (item.subject, item.predicate, item.object) if isinstance(item, Quad) else item
        if isinstance(s, NamedNode):
            props.setdefault(s.value, {}).setdefault(p.value, []).append(o)

    def first(p: dict[str, list[Any]], predicate: NamedNode) -> Any:
        values = p.get(predicate.value)
        return values[0] if values else None

    def when(p: dict[str, list[Any]]) -> str:
        return _text(first(p, GENERATED)) or ""

    entities: list[tuple[str, str, Entity]] = []
    relations: list[tuple[str, str, Relation]] = []
    for iri, p in props.items():
        types = p.get(RDF_TYPE.value, ())
        if ENTITY in types:
            name, kind = _text(first(p, ENTITY_NAME)), _text(first(p, ENTITY_TYPE))
            if name is None or kind is None:
                continue
            observed: list[tuple[str, str]] = []
            for obs in p.get(HAS_OBSERVATION.value, ()):
                q = props.get(obs.value) if isinstance(obs, NamedNode) else None
                text = _text(first(q, OBSERVATION_TEXT)) if q is not None else None
                if q is not None and text is not None:
                    observed.append((when(q), text))
            observed.sort()
            entity = Entity(name, kind, list(dict.fromkeys(t for _, t in observed)))
            entities.append((when(p), name, entity))
        elif RELATION in types:
            ends = first(p, RELATION_FROM), first(p, RELATION_TO)
            kind = _text(first(p, RELATION_TYPE))
            if kind is None or not all(isinstance(e, NamedNode) for e in ends):
                continue
            source, target = name_of(graph, ends[0]), name_of(graph, ends[1])
            if source is not None and target is not None:
                relations.append((when(p), iri, Relation(source, target, kind)))
    model = Model()
    for _, _, entity in sorted(entities, key=lambda t: (t[0], t[1])):
        model.add_entity(entity)
    for _, _, relation in sorted(relations, key=lambda t: (t[0], t[1])):
        model.add_relation(relation)
    return model
