"""rdfmem's tools for the past (a store keeping history: ``rdfmem mcp`` keeps it unless
``--no-history``): ``history`` of an entity, a memory or a decision node, and
``read_graph_as_of``; and ``as_of``, the ``asOf`` argument rdfmem's own read tools take.

An event says when (``at``, ISO 8601 UTC), who (``by``: the MCP client's IRI
``urn:rdfmem:mcp:client:NAME/VERSION``, or the server's agent), why (when given), the
``action`` (the tool that wrote) and what changed.

>>> [s.name for s in HISTORY_TOOLS]
['read_graph_as_of', 'history']
>>> as_of({"asOf": "2026-11-23T23:15:00Z"}).isoformat()
'2026-11-23T23:15:00+00:00'
>>> as_of({}) is None
True
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from pyoxigraph import NamedNode

from rdfmem.core.errors import ToolInputError
from rdfmem.domain import decision_queries as q
from rdfmem.mcp.client import Client
from rdfmem.mcp.pages import PAGE_ARGUMENTS, page_of
from rdfmem.mcp.services import Services
from rdfmem.mcp.specs import READ, Reply, Spec, json_text, obj, string
from rdfmem.store.history_reads import Version

__all__ = ["AS_OF", "HISTORY_TOOLS", "as_of"]

#: The ``asOf`` argument of the read tools.
AS_OF: dict[str, Any] = {"type": "string", "format": "date-time"}
_LINKS = {v: k for k, v in q.EDGE_PROPERTY.items()}


def as_of(arguments: dict[str, Any]) -> _dt.datetime | None:
    """The moment ``asOf`` names (UTC when it names no offset), or None without one.

    Raises:
        ToolInputError: not an ISO 8601 time.
    """
    text = arguments.get("asOf")
    if text is None:
        return None
    try:
        moment = _dt.datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        raise ToolInputError(
            f"asOf: {str(text)[:40]!r} is not a time; pass ISO 8601, e.g. "
            "2026-11-23T23:15:00Z (UTC when no offset is given) or 2026-11-23"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    return moment


def _iso(moment: _dt.datetime) -> str:
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _changed(before: dict[str, Any] | None, after: dict[str, Any]) -> list[str]:
    if before is None:
        return []
    skip = {"updated_at", "inserted_at", "created_at", "embeddings"}
    return sorted(k for k in after if k not in skip and before.get(k) != after.get(k))


def _links(v: Version) -> list[str]:
    """A node version's outgoing edges, ``type -> node IRI``."""
    found = []
    for quad in v.state:
        kind = _LINKS.get(quad.predicate.value)
        if kind is not None and isinstance(quad.object, NamedNode):
            found.append(f"{kind} -> {quad.object.value.rsplit('/node/', 1)[-1]}")
    return sorted(found)


def _events(
    versions: list[Version], key: str, made: str, changed: str, gone: str
) -> list[dict[str, Any]]:
    """Events of a memory's or node's versions: ``key`` holds the value, ``changed`` the
    fields (and, for a node, ``edges``) that differ from the version before."""
    out: list[dict[str, Any]] = []
    before: dict[str, Any] | None = None
    links: list[str] = []
    for v in versions:
        event: dict[str, Any] = {"at": _iso(v.at), "by": v.by}
        if v.why is not None:
            event["why"] = v.why
        if v.deleted or v.value is None:
            event["action"] = gone
            before, links = None, []
        else:
            value = v.value.model_dump(mode="json", exclude={"embeddings"})
            now = _links(v) if key == "node" else []
            event["action"] = made if before is None else changed
            event["changed"] = _changed(before, value) + (["edges"] if now != links else [])
            event[key] = value
            if now:
                event["edges"] = now
            before, links = value, now
        out.append(event)
    return out


def _history(s: Services, a: dict[str, Any], c: Client) -> Reply:
    given = [k for k in ("entity", "title", "node_id") if k in a]
    if len(given) != 1:
        raise ToolInputError(
            "pass one of: entity (a knowledge-graph entity's name), title with scope (a "
            "memory; session for a session memory) or node_id (a decision-graph node)"
        )
    if "entity" in a:
        events = s.kg.history(a["entity"])
    elif "title" in a:
        if "scope" not in a:
            raise ToolInputError("title names a memory of a scope: pass scope too")
        versions = s.memories(a.get("session")).history(a["scope"], a["title"])
        events = _events(versions, "memory", "memory_save", "memory_save", "memory_forget")
    else:
        versions = s.decisions.history(a["node_id"])
        events = _events(
            versions, "node", "decision_add_node", "decision_update_node", "decision_delete"
        )
    return page_of(events, "events", a, "history")


def _read_graph_as_of(s: Services, a: dict[str, Any], c: Client) -> Reply:
    graph = s.kg.read_graph(as_of=as_of(a))
    return Reply(graph, json_text(graph))


HISTORY_TOOLS = [
    Spec(
        "read_graph_as_of",
        "Read Graph As Of",
        "The knowledge graph as it was at asOf.",
        obj({"asOf": AS_OF}, ["asOf"], closed=True),
        READ,
        _read_graph_as_of,
    ),
    Spec(
        "history",
        "History",
        "Who changed an entity, a memory (title, scope) or a decision node, when, how.",
        obj(
            {
                "entity": string(),
                "title": string(),
                "scope": string(),
                "session": string(),
                "node_id": string(),
                "limit": PAGE_ARGUMENTS["limit"],
                "cursor": PAGE_ARGUMENTS["cursor"],
            },
            closed=True,
        ),
        READ,
        _history,
    ),
]
