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
everything. The log is input from every client of the server, so it is read defensively
(``rdfmem.backends.sparql.logread``): a record not shaped as rdfmem writes it is read as
"the graphs it names may have changed" (every graph when it says ``changedUnknown``), what
no rdfmem client writes is pruned by the looks that meet it (a bounded number of triples
per request, at most once a second), a look reads at most ``MAX_CHANGE_ROWS`` rows,
one per triple, and leaves out by name the records this client has read already, and
nothing in the log makes a reader raise. What writes record is ``rdfmem.backends.sparql.text``.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Protocol

from pyoxigraph import NamedNode

from rdfmem.backends.sparql.logread import MAX_SKIPPED, look_query, prune_query, read_look
from rdfmem.backends.sparql.text import MAX_CHANGE_ROWS, Changes, log_change, xsd_instant
from rdfmem.core.errors import BackingError

__all__ = ["ChangeLog", "Reader"]

#: A look that met records to prune prunes the log at most this often (seconds).
PRUNE_EVERY_S = 1.0


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
        self._lock = threading.Lock()
        self._read: dict[str, tuple[float, int]] = {}  # records read: name -> date, size

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
        log pruned when half of ``retention_s`` passed since this client last pruned it,
        or (at most once a second) when the look met records no rdfmem client writes (a
        look cut at the row cap then looks once more, at the pruned log).
        ``own_default``: rdfmem's default graph is the server's own.

        Raises:
            Unreachable, BackingError: the server did not answer, or answered badly.
        """
        changes, prune, cut = self._look(server, cursor, slack_s, own_default)
        now = changes.cursor[0] + slack_s
        with self._lock:
            due = now - self._pruned_at > retention_s / 2 or (
                prune and now - self._pruned_at > PRUNE_EVERY_S
            )
            if due:
                self._pruned_at = now
        if not due:
            return changes
        # Records no rdfmem client writes (another tenant's, malformed, future-dated) are
        # pruned at once, so the next look reads a small log again.
        try:
            server.send_update(
                prune_query(self.graph, xsd_instant(now - retention_s), xsd_instant(now + slack_s))
            )
        except BackingError:  # a server that refuses the prune: the look stands, a later one
            return changes  # prunes (the log's content cannot make a reader raise)
        if not cut:
            return changes
        # The look was cut at the row cap (it reports everything): look once more at the
        # pruned log, so that what was left out is not reported as new by the next look.
        since = 0.0 if cursor is None else cursor[0]
        seen = frozenset() if cursor is None else cursor[1]
        again, _, _ = self._look(server, (since, seen | changes.cursor[1]), slack_s, own_default)
        left, recent = again.cursor
        return Changes(
            (left, recent | changes.cursor[1]),
            changes.graphs | again.graphs,
            True,
            suspect=True,
        )

    def _look(
        self,
        server: Reader,
        cursor: tuple[float, frozenset[str]] | None,
        slack_s: float,
        own_default: bool,
    ) -> tuple[Changes, bool, bool]:
        """One look: the changes, whether the log holds records to prune, and whether the
        answer was cut at the row cap."""
        since = 0.0 if cursor is None else cursor[0]
        seen = frozenset() if cursor is None else cursor[1]
        with self._lock:
            # The records this cursor has already read are left out by name, the largest
            # first (the position this client keeps): a record is read once, not per look.
            known = [(w, n, at) for n, (at, w) in self._read.items() if n in seen and at >= since]
            skip = {n: at for _, n, at in sorted(known, reverse=True)[:MAX_SKIPPED]}
        rows = server.select_rows(look_query(self.graph, xsd_instant(since), list(skip)))
        look = read_look(rows, cursor, slack_s, own_default)
        changes = look.changes
        left, recent = changes.cursor
        still = {n for n, at in skip.items() if at >= left}  # left out, still in the window
        if still:
            changes = replace(changes, cursor=(left, recent | still))
        with self._lock:
            self._read.update(look.read)
            kept = sorted(
                ((at, w, n) for n, (at, w) in self._read.items() if at >= left), reverse=True
            )[: 4 * MAX_SKIPPED]  # bounded: the latest records are kept
            self._read = {n: (at, w) for at, w, n in kept}
        return changes, look.prune, len(rows) > MAX_CHANGE_ROWS
