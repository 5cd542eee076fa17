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

import re
from calendar import timegm
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyoxigraph import Literal, NamedNode, Quad

from rdfmem.mcp.vocab import (
    ENTITY_NAME,
    ENTITY_TYPE,
    GENERATED,
    HAS_OBSERVATION,
    OBSERVATION_TEXT,
    RELATION_FROM,
    RELATION_TO,
    RELATION_TYPE,
    name_of,
)

__all__ = [
    "READ_PREDICATES",
    "Entity",
    "Model",
    "Relation",
    "RelationKey",
    "instant_key",
    "model_from_quads",
]

RelationKey = tuple[str, str, str]


@dataclass
class Entity:
    """An entity: its name, its type and its observations in the order they were added.
    Change the observations with ``set_observations`` (the search text is cached)."""

    name: str
    entity_type: str
    observations: list[str] = field(default_factory=list)
    _haystack: str | None = field(default=None, repr=False, compare=False)

    def set_observations(self, observations: list[str]) -> None:
        self.observations = observations
        self._haystack = None

    def to_json(self) -> dict[str, Any]:
        """The official server's shape: ``name``, ``entityType``, ``observations``."""
        return {
            "name": self.name,
            "entityType": self.entity_type,
            "observations": list(self.observations),
        }

    def haystack(self) -> str:
        """Name, type and observations lower-cased, joined by NUL (cached)."""
        if self._haystack is None:
            parts = [self.name, self.entity_type, *self.observations]
            self._haystack = "\x00".join(p.lower() for p in parts)
        return self._haystack

    def matches(self, lowered: str) -> bool:
        """True when ``lowered`` is in the name, type or an observation, case ignored."""
        if "\x00" in lowered:  # the cached text joins the parts with NUL
            return (
                lowered in self.name.lower()
                or lowered in self.entity_type.lower()
                or any(lowered in o.lower() for o in self.observations)
            )
        return lowered in self.haystack()


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
    """Entities by name and relations by key, each in creation order, with the relations
    indexed by their ends."""

    def __init__(self) -> None:
        self.entities: dict[str, Entity] = {}
        self.relations: dict[RelationKey, Relation] = {}
        self._order: dict[RelationKey, int] = {}
        self._by_end: dict[str, set[RelationKey]] = {}
        self._rank: dict[str, int] = {}
        self._next = 0

    def add_entity(self, entity: Entity) -> None:
        if entity.name not in self._rank:
            self._rank[entity.name] = self._next
            self._next += 1
        self.entities[entity.name] = entity

    def add_relation(self, relation: Relation) -> None:
        key = relation.key
        if key in self.relations:
            return
        self.relations[key] = relation
        self._order[key] = self._next
        self._next += 1
        self._by_end.setdefault(key[0], set()).add(key)
        self._by_end.setdefault(key[1], set()).add(key)

    def remove_relation(self, key: RelationKey) -> None:
        if self.relations.pop(key, None) is None:
            return
        del self._order[key]
        for end in (key[0], key[1]):
            keys = self._by_end.get(end)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_end[end]

    def touching(self, names: Iterable[str]) -> list[Relation]:
        """The relations with at least one end in ``names``, in creation order."""
        keys: set[RelationKey] = set()
        for name in names:
            keys.update(self._by_end.get(name, ()))
        return [self.relations[k] for k in sorted(keys, key=self._order.__getitem__)]

    def remove_entity(self, name: str) -> None:
        """Forget entity ``name`` and every relation with an end at it."""
        self.entities.pop(name, None)
        self._rank.pop(name, None)
        for relation in self.touching([name]):
            self.remove_relation(relation.key)

    def subgraph(self, names: Iterable[str]) -> Model:
        """The named entities (in creation order) and the relations touching them."""
        wanted = set(names)
        part = Model()
        if len(wanted) * 4 < len(self.entities):
            found = [self.entities[n] for n in wanted if n in self.entities]
            found.sort(key=lambda e: self._rank[e.name])
        else:
            found = [e for n, e in self.entities.items() if n in wanted]
        for entity in found:
            part.entities[entity.name] = entity
        for relation in self.touching(part.entities):
            part.add_relation(relation)
        return part

    def search(self, query: str) -> Model:
        """Entities whose name, type or an observation holds ``query`` (case ignored), and
        the relations touching them."""
        lowered = query.lower()
        if "\x00" in lowered:
            return self.subgraph(e.name for e in self.entities.values() if e.matches(lowered))
        found = [
            e.name
            for e in self.entities.values()
            if lowered in (e._haystack if e._haystack is not None else e.haystack())
        ]
        return self.subgraph(found)

    def to_json(self) -> dict[str, Any]:
        """``{"entities": [...], "relations": [...]}``, as the official server answers."""
        return {
            "entities": [e.to_json() for e in self.entities.values()],
            "relations": [r.to_json() for r in self.relations.values()],
        }


_DATETIME = re.compile(
    r"(-?\d{4,})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?$"
)


def instant_key(text: str) -> tuple[int, str]:
    """An exact sort key of an ``xsd:dateTime`` text: microseconds since the epoch (no zone
    is UTC). Stores print the same instant differently (Oxigraph writes
    ``…59.1Z`` for ``…59.100000+00:00``), so the text itself does not sort.

    >>> instant_key("2026-01-01T00:00:59.1Z") < instant_key("2026-01-01T00:00:59.100001+00:00")
    True
    """
    m = _DATETIME.match(text.strip())
    if m is None:
        return (-(1 << 62), text)
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    micros = timegm((year, month, day, hour, minute, second, 0, 0, 0)) * 1_000_000
    micros += int((m.group(7) or "").ljust(6, "0")[:6])
    zone = m.group(8)
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        micros -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60) * 1_000_000
    return (micros, text)


def _text(term: Any) -> str | None:
    return term.value if isinstance(term, Literal) else None


#: The predicates the model is read from (types and attributions are not needed).
READ_PREDICATES = (
    ENTITY_NAME,
    ENTITY_TYPE,
    HAS_OBSERVATION,
    OBSERVATION_TEXT,
    RELATION_FROM,
    RELATION_TO,
    RELATION_TYPE,
    GENERATED,
)


def model_from_quads(graph: NamedNode, quads: Iterable[Quad | Sequence[Any]]) -> Model:
    """The knowledge graph held by ``quads`` of ``graph`` (quads or ``(s, p, o)`` rows):
    entities are the resources with an ``rm:entityName``, relations those with an
    ``rm:relationType``. Incomplete ones are left out."""
    props: dict[str, dict[str, list[Any]]] = {}
    for item in quads:
        s, p, o = (item.subject, item.predicate, item.object) if isinstance(item, Quad) else item
        if isinstance(s, NamedNode):
            props.setdefault(s.value, {}).setdefault(p.value, []).append(o)

    def first(p: dict[str, list[Any]], predicate: NamedNode) -> Any:
        values = p.get(predicate.value)
        return values[0] if values else None

    def when(p: dict[str, list[Any]]) -> tuple[int, str]:
        return instant_key(_text(first(p, GENERATED)) or "")

    entities: list[tuple[tuple[int, str], str, Entity]] = []
    relations: list[tuple[tuple[int, str], str, Relation]] = []
    for iri, p in props.items():
        if ENTITY_NAME.value in p:
            name, kind = _text(first(p, ENTITY_NAME)), _text(first(p, ENTITY_TYPE))
            if name is None or kind is None:
                continue
            observed: list[tuple[tuple[int, str], str]] = []
            for obs in p.get(HAS_OBSERVATION.value, ()):
                q = props.get(obs.value) if isinstance(obs, NamedNode) else None
                text = _text(first(q, OBSERVATION_TEXT)) if q is not None else None
                if q is not None and text is not None:
                    observed.append((when(q), text))
            observed.sort()
            entity = Entity(name, kind, list(dict.fromkeys(t for _, t in observed)))
            entities.append((when(p), name, entity))
        elif RELATION_TYPE.value in p:
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
