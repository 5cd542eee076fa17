"""What the tools of one ``rdfmem mcp`` server reach: one store, seen per project."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from urllib.parse import quote

from rdfmem.domain.decisions import DEFAULT_GRAPH as DECISIONS_GRAPH
from rdfmem.domain.decisions import DecisionGraph
from rdfmem.domain.generalisations import Generalisations
from rdfmem.domain.memories import Memories
from rdfmem.mcp.checks import Limits
from rdfmem.mcp.graph import KnowledgeGraph
from rdfmem.store.rdfstore import RdfStore

__all__ = ["Services"]

_GROUP_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


@dataclass
class Services:
    """The store and the domain objects over it, for one project (or none).

    Args:
        store: the store every tool reads and writes.
        project: the project (``--project``): its own knowledge graph, decision graph,
            project memories and generalisation group.
        query_timeout: seconds a ``sparql_query`` may run.
        max_rows: rows (or triples) a ``sparql_query`` returns at most.
        limits: the most one tool call may carry.
    """

    store: RdfStore
    project: str | None = None
    query_timeout: float = 10.0
    max_rows: int = 1000
    limits: Limits = field(default_factory=Limits)

    @cached_property
    def kg(self) -> KnowledgeGraph:
        return KnowledgeGraph(self.store, self.project)

    @cached_property
    def decisions(self) -> DecisionGraph:
        graph = DECISIONS_GRAPH
        if self.project is not None:
            graph = f"{DECISIONS_GRAPH}:{quote(self.project, safe='-_.~')}"
        return DecisionGraph(self.store, graph)

    def memories(self, session: str | None = None) -> Memories:
        """The memories of this project, and of ``session`` when given."""
        return Memories(self.store, project=self.project, session=session or None)

    def generalisations(self, group: str | None = None) -> Generalisations:
        """A group's generalisations: ``group``, else the project when it is a valid group
        id, else ``default``."""
        if group is None:
            group = self.project if self.project and _GROUP_ID.match(self.project) else "default"
        return Generalisations(self.store, group)
