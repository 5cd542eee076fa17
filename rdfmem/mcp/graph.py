"""``KnowledgeGraph``: the official MCP memory server's knowledge graph, kept as RDF in any
``RdfStore``.

Each operation behaves as the official server's (``@modelcontextprotocol/server-memory``)
and answers in its JSON shapes, but a write is all or nothing and never loses another
writer's work: the check and the write hold ``store.exclusive`` on the project's graph (the
write lock of an embedded store, a lease on a SPARQL server).

Reads stay fast as the graph grows. On an embedded store every write passes through rdfmem,
so the graph is mirrored in memory, changed in the same critical section as each write; it
is read again (one scan of its named graph) only when another writer moved the store's
write counter. On a SPARQL server other clients write too, so each call asks the server for
just the entities it needs.

>>> from rdfmem import RdfStore
>>> kg = KnowledgeGraph(RdfStore())
>>> kg.create_entities([{"name": "Alice", "entityType": "person", "observations": []}])
[{'name': 'Alice', 'entityType': 'person', 'observations': []}]
>>> kg.add_observations([{"entityName": "Alice", "contents": ["Likes tea", "Likes tea"]}])
[{'entityName': 'Alice', 'addedObservations': ['Likes tea']}]
>>> kg.open_nodes(["Alice"])["entities"][0]["observations"]
['Likes tea']
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from pyoxigraph import Literal, NamedNode, Quad

from rdfmem.core.errors import KnowledgeGraphError
from rdfmem.core.results import SelectResult
from rdfmem.core.terms import sparql_term
from rdfmem.domain.decisions import utc_now
from rdfmem.mcp.client import NOBODY, Client, attributed_to
from rdfmem.mcp.graph_history import changed_subjects, entity_events, past_model
from rdfmem.mcp.model import READ_PREDICATES, Entity, Model, Relation, model_from_quads
from rdfmem.mcp.vocab import (
    ATTRIBUTED,
    ENTITY,
    ENTITY_NAME,
    ENTITY_TYPE,
    GENERATED,
    HAS_OBSERVATION,
    OBSERVATION,
    OBSERVATION_TEXT,
    RDF_TYPE,
    RELATION,
    RELATION_FROM,
    RELATION_TO,
    RELATION_TYPE,
    client_iri,
    entity_iri,
    graph_iri,
    name_of,
    observation_iri,
    relation_iri,
    time_literal,
)
from rdfmem.store.rdfstore import RdfStore

__all__ = ["Client", "KnowledgeGraph", "KnowledgeGraphError"]

_CHUNK = 500  # IRIs per VALUES block of a remote read
_SCAN_MOST = 2000  # matches up to which a cold search asks the store, not the whole graph


class KnowledgeGraph:
    """Entities, relations and observations in the named graph of one project.

    Args:
        store: where the triples live (any backend).
        project: the project whose graph this is; ``urn:rdfmem:graph:knowledge`` when None.
    """

    def __init__(self, store: RdfStore, project: str | None = None) -> None:
        self.store = store
        self.project = project
        self.graph = graph_iri(project)
        self._mirrored = store.capabilities.exclusive_writer
        self._mirror = Model()
        self._generation = -1

    def __repr__(self) -> str:
        return f"KnowledgeGraph({self.store!r}, project={self.project!r})"

    # -- reading --------------------------------------------------------------------------

    @contextmanager
    def _section(self, names: Iterable[str] | None = None) -> Iterator[Model]:
        """Hold the graph against every other writer and yield its current content: the
        whole graph, or (on a SPARQL server) at least the named entities and the relations
        touching them."""
        with self.store.exclusive(self.graph):
            yield self._current(names)

    def _current(self, names: Iterable[str] | None) -> Model:
        if self._mirrored:
            if self._generation != self.store.generation:
                self._mirror = model_from_quads(self.graph, self._scan())
                self._generation = self.store.generation
            return self._mirror
        if names is None:
            return model_from_quads(self.graph, self.store.triples(self.graph))
        return self._remote_part(list(dict.fromkeys(names)))

    def _scan(self) -> Iterator[Quad]:
        """The quads the model is made of, one index scan per predicate."""
        match = self.store.match
        for predicate in READ_PREDICATES:
            yield from match(None, predicate, None, self.graph)

    def _remote_part(self, names: Sequence[str]) -> Model:
        g = sparql_term(self.graph)
        rows: list[tuple[Any, Any, Any]] = []
        for i in range(0, len(names), _CHUNK):
            values = " ".join(sparql_term(entity_iri(self.graph, n)) for n in names[i : i + _CHUNK])
            has, src, dst = (sparql_term(t) for t in (HAS_OBSERVATION, RELATION_FROM, RELATION_TO))
            sparql = (
                f"SELECT ?s ?p ?o WHERE {{ GRAPH {g} {{ "
                f"{{ VALUES ?s {{ {values} }} ?s ?p ?o }} "
                f"UNION {{ VALUES ?e {{ {values} }} ?e {has} ?s . ?s ?p ?o }} "
                f"UNION {{ VALUES ?e {{ {values} }} ?s {src} ?e . ?s ?p ?o }} "
                f"UNION {{ VALUES ?e {{ {values} }} ?s {dst} ?e . ?s ?p ?o }} }} }}"
            )
            result = self.store.query(sparql)
            assert isinstance(result, SelectResult)
            rows.extend((r["s"], r["p"], r["o"]) for r in result)
        return model_from_quads(self.graph, rows)

    def _remote_search(self, query: str) -> list[str]:
        g = sparql_term(self.graph)
        needle = sparql_term(Literal(query.lower()))
        sparql = (
            f"SELECT DISTINCT ?name WHERE {{ GRAPH {g} {{ "
            f"?e a {sparql_term(ENTITY)} ; {sparql_term(ENTITY_NAME)} ?name ; "
            f"{sparql_term(ENTITY_TYPE)} ?type . "
            f"OPTIONAL {{ ?e {sparql_term(HAS_OBSERVATION)}/{sparql_term(OBSERVATION_TEXT)} "
            "?obs } "
            f"FILTER (CONTAINS(LCASE(?name), {needle}) || CONTAINS(LCASE(?type), {needle}) "
            f'|| CONTAINS(LCASE(COALESCE(?obs, "")), {needle})) }} }}'
        )
        result = self.store.query(sparql)
        assert isinstance(result, SelectResult)
        return [r["name"].value for r in result]

    @property
    def cold(self) -> bool:
        """Whether the in-memory mirror of an embedded store is not read yet (or another
        writer moved the store on): ``search_nodes`` and ``open_nodes`` then ask the store
        for just what they need, as on a SPARQL server, instead of waiting for the whole
        graph to be read; ``warm`` reads it."""
        return self._mirrored and self._generation != self.store.generation

    def _scan_search(self, query: str) -> list[str] | None:
        """The names of the entities ``query`` may match, from three one-pattern scans (names,
        types, observation texts) that the engine runs without joins; None when more than
        ``_SCAN_MOST`` things match (reading the whole graph is then the cheaper way)."""
        g = sparql_term(self.graph)
        needle = sparql_term(Literal(query.lower()))
        entities: set[NamedNode] = set()
        observations: list[NamedNode] = []
        for predicate, into in (
            (ENTITY_NAME, None),
            (ENTITY_TYPE, None),
            (OBSERVATION_TEXT, observations),
        ):
            sparql = (
                f"SELECT ?s WHERE {{ GRAPH {g} {{ ?s {sparql_term(predicate)} ?v "
                f"FILTER (CONTAINS(LCASE(STR(?v)), {needle})) }} }}"
            )
            result = self.store.query(sparql)
            assert isinstance(result, SelectResult)
            found = [r["s"] for r in result if isinstance(r["s"], NamedNode)]
            if into is None:
                entities.update(found)
            else:
                into.extend(found)
            if len(entities) + len(observations) > _SCAN_MOST:
                return None
        for i in range(0, len(observations), _CHUNK):
            values = " ".join(sparql_term(o) for o in observations[i : i + _CHUNK])
            sparql = (
                f"SELECT ?e WHERE {{ GRAPH {g} {{ VALUES ?o {{ {values} }} "
                f"?e {sparql_term(HAS_OBSERVATION)} ?o }} }}"
            )
            result = self.store.query(sparql)
            assert isinstance(result, SelectResult)
            entities.update(r["e"] for r in result if isinstance(r["e"], NamedNode))
        names = (name_of(self.graph, e) for e in entities)
        return sorted(n for n in names if n is not None)

    def warm(self) -> None:
        """Read the graph into memory now (on an embedded store), so the first call does
        not wait for it; a server calls this on a thread as it starts."""
        if self._mirrored:
            with self._section():
                pass

    def read_graph(self, as_of: datetime | None = None) -> dict[str, Any]:
        """Every entity and relation: ``{"entities": [...], "relations": [...]}``; as they
        were at ``as_of`` on a store keeping history (``rdfmem.mcp.graph_history``)."""
        if as_of is not None:
            return past_model(self.store, self.graph, as_of).to_json()
        if not self._mirrored:
            return self._current(None).to_json()
        with self._section() as model:
            return model.to_json()

    def search_nodes(self, query: str, as_of: datetime | None = None) -> dict[str, Any]:
        """Entities whose name, type or an observation contains ``query`` (case ignored),
        and the relations with at least one end among them (at ``as_of``, when given)."""
        if as_of is not None:
            return past_model(self.store, self.graph, as_of).search(query).to_json()
        if not self._mirrored:
            names = self._remote_search(query)
            return self._current(names).search(query).to_json()
        if self.cold:
            found = self._scan_search(query)
            if found is not None:
                return self._remote_part(found).search(query).to_json()
        with self._section() as model:
            return model.search(query).to_json()

    def open_nodes(self, names: Sequence[str], as_of: datetime | None = None) -> dict[str, Any]:
        """The named entities that exist (existed at ``as_of``, when given), and the
        relations with at least one end among them."""
        if as_of is not None:
            return past_model(self.store, self.graph, as_of).subgraph(names).to_json()
        if not self._mirrored or self.cold:
            return self._remote_part(list(dict.fromkeys(names))).subgraph(names).to_json()
        with self._section() as model:
            return model.subgraph(names).to_json()

    def history(self, name: str) -> list[dict[str, Any]]:
        """What happened to entity ``name``, one event per write, oldest first: ``at``
        (ISO 8601, UTC), ``by`` (the MCP client's IRI, or the store's agent), ``why``
        (when given), ``action`` (the tool's name) and what changed (``entityType``,
        ``observations``, ``relations``); ``[]`` when the history knows nothing of it.

        Raises:
            HistoryUnavailable: the store keeps no history.
        """
        return entity_events(self.store, self.graph, name)

    @contextmanager
    def writes_elsewhere(self) -> Iterator[None]:
        """A block whose writes (the caller vouches) leave this knowledge graph's named
        graph alone, as a server's memory or decision tools do: the in-memory mirror stays
        valid past them instead of being read again. A no-op on a SPARQL server.

        >>> from rdfmem import RdfStore
        >>> store = RdfStore()
        >>> kg = KnowledgeGraph(store)
        >>> kg.read_graph()
        {'entities': [], 'relations': []}
        >>> with kg.writes_elsewhere():
        ...     store.set("note", "kept in the key/value graph")
        """
        if not self._mirrored:
            yield
            return
        with self.store.exclusive(self.graph):
            fresh = self._generation == self.store.generation
            yield
            if fresh:
                self._generation = self.store.generation

    # -- writing --------------------------------------------------------------------------

    def _write(
        self,
        add: Sequence[Quad],
        remove: Sequence[Quad] = (),
        update: str = "",
        gone: Sequence[NamedNode] = (),
    ) -> None:
        """One atomic write: ``update`` (deletions by pattern of the subjects ``gone``) or
        removals, then additions; on a store keeping history, with a version of every
        resource it changed, in the same request (``rdfmem.mcp.graph_history``)."""
        history = self.store.keeps_history
        if history and (add or remove or update):
            parts = [update] if update else []
            parts += _data("DELETE", self.graph, remove) + _data("INSERT", self.graph, add)
            changed = changed_subjects(add, remove, gone)
            parts.append(self.store.versioning_update(self.graph, changed))
            self.store.sparql_update(" ;\n".join(parts))
        elif update or remove:
            parts = [update] if update else []
            if remove:
                lines = " ".join(_nt(q) for q in remove)
                parts.append(f"DELETE DATA {{ GRAPH {sparql_term(self.graph)} {{ {lines} }} }}")
            if add:
                lines = " ".join(_nt(q) for q in add)
                parts.append(f"INSERT DATA {{ GRAPH {sparql_term(self.graph)} {{ {lines} }} }}")
            self.store.sparql_update(" ;\n".join(parts))
        elif add:
            self.store.assert_many([(q.subject, q.predicate, q.object, q.graph_name) for q in add])
        if self._mirrored:
            self._generation = self.store.generation

    def _observation_quads(
        self, entity: NamedNode, texts: Iterable[str], who: NamedNode
    ) -> list[Quad]:
        g = self.graph
        quads = []
        for text in texts:
            obs = observation_iri(entity, text)
            quads += [
                Quad(entity, HAS_OBSERVATION, obs, g),
                Quad(obs, RDF_TYPE, OBSERVATION, g),
                Quad(obs, OBSERVATION_TEXT, Literal(text), g),
                Quad(obs, GENERATED, time_literal(utc_now()), g),
                Quad(obs, ATTRIBUTED, who, g),
            ]
        return quads

    def _plan_entities(
        self, model: Model, entities: Sequence[Mapping[str, Any]], who: NamedNode
    ) -> tuple[list[Entity], list[Quad]]:
        wanted: dict[str, Mapping[str, Any]] = {}
        for item in entities:
            wanted.setdefault(item["name"], item)
        new = [
            Entity(n, i["entityType"], list(dict.fromkeys(i["observations"])))
            for n, i in wanted.items()
            if n not in model.entities
        ]
        g = self.graph
        quads = []
        for entity in new:
            iri = entity_iri(g, entity.name)
            quads += [
                Quad(iri, RDF_TYPE, ENTITY, g),
                Quad(iri, ENTITY_NAME, Literal(entity.name), g),
                Quad(iri, ENTITY_TYPE, Literal(entity.entity_type), g),
                Quad(iri, GENERATED, time_literal(utc_now()), g),
                Quad(iri, ATTRIBUTED, who, g),
            ]
            quads += self._observation_quads(iri, entity.observations, who)
        return new, quads

    def _plan_relations(
        self, model: Model, relations: Sequence[Mapping[str, Any]], who: NamedNode
    ) -> tuple[list[Relation], list[Quad]]:
        batch = dict.fromkeys(Relation(r["from"], r["to"], r["relationType"]) for r in relations)
        new = [r for r in batch if r.key not in model.relations]
        g = self.graph
        quads = []
        for r in new:
            iri = self._relation_iri(r)
            quads += [
                Quad(iri, RDF_TYPE, RELATION, g),
                Quad(iri, RELATION_FROM, entity_iri(g, r.source), g),
                Quad(iri, RELATION_TO, entity_iri(g, r.target), g),
                Quad(iri, RELATION_TYPE, Literal(r.relation_type), g),
                Quad(iri, GENERATED, time_literal(utc_now()), g),
                Quad(iri, ATTRIBUTED, who, g),
            ]
        return new, quads

    def _plan_observations(
        self, model: Model, observations: Sequence[Mapping[str, Any]], who: NamedNode
    ) -> tuple[list[dict[str, Any]], dict[str, list[str]], list[Quad]]:
        seen: dict[str, list[str]] = {}
        members: dict[str, set[str]] = {}  # the same texts as a set: membership in O(1)
        results = []
        for item in observations:
            name = item["entityName"]
            entity = model.entities.get(name)
            if entity is None:
                raise KnowledgeGraphError(f"Entity with name {name} not found")
            known = seen.get(name)
            if known is None:
                known = seen[name] = list(entity.observations)
                members[name] = set(known)
            have = members[name]
            added = [c for c in dict.fromkeys(item["contents"]) if c not in have]
            known.extend(added)
            have.update(added)
            results.append({"entityName": name, "addedObservations": added})
        quads: list[Quad] = []
        for name, texts in seen.items():
            fresh = texts[len(model.entities[name].observations) :]
            quads += self._observation_quads(entity_iri(self.graph, name), fresh, who)
        return results, seen, quads

    def create_entities(
        self, entities: Sequence[Mapping[str, Any]], client: Client = NOBODY
    ) -> list[dict[str, Any]]:
        """Create the entities whose names are new (the first of a repeated name); returns
        them. Existing names are skipped, their type and observations left as they are."""
        who = client_iri(client.name, client.version)
        with attributed_to(self.store, client), self._section(e["name"] for e in entities) as model:
            new, quads = self._plan_entities(model, entities, who)
            if quads:
                self._write(client.quads(self.graph) + quads)
            if self._mirrored:
                for entity in new:
                    model.add_entity(Entity(entity.name, entity.entity_type, entity.observations))
        return [e.to_json() for e in new]

    def create_relations(
        self, relations: Sequence[Mapping[str, Any]], client: Client = NOBODY
    ) -> list[dict[str, Any]]:
        """Create the relations that are new (same ends and type); returns them. Either end
        may name an entity that does not exist, as in the official server."""
        who = client_iri(client.name, client.version)
        with (
            attributed_to(self.store, client),
            self._section(r["from"] for r in relations) as model,
        ):
            new, quads = self._plan_relations(model, relations, who)
            if quads:
                self._write(client.quads(self.graph) + quads)
            if self._mirrored:
                for r in new:
                    model.add_relation(r)
        return [r.to_json() for r in new]

    def add_observations(
        self, observations: Sequence[Mapping[str, Any]], client: Client = NOBODY
    ) -> list[dict[str, Any]]:
        """Add observations to existing entities; returns, per item, the ones that were new.

        Raises:
            KnowledgeGraphError: an entity does not exist (``Entity with name X not found``,
                the official server's words); nothing is written.
        """
        who = client_iri(client.name, client.version)
        names = (o["entityName"] for o in observations)
        with attributed_to(self.store, client), self._section(names) as model:
            results, seen, quads = self._plan_observations(model, observations, who)
            if quads:
                self._write(client.quads(self.graph) + quads)
            if self._mirrored:
                for name, texts in seen.items():
                    model.entities[name].set_observations(texts)
        return results

    def delete_entities(self, names: Sequence[str], client: Client = NOBODY) -> None:
        """Delete the named entities, their observations and every relation touching them.
        Names that do not exist are ignored."""
        wanted = set(names)
        with attributed_to(self.store, client), self._section(wanted) as model:
            subjects = []
            for name in wanted:
                entity = model.entities.get(name)
                if entity is not None:
                    iri = entity_iri(self.graph, name)
                    subjects.append(iri)
                    subjects += [observation_iri(iri, t) for t in entity.observations]
            gone = model.touching(wanted)
            subjects += [self._relation_iri(r) for r in gone]
            if subjects:
                self._write([], update=self._delete_subjects(subjects), gone=subjects)
            if self._mirrored:
                for name in wanted:
                    model.remove_entity(name)

    def delete_observations(
        self, deletions: Sequence[Mapping[str, Any]], client: Client = NOBODY
    ) -> None:
        """Delete observations of entities; missing entities and observations are ignored."""
        names = (d["entityName"] for d in deletions)
        with attributed_to(self.store, client), self._section(names) as model:
            links: list[Quad] = []
            subjects: list[NamedNode] = []
            dropped: dict[str, set[str]] = {}
            present: dict[str, set[str]] = {}
            for item in deletions:
                entity = model.entities.get(item["entityName"])
                if entity is None:
                    continue
                iri = entity_iri(self.graph, entity.name)
                gone = dropped.setdefault(entity.name, set())
                has = present.get(entity.name)
                if has is None:
                    has = present[entity.name] = set(entity.observations)
                for text in item["observations"]:
                    if text in has and text not in gone:
                        gone.add(text)
                        obs = observation_iri(iri, text)
                        subjects.append(obs)
                        links.append(Quad(iri, HAS_OBSERVATION, obs, self.graph))
            if subjects:
                self._write([], links, update=self._delete_subjects(subjects), gone=subjects)
            if self._mirrored:
                for name, gone in dropped.items():
                    entity = model.entities[name]
                    entity.set_observations([o for o in entity.observations if o not in gone])

    def delete_relations(
        self, relations: Sequence[Mapping[str, Any]], client: Client = NOBODY
    ) -> None:
        """Delete relations (same ends and type); missing ones are ignored."""
        keys = {(r["from"], r["to"], r["relationType"]) for r in relations}
        with attributed_to(self.store, client), self._section(k[0] for k in keys) as model:
            gone = [model.relations[k] for k in keys if k in model.relations]
            if gone:
                subjects = [self._relation_iri(r) for r in gone]
                self._write([], update=self._delete_subjects(subjects), gone=subjects)
            if self._mirrored:
                for r in gone:
                    model.remove_relation(r.key)

    def _relation_iri(self, r: Relation) -> NamedNode:
        return relation_iri(self.graph, r.source, r.relation_type, r.target)

    def _delete_subjects(self, subjects: Sequence[NamedNode]) -> str:
        g = sparql_term(self.graph)
        values = " ".join(sparql_term(s) for s in dict.fromkeys(subjects))
        return (
            f"DELETE {{ GRAPH {g} {{ ?s ?p ?o }} }} "
            f"WHERE {{ GRAPH {g} {{ VALUES ?s {{ {values} }} ?s ?p ?o }} }}"
        )

    # -- whole graphs ---------------------------------------------------------------------

    def import_model(self, model: Model, client: Client = NOBODY) -> tuple[int, int, int]:
        """Merge ``model`` in one atomic write: new entities with their observations, new
        observations of existing entities, new relations. Returns how many entities,
        observations and relations were created."""
        who = client_iri(client.name, client.version)
        names = [*model.entities, *(r.source for r in model.relations.values())]
        with attributed_to(self.store, client), self._section(names) as current:
            entities = [e.to_json() for e in model.entities.values()]
            new, quads = self._plan_entities(current, entities, who)
            created = {e.name for e in new}
            existing = [
                {"entityName": e.name, "contents": e.observations}
                for e in model.entities.values()
                if e.name not in created
            ]
            _, seen, more = self._plan_observations(current, existing, who)
            relations = [r.to_json() for r in model.relations.values()]
            related, rquads = self._plan_relations(current, relations, who)
            observations = sum(len(e.observations) for e in new) + sum(
                len(texts) - len(current.entities[n].observations) for n, texts in seen.items()
            )
            if quads or more or rquads:
                self._write(client.quads(self.graph) + quads + more + rquads)
            if self._mirrored:
                for entity in new:
                    current.add_entity(entity)
                for name, texts in seen.items():
                    current.entities[name].set_observations(texts)
                for r in related:
                    current.add_relation(r)
        return len(new), observations, len(related)

    def model(self) -> Model:
        """A copy of the whole knowledge graph."""
        with self._section() as model:
            copy = Model()
            for e in model.entities.values():
                copy.add_entity(Entity(e.name, e.entity_type, list(e.observations)))
            for r in model.relations.values():
                copy.add_relation(r)
        return copy


def _data(verb: str, graph: NamedNode, quads: Sequence[Quad]) -> list[str]:
    """``INSERT DATA`` / ``DELETE DATA`` of ``quads`` in ``graph`` (none when empty)."""
    if not quads:
        return []
    return [f"{verb} DATA {{ GRAPH {sparql_term(graph)} {{ {' '.join(_nt(q) for q in quads)} }} }}"]


def _nt(quad: Quad) -> str:
    return f"{sparql_term(quad.subject)} {sparql_term(quad.predicate)} {sparql_term(quad.object)} ."
