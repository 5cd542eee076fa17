"""``DecisionGraph``: the writes of a decision graph (nodes, edges, supersession) over any
``RdfStore``; the reads come from ``DecisionReader``.

Each edge is written twice over: the direct triples ``<from> rm:leadsTo <to>`` and ``<from>
rm:linksTo <to>``, which SPARQL property paths walk, and an edge resource carrying its id,
type, ends, creation time and metadata (see ``ontologies/rdfmem.ttl``). Every write changes
the graph's index (on an embedded store) in the same critical section as the write.

>>> from rdfmem import RdfStore
>>> graph = DecisionGraph(RdfStore())
>>> graph.add_nodes([Node(id="a", type="goal", label="A"), Node(id="b", type="option", label="B")])
2
>>> graph.delete_node("b"), graph.delete_node("b")
(True, False)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from pydantic import ValidationError
from pyoxigraph import NamedNode

from rdfmem.core.errors import DecisionGraphError
from rdfmem.domain import decision_queries as q
from rdfmem.domain.decision_history import versioned
from rdfmem.domain.decision_models import Edge, Node, as_model, copy_node, node_age, utc_now
from rdfmem.domain.decision_reader import DecisionReader
from rdfmem.store.indexes import GraphIndex
from rdfmem.store.indexes.graph_follow import graph_follower
from rdfmem.store.known_rows import prefetching, subject_rows
from rdfmem.store.own_writes import self_contained

__all__ = ["DecisionGraph"]

_CHANGEABLE = frozenset({"type", "label", "status", "confidence", "rationale", "metadata"})
_CHUNK = 2000  # ids per existence query of the bulk adds
_SUBJECTS = 64  # a write changing more subjects declares its whole graph changed


class DecisionGraph(DecisionReader):
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

    #: Write requests this object sent (``_update``, ``_load``), counted in its sections.
    _sent = 0

    @contextmanager
    def _writing(self, *subjects: str, prefetch: Sequence[str] = ()) -> Iterator[GraphIndex | None]:
        # Check-then-write of nodes and edges: the whole graph, for every writer of the
        # store (the write lock; a lease on a SPARQL server). Yields the graph's index when
        # it was fresh before the write: the caller changes it after its write succeeded,
        # and it stays fresh; when the block raises, a write that happened leaves it stale.
        # ``subjects``: the IRIs whose triples the write changes (none: any in the graph).
        # ``prefetch``: the IRIs the write checks first; on a SPARQL server the claim's own
        # read brings their triples, and the checks send no request (``rdfmem.backends.prefetch``).
        hub = self.store.indexes
        named = [NamedNode(s) for s in subjects] if len(subjects) <= _SUBJECTS else []
        # What changed is declared: a server's change log, or an owned store's journal,
        # tells followers (other clients, attached processes) to read just that.
        with (
            prefetching([NamedNode(s) for s in prefetch]),
            self.store.exclusive(self.graph),
            self.store.declared(self._graph_term, named),
            self_contained(),  # its updates read only what they claim (``store.own_writes``)
        ):
            if hub is None:
                with self._following() as index:
                    yield index
                return
            with hub.writing([self.graph]):
                # Kept from the first write on (as the memories' indexes): a graph built
                # through add_nodes / add_edges is indexed as it grows, so its first query
                # reads nothing again.
                index = self._fresh_index(hub)
                yield index
                index.seen = hub.generation

    @contextmanager
    def _following(self) -> Iterator[GraphIndex | None]:
        # A process attached to an on-disk store that keeps this graph's index: brought up
        # to date before the write (inside its section, so no decision write of another
        # process comes between), changed by the caller after its write, and the write's
        # own note is then not read back (``GraphFollower.wrote``): the edge's source node
        # is not read again whole after each edge. None elsewhere (as before).
        follower = graph_follower(self.store)
        if follower is None:
            yield None
            return
        with follower.lock:
            if not follower.held(self.graph):
                yield None
                return
            index = follower.fresh(self.graph, self._read_whole, self._read_some)
            before, sent = follower.cursor, self._sent
            with follower.applied():  # its answer need not carry what the index is told
                yield index
            if self._sent == sent + 1:  # one request: the only write it may call its own
                follower.wrote(self.graph, before)

    def _put(self, index: GraphIndex | None, iri: str, node: Node) -> None:
        if index is not None:
            index.put_node(iri, node.type, node.status, node_age(node), copy_node(node))

    def _existing(self, iris: Sequence[str], predicate: str) -> set[str]:
        found: set[str] = set()
        for i in range(0, len(iris), _CHUNK):
            sparql = q.existing_query(self.graph, iris[i : i + _CHUNK], predicate)
            found.update(row["s"].value for row in self._rows(sparql))
        return found

    # -- nodes ------------------------------------------------------------------------------

    def add_node(self, node: Node | Mapping[str, Any]) -> Node:
        """Store a new node (a ``Node``, or a mapping of its fields) and return it.

        Raises:
            DecisionGraphError: a node with this id already exists, or the fields are invalid;
                nothing is written.
        """
        item: Node = as_model(Node, node)
        iri = self._node_iri(item.id)
        lines = self._lines_of_node(iri, item)
        with self._writing(iri, prefetch=[iri]) as index:
            if self._has(iri, q.RM_STATUS):
                raise DecisionGraphError(f"a node with id {item.id!r} already exists")
            insert = q.insert_update(self.graph, lines, unless=[f"<{iri}> {q.RM_STATUS} ?status"])
            self._update(insert, [iri])
            self._put(index, iri, item)
        return item

    def add_nodes(self, nodes: Iterable[Node | Mapping[str, Any]]) -> int:
        """Store many new nodes in one write; returns how many.

        Raises:
            DecisionGraphError: an id repeated in ``nodes`` or already stored, or invalid
                fields; nothing is written.
        """
        items: list[Node] = [as_model(Node, n) for n in nodes]
        iris = [self._node_iri(n.id) for n in items]
        twice = _repeated(n.id for n in items)
        if twice is not None:
            raise DecisionGraphError(f"node id {twice!r} appears twice in one add_nodes call")
        lines: list[str] = []
        for iri, item in zip(iris, items, strict=True):
            lines.extend(self._lines_of_node(iri, item))
        with self._writing(*iris) as index:
            clash = self._existing(iris, q.RM_STATUS)
            if clash:
                ids = sorted(q.id_of(i, self._base + "node/") for i in clash)
                raise DecisionGraphError(f"nodes with these ids already exist: {ids[:10]!r}")
            self._load(lines, iris)
            for iri, item in zip(iris, items, strict=True):
                self._put(index, iri, item)
        return len(items)

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
        with self._writing(self._node_iri(self._id(node_id))) as index:
            current = self.get_node(node_id)
            updated = self._changed(current, wanted)
            iri = self._node_iri(node_id)
            lines = self._lines_of_node(iri, updated)
            self._update(q.replace_node_update(self.graph, iri, lines), [iri])
            self._put(index, iri, updated)
        return updated

    def delete_node(self, node_id: str) -> bool:
        """Remove a node and every edge touching it.

        Returns True when a node was removed, False when there was no such node (nothing is
        written): every ``delete*`` of rdfmem returns whether it removed something, as
        ``RdfStore.delete`` does, and only ``forget`` raises for a missing item.

        Raises:
            DecisionGraphError: ``node_id`` is not a str.
        """
        iri = self._node_iri(self._id(node_id))
        with self._writing(prefetch=[iri]) as index:
            if not self._has(iri, q.RM_STATUS):
                return False
            # The node, and every resource naming it (edges, nodes linking to it), change.
            naming = [iri, *self._naming(iri)] if self.store.keeps_history else []
            self._update(q.delete_node_update(self.graph, iri), naming)
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
        item: Edge = as_model(Edge, edge)
        ends = (self._node_iri(item.from_id), self._edge_iri(item.id))
        checked = [ends[1], ends[0], self._node_iri(item.to_id)]
        with self._writing(*ends, prefetch=checked) as index:
            self._check_edge(item, index)
            self._update(self._insert_edge(item), ends)
            if index is not None:
                index.link(
                    self._node_iri(item.from_id), self._node_iri(item.to_id), q.EDGE_BIT[item.type]
                )
        return item

    def add_edges(self, edges: Iterable[Edge | Mapping[str, Any]]) -> int:
        """Store many new edges between stored nodes in one write; returns how many.

        Raises:
            DecisionGraphError: an id repeated in ``edges`` or already stored, an end that
                is not a stored node, or invalid fields; nothing is written.
        """
        items: list[Edge] = [as_model(Edge, e) for e in edges]
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
        changed = dict.fromkeys([*(end_iri[e.from_id] for e in items), *iris])
        with self._writing(*changed) as index:
            clash = self._existing(iris, q.RM_EDGE_TYPE)
            if clash:
                ids = sorted(q.id_of(i, self._base + "edge/") for i in clash)
                raise DecisionGraphError(f"edges with these ids already exist: {ids[:10]!r}")
            found = self._existing(list(end_iri.values()), q.RM_STATUS)
            if len(found) < len(end_iri):
                ids = sorted(i for i, iri in end_iri.items() if iri not in found)
                raise DecisionGraphError(f"edges to nodes that do not exist: {ids[:10]!r}")
            self._load(lines, changed)
            if index is not None:
                for e in items:
                    index.link(end_iri[e.from_id], end_iri[e.to_id], q.EDGE_BIT[e.type])
        return len(items)

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
        changed = (
            self._node_iri(self._id(old_id)),
            self._node_iri(self._id(new_id)),
            self._edge_iri(edge.id),
        )
        with self._writing(*changed) as index:
            old = self.get_node(old_id)
            self.get_node(new_id)
            updated = self._changed(old, changes)
            iri = self._node_iri(old_id)
            self._check_edge(edge)
            request = q.replace_node_update(self.graph, iri, self._lines_of_node(iri, updated))
            self._update(request + " ;\n" + self._insert_edge(edge), changed)
            self._put(index, iri, updated)
            if index is not None:
                index.link(self._node_iri(new_id), iri, q.EDGE_BIT["supersedes"])
        return edge

    # -- helpers ----------------------------------------------------------------------------

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

    def _check_edge(self, edge: Edge, index: GraphIndex | None = None) -> None:
        # ``index``: the graph's index, exact for this write (``_writing``'s), or None.
        iri = self._edge_iri(edge.id)
        ends = [self._node_iri(end) for end in (edge.from_id, edge.to_id)]
        if self.store.capabilities.embedded:  # three lookups in this process
            found = {i for i in ends if self._has(i, q.RM_STATUS)}
            clash = self._has(iri, q.RM_EDGE_TYPE)
        elif index is not None:  # the ends from the index; the new edge known absent
            found = {i for i in ends if index.value(i) is not None}
            clash = self._present(iri, [])[1]
        else:  # one request for the three
            found, clash = self._present(iri, ends)
        if clash:
            raise DecisionGraphError(f"an edge with id {edge.id!r} already exists")
        for end, end_iri in zip((edge.from_id, edge.to_id), ends, strict=True):
            if end_iri not in found:
                raise DecisionGraphError(
                    f"edge {edge.id!r} goes {edge.from_id!r} -> {edge.to_id!r}, "
                    f"but there is no node {end!r}"
                )

    def _present(self, edge_iri: str, node_iris: Sequence[str]) -> tuple[set[str], bool]:
        """Which of ``node_iris`` are stored nodes, and whether the edge ``edge_iri`` is
        stored, in one query (the IRIs are minted, escaped, by ``_node_iri``/``_edge_iri``),
        or in none when the write's claim brought their triples (``subject_rows``)."""
        pairs = " ".join(
            [f"(<{edge_iri}> {q.RM_EDGE_TYPE})", *(f"(<{i}> {q.RM_STATUS})" for i in node_iris)]
        )
        sparql = (
            f"SELECT DISTINCT ?s ?p WHERE {{ GRAPH <{self.graph}> {{ "
            f"VALUES (?s ?p) {{ {pairs} }} ?s ?p ?o }} }}"
        )
        subjects = [NamedNode(i) for i in (edge_iri, *node_iris)]
        found = subject_rows(self.store, self._graph_term, subjects, sparql)
        rows = [(row["s"].value, row["p"].value) for row in found]
        edge_type = q.RM_EDGE_TYPE[1:-1]
        nodes = {s for s, p in rows if p != edge_type}
        return nodes, any(s == edge_iri and p == edge_type for s, p in rows)

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

    def _update(self, update: str, subjects: Iterable[str]) -> None:
        """One request: ``update``, and a version of each of ``subjects`` (IRIs) when the
        store keeps history (``rdfmem.domain.decision_history``)."""
        self._sent += 1
        self.store.sparql_update(versioned(self.store, self._graph_term, update, subjects))

    def _naming(self, iri: str) -> list[str]:
        """The resources with a triple pointing at ``iri`` (edges, nodes linking to it)."""
        rows = self._rows(
            f"SELECT DISTINCT ?s WHERE {{ GRAPH <{self.graph}> {{ ?s ?p <{iri}> }} }}"
        )
        return [row["s"].value for row in rows if isinstance(row["s"], NamedNode)]

    def _load(self, lines: Sequence[str], subjects: Iterable[str]) -> None:
        if not lines:
            return
        if self.store.keeps_history:  # an update, so the versions land in the same request
            body = "\n".join(lines)
            self._update(f"INSERT DATA {{ GRAPH <{self.graph}> {{\n{body}\n}} }}", subjects)
            return
        data = ("\n".join(lines) + "\n").encode("utf-8")
        self._sent += 1
        self.store.load(data, format="ntriples", graph=self._graph_term)


def _repeated(ids: Iterable[str]) -> str | None:
    seen: set[str] = set()
    for item in ids:
        if item in seen:
            return item
        seen.add(item)
    return None
