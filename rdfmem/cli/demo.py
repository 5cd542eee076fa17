"""``rdfmem demo``: a realistic agent memory on disk, every named query run on it, an export.

The story: a coding agent is asked to ship a search API. It sets goals, weighs options,
chooses one, acts, observes the outcome, and revises an earlier decision (which becomes
``superseded``). Alongside sit its key/value working state, the generalisations it drew and
the memories it keeps, all in one on-disk store that any SPARQL tool can read once served.
The store keeps history: a memory the agent revised after a load test shows its versions,
who wrote each and why (the ``history``, ``as_of`` and ``changes_since`` queries).

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as folder:
...     report = run_demo(folder)
...     [len(s.rows) for s in report.queries if s.name == "active_goals"]
[2]
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pyoxigraph import Literal

from rdfmem.core.errors import RdfMemError
from rdfmem.core.ontology import PREFIXES
from rdfmem.core.results import GraphResult, Row, SelectResult
from rdfmem.domain.context import ContextUpdate
from rdfmem.domain.decision_queries import NODE_QUERIES
from rdfmem.domain.embeddings import FLOAT32_VECTOR
from rdfmem.server.named import list_named_queries
from rdfmem.store.history import HISTORY_PREFIX
from rdfmem.store.rdfstore import RdfStore

__all__ = ["DemoReport", "QuerySection", "build_memory", "run_demo"]

#: Marks a folder as made by ``rdfmem demo``, so a second run may replace it.
MARKER = ".rdfmem-demo"
PROJECT = "search-api"
SESSION = "2024-06-03-standup"
GROUP = "search-team"
#: The agent the store's writes are attributed to, and the one that revised a memory.
AGENT = "urn:rdfmem:agent:coding-agent"
LOAD_TESTER = "urn:rdfmem:agent:load-tester"


@dataclass
class QuerySection:
    """One named query's run: its name, the parameters bound, and the rows."""

    name: str
    title: str
    sparql_params: str
    variables: list[str]
    rows: list[Row]


@dataclass
class DemoReport:
    """What ``run_demo`` built, ran and wrote."""

    folder: Path
    store_path: Path
    export_path: Path
    dataset_path: Path
    built: list[str] = field(default_factory=list)
    queries: list[QuerySection] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    prefixes: dict[str, str] = field(default_factory=dict)


# -- the parts of the memory ------------------------------------------------------------------


def _working_state(store: RdfStore, demo: _Demo) -> None:
    agent = store.with_namespace("agent")
    agent.set("task", "Ship the v2 search API")
    agent.set("token_budget", 120_000)
    agent.set("open_files", ["api/search.py", "db/migrations/0042_search_index.sql"])
    ContextUpdate().set("phase", "implementation").append("done", "spike: Postgres FTS").merge(
        "limits", {"p95_ms": 200, "max_results": 50}
    ).apply(agent)
    agent.update("token_budget", lambda n: (n or 0) - 18_500)
    session = store.with_namespace("session")
    session.set("user", "eli")
    session.set("last_question", "Can search stay under 200 ms at p95?")
    demo.built.append(
        f"key/value: {len(agent.keys())} keys in namespace 'agent', "
        f"{len(session.keys())} in 'session'"
    )


def _decisions(store: RdfStore, demo: _Demo) -> None:
    from rdfmem.domain.decisions import DecisionGraph, Edge, Node

    graph = DecisionGraph(store)

    def node(id: str, kind: Any, label: str, **extra: Any) -> str:
        return str(graph.add_node(Node(id=id, type=kind, label=label, **extra)).id)

    ship = node("ship-v2", "goal", "Ship the v2 search API by Friday", confidence=0.8)
    fast = node("p95-200ms", "goal", "Keep search p95 latency under 200 ms", confidence=0.9)
    choose = node(
        "pick-backend",
        "decision",
        "Choose a search backend",
        rationale="The API needs ranked full-text search over 2M documents.",
        confidence=0.75,
    )
    postgres = node("postgres-fts", "option", "Postgres full-text search", metadata={"ops": 0})
    elastic = node("elasticsearch", "option", "Elasticsearch cluster", metadata={"ops": 2})
    meili = node("meilisearch", "option", "Meilisearch", metadata={"ops": 1})
    index = node("gin-index", "action", "Add a GIN index on documents.body", status="completed")
    outcome = node(
        "p95-120ms",
        "outcome",
        "p95 fell from 340 ms to 120 ms",
        status="completed",
        confidence=0.95,
        metadata={"p95_before_ms": 340, "p95_after_ms": 120},
    )
    seen = node("short-queries", "observation", "Ranking is weak for very short queries")
    redis = node(
        "redis-cache",
        "decision",
        "Cache search results in Redis",
        rationale="Repeated queries dominate traffic.",
        confidence=0.6,
    )
    lru = node(
        "lru-cache",
        "decision",
        "Cache search results in-process with an LRU",
        rationale="No new service to run; the same hit rate in the load test.",
        confidence=0.8,
    )
    revisit = node("revisit-ranking", "revisit", "Revisit ranking once click data exists")
    for a, b, kind in [
        (ship, choose, "leads_to"),
        (fast, choose, "leads_to"),
        (choose, postgres, "chosen"),
        (choose, elastic, "rejected"),
        (choose, meili, "rejected"),
        (postgres, index, "requires"),
        (index, outcome, "leads_to"),
        (outcome, fast, "enables"),
        (outcome, seen, "leads_to"),
        (seen, revisit, "leads_to"),
        (ship, redis, "leads_to"),
    ]:
        graph.add_edge(Edge(from_id=a, to_id=b, type=kind))  # type: ignore[arg-type]
    graph.supersede(redis, lru, rationale="Redis adds a service for no measured gain.")
    graph.add_edge(Edge(from_id=ship, to_id=lru, type="leads_to"))
    demo.decisions = graph
    demo.values.update({"from_id": ship, "to_id": outcome, "node_id": choose, "limit": "5"})
    demo.overrides["ancestors"] = {"node_id": outcome}
    demo.overrides["ancestor_links"] = {"node_id": outcome}
    demo.overrides["decision_edges"] = {"from_id": choose}
    demo.prefixes["node"] = graph.graph + "/node/"
    demo.prefixes["edge"] = graph.graph + "/edge/"
    demo.built.append(
        "decision graph: 2 goals, 3 decisions (one superseded), 3 options, an action, "
        "an outcome, an observation, a revisit, 12 edges"
    )


def _generalisations(store: RdfStore, demo: _Demo) -> None:
    from rdfmem.domain.generalisations import Generalisation, Generalisations

    gens = Generalisations(store, GROUP)
    gens.add(Generalisation("gin-index", "A GIN index cut p95 search latency by 65%.", 0, 0.9))
    gens.add(
        Generalisation("short-queries", "Full-text ranking is weak on one-word queries.", 0, 0.7)
    )
    gens.add(
        Generalisation(
            "index-first",
            "Try an index on the existing database before adding a search service.",
            1,
            0.8,
            ["gin-index"],
        )
    )
    gens.add(
        Generalisation(
            "fewer-services",
            "Prefer fewer moving parts: a new service must earn its operating cost.",
            2,
            0.75,
            ["index-first", "short-queries"],
        )
    )
    demo.values.update({"level": "1", "id": "fewer-services"})
    demo.prefixes["gen"] = gens.subject("x").value[:-1]
    demo.built.append(f"generalisations: 4 in group '{GROUP}', levels 0 to 2")


def _memories(store: RdfStore, demo: _Demo) -> None:
    from rdfmem.domain.memories import Memories, Memory

    memories = Memories(store, project=PROJECT, session=SESSION)
    for scope, title, content, topics in [
        ("global", "Eli's Preferences", "Eli wants short answers and a benchmark.", ["people"]),
        (
            "project",
            "Search Latency",
            "p95 must stay under 200 ms; it is 340 ms today.",
            ["latency", "search"],
        ),
        (
            "project",
            "Deploy Steps",
            "Run the migration, warm the cache, then flip the feature flag.",
            ["deploy"],
        ),
        (
            "session",
            "Standup Notes",
            "Asked whether search stays fast; answer: yes, 120 ms at p95.",
            ["latency"],
        ),
    ]:
        memories.save(Memory(scope, title, content, topics))
    before = datetime.now(timezone.utc)
    with store.attributed(by=LOAD_TESTER, why="load test after the GIN index"):
        latency = memories.read("project", "Search Latency")
        memories.save(
            latency.model_copy(
                update={
                    "content": "p95 must stay under 200 ms; the GIN index got it to 120 ms.",
                    "embeddings": None,
                }
            )
        )
    revised = f"urn:rdfmem:memory:project:{PROJECT}:search-latency"
    moment = before.isoformat(timespec="microseconds").replace("+00:00", "Z")
    demo.overrides["history"] = {"resource": revised}
    demo.overrides["as_of"] = {"resource": revised, "moment": moment}
    demo.overrides["changes_since"] = {"since": moment}
    demo.values["topic"] = "latency"
    demo.prefixes["memory"] = "urn:rdfmem:memory:"
    demo.built.append(
        f"memories: 4 across global, project '{PROJECT}' and session '{SESSION}'; "
        "one revised after a load test (its history: 2 versions, who and why)"
    )


# -- running it -------------------------------------------------------------------------------


@dataclass
class _Demo:
    """What the parts of the demo leave for the queries that follow."""

    values: dict[str, str] = field(default_factory=dict)
    overrides: dict[str, dict[str, str]] = field(default_factory=dict)
    prefixes: dict[str, str] = field(default_factory=lambda: dict(PREFIXES))
    built: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    decisions: Any = None


def build_memory(store: RdfStore) -> _Demo:
    """Fill ``store`` with the demo memory; a part whose module is missing is skipped (and
    said so in ``skipped``)."""
    demo = _Demo()
    parts: list[tuple[str, Callable[[RdfStore, _Demo], None]]] = [
        ("key/value state", _working_state),
        ("decision graph", _decisions),
        ("generalisations", _generalisations),
        ("memories", _memories),
    ]
    for what, part in parts:
        try:
            part(store, demo)
        except ImportError as exc:
            demo.skipped.append(f"{what}: {exc}")
    return demo


#: Columns left out of the tables: the same in every row, or IRIs that repeat an id.
_HIDDEN = {"graph", "created", "updated", "node", "edge", "generalisation", "memory"}


def _section(
    name: str, shown: dict[str, str], variables: list[str], rows: list[Row]
) -> QuerySection:
    keep = [v for v in variables if v not in _HIDDEN and v not in shown]
    title = name.replace("_", " ").capitalize()
    params = ", ".join(f"{k}={v}" for k, v in shown.items())
    return QuerySection(name, title, params, keep, rows)


def _decision_rows(demo: _Demo, name: str, given: dict[str, str]) -> QuerySection | None:
    """The five decision-graph queries as ``DecisionGraph.query`` orders them."""
    graph = demo.decisions
    if graph is None or name not in NODE_QUERIES:
        return None
    params: dict[str, Any] = {k: v for k, v in given.items() if k != "graph"}
    if "limit" in params:
        params["limit"] = int(params["limit"])
    nodes = graph.query(name, **params)
    rows: list[Row] = [
        {
            "id": Literal(n.id),
            "type": Literal(n.type),
            "label": Literal(n.label),
            "status": Literal(n.status),
            **({"confidence": Literal(n.confidence)} if n.confidence is not None else {}),
        }
        for n in nodes
    ]
    variables = ["id", "type", "label", "status", "confidence"]
    section = _section(name, {k: str(v) for k, v in params.items()}, variables, rows)
    section.title += " (DecisionGraph.query: ordered)"
    return section


def _run_named(store: RdfStore, demo: _Demo) -> list[QuerySection]:
    sections: list[QuerySection] = []
    for named in list_named_queries():
        values = demo.overrides.get(named.name, demo.values)
        given = {p.name: values[p.name] for p in named.params if p.name in values}
        if named.name == "recent_decisions":
            given["limit"] = values.get("limit", "10")
        missing = [p.name for p in named.params if p.required and p.name not in given]
        if missing:
            demo.skipped.append(f"named query {named.name}: no value for {', '.join(missing)}")
            continue
        try:
            section = _decision_rows(demo, named.name, given)
            if section is None:
                text, bindings = named.prepare(given)
                result = store.query(text, bindings=bindings)
                if not isinstance(result, SelectResult):
                    continue
                section = _section(named.name, given, result.variables, list(result))
        except RdfMemError as exc:
            demo.skipped.append(f"named query {named.name}: {exc}")
            continue
        sections.append(section)
    return sections


def run_demo(folder: str | Path, *, history: bool = True) -> DemoReport:
    """Build the demo memory in ``folder`` (``folder/store``), run every named query and
    write ``folder/memory.ttl`` (the memory as it is now, without its embedding vectors:
    for people) and ``folder/memory.trig`` (everything, history and vectors included). A
    folder from an earlier demo is replaced. ``history``: the store keeps every write's past
    (its history graphs are in memory.trig; the ``history``, ``as_of`` and ``changes_since``
    queries show a revised memory).

    Raises:
        RdfMemError: ``folder`` holds something that is not an earlier demo, or the store
            fails.
    """
    root = Path(folder)
    store_path = root / "store"
    if store_path.exists():
        if not (root / MARKER).exists():
            raise RdfMemError(
                f"{store_path} exists and was not made by rdfmem demo; choose another folder"
            )
        shutil.rmtree(store_path)
    root.mkdir(parents=True, exist_ok=True)
    (root / MARKER).write_text("made by rdfmem demo; safe to delete\n", encoding="utf-8")
    report = DemoReport(root, store_path, root / "memory.ttl", root / "memory.trig")
    options: dict[str, Any] = {"history": True, "agent": AGENT} if history else {}
    with RdfStore.open(store_path, **options) as store:
        demo = build_memory(store)
        report.queries = _run_named(store, demo)
        report.built, report.skipped, report.prefixes = demo.built, demo.skipped, demo.prefixes
        # The Turtle is for people: the memory as it is now, without the embedding vectors
        # (base64, most of its bytes; ``rdfmem export`` leaves them out too). The history
        # graphs and the vectors are in the store and memory.trig.
        everything = store.query(
            "CONSTRUCT { ?s ?p ?o } WHERE { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o } "
            f"FILTER(!STRSTARTS(STR(?g), '{HISTORY_PREFIX}')) }} "
            f"FILTER(!isLiteral(?o) || DATATYPE(?o) != <{FLOAT32_VECTOR.value}>) }}"
        )
        assert isinstance(everything, GraphResult)
        report.export_path.write_bytes(everything.serialize("turtle", prefixes=store.prefixes))
        report.dataset_path.write_text(store.export("trig"), encoding="utf-8")
    return report
