"""What the tools of one ``rdfmem mcp`` server reach: one store, seen per project.

The store may be given, or opened on first use (``Services.later``): a server answers
``initialize`` and lists its tools before the store (and the library under it) is loaded.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import quote

from rdfmem.mcp.checks import Limits

if TYPE_CHECKING:
    from rdfmem.domain.decisions import DecisionGraph
    from rdfmem.domain.embeddings import Embedder
    from rdfmem.domain.generalisations import Generalisations
    from rdfmem.domain.memories import Memories
    from rdfmem.mcp.graph import KnowledgeGraph
    from rdfmem.store.rdfstore import RdfStore

__all__ = ["Services"]

_GROUP_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


class Services:
    """The store and the domain objects over it, for one project (or none).

    Args:
        store: the store every tool reads and writes.
        project: the project (``--project``): its own knowledge graph, decision graph,
            project memories and generalisation group.
        query_timeout: seconds a ``sparql_query`` may run.
        max_rows: rows (or triples) a ``sparql_query`` returns at most.
        limits: the most one tool call may carry.
        embedder: the embedder of memories and generalisations: an ``Embedder``, or a spec
            (``rdfmem.domain.embedders``: ``hashing``, ``sentence-transformers:…``,
            ``module:attribute``) loaded on first use; ``None``: hashing.
    """

    def __init__(
        self,
        store: RdfStore | None = None,
        project: str | None = None,
        *,
        query_timeout: float = 10.0,
        max_rows: int = 1000,
        limits: Limits | None = None,
        opener: Callable[[], RdfStore] | None = None,
        embedder: Embedder | str | None = None,
    ) -> None:
        if store is None and opener is None:
            raise TypeError("Services needs a store, or an opener that makes one")
        self._store = store
        self._opener = opener
        self._opening = threading.Lock()
        self._kg: KnowledgeGraph | None = None
        self._decisions: DecisionGraph | None = None
        self._embedder_spec = embedder if isinstance(embedder, str) else None
        self._embedder: Embedder | None = None if isinstance(embedder, str) else embedder
        self._embedder_checked = False
        self.project = project
        self.query_timeout = query_timeout
        self.max_rows = max_rows
        self.limits = limits or Limits()

    @classmethod
    def later(
        cls,
        opener: Callable[[], RdfStore],
        project: str | None = None,
        *,
        query_timeout: float = 10.0,
        max_rows: int = 1000,
        embedder: Embedder | str | None = None,
    ) -> Services:
        """Services whose store ``opener`` makes on first use (once, whichever thread asks)."""
        return cls(
            None,
            project,
            query_timeout=query_timeout,
            max_rows=max_rows,
            opener=opener,
            embedder=embedder,
        )

    @property
    def store(self) -> RdfStore:
        store = self._store
        if store is None:
            with self._opening:
                if self._store is None:
                    assert self._opener is not None
                    self._store = self._opener()
                store = self._store
        return store

    @property
    def opened(self) -> bool:
        """Whether the store is open (a lazily opened one: whether anything needed it yet)."""
        return self._store is not None

    def close(self) -> None:
        """Close the store, if it was opened."""
        if self._store is not None:
            self._store.close()

    @property
    def kg(self) -> KnowledgeGraph:
        """The project's knowledge graph (one object, whichever thread asks first)."""
        kg = self._kg
        if kg is None:
            from rdfmem.mcp.graph import KnowledgeGraph

            store = self.store
            with self._opening:
                if self._kg is None:
                    self._kg = KnowledgeGraph(store, self.project)
                kg = self._kg
        return kg

    @property
    def decisions(self) -> DecisionGraph:
        """The project's decision graph (one object, whichever thread asks first)."""
        decisions = self._decisions
        if decisions is None:
            from rdfmem.domain.decisions import DEFAULT_GRAPH, DecisionGraph

            graph = DEFAULT_GRAPH
            if self.project is not None:
                graph = f"{DEFAULT_GRAPH}:{quote(self.project, safe='-_.~')}"
            store = self.store
            with self._opening:
                if self._decisions is None:
                    self._decisions = DecisionGraph(store, graph)
                decisions = self._decisions
        return decisions

    @property
    def embedder(self) -> Embedder:
        """The embedder of memories and generalisations, made on first use (once), and
        checked once against the vectors the store's memories already have.

        Raises:
            InvalidValue: the spec names no embedder, or the stored memories and
                generalisations have vectors of another dimension only (the message says
                what to pass).
        """
        embedder = self._embedder
        if embedder is None or not self._embedder_checked:
            from rdfmem.domain.embedder_check import check_dimension

            store = self.store
            with self._opening:
                if self._embedder is None:
                    from rdfmem.domain.embedders import embedder_from_spec

                    self._embedder = embedder_from_spec(self._embedder_spec)
                if not self._embedder_checked:
                    check_dimension(store, self._embedder, self._embedder_spec)
                    self._embedder_checked = True
                embedder = self._embedder
        return embedder

    def memories(self, session: str | None = None) -> Memories:
        """The memories of this project, and of ``session`` when given."""
        from rdfmem.domain.memories import Memories

        return Memories(
            self.store, project=self.project, session=session or None, embedder=self.embedder
        )

    def generalisations(self, group: str | None = None) -> Generalisations:
        """A group's generalisations: ``group``, else the project when it is a valid group
        id, else ``default``."""
        from rdfmem.domain.generalisations import Generalisations

        if group is None:
            group = self.project if self.project and _GROUP_ID.match(self.project) else "default"
        return Generalisations(self.store, group, embedder=self.embedder)
