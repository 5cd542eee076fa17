"""The decision graph contract (Nous.Decisions, plus what rdfmem adds), on every backend."""

from __future__ import annotations

import datetime as dt
import re
import warnings
from itertools import pairwise
from pathlib import Path

import pytest
import rdflib
from pydantic import ValidationError
from pyoxigraph import Literal, NamedNode, RdfFormat, Store, Variable

from rdfmem import DecisionGraphError, NodeNotFound, RdfStore
from rdfmem.core.ontology import named_query, ontology_path
from rdfmem.decisions import DEFAULT_GRAPH, DecisionGraph, Edge, Node

UTC = dt.timezone.utc
T0 = dt.datetime(2025, 3, 1, 9, 30, tzinfo=UTC)
HOSTILE = [
    'say "hi"',
    "a > b < c",
    "line one\nline two\r\n",
    "café ☕ 日本",
    "} ; DROP ALL ; #",
    "<urn:x> . ?s ?p ?o",
    "'single' \\ back\\slash",
    "%41 already/escaped?#",
]


def test_both_import_paths_give_the_same_public_names() -> None:
    import rdfmem.decisions as public
    import rdfmem.domain.decisions as domain

    assert public.__all__ == domain.__all__
    assert {"DEFAULT_GRAPH", "DecisionGraph", "Edge", "EdgeType", "Node", "NodeType"} <= set(
        public.__all__
    )
    for name in public.__all__:
        assert getattr(public, name) is getattr(domain, name)


@pytest.fixture
def graph(store: RdfStore) -> DecisionGraph:
    return DecisionGraph(store)


def node(node_id: str, type: str = "decision", **fields: object) -> Node:
    return Node(id=node_id, type=type, label=fields.pop("label", node_id.upper()), **fields)  # type: ignore[arg-type]


def ids(nodes: list[Node]) -> list[str]:
    return [n.id for n in nodes]


def link(graph: DecisionGraph, *pairs: str, type: str = "leads_to") -> None:
    """Edges ``"a>b"``, in that order."""
    for pair in pairs:
        a, b = pair.split(">")
        graph.add_edge(Edge(from_id=a, to_id=b, type=type))  # type: ignore[arg-type]


def nodes_of(graph: DecisionGraph, *names: str, type: str = "action") -> None:
    for name in names:
        graph.add_node(node(name, type))


# -- nodes ---------------------------------------------------------------------------------------


def test_node_round_trips_every_field(graph: DecisionGraph) -> None:
    written = Node(
        id="d1",
        type="decision",
        label="Use RDF for memory",
        status="completed",
        confidence=0.75,
        rationale="SPARQL gives paths for free",
        metadata={"tags": ["storage", "rdf"], "cost": 1.5, "nested": {"ok": True, "n": None}},
        created_at=dt.datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
        updated_at=dt.datetime(2025, 1, 3, 3, 4, 5, 120000, tzinfo=UTC),
    )
    assert graph.add_node(written) == written
    assert graph.get_node("d1") == written


def test_defaults_of_a_new_node() -> None:
    made = Node(type="goal", label="Ship v1")
    assert re.fullmatch(r"[0-9a-f]{32}", made.id)
    assert (made.status, made.confidence, made.rationale, made.metadata) == (
        "active",
        None,
        None,
        {},
    )
    assert made.created_at.tzinfo is UTC and made.updated_at == made.created_at
    assert Node(type="goal", label="x").id != made.id
    later = Node(type="goal", label="y")
    assert later.created_at > made.created_at  # creation order is never a tie


def test_times_are_utc_with_microseconds() -> None:
    naive = Node(type="goal", label="x", created_at=dt.datetime(2025, 1, 1, 12, 0, 0, 5))
    assert naive.created_at == dt.datetime(2025, 1, 1, 12, 0, 0, 5, tzinfo=UTC)
    paris = dt.timezone(dt.timedelta(hours=2))
    other = Node(type="goal", label="x", created_at=dt.datetime(2025, 1, 1, 14, tzinfo=paris))
    assert other.created_at.tzinfo is UTC and other.created_at.hour == 12


@pytest.mark.parametrize(
    "fields",
    [
        {"type": "plan"},
        {"status": "done"},
        {"confidence": 1.5},
        {"confidence": -0.1},
        {"confidence": float("nan")},
        {"id": ""},
        {"metadata": {"x": float("nan")}},
        {"metadata": {"x": {1, 2}}},
        {"colour": "red"},
    ],
)
def test_invalid_node_fields_are_refused(fields: dict[str, object]) -> None:
    data: dict[str, object] = {"type": "goal", "label": "x", **fields}
    with pytest.raises(ValidationError):
        Node(**data)  # type: ignore[arg-type]


def test_missing_node_raises_node_not_found(graph: DecisionGraph) -> None:
    with pytest.raises(NodeNotFound) as caught:
        graph.get_node("nope")
    assert caught.value.node_id == "nope"
    assert isinstance(caught.value, KeyError)
    assert "nope" in str(caught.value)


def test_duplicate_node_id_is_an_error_and_keeps_the_first(graph: DecisionGraph) -> None:
    graph.add_node(node("a", label="first"))
    with pytest.raises(DecisionGraphError, match="'a' already exists"):
        graph.add_node(node("a", label="second"))
    assert graph.get_node("a").label == "first"


def test_add_node_takes_a_mapping(graph: DecisionGraph) -> None:
    made = graph.add_node({"id": "g", "type": "goal", "label": "Ship"})
    assert graph.get_node("g") == made
    with pytest.raises(DecisionGraphError, match="invalid Node"):
        graph.add_node({"id": "h", "type": "wish", "label": "x"})
    with pytest.raises(NodeNotFound):
        graph.get_node("h")


def test_update_node_sets_updated_at_and_keeps_created_at(graph: DecisionGraph) -> None:
    before = graph.add_node(node("a", "goal", confidence=0.2))
    after = graph.update_node("a", {"status": "completed", "confidence": 0.9})
    assert (after.status, after.confidence, after.label) == ("completed", 0.9, "A")
    assert after.created_at == before.created_at
    assert after.updated_at > before.updated_at
    assert graph.get_node("a") == after
    assert graph.update_node("a", label="Renamed", rationale=None).label == "Renamed"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"id": "b"}, "cannot change id"),
        ({"created_at": T0}, "cannot change created_at"),
        ({"colour": "red"}, "cannot change colour"),
        ({"confidence": 2.0}, "invalid change"),
        ({"status": "paused"}, "invalid change"),
    ],
)
def test_bad_update_changes_nothing(
    graph: DecisionGraph, changes: dict[str, object], message: str
) -> None:
    before = graph.add_node(node("a", confidence=0.5))
    with pytest.raises(DecisionGraphError, match=message):
        graph.update_node("a", changes)
    assert graph.get_node("a") == before


def test_update_of_a_missing_node_raises(graph: DecisionGraph) -> None:
    with pytest.raises(NodeNotFound):
        graph.update_node("ghost", {"status": "completed"})


def test_delete_node_removes_every_edge_touching_it(graph: DecisionGraph) -> None:
    nodes_of(graph, "a", "b", "c", "d")
    link(graph, "a>b", "b>c", "c>b", "b>d", "d>a")
    assert graph.delete_node("b") is True
    with pytest.raises(NodeNotFound):
        graph.get_node("b")
    assert graph.get_edges("a") == []
    assert graph.get_edges("c") == []
    assert graph.get_edges("a", "incoming")[0].from_id == "d"
    assert ids(graph.query("descendants", node_id="a")) == []
    assert ids(graph.query("ancestors", node_id="a")) == ["d"]
    assert graph.delete_node("b") is False
    assert graph.store.count(subject=graph._node_iri("b")) == 0
    assert graph.store.count(object=graph._node_iri("b")) == 0


# -- edges ---------------------------------------------------------------------------------------


def test_edges_round_trip_by_direction(graph: DecisionGraph) -> None:
    nodes_of(graph, "a", "b", "c")
    first = graph.add_edge(
        Edge(id="e1", from_id="a", to_id="b", type="chosen", metadata={"why": "cheap"})
    )
    second = graph.add_edge(Edge(id="e2", from_id="a", to_id="c", type="rejected"))
    graph.add_edge(Edge(id="e3", from_id="c", to_id="a", type="blocks"))
    assert graph.get_edges("a") == [first, second]
    assert graph.get_edges("a", "outgoing") == [first, second]
    assert ids(graph.get_edges("a", "incoming")) == ["e3"]  # type: ignore[arg-type]
    assert graph.get_edges("b", "outgoing") == []
    assert graph.get_edges("nope", "incoming") == []
    with pytest.raises(DecisionGraphError, match="'outgoing' or 'incoming'"):
        graph.get_edges("a", "both")  # type: ignore[arg-type]


def test_edge_to_a_missing_node_is_an_error(graph: DecisionGraph) -> None:
    nodes_of(graph, "a")
    with pytest.raises(DecisionGraphError, match="no node 'ghost'"):
        graph.add_edge(Edge(from_id="a", to_id="ghost", type="leads_to"))
    with pytest.raises(DecisionGraphError, match="no node 'ghost'"):
        graph.add_edge(Edge(from_id="ghost", to_id="a", type="leads_to"))
    assert graph.get_edges("a") == [] and graph.get_edges("a", "incoming") == []


def test_duplicate_edge_id_is_an_error(graph: DecisionGraph) -> None:
    nodes_of(graph, "a", "b")
    graph.add_edge(Edge(id="e", from_id="a", to_id="b", type="leads_to"))
    with pytest.raises(DecisionGraphError, match="'e' already exists"):
        graph.add_edge(Edge(id="e", from_id="b", to_id="a", type="leads_to"))
    assert graph.get_edges("b") == []


def test_two_edges_between_the_same_nodes_are_both_kept(graph: DecisionGraph) -> None:
    nodes_of(graph, "a", "b")
    link(graph, "a>b", "a>b", type="requires")
    link(graph, "a>b", type="enables")
    assert [e.type for e in graph.get_edges("a")] == ["requires", "requires", "enables"]
    assert ids(graph.query("descendants", node_id="a")) == ["b"]


def test_bulk_adds_are_all_or_nothing(graph: DecisionGraph) -> None:
    assert graph.add_nodes([node("a"), node("b"), {"id": "c", "type": "goal", "label": "C"}]) == 3
    with pytest.raises(DecisionGraphError, match="'d' appears twice"):
        graph.add_nodes([node("d"), node("d")])
    with pytest.raises(DecisionGraphError, match=r"already exist: \['b'\]"):
        graph.add_nodes([node("e"), node("b")])
    for missing in ("d", "e"):
        with pytest.raises(NodeNotFound):
            graph.get_node(missing)
    edges = [Edge(id="ab", from_id="a", to_id="b", type="leads_to")]
    assert graph.add_edges(edges) == 1
    with pytest.raises(DecisionGraphError, match="already exist"):
        graph.add_edges([Edge(id="bc", from_id="b", to_id="c", type="leads_to"), *edges])
    with pytest.raises(DecisionGraphError, match=r"do not exist: \['zz'\]"):
        graph.add_edges([Edge(id="bz", from_id="b", to_id="zz", type="leads_to")])
    assert graph.get_edges("b") == []
    assert graph.add_nodes([]) == 0 and graph.add_edges([]) == 0


# -- named queries -------------------------------------------------------------------------------


def test_recent_decisions_newest_first_limited_and_only_decisions(graph: DecisionGraph) -> None:
    for label in ("First", "Second", "Third"):
        graph.add_node(Node(type="decision", label=label))
        graph.add_node(Node(type="action", label=label + " action"))
    recent = graph.query("recent_decisions", limit=2)
    assert [n.label for n in recent] == ["Third", "Second"]
    everything = graph.query("recent_decisions")
    assert [n.label for n in everything] == ["Third", "Second", "First"]
    assert graph.query("recent_decisions", limit=0) == []


def test_recent_decisions_defaults_to_ten(graph: DecisionGraph) -> None:
    graph.add_nodes(
        Node(type="decision", label=f"d{i}", created_at=T0 + dt.timedelta(minutes=i))
        for i in range(12)
    )
    recent = graph.query("recent_decisions")
    assert [n.label for n in recent] == [f"d{i}" for i in range(11, 1, -1)]


def test_recent_decisions_is_stable_when_times_tie(graph: DecisionGraph) -> None:
    graph.add_nodes(Node(id=i, type="decision", label=i, created_at=T0) for i in "bdac")
    graph.add_node(Node(id="new", type="decision", label="new", created_at=T0 + dt.timedelta(1)))
    first = ids(graph.query("recent_decisions"))
    assert first == ["new", "d", "c", "b", "a"]
    assert ids(graph.query("recent_decisions", limit=3)) == first[:3]


def test_active_goals(graph: DecisionGraph) -> None:
    graph.add_nodes(
        [
            node("g1", "goal"),
            node("g2", "goal", status="completed"),
            node("g3", "goal"),
            node("d1", "decision"),
        ]
    )
    assert ids(graph.query("active_goals")) == ["g1", "g3"]
    graph.update_node("g1", status="superseded")
    assert ids(graph.query("active_goals")) == ["g3"]


def diamond(graph: DecisionGraph) -> None:
    # a -> b -> d -> f, a -> c -> e -> f, c -> d, f -> a (a cycle back to the start)
    nodes_of(graph, "a", "b", "c", "d", "e", "f")
    link(graph, "a>b", "a>c", "b>d", "c>d", "c>e", "d>f", "e>f", "f>a")


def test_descendants_breadth_first_without_the_start(graph: DecisionGraph) -> None:
    diamond(graph)
    assert ids(graph.query("descendants", node_id="a")) == ["b", "c", "d", "e", "f"]
    assert ids(graph.query("descendants", node_id="e")) == ["f", "a", "b", "c", "d"]
    assert graph.query("descendants", node_id="missing") == []


def test_ancestors_breadth_first_without_the_start(graph: DecisionGraph) -> None:
    diamond(graph)
    assert ids(graph.query("ancestors", node_id="f")) == ["d", "e", "b", "c", "a"]
    assert ids(graph.query("ancestors", node_id="b")) == ["a", "f", "d", "e", "c"]
    assert graph.query("ancestors", node_id="missing") == []


def test_descendants_of_a_leaf_and_ancestors_of_a_root(graph: DecisionGraph) -> None:
    nodes_of(graph, "root", "leaf", "alone")
    link(graph, "root>leaf")
    assert graph.query("descendants", node_id="leaf") == []
    assert graph.query("ancestors", node_id="root") == []
    assert graph.query("descendants", node_id="alone") == []
    assert graph.query("descendants", node_id="root") == [graph.get_node("leaf")]


def test_siblings_come_oldest_first(graph: DecisionGraph) -> None:
    graph.add_nodes(
        node(name, created_at=T0 + dt.timedelta(seconds=i))
        for i, name in enumerate(["root", "z", "y", "x"])
    )
    link(graph, "root>x", "root>z", "root>y")
    assert ids(graph.query("descendants", node_id="root")) == ["z", "y", "x"]


def test_path_between(graph: DecisionGraph) -> None:
    diamond(graph)
    assert ids(graph.query("path_between", from_id="a", to_id="f")) == ["a", "b", "d", "f"]
    assert ids(graph.query("path_between", from_id="e", to_id="d")) == ["e", "f", "a", "b", "d"]
    assert ids(graph.query("path_between", from_id="c", to_id="c")) == ["c"]
    nodes_of(graph, "island")
    assert graph.query("path_between", from_id="a", to_id="island") == []
    assert graph.query("path_between", from_id="a", to_id="missing") == []
    assert graph.query("path_between", from_id="missing", to_id="missing") == []
    path = graph.query("path_between", from_id="a", to_id="c")
    assert path == [graph.get_node("a"), graph.get_node("c")]


def test_paths_of_any_length(graph: DecisionGraph) -> None:
    hops = 25  # Nous's DuckDB backend misses paths over 10 hops
    names = [f"n{i:02d}" for i in range(hops + 1)]
    graph.add_nodes(node(n) for n in names)
    graph.add_edges(Edge(from_id=a, to_id=b, type="leads_to") for a, b in pairwise(names))
    assert ids(graph.query("path_between", from_id=names[0], to_id=names[-1])) == names
    assert ids(graph.query("descendants", node_id=names[0])) == names[1:]
    assert ids(graph.query("ancestors", node_id=names[-1])) == names[-2::-1]
    assert graph.query("path_between", from_id=names[-1], to_id=names[0]) == []


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("nope", {}, "no decision query 'nope'"),
        ("descendants", {}, "descendants needs node_id"),
        ("path_between", {"from_id": "a"}, "needs to_id"),
        ("active_goals", {"limit": 3}, "takes no parameters, not limit"),
        ("recent_decisions", {"limit": -1}, "0 or more"),
        ("recent_decisions", {"limit": "5"}, "0 or more"),
        ("recent_decisions", {"limit": True}, "0 or more"),
        ("ancestors", {"node_id": 7}, "a node id is a str"),
    ],
)
def test_bad_queries_are_refused(
    graph: DecisionGraph, name: str, params: dict[str, object], message: str
) -> None:
    with pytest.raises(DecisionGraphError, match=message):
        graph.query(name, **params)


# -- the workflow, supersede ---------------------------------------------------------------------


def test_goal_decision_action_outcome_workflow(graph: DecisionGraph) -> None:
    goal = graph.add_node(Node(type="goal", label="Cut p95 latency under 200 ms"))
    decision = graph.add_node(Node(type="decision", label="Add a cache", confidence=0.7))
    option = graph.add_node(Node(type="option", label="Redis"))
    other = graph.add_node(Node(type="option", label="Memcached"))
    action = graph.add_node(Node(type="action", label="Deploy Redis"))
    outcome = graph.add_node(Node(type="outcome", label="p95 at 140 ms"))
    graph.add_edge(Edge(from_id=goal.id, to_id=decision.id, type="leads_to"))
    graph.add_edge(Edge(from_id=decision.id, to_id=option.id, type="chosen"))
    graph.add_edge(Edge(from_id=decision.id, to_id=other.id, type="rejected"))
    graph.add_edge(Edge(from_id=option.id, to_id=action.id, type="requires"))
    graph.add_edge(Edge(from_id=action.id, to_id=outcome.id, type="leads_to"))
    graph.add_edge(Edge(from_id=outcome.id, to_id=goal.id, type="enables"))  # not lineage
    graph.update_node(goal.id, {"status": "completed"})

    assert graph.query("active_goals") == []
    assert [n.label for n in graph.query("recent_decisions")] == ["Add a cache"]
    path = graph.query("path_between", from_id=goal.id, to_id=outcome.id)
    assert [n.type for n in path] == ["goal", "decision", "option", "action", "outcome"]
    assert [n.label for n in graph.query("descendants", node_id=goal.id)] == [
        "Add a cache",
        "Redis",
        "Memcached",
        "Deploy Redis",
        "p95 at 140 ms",
    ]
    assert ids(graph.query("ancestors", node_id=outcome.id)) == [
        action.id,
        option.id,
        decision.id,
        goal.id,
    ]


def test_supersede_marks_the_old_node_and_links_new_to_old(graph: DecisionGraph) -> None:
    old = graph.add_node(node("old", rationale="first idea"))
    graph.add_node(node("new"))
    edge = graph.supersede("old", "new", "the benchmark says so")
    stored = graph.get_node("old")
    assert stored.status == "superseded"
    assert stored.rationale == "the benchmark says so"
    assert stored.created_at == old.created_at and stored.updated_at > old.updated_at
    assert (edge.from_id, edge.to_id, edge.type) == ("new", "old", "supersedes")
    assert edge.metadata == {"rationale": "the benchmark says so"}
    assert graph.get_edges("new") == [edge]
    # supersedes is not lineage: "new" did not come out of "old", nor "old" out of "new"
    assert graph.query("descendants", node_id="new") == []
    assert ids(graph.query("path_between", from_id="new", to_id="old")) == ["new", "old"]


def test_supersede_without_a_rationale_keeps_the_old_one(graph: DecisionGraph) -> None:
    graph.add_nodes([node("old", rationale="kept"), node("new")])
    edge = graph.supersede("old", "new")
    assert graph.get_node("old").rationale == "kept"
    assert edge.metadata == {}


def test_supersede_errors_change_nothing(graph: DecisionGraph) -> None:
    before = graph.add_node(node("old"))
    with pytest.raises(NodeNotFound):
        graph.supersede("old", "ghost")
    with pytest.raises(NodeNotFound):
        graph.supersede("ghost", "old")
    with pytest.raises(DecisionGraphError, match="cannot supersede itself"):
        graph.supersede("old", "old")
    assert graph.get_node("old") == before
    assert graph.get_edges("old", "incoming") == []


# -- hostile text, graphs, portability -----------------------------------------------------------


def test_hostile_ids_and_labels_are_stored_and_queried_safely(graph: DecisionGraph) -> None:
    graph.add_node(node("root", "goal"))
    for i, text in enumerate(HOSTILE):
        graph.add_node(Node(id=text, type="decision", label=text, rationale=text))
        graph.add_edge(Edge(id=text, from_id="root" if i == 0 else HOSTILE[i - 1], to_id=text,
                            type="leads_to", metadata={text: text}))  # fmt: skip
    for text in HOSTILE:
        stored = graph.get_node(text)
        assert (stored.id, stored.label, stored.rationale) == (text, text, text)
        assert graph.get_edges(text, "incoming")[0].metadata == {text: text}
    assert ids(graph.query("descendants", node_id="root")) == HOSTILE
    assert ids(graph.query("ancestors", node_id=HOSTILE[-1])) == [*HOSTILE[-2::-1], "root"]
    assert ids(graph.query("path_between", from_id=HOSTILE[0], to_id=HOSTILE[-1])) == HOSTILE
    assert [n.id for n in graph.query("recent_decisions", limit=3)] == HOSTILE[:-4:-1]
    graph.update_node(HOSTILE[4], {"label": HOSTILE[5]})
    assert graph.get_node(HOSTILE[4]).label == HOSTILE[5]
    assert graph.delete_node(HOSTILE[4]) is True
    assert graph.get_node(HOSTILE[3]).label == HOSTILE[3]  # nothing else was touched
    with pytest.raises(NodeNotFound):
        graph.get_node(HOSTILE[4])


def test_two_graphs_on_one_store_stay_apart(store: RdfStore) -> None:
    work = DecisionGraph(store, graph="https://example.org/agent/work")
    home = DecisionGraph(store, graph="https://example.org/agent/home")
    for g in (work, home):
        g.add_nodes([node("a", "goal"), node("b")])
    link(work, "a>b")
    assert ids(work.query("descendants", node_id="a")) == ["b"]
    assert home.query("descendants", node_id="a") == []
    home.delete_node("b")
    assert work.get_node("b").id == "b"
    assert ids(home.query("active_goals")) == ["a"]
    assert work._node_iri("a") == "https://example.org/agent/work/node/a"
    with pytest.raises(DecisionGraphError, match="must be an IRI"):
        DecisionGraph(store, graph="not an iri")


def test_the_decision_graph_lives_in_its_named_graph(graph: DecisionGraph) -> None:
    nodes_of(graph, "a", "b")
    link(graph, "a>b")
    quads = list(graph.store.triples())
    assert quads and all(q.graph_name == NamedNode(DEFAULT_GRAPH) for q in quads)
    rm = "https://w3id.org/rdfmem#"
    a, b = graph._node_iri("a"), graph._node_iri("b")
    assert graph.store.ask(subject=a, predicate=rm + "leadsTo", object=NamedNode(b))
    assert graph.store.ask(subject=a, predicate=rm + "linksTo", object=NamedNode(b))
    rows = graph.store.select(
        [("?e", rm + "fromNode", NamedNode(a)), ("?e", rm + "edgeType", NamedNode(rm + "leadsTo"))]
    )
    assert len(rows) == 1


def test_shipped_queries_run_unchanged_on_a_trig_export(graph: DecisionGraph) -> None:
    diamond(graph)
    trig = graph.store.export("trig")
    # rdflib, on its own, with plain initBindings
    with warnings.catch_warnings():  # rdflib 7.6 calls its own deprecated default_context
        warnings.simplefilter("ignore", DeprecationWarning)
        dataset = rdflib.Dataset()
        dataset.parse(data=trig, format="trig")
        query = named_query("descendants")
        found = dataset.query(query, initBindings={"node_id": rdflib.Literal("a")})
        assert sorted(str(row.id) for row in found) == ["b", "c", "d", "e", "f"]  # type: ignore[union-attr]
    # pyoxigraph, on its own, with SEP-0007 substitutions
    raw = Store()
    raw.load(trig, RdfFormat.TRIG)
    rows = raw.query(named_query("path_between"), substitutions={
        Variable("from_id"): Literal("a"), Variable("to_id"): Literal("f")})  # fmt: skip
    assert [row["id"].value for row in rows] == ["a", "b", "d", "f"]  # type: ignore[index, union-attr]


def test_every_decision_query_is_documented_parses_and_runs(graph: DecisionGraph) -> None:
    diamond(graph)
    graph.add_nodes([node("g", "goal"), node("dd", "decision")])
    folder = ontology_path() / "queries"
    names = [
        "active_goals", "recent_decisions", "path_between", "descendants", "ancestors",
        "descendant_links", "ancestor_links", "decision_node", "decision_edges",
    ]  # fmt: skip
    values = {"node_id": "a", "from_id": "f", "to_id": "a"}
    for name in names:
        text = (folder / f"{name}.rq").read_text(encoding="utf-8")
        params = re.findall(r"^# param: (\w+)", text, flags=re.MULTILINE)
        assert "graph" in params, name
        used = set(re.findall(r"\?(\w+)", text.split("SELECT", 1)[1]))
        assert set(params) <= used, name
        bindings: dict[str, object] = {p: values[p] for p in params if p in values}
        rows = graph.store.query(text, bindings={"graph": NamedNode(graph.graph), **bindings})
        assert len(rows) > 0, name  # type: ignore[arg-type]


def test_the_vocabulary_declares_every_term_in_use() -> None:
    vocab = rdflib.Graph().parse(Path(ontology_path() / "rdfmem.ttl"))
    rm = rdflib.Namespace("https://w3id.org/rdfmem#")
    label = rdflib.RDFS.label
    for name in ("Goal", "Decision", "Option", "Action", "Outcome", "Observation", "Revisit"):
        assert (rm[name], rdflib.RDFS.subClassOf, rm.DecisionNode) in vocab
    for name in ("leadsTo", "chosen", "rejected", "requires", "blocks", "enables", "supersedes"):
        assert (rm[name], rdflib.RDFS.subPropertyOf, rm.linksTo) in vocab
    for name in ("Active", "Completed", "Superseded", "Rejected"):
        assert (rm[name + "Status"], rdflib.SKOS.inScheme, rm.DecisionStatusScheme) in vocab
    for term in ("status", "rationale", "metadata", "confidence", "edgeType", "fromNode", "toNode"):
        assert (rm[term], label, None) in vocab, term


@pytest.mark.parametrize("on_disk", [False, True])
def test_a_graph_built_through_its_writes_is_indexed_from_the_first_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_disk: bool
) -> None:
    """Nodes and edges added to a new store are indexed as they are written, so the first
    ``active_goals`` after building a large graph reads nothing again (issue 21: it read
    the whole graph back, seconds at 20,000 nodes)."""
    store = RdfStore.open(tmp_path / "db") if on_disk else RdfStore()
    graph = DecisionGraph(store)
    graph.add_nodes(
        Node(id=f"n{i}", type="goal" if i % 10 == 0 else "decision", label=f"node {i}")
        for i in range(300)
    )
    graph.add_edges(
        {"from_id": f"n{i}", "to_id": f"n{i + 1}", "type": "leads_to"} for i in range(299)
    )

    def read_whole(self: DecisionGraph) -> None:
        raise AssertionError("the graph was read again whole")

    monkeypatch.setattr(DecisionGraph, "_read_whole", read_whole)
    goals = graph.query("active_goals")
    assert {node.id for node in goals} == {f"n{i}" for i in range(0, 300, 10)}
    assert ids(graph.query("descendants", node_id="n297")) == ["n298", "n299"]
    store.close()
