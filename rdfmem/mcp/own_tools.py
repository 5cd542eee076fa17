"""rdfmem's own tools beside the knowledge graph: scoped memories, the decision graph,
generalisations and ``stats``. Each is a few lines over the library (``sparql_query`` lives
in ``rdfmem.mcp.sparql``, as it needs a time limit).

>>> [s.name for s in OWN_TOOLS if s.name.startswith("memory_")]
['memory_save', 'memory_search', 'memory_read', 'memory_list', 'memory_forget']
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, get_args

from pyoxigraph import NamedNode

from rdfmem.core.results import SelectResult
from rdfmem.domain import decision_history
from rdfmem.domain.decision_reader import DecisionReader
from rdfmem.domain.decisions import EdgeType, NodeStatus, NodeType
from rdfmem.domain.generalisations import Generalisation
from rdfmem.domain.memories import SCOPES, Memory
from rdfmem.mcp.checks import ToolInputError
from rdfmem.mcp.client import Client, attributed_to
from rdfmem.mcp.history_tools import AS_OF, as_of
from rdfmem.mcp.pages import DEFAULT_LIMIT, PAGE_ARGUMENTS, page_of, page_start
from rdfmem.mcp.services import Services
from rdfmem.mcp.specs import DELETE, READ, WRITE, Reply, Spec, array, json_text, obj, string

__all__ = ["OWN_TOOLS"]

_SCOPE = string("global, project (this --project) or session (with session)", enum=list(SCOPES))
_SESSION = string("Conversation id, for the session scope")
_TITLE = string("Short title, e.g. 'Build steps'")
_NODE_TYPES = list(get_args(NodeType))
_EDGE_TYPES = list(get_args(EdgeType))
_STATUSES = list(get_args(NodeStatus))
_METADATA = {"type": "object", "description": "Any JSON object"}
_CONFIDENCE = {"type": "number", "minimum": 0, "maximum": 1, "description": "0 to 1"}


def _reply(value: Any) -> Reply:
    structured = value if isinstance(value, dict) else {"result": value}
    return Reply(structured, json_text(value))


def _memory(m: Memory, score: float | None = None) -> dict[str, Any]:
    out = m.model_dump(mode="json", exclude={"embeddings"})
    if score is not None:
        out["score"] = round(score, 4)
    return out


def _memory_save(s: Services, a: dict[str, Any], c: Client) -> Reply:
    memories = s.memories(a.get("session"))
    memory = Memory(
        scope=a["scope"], title=a["title"], content=a["content"], topics=a.get("topics", [])
    )
    with attributed_to(s.store, c):
        return _reply(_memory(memories.save(memory)))


def _ranked(a: dict[str, Any], search: Callable[[int], list[Any]], key: str, tool: str) -> Reply:
    """One page of a best-first search: enough asked for to know whether more follow."""
    limit = int(a.get("limit", 5))
    found = search(page_start(a.get("cursor"), tool) + limit + 1)
    return page_of(found, key, {**a, "limit": limit}, tool)


def _memory_search(s: Services, a: dict[str, Any], c: Client) -> Reply:
    memories = s.memories(a.get("session"))
    return _ranked(
        a,
        lambda n: [
            _memory(m, score) for m, score in memories.search(a["query"], n, as_of=as_of(a))
        ],
        "memories",
        "memory_search",
    )


def _memory_read(s: Services, a: dict[str, Any], c: Client) -> Reply:
    memories = s.memories(a.get("session"))
    return _reply(_memory(memories.read(a["scope"], a["title"], as_of=as_of(a))))


def _memory_list(s: Services, a: dict[str, Any], c: Client) -> Reply:
    titles = s.memories(a.get("session")).list(a.get("scope"), as_of=as_of(a))
    return page_of(titles, "titles", a, "memory_list")


def _memory_forget(s: Services, a: dict[str, Any], c: Client) -> Reply:
    with attributed_to(s.store, c):
        s.memories(a.get("session")).forget(a["scope"], a["title"])
    return _reply({"forgotten": a["title"], "scope": a["scope"]})


def _fields(a: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {k: a[k] for k in names if k in a}


def _decision_add_node(s: Services, a: dict[str, Any], c: Client) -> Reply:
    names = ("id", "type", "label", "status", "confidence", "rationale", "metadata")
    with attributed_to(s.store, c):
        node = s.decisions.add_node(_fields(a, names))
    return _reply(node.model_dump(mode="json"))


def _decision_add_edge(s: Services, a: dict[str, Any], c: Client) -> Reply:
    with attributed_to(s.store, c):
        edge = s.decisions.add_edge(_fields(a, ("id", "from_id", "to_id", "type", "metadata")))
    return _reply(edge.model_dump(mode="json"))


def _decision_update_node(s: Services, a: dict[str, Any], c: Client) -> Reply:
    changes = _fields(a, ("type", "label", "status", "confidence", "rationale", "metadata"))
    with attributed_to(s.store, c):
        return _reply(s.decisions.update_node(a["id"], changes).model_dump(mode="json"))


def _decision_supersede(s: Services, a: dict[str, Any], c: Client) -> Reply:
    with attributed_to(s.store, c):
        edge = s.decisions.supersede(a["old_id"], a["new_id"], a.get("rationale"))
    return _reply(edge.model_dump(mode="json"))


def _decision_get(s: Services, a: dict[str, Any], c: Client) -> Reply:
    graph = past_decisions(s, as_of(a))
    node = graph.get_node(a["id"])
    out = node.model_dump(mode="json")
    out["outgoing"] = [e.model_dump(mode="json") for e in graph.get_edges(a["id"], "outgoing")]
    out["incoming"] = [e.model_dump(mode="json") for e in graph.get_edges(a["id"], "incoming")]
    return _reply(out)


def past_decisions(s: Services, moment: datetime | None) -> DecisionReader:
    """The project's decision graph, or its past at ``moment`` (a fresh in-memory store)."""
    if moment is None:
        return s.decisions
    graph = s.decisions
    past = decision_history.past_store(graph.store, NamedNode(graph.graph), moment)
    return DecisionReader(past, graph.graph)


def _decision_query(s: Services, a: dict[str, Any], c: Client) -> Reply:
    params = _fields(a, ("from_id", "to_id", "node_id"))
    start = page_start(a.get("cursor"), "decision_query")
    page = int(a.get("limit", DEFAULT_LIMIT))
    if a["name"] == "recent_decisions":
        params["limit"] = start + page + 1
    nodes = s.decisions.query(a["name"], as_of=as_of(a), **params)
    found = [n.model_dump(mode="json") for n in nodes]
    return page_of(found, "nodes", {**a, "limit": page}, "decision_query")


def _generalisation(g: Generalisation, score: float | None = None) -> dict[str, Any]:
    out = g.model_dump(mode="json")
    if score is not None:
        out["score"] = round(score, 4)
    return out


def _gen_add(s: Services, a: dict[str, Any], c: Client) -> Reply:
    g = Generalisation(
        id=a["id"],
        content=a["content"],
        level=int(a["level"]),
        confidence=a["confidence"],
        generalises=a.get("generalises", []),
    )
    with attributed_to(s.store, c):
        return _reply(_generalisation(s.generalisations(a.get("group")).add(g)))


def _gen_search(s: Services, a: dict[str, Any], c: Client) -> Reply:
    gens = s.generalisations(a.get("group"))
    return _ranked(
        a,
        lambda n: [_generalisation(g, score) for g, score in gens.search(a["text"], n)],
        "generalisations",
        "generalisation_search",
    )


def _gen_lineage(s: Services, a: dict[str, Any], c: Client) -> Reply:
    gens = s.generalisations(a.get("group"))
    if "id" in a:
        found = gens.lineage(a["id"])
    elif "level" in a:
        found = gens.by_level(int(a["level"]))
    else:
        raise ToolInputError("pass id (its lineage) or level (every one of that level)")
    items = [_generalisation(g) for g in found]
    return page_of(items, "generalisations", a, "generalisation_list")


def _stats(s: Services, a: dict[str, Any], c: Client) -> Reply:
    result = s.store.query(
        "SELECT ?g (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } } GROUP BY ?g ORDER BY ?g"
    )
    assert isinstance(result, SelectResult)
    graphs = {r["g"].value: int(r["n"].value) for r in result}
    kg = s.kg.read_graph()
    return _reply(
        {
            "project": s.project,
            "knowledge_graph": {
                "graph": s.kg.graph.value,
                "entities": len(kg["entities"]),
                "relations": len(kg["relations"]),
                "observations": sum(len(e["observations"]) for e in kg["entities"]),
            },
            "triples_per_graph": graphs,
        }
    )


_GROUP = string("Generalisation group (letters, digits, - and _); the project by default")

OWN_TOOLS = [
    Spec(
        "memory_save",
        "Save Memory",
        "Save a titled note (a fact, preference or procedure) in a scope; the same title "
        "replaces it.",
        obj(
            {
                "scope": _SCOPE,
                "title": _TITLE,
                "content": string("The memory itself"),
                "topics": array(string(), "Topic words for filtering"),
                "session": _SESSION,
            },
            ["scope", "title", "content"],
            closed=True,
        ),
        WRITE,
        _memory_save,
    ),
    Spec(
        "memory_search",
        "Search Memories",
        "Saved memories closest in meaning to query, best first (and the session's, with session).",
        obj(
            {
                "query": string("What to look for"),
                "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                "cursor": PAGE_ARGUMENTS["cursor"],
                "max_tokens": PAGE_ARGUMENTS["max_tokens"],
                "session": _SESSION,
                "asOf": AS_OF,
            },
            ["query"],
            closed=True,
        ),
        READ,
        _memory_search,
    ),
    Spec(
        "memory_read",
        "Read Memory",
        "Read one saved memory by scope and title.",
        obj(
            {"scope": _SCOPE, "title": _TITLE, "session": _SESSION, "asOf": AS_OF},
            ["scope", "title"],
            closed=True,
        ),
        READ,
        _memory_read,
    ),
    Spec(
        "memory_list",
        "List Memories",
        "The titles of the saved memories, of one scope or of all.",
        obj({"scope": _SCOPE, "session": _SESSION, "asOf": AS_OF, **PAGE_ARGUMENTS}, closed=True),
        READ,
        _memory_list,
    ),
    Spec(
        "memory_forget",
        "Forget Memory",
        "Delete one saved memory by scope and title.",
        obj(
            {"scope": _SCOPE, "title": _TITLE, "session": _SESSION},
            ["scope", "title"],
            closed=True,
        ),
        DELETE,
        _memory_forget,
    ),
    Spec(
        "decision_add_node",
        "Add Decision Node",
        "Add a node (goal, decision, option, action …) to the decision graph; returns its id.",
        obj(
            {
                "type": string(enum=_NODE_TYPES),
                "label": string("What it is, in a sentence"),
                "status": string(enum=_STATUSES),
                "confidence": _CONFIDENCE,
                "rationale": string("Why"),
                "metadata": _METADATA,
                "id": string("An id of your own (default: a new random id)"),
            },
            ["type", "label"],
            closed=True,
        ),
        WRITE,
        _decision_add_node,
    ),
    Spec(
        "decision_add_edge",
        "Add Decision Edge",
        "Link two decision-graph nodes: leads_to, chosen, rejected, requires, blocks, "
        "enables or supersedes.",
        obj(
            {
                "from_id": string(),
                "to_id": string(),
                "type": string(enum=_EDGE_TYPES),
                "metadata": _METADATA,
                "id": string(),
            },
            ["from_id", "to_id", "type"],
            closed=True,
        ),
        WRITE,
        _decision_add_edge,
    ),
    Spec(
        "decision_update_node",
        "Update Decision Node",
        "Change fields of a decision-graph node (e.g. status completed or rejected).",
        obj(
            {
                "id": string(),
                "type": string(enum=_NODE_TYPES),
                "label": string(),
                "status": string(enum=_STATUSES),
                "confidence": _CONFIDENCE,
                "rationale": string(),
                "metadata": _METADATA,
            },
            ["id"],
            closed=True,
        ),
        WRITE,
        _decision_update_node,
    ),
    Spec(
        "decision_supersede",
        "Supersede Decision",
        "Mark node old_id superseded by node new_id (with a rationale).",
        obj(
            {"old_id": string(), "new_id": string(), "rationale": string()},
            ["old_id", "new_id"],
            closed=True,
        ),
        WRITE,
        _decision_supersede,
    ),
    Spec(
        "decision_get",
        "Get Decision Node",
        "One decision-graph node with its outgoing and incoming edges.",
        obj({"id": string(), "asOf": AS_OF}, ["id"], closed=True),
        READ,
        _decision_get,
    ),
    Spec(
        "decision_query",
        "Query Decisions",
        "A named query: active_goals, recent_decisions (limit), path_between (from_id, "
        "to_id), descendants or ancestors (node_id).",
        obj(
            {
                "name": string(
                    enum=[
                        "active_goals",
                        "recent_decisions",
                        "path_between",
                        "descendants",
                        "ancestors",
                    ]
                ),
                "from_id": string(),
                "to_id": string(),
                "node_id": string(),
                "asOf": AS_OF,
                **PAGE_ARGUMENTS,
            },
            ["name"],
            closed=True,
        ),
        READ,
        _decision_query,
    ),
    Spec(
        "generalisation_save",
        "Save Generalisation",
        "Save a lesson (level 0 concrete, higher more general) and the ids it generalises.",
        obj(
            {
                "id": string(),
                "content": string(),
                "level": {"type": "integer", "minimum": 0},
                "confidence": _CONFIDENCE,
                "generalises": array(string()),
                "group": _GROUP,
            },
            ["id", "content", "level", "confidence"],
            closed=True,
        ),
        WRITE,
        _gen_add,
    ),
    Spec(
        "generalisation_search",
        "Search Generalisations",
        "Find generalisations closest to a text, best first.",
        obj(
            {
                "text": string(),
                "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                "cursor": PAGE_ARGUMENTS["cursor"],
                "max_tokens": PAGE_ARGUMENTS["max_tokens"],
                "group": _GROUP,
            },
            ["text"],
            closed=True,
        ),
        READ,
        _gen_search,
    ),
    Spec(
        "generalisation_list",
        "List Generalisations",
        "What generalisation id generalises (transitively), or every one of a level.",
        obj(
            {
                "id": string(),
                "level": {"type": "integer", "minimum": 0},
                "group": _GROUP,
                **PAGE_ARGUMENTS,
            },
            closed=True,
        ),
        READ,
        _gen_lineage,
    ),
    Spec(
        "stats",
        "Memory Statistics",
        "Counts: knowledge-graph entities, relations, observations; triples per graph.",
        obj({}, closed=True),
        READ,
        _stats,
    ),
]
