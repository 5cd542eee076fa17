"""One client's side of the change log (``SparqlBackend.changes_since``): what its writes
record, and reading what changed.

The rule: every rdfmem write records the graphs it touched in the change log, in the very
request that writes (``SparqlBackend.apply``), stamped with the server's ``NOW()``. A write
that returned before a look started is committed, so the look's query sees its record,
unless the record is older than the cursor; the cursor lies ``slack_s`` before the server
time of the previous look, and a write commits within ``slack_s`` of its stamp (requests
time out well before). Records already reported are remembered in the cursor, not reported
twice. A raw ``sparql_update`` through rdfmem is logged as a change of unknown scope
(unless its thread declared a ``scope``); writes by other SPARQL clients are not logged.
Records older than ``retention_s`` are pruned now and then; a cursor older than that reads
everything. The log is input from every client of the server, so it is read defensively:
a malformed or future-dated record is read as "its graphs (or, naming none, every graph)
may have changed" and pruned at once, a look reads at most ``MAX_CHANGE_ROWS`` rows, and
nothing in the log makes a reader raise. The SPARQL is written by ``rdfmem.backends.sparql.text``.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from pyoxigraph import NamedNode

from rdfmem.backends.sparql.text import (
    Changes,
    interpret_changes,
    log_change,
    prune_changes,
    read_changes,
    xsd_instant,
)

__all__ = ["ChangeLog", "Reader"]


class Reader(Protocol):
    """What reading the change log needs of the server connection (``SparqlBackend``)."""

    def select_rows(self, sparql: str) -> list[dict[str, Any]]: ...

    def send_update(self, sparql: str) -> None: ...


class ChangeLog:
    """The change log in ``graph``, as one client writes and reads it.

    >>> log = ChangeLog(NamedNode("urn:rdfmem:graph:changes"))
    >>> log.declared()
    False
    >>> with log.scope(NamedNode("urn:g"), [NamedNode("urn:s")]):
    ...     log.declared()
    True
    """

    def __init__(self, graph: NamedNode) -> None:
        self.graph = graph
        self._scope = threading.local()  # what this thread's raw updates touch (``scope``)
        self._pruned_at = 0.0  # the server time this client last pruned the log

    def declared(self) -> bool:
        """True inside this thread's ``scope`` block."""
        return getattr(self._scope, "touches", None) is not None

    def record(self) -> str:
        """The change-log operation for an update this thread sends now: the graph and
        subjects of its ``scope`` block, or a change of unknown scope outside one."""
        scope: tuple[str, list[NamedNode]] | None = getattr(self._scope, "touches", None)
        if scope is None:
            return log_change(self.graph, uuid.uuid4().hex, None)
        return log_change(self.graph, uuid.uuid4().hex, [scope[0]], scope[1])

    @contextmanager
    def scope(self, graph: NamedNode, subjects: Sequence[NamedNode]) -> Iterator[None]:
        """Declare that the updates this thread sends inside the block change only
        ``subjects`` of ``graph``."""
        before = getattr(self._scope, "touches", None)
        self._scope.touches = (graph.value, list(subjects))
        try:
            yield
        finally:
            self._scope.touches = before

    def since(
        self,
        server: Reader,
        cursor: tuple[float, frozenset[str]] | None,
        *,
        slack_s: float,
        retention_s: float,
        own_default: bool,
    ) -> Changes:
        """What changed since ``cursor`` (None: the first look), read in one query, and the
        log pruned when half of ``retention_s`` passed since this client last pruned it.
        ``own_default``: rdfmem's default graph is the server's own.

        Raises:
            Unreachable, BackingError: the server did not answer, or answered badly.
        """
        since = 0.0 if cursor is None else cursor[0]
        rows = server.select_rows(read_changes(self.graph, xsd_instant(since)))
        changes = interpret_changes(rows, cursor, slack_s, own_default)
        now = changes.cursor[0] + slack_s
        if changes.suspect or now - self._pruned_at > retention_s / 2:
            # Records no rdfmem client writes (another tenant's, malformed, future-dated)
            # are pruned at once, so the next look reads a small log again.
            self._pruned_at = now
            server.send_update(
                prune_changes(
                    self.graph, xsd_instant(now - retention_s), xsd_instant(now + slack_s)
                )
            )
        return changes
