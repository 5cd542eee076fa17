"""Named decision queries keep their promises on every surface: ``path_between`` is one
shortest path in order, ``descendants``/``ancestors`` follow the lineage edges only, and
Python (``DecisionGraph.query``), the CLI (``rdfmem query --named``) and the server's
``/queries/<name>`` give the same nodes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from pyoxigraph import Literal, NamedNode
from servers import Server

from rdfmem import RdfStore
from rdfmem.cli import cli
from rdfmem.cli.demo import run_demo
from rdfmem.core.ontology import named_query
from rdfmem.decisions import DecisionGraph, Edge, Node
from rdfmem.domain.decision_queries import PATH_EDGES, path_between_text
from rdfmem.server import BackgroundServer

GOALS = {"ship-v2", "p95-200ms"}


def ids(nodes: list[Node]) -> list[str]:
    return [n.id for n in nodes]


def build(graph: DecisionGraph, names: str, edges: list[str], type: str = "leads_to") -> None:
    graph.add_nodes(Node(id=n, type="decision", label=n.upper()) for n in names.split())
    for pair in edges:
        a, b = pair.split(">")
        graph.add_edge(Edge(from_id=a, to_id=b, type=type))  # type: ignore[arg-type]


def diamond_with_cycle(graph: DecisionGraph) -> None:
    # a -> b -> d -> f, a -> c -> e -> f, c -> d, f -> a: two equally short paths a..f
    build(graph, "a b c d e f", ["a>b", "a>c", "b>d", "c>d", "c>e", "d>f", "e>f", "f>a"])


def rq_ids(store: RdfStore, graph: DecisionGraph, name: str, **params: str) -> list[str]:
    """The ids the shipped ``.rq`` text answers, as any SPARQL client runs it."""
    bindings = {"graph": NamedNode(graph.graph), **{k: Literal(v) for k, v in params.items()}}
    return [row["id"].value for row in store.query(named_query(name), bindings=bindings)]  # type: ignore[index, union-attr]


def test_the_shipped_path_query_is_the_generated_text() -> None:
    assert named_query("path_between").endswith(path_between_text())


def test_path_between_is_one_shortest_path_in_order(store: RdfStore) -> None:
    graph = DecisionGraph(store)
    diamond_with_cycle(graph)
    cases = {
        ("a", "f"): ["a", "b", "d", "f"],  # b < c: the smaller of the two shortest paths
        ("e", "d"): ["e", "f", "a", "b", "d"],  # round the cycle
        ("c", "c"): ["c"],
        ("f", "e"): ["f", "a", "c", "e"],
        ("a", "missing"): [],
    }
    for (a, b), want in cases.items():
        assert ids(graph.query("path_between", from_id=a, to_id=b)) == want
        assert rq_ids(store, graph, "path_between", from_id=a, to_id=b) == want


def test_path_between_follows_every_edge_type_and_lineage_queries_do_not(
    store: RdfStore,
) -> None:
    graph = DecisionGraph(store)
    build(graph, "goal act out", ["goal>act", "act>out"])
    graph.add_edge(Edge(from_id="out", to_id="goal", type="enables"))
    assert ids(graph.query("path_between", from_id="out", to_id="act")) == ["out", "goal", "act"]
    assert ids(graph.query("descendants", node_id="out")) == []
    assert ids(graph.query("ancestors", node_id="goal")) == []
    assert rq_ids(store, graph, "descendants", node_id="out") == []
    assert rq_ids(store, graph, "path_between", from_id="out", to_id="act") == [
        "out", "goal", "act",
    ]  # fmt: skip


def test_the_shipped_path_query_stops_at_its_bound_and_python_does_not(store: RdfStore) -> None:
    graph = DecisionGraph(store)
    names = [f"n{i:02d}" for i in range(PATH_EDGES + 2)]
    build(graph, " ".join(names), [f"{a}>{b}" for a, b in pairwise(names)])
    last, beyond = names[PATH_EDGES], names[-1]
    assert rq_ids(store, graph, "path_between", from_id="n00", to_id=last) == names[:-1]
    assert ids(graph.query("path_between", from_id="n00", to_id=last)) == names[:-1]
    assert rq_ids(store, graph, "path_between", from_id="n00", to_id=beyond) == []
    assert ids(graph.query("path_between", from_id="n00", to_id=beyond)) == names


# -- the demo, on the three surfaces -------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    report = run_demo(tmp_path_factory.mktemp("demo") / "d")
    return report.store_path


@pytest.fixture(scope="module")
def served(demo_store: Path) -> Iterator[tuple[DecisionGraph, str]]:
    with RdfStore.open(demo_store) as store, BackgroundServer(store) as server:
        yield DecisionGraph(store), server.url


def cli_ids(store: Path, name: str, **params: str) -> list[str]:
    args = ["query", str(store), "--named", name, "-o", "json"]
    for key, value in params.items():
        args += ["-p", f"{key}={value}"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["results"]["bindings"]
    return [r["id"]["value"] for r in rows]


def server_ids(url: str, name: str, **params: str) -> list[str]:
    answer = httpx.get(f"{url}/queries/{name}", params=params, timeout=30)
    assert answer.status_code == 200, answer.text
    return [r["id"]["value"] for r in answer.json()["results"]["bindings"]]


DEMO_QUERIES: list[tuple[str, dict[str, str]]] = [
    ("path_between", {"from_id": "ship-v2", "to_id": "p95-120ms"}),
    ("path_between", {"from_id": "p95-120ms", "to_id": "pick-backend"}),
    ("path_between", {"from_id": "lru-cache", "to_id": "redis-cache"}),
    ("path_between", {"from_id": "revisit-ranking", "to_id": "ship-v2"}),
    ("descendants", {"node_id": "pick-backend"}),
    ("descendants", {"node_id": "p95-120ms"}),
    ("ancestors", {"node_id": "p95-120ms"}),
    ("active_goals", {}),
    ("recent_decisions", {"limit": "2"}),
]


@pytest.mark.parametrize(("name", "params"), DEMO_QUERIES)
def test_python_cli_and_server_agree_on_the_demo(
    demo_store: Path, served: tuple[DecisionGraph, str], name: str, params: dict[str, str]
) -> None:
    graph, url = served
    given: dict[str, object] = dict(params)
    if "limit" in given:
        given["limit"] = int(params["limit"])
    python = ids(graph.query(name, **given))
    over_http = server_ids(url, name, **params)
    on_the_command_line = cli_ids(demo_store, name, **params) if name == "path_between" else None
    if name in ("descendants", "ancestors"):
        # the .rq lists them oldest first; DecisionGraph breadth-first: the same nodes
        assert sorted(over_http) == sorted(python) and len(set(python)) == len(python)
        oldest = sorted(graph.query(name, **given), key=lambda n: (n.created_at, n.id))
        assert over_http == ids(oldest)
    else:
        assert over_http == python
    if on_the_command_line is not None:
        assert on_the_command_line == python


def test_the_demo_paths_and_lineage(served: tuple[DecisionGraph, str]) -> None:
    graph, _ = served
    path = graph.query("path_between", from_id="ship-v2", to_id="p95-120ms")
    assert ids(path) == ["ship-v2", "pick-backend", "postgres-fts", "gin-index", "p95-120ms"]
    for node_id in ("p95-120ms", "gin-index", "pick-backend"):
        up = set(ids(graph.query("ancestors", node_id=node_id)))
        down = set(ids(graph.query("descendants", node_id=node_id)))
        assert not (up & down), node_id  # nothing is both before and after a node
    assert GOALS & set(ids(graph.query("ancestors", node_id="p95-120ms"))) == GOALS
    assert ids(graph.query("descendants", node_id="p95-120ms")) == [
        "short-queries", "revisit-ranking",
    ]  # fmt: skip


def test_path_between_on_the_command_line_is_a_path_not_links(demo_store: Path) -> None:
    got = cli_ids(demo_store, "path_between", from_id="ship-v2", to_id="p95-120ms")
    assert got == ["ship-v2", "pick-backend", "postgres-fts", "gin-index", "p95-120ms"]


@pytest.fixture
def remote(server: Server) -> Iterator[RdfStore]:
    store = server.connect()
    yield store
    store.close()


def test_the_shipped_queries_on_each_real_server(server: Server, remote: RdfStore) -> None:
    store = remote
    graph = DecisionGraph(store)
    diamond_with_cycle(graph)
    graph.add_node(Node(id="g", type="goal", label="G"))
    graph.add_edge(Edge(from_id="f", to_id="g", type="enables"))
    # Virtuoso's query compiler runs out of memory on the shipped path_between.rq beyond
    # three edges (docs/decisions.md); DecisionGraph does not send it that query
    for a, b in [("a", "f"), ("e", "d"), ("c", "c"), ("a", "g"), ("g", "a")]:
        want = ids(graph.query("path_between", from_id=a, to_id=b))
        if server.name != "virtuoso":
            assert rq_ids(store, graph, "path_between", from_id=a, to_id=b) == want
    assert ids(graph.query("path_between", from_id="a", to_id="g")) == ["a", "b", "d", "f", "g"]
    for name in ("descendants", "ancestors"):
        for node_id in "acfg":
            python = graph.query(name, node_id=node_id)
            oldest = sorted(python, key=lambda n: (n.created_at, n.id))
            assert rq_ids(store, graph, name, node_id=node_id) == ids(oldest)
    assert "g" not in ids(graph.query("descendants", node_id="a"))
