"""The past of the MCP knowledge graph, on a store keeping history.

Every write of ``KnowledgeGraph`` versions the resources it changed in the same request
(``RdfStore.versioning_update``): each entity (its name, type and observation links),
each observation, each relation; attributed to the MCP client that called
(``rdfmem.mcp.client.attributed_to``). From those versions:

* ``past_model``: the whole graph as it was at a moment (``read_graph``, ``search_nodes``
  and ``open_nodes`` with ``as_of=``);
* ``entity_events``: what happened to one entity, write by write: ``at`` (ISO 8601, UTC),
  ``by`` (the agent IRI), ``why`` (when given), ``action`` (the official tool's name:
  ``create_entities``, ``add_observations``, ``delete_observations``, ``delete_entities``,
  ``create_relations``, ``delete_relations``) and what changed (``entityType``,
  ``observations``, ``relations``).

>>> from rdfmem import RdfStore
>>> from rdfmem.mcp.client import Client
>>> from rdfmem.mcp.graph import KnowledgeGraph
>>> kg = KnowledgeGraph(RdfStore(history=True))
>>> _ = kg.create_entities([{"name": "Ada", "entityType": "person", "observations": []}])
>>> _ = kg.add_observations([{"entityName": "Ada", "contents": ["Writes code"]}], Client("cli"))
>>> for event in kg.history("Ada"):
...     print(event["action"], event["by"], event["observations"])
create_entities urn:rdfmem:agent:unattributed []
add_observations urn:rdfmem:mcp:client:cli/ ['Writes code']
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyoxigraph import Literal, NamedNode, Quad

from rdfmem.core.results import SelectResult
from rdfmem.core.terms import sparql_term
from rdfmem.domain.past import moment_of, quads_at, require_history
from rdfmem.mcp.model import Model, model_from_quads
from rdfmem.mcp.vocab import (
    CLIENT_PREFIX,
    ENTITY_NAME,
    ENTITY_TYPE,
    HAS_OBSERVATION,
    OBSERVATION_TEXT,
    RELATION_FROM,
    RELATION_TO,
    RELATION_TYPE,
    entity_iri,
    name_of,
)
from rdfmem.store.history import (
    ASSOCIATED,
    GENERATED_BY,
    REASON,
    SPECIALIZES,
    TOMBSTONE,
    history_graph,
    time_of_version,
    token_of_version,
)
from rdfmem.store.history_reads import Version
from rdfmem.store.rdfstore import RdfStore

__all__ = ["changed_subjects", "entity_events", "past_model"]

_CHUNK = 500


def changed_subjects(
    add: Iterable[Quad], remove: Iterable[Quad], gone: Iterable[NamedNode]
) -> list[NamedNode]:
    """The resources a write versions: the subjects of its quads and those it deleted by
    pattern; not the MCP clients' own descriptions (rewritten by every write), and not an
    entity whose only change is an observation link (``rm:hasObservation``): a version of
    the entity for each observation would copy all its links each time, and the links are
    known from the observations' own versions (their IRIs start with the entity's)."""
    subjects = [
        q.subject
        for q in (*add, *remove)
        if isinstance(q.subject, NamedNode) and q.predicate != HAS_OBSERVATION
    ]
    return [s for s in dict.fromkeys([*subjects, *gone]) if not s.value.startswith(CLIENT_PREFIX)]


def past_model(store: RdfStore, graph: NamedNode, moment: object) -> Model:
    """The knowledge graph of ``graph`` as it was at ``moment``.

    Raises:
        HistoryUnavailable: the store keeps no history.
        InvalidValue: ``moment`` is not a datetime.
    """
    quads = quads_at(store, graph, moment_of(store, moment))
    entities = {
        q.subject.value
        for q in quads
        if q.predicate == ENTITY_NAME and isinstance(q.subject, NamedNode)
    }
    kept = [q for q in quads if q.predicate != HAS_OBSERVATION]
    for q in quads:  # each observation alive then, linked to its entity (when alive then)
        if q.predicate == OBSERVATION_TEXT and isinstance(q.subject, NamedNode):
            owner = q.subject.value.rpartition("/observation/")[0]
            if owner in entities:
                kept.append(Quad(NamedNode(owner), HAS_OBSERVATION, q.subject, graph))
    return model_from_quads(graph, kept)


def _rows(store: RdfStore, sparql: str) -> SelectResult:
    result = store.query(sparql)
    assert isinstance(result, SelectResult)
    return result


def _relations_of(store: RdfStore, graph: NamedNode, entity: NamedNode) -> list[NamedNode]:
    """Every relation that ever had ``entity`` at an end (one query over the history)."""
    h, e = sparql_term(history_graph(graph)), sparql_term(entity)
    ends = (
        f"{{ ?v {sparql_term(RELATION_FROM)} {e} }} UNION {{ ?v {sparql_term(RELATION_TO)} {e} }}"
    )
    rows = _rows(
        store,
        f"SELECT DISTINCT ?r WHERE {{ GRAPH {h} {{ ?v {sparql_term(SPECIALIZES)} ?r . {ends} }} }}",
    )
    return [r["r"] for r in rows if isinstance(r["r"], NamedNode)]


@dataclass(frozen=True)
class _Step:
    """One version of an observation: when, by whom, its text, whether it was removed."""

    subject: str
    activity: str
    at: _dt.datetime
    by: str | None
    why: str | None
    text: str | None
    deleted: bool


def _observation_steps(store: RdfStore, graph: NamedNode, entity: NamedNode) -> list[_Step]:
    """Every version of every observation ``entity`` ever had, oldest first (one query:
    an observation's IRI is its entity's, ``/observation/`` and a hash of its text)."""
    h = sparql_term(history_graph(graph))
    prefix = sparql_term(Literal(entity.value + "/observation/"))
    rows = _rows(
        store,
        f"SELECT ?v ?s ?a ?by ?why ?text ?dead WHERE {{ GRAPH {h} {{ "
        f"?v {sparql_term(SPECIALIZES)} ?s ; {sparql_term(GENERATED_BY)} ?a . "
        f"FILTER (STRSTARTS(STR(?s), {prefix})) "
        f"OPTIONAL {{ ?a {sparql_term(ASSOCIATED)} ?by }} "
        f"OPTIONAL {{ ?a {sparql_term(REASON)} ?why }} "
        f"OPTIONAL {{ ?v {sparql_term(OBSERVATION_TEXT)} ?text }} "
        f"OPTIONAL {{ ?v a ?dead FILTER (?dead = {sparql_term(TOMBSTONE)}) }} }} }}",
    )
    steps: list[tuple[str, _Step]] = []
    for row in rows:
        v = row["v"].value
        at = time_of_version(v)
        if at is None:
            continue
        step = _Step(
            subject=row["s"].value,
            activity=row["a"].value,
            at=at,
            by=row["by"].value if "by" in row else None,
            why=row["why"].value if "why" in row else None,
            text=row["text"].value if "text" in row else None,
            deleted="dead" in row,
        )
        steps.append((token_of_version(v), step))
    return [step for _, step in sorted(steps, key=lambda t: t[0])]


def _values(version: Version, predicate: NamedNode) -> list[Any]:
    return [q.object for q in version.state if q.predicate == predicate]


class _Events:
    """Events by write (activity), in time order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.by_activity: dict[str, dict[str, Any]] = {}

    def of(self, v: Version | _Step, action: str) -> dict[str, Any]:
        key = v.activity or (v.iri if isinstance(v, Version) else v.subject)
        event = self.by_activity.get(key)
        if event is None:
            event = {"at": _iso(v.at), "by": v.by, "action": action, "entity": self.name}
            if v.why is not None:
                event["why"] = v.why
            self.by_activity[key] = event
        return event

    def ordered(self) -> list[dict[str, Any]]:
        return sorted(self.by_activity.values(), key=lambda e: str(e["at"]))


def _iso(moment: _dt.datetime) -> str:
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def entity_events(store: RdfStore, graph: NamedNode, name: str) -> list[dict[str, Any]]:
    """What happened to entity ``name``, one event per write, oldest first (``[]`` when
    the history kept knows nothing of it).

    Raises:
        HistoryUnavailable: the store keeps no history.
    """
    require_history(store)
    entity = entity_iri(graph, name)
    events = _Events(name)
    for v in store.history_of(graph, entity):  # made and removed (its links: below)
        if v.deleted:
            events.of(v, "delete_entities")
        else:
            kinds = _values(v, ENTITY_TYPE)
            event = events.of(v, "create_entities")
            event["entityType"] = kinds[0].value if kinds else None
            event.setdefault("observations", [])
    texts: dict[str, str] = {}
    alive: set[str] = set()
    for step in _observation_steps(store, graph, entity):
        if step.text is not None:
            texts.setdefault(step.subject, step.text)
        if step.deleted == (step.subject not in alive):  # no change: not there, or still there
            continue
        if step.deleted:
            alive.discard(step.subject)
            event = events.of(step, "delete_observations")
            if event["action"] == "delete_entities":
                continue  # (they went with it)
        else:
            alive.add(step.subject)
            event = events.of(step, "add_observations")
        event.setdefault("observations", []).append(texts.get(step.subject, step.subject))
    for relation in _relations_of(store, graph, entity):
        made, last = False, None
        for v in store.history_of(graph, relation):
            if v.deleted == (not made):  # a relation made or removed
                continue
            if not v.deleted:
                r = _relation(graph, v)
                if r is None:
                    continue
                events.of(v, "create_relations").setdefault("relations", []).append(r)
                made, last = True, r
            elif last is not None:
                events.of(v, "delete_relations").setdefault("relations", []).append(last)
                made = False
    return events.ordered()


def _relation(graph: NamedNode, v: Version) -> dict[str, str] | None:
    ends = [_values(v, RELATION_FROM), _values(v, RELATION_TO)]
    kinds = _values(v, RELATION_TYPE)
    if not all(ends) or not kinds:
        return None
    source, target = name_of(graph, ends[0][0]), name_of(graph, ends[1][0])
    if source is None or target is None:
        return None
    return {"from": source, "to": target, "relationType": kinds[0].value}
