"""A named graph as a picture to draw: nodes with a label, a kind and a status, and edges with
a label, read with a few bounded queries.

What is drawn depends on what the graph holds, and a graph holding several kinds shows them
all:

* the decision graph: its nodes (kind: goal, decision, option …; status: active, completed,
  superseded, rejected) and its typed edges (``leads_to``, ``chosen`` …);
* the MCP knowledge graph: its entities (kind: the entity type) and relations (the relation
  type), each entity titled with its observations;
* a memory scope: each memory and the topics it is tagged with;
* a group's generalisations: each one (kind: its level) and what it was derived from.

Any other graph is drawn as its resources and the triples between them (``rdf:type`` left
out). At most ``max_nodes`` nodes are read; ``truncated`` says when there were more.

>>> from rdfmem import RdfStore
>>> from rdfmem.domain.decisions import DecisionGraph, Edge, Node
>>> store = RdfStore()
>>> graph = DecisionGraph(store)
>>> _ = graph.add_node(Node(id="ship", type="goal", label="Ship it"))
>>> _ = graph.add_node(Node(id="pick", type="decision", label="Pick a backend"))
>>> _ = graph.add_edge(Edge(from_id="ship", to_id="pick", type="leads_to"))
>>> picture = read_picture(store, "urn:rdfmem:graph:decisions")
>>> sorted((n.label, n.kind, n.status) for n in picture.nodes)
[('Pick a backend', 'decision', 'active'), ('Ship it', 'goal', 'active')]
>>> [e.label for e in picture.edges]
['leads_to']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import unquote

from pyoxigraph import NamedNode

from rdfmem.core.errors import InvalidTerm
from rdfmem.core.ontology import PREFIXES, RDFMEM
from rdfmem.core.results import Row, SelectResult
from rdfmem.core.terms import sparql_term
from rdfmem.domain.decision_queries import EDGE_PROPERTY
from rdfmem.store.rdfstore import RdfStore

__all__ = ["MAX_NODES", "Edge", "Node", "Picture", "read_picture"]

#: The most nodes read for one picture by default.
MAX_NODES = 2000

_EDGE_NAMES = {iri: name for name, iri in EDGE_PROPERTY.items()}
_PREFIXES = (
    f"PREFIX rm: <{RDFMEM}>\nPREFIX dcterms: <{PREFIXES['dcterms']}>\n"
    f"PREFIX rdfs: <{PREFIXES['rdfs']}>\nPREFIX prov: <{PREFIXES['prov']}>\n"
)
_DECISION_NODES = """SELECT ?node ?id ?label ?type ?status WHERE { GRAPH ?graph {
  ?node dcterms:identifier ?id ; rm:status ?status ; a ?type .
  OPTIONAL { ?node rdfs:label ?label }
  FILTER (?type IN (rm:Goal, rm:Decision, rm:Option, rm:Action, rm:Outcome, rm:Observation,
                    rm:Revisit)) } } ORDER BY ?id"""
_DECISION_EDGES = """SELECT ?from ?to ?type WHERE { GRAPH ?graph {
  ?edge rm:edgeType ?type ; rm:fromNode ?from ; rm:toNode ?to } } ORDER BY ?edge"""
_ENTITIES = """SELECT ?node ?name ?type (GROUP_CONCAT(?text; SEPARATOR="\\n") AS ?notes)
WHERE { GRAPH ?graph { ?node a rm:KnowledgeEntity ; rm:entityName ?name .
  OPTIONAL { ?node rm:entityType ?type }
  OPTIONAL { ?node rm:hasObservation/rm:observationText ?text } } }
GROUP BY ?node ?name ?type ORDER BY ?name"""
_RELATIONS = """SELECT ?from ?to ?type WHERE { GRAPH ?graph { ?r a rm:KnowledgeRelation ;
  rm:relationFrom ?from ; rm:relationTo ?to ; rm:relationType ?type } } ORDER BY ?r"""
_MEMORIES = """SELECT ?node ?title ?topic ?content WHERE { GRAPH ?graph {
  ?node a rm:Memory ; dcterms:title ?title . OPTIONAL { ?node rm:topic ?topic }
  OPTIONAL { ?node rm:content ?content } } } ORDER BY ?title ?topic"""
_GENERALISATIONS = """SELECT ?node ?id ?level ?content ?from WHERE { GRAPH ?graph {
  ?node a rm:Generalisation ; dcterms:identifier ?id . OPTIONAL { ?node rm:level ?level }
  OPTIONAL { ?node rm:content ?content } OPTIONAL { ?node prov:wasDerivedFrom ?from } } }
  ORDER BY ?id"""
_TRIPLES = """SELECT ?s ?p ?o ?label WHERE { GRAPH ?graph { ?s ?p ?o
  FILTER (!isLiteral(?o) && ?p != <http://www.w3.org/1999/02/22-rdf-syntax-ns#type>) }
  OPTIONAL { GRAPH ?graph { ?s rdfs:label ?label } } }"""
_SUBJECTS = """SELECT DISTINCT ?s WHERE { GRAPH ?graph { ?s ?p ?o } } ORDER BY ?s"""


@dataclass(frozen=True)
class Node:
    """One node: ``key`` (its IRI, or a made-up key for a topic), what it shows."""

    key: str
    label: str
    kind: str = ""
    status: str = ""
    title: str = ""


@dataclass(frozen=True)
class Edge:
    """One edge between the keys of two nodes, with its label (an edge or relation type)."""

    source: str
    target: str
    label: str = ""


@dataclass
class Picture:
    """What ``read_picture`` found in one graph."""

    graph: str
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    truncated: bool = False
    _seen: set[str] = field(default_factory=set, repr=False)

    def add(self, node: Node, limit: int) -> bool:
        """Add ``node`` unless it is there already; False when the picture is full."""
        if node.key in self._seen:
            return True
        if len(self.nodes) >= limit:
            self.truncated = True
            return False
        self._seen.add(node.key)
        self.nodes.append(node)
        return True

    def link(self, edge: Edge) -> None:
        """Add ``edge`` when both its ends are drawn."""
        if edge.source in self._seen and edge.target in self._seen:
            self.edges.append(edge)


def _rows(store: RdfStore, sparql: str, graph: NamedNode, limit: int) -> list[Row]:
    # The graph written as an escaped term: a substitution must be in the projection.
    text = sparql.replace("?graph", sparql_term(graph))
    result = store.query(f"{_PREFIXES}{text} LIMIT {limit}")
    assert isinstance(result, SelectResult)
    return list(result)


def _text(row: Row, name: str) -> str:
    term = row.get(name)
    return "" if term is None else str(term.value)


def _local(iri: str) -> str:
    """The last part of an IRI, readable."""
    for mark in ("#", "/", ":"):
        if mark in iri.rstrip(mark):
            iri = iri.rstrip(mark).rsplit(mark, 1)[1]
            break
    return unquote(iri)


def _status(iri: str) -> str:
    return _local(iri).removesuffix("Status").lower()


def _decisions(store: RdfStore, picture: Picture, graph: NamedNode, limit: int) -> None:
    for row in _rows(store, _DECISION_NODES, graph, limit + 1):
        node = Node(
            _text(row, "node"),
            _text(row, "label") or _text(row, "id"),
            _local(_text(row, "type")).lower(),
            _status(_text(row, "status")),
            _text(row, "id"),
        )
        if not picture.add(node, limit):
            break
    for row in _rows(store, _DECISION_EDGES, graph, 4 * limit):
        kind = _text(row, "type")
        picture.link(Edge(_text(row, "from"), _text(row, "to"), _EDGE_NAMES.get(kind, kind)))


def _knowledge(store: RdfStore, picture: Picture, graph: NamedNode, limit: int) -> None:
    for row in _rows(store, _ENTITIES, graph, limit + 1):
        notes = _text(row, "notes")
        node = Node(_text(row, "node"), _text(row, "name"), _text(row, "type"), "", notes)
        if not picture.add(node, limit):
            break
    for row in _rows(store, _RELATIONS, graph, 4 * limit):
        picture.link(Edge(_text(row, "from"), _text(row, "to"), _text(row, "type")))


def _memories(store: RdfStore, picture: Picture, graph: NamedNode, limit: int) -> None:
    for row in _rows(store, _MEMORIES, graph, 4 * limit):
        memory = Node(_text(row, "node"), _text(row, "title"), "memory", "", _text(row, "content"))
        if not picture.add(memory, limit):
            break
        topic = _text(row, "topic")
        if topic:
            key = f"topic:{topic}"
            if not picture.add(Node(key, topic, "topic"), limit):
                break
            picture.link(Edge(memory.key, key, "topic"))


def _generalisations(store: RdfStore, picture: Picture, graph: NamedNode, limit: int) -> None:
    rows = _rows(store, _GENERALISATIONS, graph, 4 * limit)
    for row in rows:
        level = _text(row, "level")
        kind = f"level {level}" if level else "generalisation"
        node = Node(_text(row, "node"), _text(row, "id"), kind, "", _text(row, "content"))
        if not picture.add(node, limit):
            break
    for row in rows:
        if "from" in row:
            picture.link(Edge(_text(row, "node"), _text(row, "from"), "derived from"))


def _resources(store: RdfStore, picture: Picture, graph: NamedNode, limit: int) -> None:
    """Any other graph: its subjects, and the resources its triples link."""
    labels: dict[str, str] = {}
    links: list[tuple[str, str, str]] = []
    for row in _rows(store, _TRIPLES, graph, 4 * limit):
        s, o = _text(row, "s"), _text(row, "o")
        labels.setdefault(s, _text(row, "label") or _local(s))
        labels.setdefault(o, _local(o))
        links.append((s, o, _local(_text(row, "p"))))
    for row in _rows(store, _SUBJECTS, graph, limit + 1):
        labels.setdefault(_text(row, "s"), _local(_text(row, "s")))
    for key, label in labels.items():
        if not picture.add(Node(key, label, "resource", "", key), limit):
            break
    for s, o, p in links:
        picture.link(Edge(s, o, p))


def read_picture(store: RdfStore, graph: str, *, max_nodes: int = MAX_NODES) -> Picture:
    """The picture of the named graph ``graph`` in ``store``: at most ``max_nodes`` nodes.

    Raises:
        InvalidTerm: ``graph`` is not an absolute IRI.
    """
    try:
        name = NamedNode(graph)
    except ValueError as exc:
        raise InvalidTerm(f"a graph is an absolute IRI such as <urn:g>, not {graph!r}") from exc
    if ":" not in graph:
        raise InvalidTerm(f"a graph is an absolute IRI such as <urn:g>, not {graph!r}")
    picture = Picture(graph)
    for part in (_decisions, _knowledge, _memories, _generalisations):
        part(store, picture, name, max_nodes)
    if not picture.nodes:
        _resources(store, picture, name, max_nodes)
    return picture
