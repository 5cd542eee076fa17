"""An agent's decision graph (from Nous.Decisions) kept as RDF in one named graph.

Goals, decisions, options, actions, outcomes, observations and revisits are nodes; typed
edges (leads_to, chosen, rejected, requires, blocks, enables, supersedes) join them. Each edge
is written twice over: the direct triples ``<from> rm:leadsTo <to>`` and ``<from> rm:linksTo
<to>``, which SPARQL property paths walk, and an edge resource carrying its id, type, ends,
creation time and metadata (see ``ontologies/rdfmem.ttl``). The five named queries are the
shipped ``ontologies/queries/*.rq`` files: the portable definition, and the answer on a
remote store. On an embedded store they are answered from a ``rdfmem.store.indexes.GraphIndex``
(nodes by type and status and age, links both ways) that every write of this module
changes in its critical section; a write that bypassed it (raw SPARQL, ``load``,
``clear_graph`` …) makes it rebuild from SPARQL before the next read. The answers are the
same either way.

>>> from rdfmem import RdfStore
>>> graph = DecisionGraph(RdfStore())
>>> goal = graph.add_node(Node(id="g", type="goal", label="Ship v1"))
>>> plan = graph.add_node(Node(id="d", type="decision", label="Use RDF"))
>>> edge = graph.add_edge(Edge(from_id="g", to_id="d", type="leads_to"))
>>> [n.label for n in graph.query("descendants", node_id="g")]
['Use RDF']
>>> [n.id for n in graph.query("path_between", from_id="g", to_id="d")]
['g', 'd']
"""

from __future__ import annotations

import datetime as _dt
import json
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from copy import deepcopy
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pyoxigraph import Literal as Text
from pyoxigraph import NamedNode

from rdfmem.core.errors import DecisionGraphError, NodeNotFound
from rdfmem.core.results import Row, SelectResult
from rdfmem.domain import decision_queries as q
from rdfmem.store.indexes import GraphIndex
from rdfmem.store.rdfstore import RdfStore

__all__ = [
    "DEFAULT_GRAPH",
    "DecisionGraph",
    "Edge",
    "EdgeType",
    "Node",
    "NodeStatus",
    "NodeType",
    "utc_now",
]

NodeType = Literal["goal", "decision", "option", "action", "outcome", "observation", "revisit"]
NodeStatus = Literal["active", "completed", "superseded", "rejected"]
EdgeType = Literal["leads_to", "chosen", "rejected", "requires", "blocks", "enables", "supersedes"]
Direction = Literal["outgoing", "incoming"]

#: The named graph a ``DecisionGraph`` uses when given none.
DEFAULT_GRAPH = "urn:rdfmem:graph:decisions"

_UTC = _dt.timezone.utc
_TYPE_OF_CLASS = {iri: name for name, iri in q.CLASS_OF_TYPE.items()}
_STATUS_OF_IRI = {iri: name for name, iri in q.STATUS_IRI.items()}
_EDGE_TYPE_OF = {iri: name for name, iri in q.EDGE_PROPERTY.items()}
_CHANGEABLE = frozenset({"type", "label", "status", "confidence", "rationale", "metadata"})
_CHUNK = 2000  # ids per existence query of the bulk adds
_new = object.__new__
_set = object.__setattr__
M = TypeVar("M", bound=BaseModel)


class _Clock:
    """UTC now, strictly later than the last time it gave (so creation order is never a tie)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = _dt.datetime.min.replace(tzinfo=_UTC)

    def now(self) -> _dt.datetime:
        with self._lock:
            now = _dt.datetime.now(_UTC)
            if now <= self._last:
                now = self._last + _dt.timedelta(microseconds=1)
            self._last = now
            return now


_clock = _Clock()


def utc_now() -> _dt.datetime:
    """The current time in UTC, later than any this process handed out before."""
    return _clock.now()


def _new_id() -> str:
    return uuid.uuid4().hex


def _utc(value: _dt.datetime) -> _dt.datetime:
    # A naive datetime is taken to be UTC already.
    if value.tzinfo is None:
        return value.replace(tzinfo=_UTC)
    return value.astimezone(_UTC)


def _text(value: str | None) -> str | None:
    if value is not None:
        value.encode("utf-8")  # lone surrogates cannot be stored
    return value


def _json_object(value: dict[str, Any]) -> dict[str, Any]:
    try:
        json.dumps(value, allow_nan=False)
    except TypeError as exc:  # a set, an object … (NaN and infinities raise ValueError)
        raise ValueError(f"metadata must be JSON: {exc}") from exc
    return value


class Node(BaseModel):
    """A node of the decision graph.

    ``id`` defaults to 32 hex characters; ``created_at`` to now and ``updated_at`` to
    ``created_at``. Times are timezone-aware UTC (a naive time is read as UTC).

    >>> node = Node(type="goal", label="Ship v1", confidence=0.9)
    >>> (len(node.id), node.status, node.updated_at == node.created_at)
    (32, 'active', True)

    Raises:
        pydantic.ValidationError: a field of the wrong type, an unknown type or status, a
            confidence outside 0..1, metadata that is not a JSON object.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    id: str = Field(default_factory=_new_id, min_length=1)
    type: NodeType
    label: str
    status: NodeStatus = "active"
    confidence: float | None = Field(default=None, ge=0.0, le=1.0, allow_inf_nan=False)
    rationale: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: _dt.datetime = Field(default_factory=utc_now)
    updated_at: _dt.datetime = Field(default_factory=utc_now)

    @model_validator(mode="before")
    @classmethod
    def _stamp(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("updated_at") is None:
            data = dict(data)
            if data.get("created_at") is None:
                data["created_at"] = utc_now()
            data["updated_at"] = data["created_at"]
        return data

    _check_text = field_validator("id", "label", "rationale")(_text)
    _check_metadata = field_validator("metadata")(_json_object)
    _check_time = field_validator("created_at", "updated_at")(_utc)


class Edge(BaseModel):
    """A typed, directed edge between two nodes.

    >>> Edge(from_id="g", to_id="d", type="leads_to").metadata
    {}

    Raises:
        pydantic.ValidationError: a field of the wrong type or an unknown edge type.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    id: str = Field(default_factory=_new_id, min_length=1)
    from_id: str = Field(min_length=1)
    to_id: str = Field(min_length=1)
    type: EdgeType
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: _dt.datetime = Field(default_factory=utc_now)

    _check_text = field_validator("id", "from_id", "to_id")(_text)
    _check_metadata = field_validator("metadata")(_json_object)
    _check_time = field_validator("created_at")(_utc)


def _validated(model: type[BaseModel], value: Any) -> Any:
    if isinstance(value, model):
        return value
    if not isinstance(value, Mapping):
        raise DecisionGraphError(f"expected a {model.__name__} or a mapping, not {value!r}")
    try:
        return model.model_validate(dict(value))
    except ValidationError as exc:
        raise DecisionGraphError(f"invalid {model.__name__}: {exc}") from exc


def _stored(model: type[M], values: dict[str, Any]) -> M:
    # What BaseModel.model_construct does, minus its per-call bookkeeping: rows come from the
    # store, written from validated models, so they are not validated again (see
    # _node_from_row for the checks that remain). Every field is given.
    obj = _new(model)
    _set(obj, "__dict__", values)
    _set(obj, "__pydantic_fields_set__", set(values))
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj


def _node_from_row(row: Row) -> Node:
    confidence = row.get("confidence")
    rationale = row.get("rationale")
    metadata = row.get("metadata")
    try:
        return _stored(
            Node,
            {
                "id": row["id"].value,
                "type": _TYPE_OF_CLASS[row["type"].value],
                "label": row["label"].value,
                "status": _STATUS_OF_IRI[row["status"].value],
                "confidence": None if confidence is None else float(confidence.value),
                "rationale": None if rationale is None else rationale.value,
                "metadata": {} if metadata is None else json.loads(metadata.value),
                "created_at": q.parse_datetime(row["created"].value),
                "updated_at": q.parse_datetime(row["updated"].value),
            },
        )
    except (KeyError, ValueError) as exc:
        raise DecisionGraphError(f"stored node {row['id'].value!r} is malformed: {exc}") from exc


def _edge_from_row(row: Row) -> Edge:
    metadata = row.get("metadata")
    try:
        return _stored(
            Edge,
            {
                "id": row["id"].value,
                "from_id": row["from_id"].value,
                "to_id": row["to_id"].value,
                "type": _EDGE_TYPE_OF[row["type"].value],
                "metadata": {} if metadata is None else json.loads(metadata.value),
                "created_at": q.parse_datetime(row["created"].value),
            },
        )
    except (KeyError, ValueError) as exc:
        raise DecisionGraphError(f"stored edge {row['id'].value!r} is malformed: {exc}") from exc


class DecisionGraph:
    """A decision graph in one named graph of an ``RdfStore`` (any backend).

    Node ``x`` of graph ``G`` is ``<G/node/x>`` (the id percent-escaped, so any text is a
    safe id) and edge ``e`` is ``<G/edge/e>``. Each write is one store request; the checks
    before it (duplicate id, missing end) and the write are serialised per ``DecisionGraph``
    object, and the insert itself is conditional, so even a writer elsewhere never turns two
    nodes into one.

    Args:
        store: where the triples live.
        graph: the named graph holding this decision graph (an IRI); node and edge IRIs are
            minted under it, so two decision graphs never share a node.

    Raises:
        DecisionGraphError: ``graph`` is not an IRI.
    """

    def __init__(self, store: RdfStore, graph: str = DEFAULT_GRAPH) -> None:
        try:
            self._graph_term = NamedNode(graph)
        except (TypeError, ValueError) as exc:
            raise DecisionGraphError(f"graph must be an IRI, not {graph!r}") from exc
        self.store = store
        self.graph = graph
        self._base = q.iri_base(graph)

    def __repr__(self) -> str:
        return f"DecisionGraph({self.store!r}, graph={self.graph!r})"

    @contextmanager
    def _writing(self) -> Iterator[GraphIndex | None]:
        # Check-then-write of nodes and edges: the whole graph, for every writer of the
        # store (the write lock; a lease on a SPARQL server). Yields the graph's index when
        # it was fresh before the write: the caller changes it after its write succeeded,
        # and it stays fresh; when the block raises, a write that happened leaves it stale.
        hub = self.store.indexes
        with self.store.exclusive(self.graph):
            if hub is None:  # a server: its change log learns that only this graph changed
                with self.store.declared(self._graph_term):
                    yield None
                return
            with hub.writing([self.graph]):
                index = hub.known_graph_index(self.graph)
                if index is not None and not hub.fresh(index.seen, (self.graph,)):
                    index = None
                yield index
                if index is not None:
                    index.seen = hub.generation

    @contextmanager
    def _reading(self) -> Iterator[GraphIndex | None]:
        # The graph's index, fresh (rebuilt from SPARQL when a write bypassed it), under the
        # write lock so no write is half applied; None on a remote store.
        hub = self.store.indexes
        if hub is None:
            yield None
            return
        with hub.reading():
            index = hub.graph_index(self.graph)
            if not hub.fresh(index.seen, (self.graph,)):
                self._rebuild(index)
                index.seen = hub.generation
            yield index

    def _rebuild(self, index: GraphIndex) -> None:
        nodes = []
        for row in self._rows(q.all_nodes_query(self.graph)):
            node = _node_from_row(row)
            nodes.append((row["node"].value, node.type, node.status, _node_age(node), node))
        links = [
            (r["source"].value, r["target"].value)
            for r in self._rows(q.all_links_query(self.graph))
        ]
        index.rebuild(nodes, links)

    def _put(self, index: GraphIndex | None, iri: str, node: Node) -> None:
        if index is not None:
            index.put_node(iri, node.type, node.status, _node_age(node), _copy(node))

    # -- IRIs, reads ----------------------------------------------------------------------

    def _node_iri(self, node_id: str) -> str:
        return q.node_iri(self._base, node_id)

    def _edge_iri(self, edge_id: str) -> str:
        return q.edge_iri(self._base, edge_id)

    def _select(self, sparql: str, **bindings: Any) -> SelectResult:
        """Rows of a shipped query, with ``?graph`` bound to this graph."""
        return self._rows(sparql, {"graph": self._graph_term, **bindings})

    def _rows(self, sparql: str, bindings: Mapping[str, Any] | None = None) -> SelectResult:
        result = self.store.query(sparql, bindings=bindings)
        assert isinstance(result, SelectResult)
        return result

    def _has(self, iri: str, predicate: str) -> bool:
        return self.store.ask(
            subject=NamedNode(iri), predicate=NamedNode(predicate[1:-1]), graph=self._graph_term
        )

    def _existing(self, iris: Sequence[str], predicate: str) -> set[str]:
        found: set[str] = set()
        for i in range(0, len(iris), _CHUNK):
            sparql = q.existing_query(self.graph, iris[i : i + _CHUNK], predicate)
            found.update(row["s"].value for row in self._rows(sparql))
        return found

    def _nodes(self, sparql: str, **bindings: Any) -> list[Node]:
        return [_node_from_row(row) for row in self._select(sparql, **bindings)]

    @staticmethod
    def _by_iri(rows: SelectResult) -> dict[str, Node]:
        return {row["node"].value: _node_from_row(row) for row in rows}

    # -- nodes ------------------------------------------------------------------------------

    def add_node(self, node: Node | Mapping[str, Any]) -> Node:
        """Store a new node (a ``Node``, or a mapping of its fields) and return it.

        Raises:
            DecisionGraphError: a node with this id already exists, or the fields are invalid;
                nothing is written.
        """
        item: Node = _validated(Node, node)
        iri = self._node_iri(item.id)
        lines = self._lines_of_node(iri, item)
        with self._writing() as index:
            if self._has(iri, q.RM_STATUS):
                raise DecisionGraphError(f"a node with id {item.id!r} already exists")
            self.store.sparql_update(
                q.insert_update(self.graph, lines, unless=[f"<{iri}> {q.RM_STATUS} ?status"])
            )
            self._put(index, iri, item)
        return item

    def add_nodes(self, nodes: Iterable[Node | Mapping[str, Any]]) -> int:
        """Store many new nodes in one write; returns how many.

        Raises:
            DecisionGraphError: an id repeated in ``nodes`` or already stored, or invalid
                fields; nothing is written.
        """
        items: list[Node] = [_validated(Node, n) for n in nodes]
        iris = [self._node_iri(n.id) for n in items]
        twice = _repeated(n.id for n in items)
        if twice is not None:
            raise DecisionGraphError(f"node id {twice!r} appears twice in one add_nodes call")
        lines: list[str] = []
        for iri, item in zip(iris, items, strict=True):
            lines.extend(self._lines_of_node(iri, item))
        with self._writing() as index:
            clash = self._existing(iris, q.RM_STATUS)
            if clash:
                ids = sorted(q.id_of(i, self._base + "node/") for i in clash)
                raise DecisionGraphError(f"nodes with these ids already exist: {ids[:10]!r}")
            self._load(lines)
            for iri, item in zip(iris, items, strict=True):
                self._put(index, iri, item)
        return len(items)

    def get_node(self, node_id: str) -> Node:
        """The node with this id.

        Raises:
            NodeNotFound: no such node.
        """
        with self._reading() as index:
            if index is not None:
                stored = index.value(self._node_iri(self._id(node_id)))
                if stored is None:
                    raise NodeNotFound(node_id)
                return _copy(stored)
        found = self._nodes(q.query_text("decision_node"), node_id=Text(self._id(node_id)))
        if not found:
            raise NodeNotFound(node_id)
        return found[0]

    def update_node(
        self, node_id: str, changes: Mapping[str, Any] | None = None, **fields: Any
    ) -> Node:
        """Change some fields of a node (``type``, ``label``, ``status``, ``confidence``,
        ``rationale``, ``metadata``); ``updated_at`` becomes now, ``created_at`` stays.
        Returns the updated node.

        >>> from rdfmem import RdfStore
        >>> graph = DecisionGraph(RdfStore())
        >>> node = graph.add_node(Node(type="goal", label="Ship v1"))
        >>> graph.update_node(node.id, {"status": "completed"}).status
        'completed'

        Raises:
            NodeNotFound: no such node.
            DecisionGraphError: an unknown or unchangeable field, or an invalid value; nothing
                is written.
        """
        wanted = {**(changes or {}), **fields}
        bad = sorted(set(wanted) - _CHANGEABLE)
        if bad:
            raise DecisionGraphError(
                f"update_node cannot change {', '.join(bad)}; it changes "
                f"{', '.join(sorted(_CHANGEABLE))} (updated_at is set for you)"
            )
        with self._writing() as index:
            current = self.get_node(node_id)
            updated = self._changed(current, wanted)
            iri = self._node_iri(node_id)
            self.store.sparql_update(
                q.replace_node_update(self.graph, iri, self._lines_of_node(iri, updated))
            )
            self._put(index, iri, updated)
        return updated

    def delete_node(self, node_id: str) -> bool:
        """Remove a node and every edge touching it; True when there was such a node."""
        iri = self._node_iri(self._id(node_id))
        with self._writing() as index:
            if not self._has(iri, q.RM_STATUS):
                return False
            self.store.sparql_update(q.delete_node_update(self.graph, iri))
            if index is not None:
                index.remove_node(iri)
        return True

    # -- edges ------------------------------------------------------------------------------

    def add_edge(self, edge: Edge | Mapping[str, Any]) -> Edge:
        """Store a new edge between two stored nodes (an ``Edge``, or a mapping of its fields).

        Raises:
            DecisionGraphError: an edge with this id already exists, an end is not a stored
                node, or the fields are invalid; nothing is written.
        """
        item: Edge = _validated(Edge, edge)
        with self._writing() as index:
            self._check_edge(item)
            self.store.sparql_update(self._insert_edge(item))
            if index is not None:
                index.link(self._node_iri(item.from_id), self._node_iri(item.to_id))
        return item

    def add_edges(self, edges: Iterable[Edge | Mapping[str, Any]]) -> int:
        """Store many new edges between stored nodes in one write; returns how many.

        Raises:
            DecisionGraphError: an id repeated in ``edges`` or already stored, an end that
                is not a stored node, or invalid fields; nothing is written.
        """
        items: list[Edge] = [_validated(Edge, e) for e in edges]
        iris = [self._edge_iri(e.id) for e in items]
        twice = _repeated(e.id for e in items)
        if twice is not None:
            raise DecisionGraphError(f"edge id {twice!r} appears twice in one add_edges call")
        end_iri: dict[str, str] = {}  # node id -> IRI, each escaped once
        for e in items:
            for end in (e.from_id, e.to_id):
                if end not in end_iri:
                    end_iri[end] = self._node_iri(end)
        lines: list[str] = []
        for iri, item in zip(iris, items, strict=True):
            lines.extend(
                q.edge_lines(
                    iri,
                    edge_id=item.id,
                    type=item.type,
                    from_iri=end_iri[item.from_id],
                    to_iri=end_iri[item.to_id],
                    metadata=item.metadata,
                    created_at=item.created_at,
                )
            )
        with self._writing() as index:
            clash = self._existing(iris, q.RM_EDGE_TYPE)
            if clash:
                ids = sorted(q.id_of(i, self._base + "edge/") for i in clash)
                raise DecisionGraphError(f"edges with these ids already exist: {ids[:10]!r}")
            found = self._existing(list(end_iri.values()), q.RM_STATUS)
            if len(found) < len(end_iri):
                ids = sorted(i for i, iri in end_iri.items() if iri not in found)
                raise DecisionGraphError(f"edges to nodes that do not exist: {ids[:10]!r}")
            self._load(lines)
            if index is not None:
                for e in items:
                    index.link(end_iri[e.from_id], end_iri[e.to_id])
        return len(items)

    def get_edges(self, node_id: str, direction: Direction = "outgoing") -> list[Edge]:
        """The edges leaving (``"outgoing"``) or entering (``"incoming"``) a node, oldest
        first; ``[]`` when there are none or no such node.

        Raises:
            DecisionGraphError: a direction other than ``"outgoing"`` or ``"incoming"``.
        """
        if direction not in ("outgoing", "incoming"):
            raise DecisionGraphError(f"direction is 'outgoing' or 'incoming', not {direction!r}")
        key = "from_id" if direction == "outgoing" else "to_id"
        rows = self._select(q.query_text("decision_edges"), **{key: Text(self._id(node_id))})
        return [_edge_from_row(row) for row in rows]

    def supersede(self, old_id: str, new_id: str, rationale: str | None = None) -> Edge:
        """Mark ``old_id`` superseded (with ``rationale``, when given, as its rationale) and
        add a ``supersedes`` edge from ``new_id`` to it carrying ``{"rationale": …}`` in its
        metadata, in one write. Returns the edge.

        Raises:
            NodeNotFound: either node is missing.
            DecisionGraphError: a node superseding itself; nothing is written.
        """
        if old_id == new_id:
            raise DecisionGraphError(f"node {old_id!r} cannot supersede itself")
        changes: dict[str, Any] = {"status": "superseded"}
        if rationale is not None:
            changes["rationale"] = rationale
        edge = Edge(
            from_id=new_id,
            to_id=old_id,
            type="supersedes",
            metadata={} if rationale is None else {"rationale": rationale},
        )
        with self._writing() as index:
            old = self.get_node(old_id)
            self.get_node(new_id)
            updated = self._changed(old, changes)
            iri = self._node_iri(old_id)
            self._check_edge(edge)
            request = q.replace_node_update(self.graph, iri, self._lines_of_node(iri, updated))
            self.store.sparql_update(request + " ;\n" + self._insert_edge(edge))
            self._put(index, iri, updated)
            if index is not None:
                index.link(self._node_iri(new_id), iri)
        return edge

    # -- named queries ----------------------------------------------------------------------

    def query(self, name: str, **params: Any) -> list[Node]:
        """Run a named query of ``ontologies/queries``; returns nodes.

        * ``active_goals``: active goals, oldest first;
        * ``recent_decisions`` (``limit=10``): decisions, newest first;
        * ``path_between`` (``from_id``, ``to_id``): the nodes of a shortest path, both ends
          included; ``[from]`` when they are equal, ``[]`` when there is no path;
        * ``descendants`` / ``ancestors`` (``node_id``): every node reachable from (that
          reaches) the node, breadth-first (by distance from the node, then oldest first,
          then by id), the node itself left out even in a cycle; ``[]`` for a missing node.

        Raises:
            DecisionGraphError: an unknown query, a missing or unknown parameter, a ``limit``
                that is not an int of 0 or more.
        """
        if name not in q.NODE_QUERIES:
            raise DecisionGraphError(
                f"no decision query {name!r}; known: {', '.join(sorted(q.NODE_QUERIES))}"
            )
        allowed = q.NODE_QUERIES[name]
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            takes = ", ".join(allowed) or "no parameters"
            raise DecisionGraphError(f"{name} takes {takes}, not {', '.join(unknown)}")
        required = [p for p in allowed if p != "limit" and p not in params]
        if required:
            raise DecisionGraphError(f"{name} needs {', '.join(required)}")
        with self._reading() as index:
            if index is not None:
                return self._indexed(index, name, params)
        if name == "active_goals":
            return self._nodes(q.query_text(name))
        if name == "recent_decisions":
            limit = params.get("limit", 10)
            try:
                text = q.with_limit(q.query_text(name), limit)
            except ValueError as exc:
                raise DecisionGraphError(f"recent_decisions: {exc}") from exc
            return self._nodes(text)
        if name == "path_between":
            return self._path_between(self._id(params["from_id"]), self._id(params["to_id"]))
        return self._reachable(name, self._id(params["node_id"]))

    def _indexed(self, index: GraphIndex, name: str, params: Mapping[str, Any]) -> list[Node]:
        # The named query answered from the index: the same nodes, in the same order, as
        # the .rq files give (tests/test_index_properties.py holds them to it).
        if name == "active_goals":
            iris = index.oldest("goal", "active")
        elif name == "recent_decisions":
            limit = params.get("limit", 10)
            if type(limit) is not int or limit < 0:
                raise DecisionGraphError(
                    f"recent_decisions: a limit is an int of 0 or more, not {limit!r}"
                )
            iris = index.newest("decision", limit)
        elif name == "path_between":
            first = self._node_iri(self._id(params["from_id"]))
            iris = index.shortest_path(first, self._node_iri(self._id(params["to_id"])))
        else:
            start = self._node_iri(self._id(params["node_id"]))
            iris = index.reachable(start, backwards=name == "ancestors")
        return [_copy(index.value(iri)) for iri in iris]

    def _reachable(self, name: str, node_id: str) -> list[Node]:
        by_iri = self._by_iri(self._select(q.query_text(name), node_id=Text(node_id)))
        if not by_iri:
            return []
        start = self._node_iri(node_id)
        oldest_first = sorted(by_iri.items(), key=_item_age)
        rank = {iri: i for i, (iri, _) in enumerate(oldest_first)}
        links_name = "descendant_links" if name == "descendants" else "ancestor_links"
        links = q.unpack_links(self._select(q.query_text(links_name), node_id=Text(node_id)))
        order = q.bfs_order(start, links, rank, backwards=name == "ancestors")
        ordered = [by_iri[iri] for iri in order if iri in by_iri]
        if len(ordered) < len(by_iri):  # written between the two queries
            placed = {n.id for n in ordered}
            ordered += sorted((n for n in by_iri.values() if n.id not in placed), key=_node_age)
        return ordered

    def _path_between(self, from_id: str, to_id: str) -> list[Node]:
        if from_id == to_id:
            try:
                return [self.get_node(from_id)]
            except NodeNotFound:
                return []
        first, last = self._node_iri(from_id), self._node_iri(to_id)
        if not (self._has(first, q.RM_STATUS) and self._has(last, q.RM_STATUS)):
            return []  # (asked first: engines may walk every path before seeing this)
        rows = self._select(q.query_text("path_between"), from_id=Text(from_id), to_id=Text(to_id))
        path = q.shortest_path(first, last, q.unpack_links(rows))
        if not path:
            return []
        by_iri = self._by_iri(self._rows(q.nodes_query(self.graph, path)))
        if len(by_iri) < len(path):  # a node deleted between the two queries
            return []
        return [by_iri[iri] for iri in path]

    # -- helpers ----------------------------------------------------------------------------

    @staticmethod
    def _id(value: Any) -> str:
        if not isinstance(value, str):
            raise DecisionGraphError(f"a node id is a str, not {value!r}")
        return value

    def _lines_of_node(self, iri: str, node: Node) -> list[str]:
        return q.node_lines(
            iri,
            node_id=node.id,
            type=node.type,
            label=node.label,
            status=node.status,
            confidence=node.confidence,
            rationale=node.rationale,
            metadata=node.metadata,
            created_at=node.created_at,
            updated_at=node.updated_at,
        )

    @staticmethod
    def _changed(node: Node, changes: Mapping[str, Any]) -> Node:
        data = node.model_dump()
        data.update(changes)
        data["updated_at"] = max(utc_now(), node.created_at)
        try:
            return Node.model_validate(data)
        except ValidationError as exc:
            raise DecisionGraphError(f"invalid change to node {node.id!r}: {exc}") from exc

    def _check_edge(self, edge: Edge) -> None:
        if self._has(self._edge_iri(edge.id), q.RM_EDGE_TYPE):
            raise DecisionGraphError(f"an edge with id {edge.id!r} already exists")
        for end in (edge.from_id, edge.to_id):
            if not self._has(self._node_iri(end), q.RM_STATUS):
                raise DecisionGraphError(
                    f"edge {edge.id!r} goes {edge.from_id!r} -> {edge.to_id!r}, "
                    f"but there is no node {end!r}"
                )

    def _insert_edge(self, edge: Edge) -> str:
        iri = self._edge_iri(edge.id)
        lines = q.edge_lines(
            iri,
            edge_id=edge.id,
            type=edge.type,
            from_iri=self._node_iri(edge.from_id),
            to_iri=self._node_iri(edge.to_id),
            metadata=edge.metadata,
            created_at=edge.created_at,
        )
        return q.insert_update(self.graph, lines, unless=[f"<{iri}> {q.RM_EDGE_TYPE} ?type"])

    def _load(self, lines: Sequence[str]) -> None:
        if lines:
            data = ("\n".join(lines) + "\n").encode("utf-8")
            self.store.load(data, format="ntriples", graph=self._graph_term)


def _repeated(ids: Iterable[str]) -> str | None:
    seen: set[str] = set()
    for item in ids:
        if item in seen:
            return item
        seen.add(item)
    return None


def _node_age(node: Node) -> tuple[_dt.datetime, str]:
    return (node.created_at, node.id)


def _item_age(item: tuple[str, Node]) -> tuple[_dt.datetime, str]:
    return (item[1].created_at, item[1].id)


def _copy(node: Node) -> Node:
    # The index keeps its own Node objects: callers get copies they may change freely.
    fields = dict(node.__dict__)
    if fields["metadata"]:
        fields["metadata"] = deepcopy(fields["metadata"])
    else:
        fields["metadata"] = {}
    return _stored(Node, fields)
