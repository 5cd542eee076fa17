"""The nine tools of the official MCP memory server, with its names, titles, descriptions,
input and output schemas, hints and answers, over ``KnowledgeGraph``.

>>> [s.name for s in KG_TOOLS][:3]
['create_entities', 'create_relations', 'add_observations']
"""

from __future__ import annotations

from typing import Any

from rdfmem.mcp.graph import Client
from rdfmem.mcp.services import Services
from rdfmem.mcp.specs import DELETE, READ, WRITE, Reply, Spec, array, json_text, obj, string

__all__ = ["KG_TOOLS", "RESOURCE_URI", "graph_text"]

#: The resource holding the whole knowledge graph as JSON.
RESOURCE_URI = "memory://knowledge-graph"


def _entity(closed: bool) -> dict[str, Any]:
    return obj(
        {
            "name": string("The name of the entity"),
            "entityType": string("The type of the entity"),
            "observations": array(
                string(), "An array of observation contents associated with the entity"
            ),
        },
        ["name", "entityType", "observations"],
        closed=closed,
    )


def _relation(closed: bool) -> dict[str, Any]:
    return obj(
        {
            "from": string("The name of the entity where the relation starts"),
            "to": string("The name of the entity where the relation ends"),
            "relationType": string("The type of the relation"),
        },
        ["from", "to", "relationType"],
        closed=closed,
    )


def _graph_output() -> dict[str, Any]:
    return obj(
        {"entities": array(_entity(True)), "relations": array(_relation(True))},
        ["entities", "relations"],
        closed=True,
        top=True,
    )


def _done_output() -> dict[str, Any]:
    return obj(
        {"success": {"type": "boolean"}, "message": {"type": "string"}},
        ["success", "message"],
        closed=True,
        top=True,
    )


def _done(message: str) -> Reply:
    return Reply({"success": True, "message": message}, message)


def graph_text(graph: dict[str, Any]) -> str:
    """The knowledge graph as the resource and the read tools print it."""
    return json_text(graph)


def _create_entities(s: Services, args: dict[str, Any], client: Client) -> Reply:
    result = s.kg.create_entities(args["entities"], client)
    return Reply({"entities": result}, json_text(result))


def _create_relations(s: Services, args: dict[str, Any], client: Client) -> Reply:
    result = s.kg.create_relations(args["relations"], client)
    return Reply({"relations": result}, json_text(result))


def _add_observations(s: Services, args: dict[str, Any], client: Client) -> Reply:
    result = s.kg.add_observations(args["observations"], client)
    return Reply({"results": result}, json_text(result))


def _delete_entities(s: Services, args: dict[str, Any], client: Client) -> Reply:
    s.kg.delete_entities(args["entityNames"], client)
    return _done("Entities deleted successfully")


def _delete_observations(s: Services, args: dict[str, Any], client: Client) -> Reply:
    s.kg.delete_observations(args["deletions"], client)
    return _done("Observations deleted successfully")


def _delete_relations(s: Services, args: dict[str, Any], client: Client) -> Reply:
    s.kg.delete_relations(args["relations"], client)
    return _done("Relations deleted successfully")


def _graph_reply(graph: dict[str, Any]) -> Reply:
    return Reply(graph, graph_text(graph))


def _read_graph(s: Services, args: dict[str, Any], client: Client) -> Reply:
    return _graph_reply(s.kg.read_graph())


def _search_nodes(s: Services, args: dict[str, Any], client: Client) -> Reply:
    return _graph_reply(s.kg.search_nodes(args["query"]))


def _open_nodes(s: Services, args: dict[str, Any], client: Client) -> Reply:
    return _graph_reply(s.kg.open_nodes(args["names"]))


KG_TOOLS = [
    Spec(
        "create_entities",
        "Create Entities",
        "Create multiple new entities in the knowledge graph",
        obj({"entities": array(_entity(False))}, ["entities"], top=True),
        WRITE,
        _create_entities,
        obj({"entities": array(_entity(True))}, ["entities"], closed=True, top=True),
        changes_graph=True,
    ),
    Spec(
        "create_relations",
        "Create Relations",
        "Create multiple new relations between entities in the knowledge graph. "
        "Relations should be in active voice",
        obj({"relations": array(_relation(False))}, ["relations"], top=True),
        WRITE,
        _create_relations,
        obj({"relations": array(_relation(True))}, ["relations"], closed=True, top=True),
        changes_graph=True,
    ),
    Spec(
        "add_observations",
        "Add Observations",
        "Add new observations to existing entities in the knowledge graph",
        obj(
            {
                "observations": array(
                    obj(
                        {
                            "entityName": string(
                                "The name of the entity to add the observations to"
                            ),
                            "contents": array(string(), "An array of observation contents to add"),
                        },
                        ["entityName", "contents"],
                    )
                )
            },
            ["observations"],
            top=True,
        ),
        WRITE,
        _add_observations,
        obj(
            {
                "results": array(
                    obj(
                        {"entityName": string(), "addedObservations": array(string())},
                        ["entityName", "addedObservations"],
                        closed=True,
                    )
                )
            },
            ["results"],
            closed=True,
            top=True,
        ),
        changes_graph=True,
    ),
    Spec(
        "delete_entities",
        "Delete Entities",
        "Delete multiple entities and their associated relations from the knowledge graph",
        obj(
            {"entityNames": array(string(), "An array of entity names to delete")},
            ["entityNames"],
            top=True,
        ),
        DELETE,
        _delete_entities,
        _done_output(),
        changes_graph=True,
    ),
    Spec(
        "delete_observations",
        "Delete Observations",
        "Delete specific observations from entities in the knowledge graph",
        obj(
            {
                "deletions": array(
                    obj(
                        {
                            "entityName": string(
                                "The name of the entity containing the observations"
                            ),
                            "observations": array(string(), "An array of observations to delete"),
                        },
                        ["entityName", "observations"],
                    )
                )
            },
            ["deletions"],
            top=True,
        ),
        DELETE,
        _delete_observations,
        _done_output(),
        changes_graph=True,
    ),
    Spec(
        "delete_relations",
        "Delete Relations",
        "Delete multiple relations from the knowledge graph",
        obj(
            {"relations": array(_relation(False), "An array of relations to delete")},
            ["relations"],
            top=True,
        ),
        DELETE,
        _delete_relations,
        _done_output(),
        changes_graph=True,
    ),
    Spec(
        "read_graph",
        "Read Graph",
        "Read the entire knowledge graph",
        obj({}, top=True),
        READ,
        _read_graph,
        _graph_output(),
    ),
    Spec(
        "search_nodes",
        "Search Nodes",
        "Search for nodes in the knowledge graph based on a query",
        obj(
            {
                "query": string(
                    "The search query to match against entity names, types, and observation content"
                )
            },
            ["query"],
            top=True,
        ),
        READ,
        _search_nodes,
        _graph_output(),
    ),
    Spec(
        "open_nodes",
        "Open Nodes",
        "Open specific nodes in the knowledge graph by their names",
        obj(
            {"names": array(string(), "An array of entity names to retrieve")},
            ["names"],
            top=True,
        ),
        READ,
        _open_nodes,
        _graph_output(),
    ),
]
