"""The read side of a decision graph: ``DecisionReader`` gets nodes and edges and answers the
five named queries, from the graph's index on an embedded store or by SPARQL on a remote one.

The named queries are the shipped ``ontologies/queries/*.rq`` files: the portable definition,
and the answer on a remote store. On an embedded store they are answered from a
``rdfmem.store.indexes.GraphIndex`` (nodes by type and status and age, links both ways) that
every write of ``DecisionGraph`` changes in its critical section; a write that bypassed it
(raw SPARQL, ``load``, ``clear_graph`` …) makes it rebuild from SPARQL before the next read.
The answers are the same either way (``tests/test_index_properties.py`` holds them to it).

``DecisionGraph`` (``rdfmem.domain.decision_graph``) is a ``DecisionReader`` that also writes.

>>> from rdfmem import RdfStore
>>> reader = DecisionReader(RdfStore())
>>> reader.query("active_goals"), reader.get_edges("nowhere")
([], [])
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from pyoxigraph import Literal as Text
from pyoxigraph import NamedNode

from rdfmem.core.errors import DecisionGraphError, NodeNotFound
from rdfmem.core.results import SelectResult
from rdfmem.domain import decision_history
from rdfmem.domain import decision_queries as q
from rdfmem.domain.decision_models import (
    DEFAULT_GRAPH,
    Direction,
    Edge,
    Node,
    copy_node,
    edge_from_row,
    node_age,
    node_from_row,
)
from rdfmem.domain.embeddings import PATCH_LIMIT
from rdfmem.domain.node_copies import NodeCopies
from rdfmem.store.background import started
from rdfmem.store.history_reads import Version
from rdfmem.store.indexes import GraphIndex, IndexHub
from rdfmem.store.indexes.graph_follow import NodeRow, graph_follower, patch_subjects
from rdfmem.store.known_rows import subject_rows
from rdfmem.store.own_rows import on_server, own_table
from rdfmem.store.rdfstore import RdfStore

__all__ = ["DecisionReader"]


class DecisionReader:
    """The reads of a decision graph in one named graph of an ``RdfStore`` (any backend).

    Node ``x`` of graph ``G`` is ``<G/node/x>`` (the id percent-escaped, so any text is a
    safe id) and edge ``e`` is ``<G/edge/e>``.

    Args:
        store: where the triples live.
        graph: the named graph holding the decision graph (an IRI).

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
        # What the index's answers hand out: copies, given again once released unchanged.
        self._copies = NodeCopies()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.store!r}, graph={self.graph!r})"

    @contextmanager
    def _reading(self) -> Iterator[GraphIndex | None]:
        # The graph's index, fresh (rebuilt from SPARQL when a write bypassed it), under the
        # write lock so no write is half applied; on a remote store with the change log, the
        # index this process follows the log with; None on any other remote store.
        hub = self.store.indexes
        if hub is None:
            follower = graph_follower(self.store)
            if follower is None:
                yield None
                return
            with follower.lock:
                yield follower.fresh(self.graph, self._read_whole, self._read_some)
            return
        with hub.reading():
            yield self._fresh_index(hub)

    def _fresh_index(self, hub: IndexHub) -> GraphIndex:
        # The graph's index brought up to date (call under the write lock): read again
        # whole after a write that bypassed it, or subject by subject (the journal).
        index = hub.graph_index(self.graph)
        if not hub.fresh(index.seen, (self.graph,)):
            changed = hub.changed(index.seen, (self.graph,))
            if changed is None or len(changed) > PATCH_LIMIT:
                self._rebuild(index)
            else:  # another process's writes, subject by subject (the journal)
                patch_subjects(index, sorted(s for _, s in changed), self._read_some)
            index.seen = hub.generation
        return index

    def _rebuild(self, index: GraphIndex) -> None:
        index.rebuild(*self._read_whole())

    def _read_whole(self) -> tuple[list[NodeRow], list[tuple[str, str, int]]]:
        # Every node and link of the graph, as GraphIndex takes them; on a server, the
        # links read on a thread meanwhile (the server answers it while this parses nodes).
        links = q.all_links_query(self.graph)
        if not on_server(self.store):
            return self._node_rows(q.all_nodes_query(self.graph)), self._link_rows(links)
        later = started(lambda: self._link_rows(links))
        nodes = self._node_rows(q.all_nodes_query(self.graph))
        return nodes, later()

    def _read_some(self, iris: Sequence[str]) -> tuple[list[NodeRow], list[tuple[str, str, int]]]:
        # The nodes among ``iris`` and the links leaving them.
        nodes: list[NodeRow] = []
        links: list[tuple[str, str, int]] = []
        bit = _BIT_OF_PROPERTY
        for i in range(0, len(iris), 500):
            chunk = iris[i : i + 500]
            # One request for both (a remote or attached store pays per request): rows of
            # the first half bind ``?node``, rows of the second ``?source``.
            both = (
                f"SELECT * WHERE {{ {{ {q.nodes_query(self.graph, chunk)} }} UNION "
                f"{{ {q.links_from_query(self.graph, chunk)} }} }}"
            )
            # An attached process may know those subjects' triples: read here, then.
            subjects = [NamedNode(i) for i in chunk]
            for row in subject_rows(self.store, self._graph_term, subjects, both):
                if row.get("node") is not None:
                    node = node_from_row(row)
                    nodes.append((row["node"].value, node.type, node.status, node_age(node), node))
                else:
                    links.append(
                        (row["source"].value, row["target"].value, bit[row["property"].value])
                    )
        return nodes, links

    def _node_rows(self, sparql: str) -> list[NodeRow]:
        # Parsed once on a server, into tuples (``own_table``); a node reads its fields by
        # name from a dict of them (unbound ones None, as ``row.get`` gives).
        names, table = own_table(self.store, sparql)
        rows: list[NodeRow] = []
        for values in table:
            row = dict(zip(names, values, strict=True))
            node = node_from_row(row)
            rows.append((row["node"].value, node.type, node.status, node_age(node), node))
        return rows

    def _link_rows(self, sparql: str) -> list[tuple[str, str, int]]:
        bit = _BIT_OF_PROPERTY
        names, table = own_table(self.store, sparql)
        s, p, t = names.index("source"), names.index("property"), names.index("target")
        return [(r[s].value, r[t].value, bit[r[p].value]) for r in table]

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

    def _nodes(self, sparql: str, **bindings: Any) -> list[Node]:
        return [node_from_row(row) for row in self._select(sparql, **bindings)]

    @staticmethod
    def _by_iri(rows: SelectResult) -> dict[str, Node]:
        return {row["node"].value: node_from_row(row) for row in rows}

    # -- nodes and edges --------------------------------------------------------------------

    def get_node(self, node_id: str, *, as_of: _dt.datetime | None = None) -> Node:
        """The node with this id (as it was at ``as_of``, on a store keeping history; a
        naive datetime means UTC).

        Raises:
            NodeNotFound: no such node (then).
            HistoryUnavailable: ``as_of`` on a store keeping no history.
        """
        if as_of is not None:
            iri = self._node_iri(self._id(node_id))
            then = decision_history.node_as_of(self.store, self._graph_term, iri, as_of)
            if then is None:
                raise NodeNotFound(node_id)
            return then
        with self._reading() as index:
            if index is not None:
                stored = index.value(self._node_iri(self._id(node_id)))
                if stored is None:
                    raise NodeNotFound(node_id)
                return copy_node(stored)
        found = self._nodes(q.query_text("decision_node"), node_id=Text(self._id(node_id)))
        if not found:
            raise NodeNotFound(node_id)
        return found[0]

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
        return [edge_from_row(row) for row in rows]

    # -- named queries ----------------------------------------------------------------------

    def history(self, node_id: str) -> list[Version]:
        """Every version of the node, oldest first: ``.value`` the ``Node`` it was (None
        once deleted), ``.at`` (UTC), ``.by``, ``.why``, ``.deleted``; ``[]`` when it never
        had one (``rdfmem.domain.decision_history``).

        Raises:
            HistoryUnavailable: the store keeps no history.
            DecisionGraphError: ``node_id`` is not a str.
        """
        iri = self._node_iri(self._id(node_id))
        return decision_history.node_versions(self.store, self._graph_term, iri)

    def query(self, name: str, as_of: _dt.datetime | None = None, **params: Any) -> list[Node]:
        """Run a named query of ``ontologies/queries``; returns nodes. ``as_of``: over the
        graph as it was then (a store keeping history: the graph rebuilt from its versions,
        ``rdfmem.domain.decision_history``).

        * ``active_goals``: active goals, oldest first;
        * ``recent_decisions`` (``limit=10``): decisions, newest first;
        * ``path_between`` (``from_id``, ``to_id``): the nodes of a shortest path along
          edges of every type (in their direction), both ends included, the smallest in
          IRI order among equally short ones; ``[from]`` when they are equal, ``[]`` when
          there is no path; of any length (the shipped ``.rq`` stops at
          ``PATH_EDGES`` edges);
        * ``descendants`` / ``ancestors`` (``node_id``): every node reachable from (that
          reaches) the node along ``leads_to``, ``chosen``, ``rejected`` and ``requires``
          edges (``LINEAGE``; not ``blocks``, ``enables``, ``supersedes``), breadth-first (by
          distance from the node, then oldest first, then by id), the node itself left out
          even in a cycle; ``[]`` for a missing node.

        Raises:
            DecisionGraphError: an unknown query, a missing or unknown parameter, a ``limit``
                that is not an int of 0 or more.
            HistoryUnavailable: ``as_of`` on a store keeping no history.
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
        if as_of is not None:
            past = decision_history.past_store(self.store, self._graph_term, as_of)
            try:
                return DecisionReader(past, self.graph).query(name, **params)
            finally:
                past.close()
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
            iris = index.reachable(start, backwards=name == "ancestors", mask=q.LINEAGE_MASK)
        value = index.value
        return self._copies.copies((iri, value(iri)) for iri in iris)

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
            ordered += sorted((n for n in by_iri.values() if n.id not in placed), key=node_age)
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
        rows = self._rows(q.path_links_query(self.graph, first))
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


_BIT_OF_PROPERTY = q.LINK_PROPERTY_BIT


def _item_age(item: tuple[str, Node]) -> tuple[_dt.datetime, str]:
    return node_age(item[1])
