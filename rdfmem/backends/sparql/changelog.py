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

A look costs what is new, not the whole window (``_bounded``): it reads in full only the
records dated since shortly before the previous look, and counts the rest of the window in
the same request; when the count is what this cursor has read there, nothing committed late
and the look is done, else it looks at the whole window as above (one request more).
"""

from __future__ import annotations

import heapq
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Protocol

from pyoxigraph import NamedNode

from rdfmem.backends.sparql.loglines import Line, line_of, names_of
from rdfmem.backends.sparql.logread import (
    MAX_FRESH_SKIPPED,
    MAX_SKIPPED,
    Look,
    bounded_query,
    clock_of,
    counted,
    exact_us,
    look_query,
    prune_query,
    read_look,
)
from rdfmem.backends.sparql.own_writes import OwnWrites
from rdfmem.backends.sparql.text import (
    MAX_CHANGE_ROWS,
    Changes,
    bucket_of,
    buckets_between,
    log_change,
    xsd_instant,
)
from rdfmem.core.errors import BackingError

__all__ = ["ChangeLog", "Reader"]

#: A look that met records to prune prunes the log at most this often (seconds).
PRUNE_EVERY_S = 1.0
#: A bounded look reads in full the records dated at or after the previous look's server
#: time less this (seconds): a write stamped just before that look and committed after it
#: is read there, instead of making the count differ.
FRESH_S = 1.0
#: A bounded look lists the buckets up to this far past the server time it expects (its
#: last look's, plus the time since then, seconds); a look that finds the server's clock
#: beyond them looks in full.
AHEAD_S = 2.0
#: A bounded look that would list more buckets (seconds) than this (a reader idle for
#: minutes) reads the dates of the whole log instead.
MAX_BUCKETS = 240
#: At most this many records read are remembered by date (about 150 bytes each).
MAX_DATED = 100_000
#: The remembered dates are trimmed to the last two windows at most this often (seconds).
TRIM_EVERY_S = 1.0
#: After this many bounded looks in a row that could not tell (a count that differed, a
#: record it cannot count), the next ``FULL_AFTER_MISSES`` looks are full ones (a log whose
#: dates this client cannot count: Virtuoso's have no time zone).
MISSES_IN_A_ROW = 8
FULL_AFTER_MISSES = 32
#: The lines of at most this many cursors are kept (one per follower: vectors, texts,
#: the decision graph, and callers of ``changes_since``).
MAX_LINES = 16
#: The names of the records this client made that it remembers (to tell others' apart).
MAX_MADE = 4096


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
        # Records read in the last two windows: name -> latest date, dates in microseconds
        # (None: not all in UTC), to count them in bounded looks.
        self._dated: dict[str, tuple[float, tuple[int, ...] | None]] = {}
        self._dated_trimmed = 0.0  # the window's start when ``_dated`` was last trimmed
        self._misses = 0  # bounded looks in a row whose count differed
        self._full_for = 0  # full looks to make before a bounded one again
        self._lines: dict[int, Line] = {}  # by the identity of a cursor's names
        self.own = OwnWrites()  # what this client's own writes left (``own_writes``)
        self.bounded = 0  # bounded looks that were enough
        self.missed = 0  # bounded looks whose count differed (a full look followed)
        # The server's clock at the last look, this process's monotonic clock then, and
        # whether the server writes it in the form buckets are filed by (``bucket_of``).
        self._clock: tuple[float, float, bool] | None = None
        self._made: OrderedDict[str, None] = OrderedDict()  # names of records made here
        #: Told the graphs and subjects that other clients' records (as far as this client
        #: can tell: those not made by ``record``) named, look by look (``Leases``).
        self.on_theirs: Callable[[set[str]], None] | None = None

    def declared(self) -> bool:
        """True inside this thread's ``scope`` block."""
        return getattr(self._scope, "touches", None) is not None

    def record(self, sparql: str | None = None, rows: Sequence[Any] | None = None) -> str:
        """The change-log operation for an update this thread sends now: the graph and
        subjects of its ``scope`` block, or a change of unknown scope outside one. With
        the update (``sparql``) and the rows its claim's read brought (``rows``: every
        triple it reads), what the subjects hold after it is expected (``own_writes``)."""
        scope: tuple[str, list[NamedNode]] | None = getattr(self._scope, "touches", None)
        name = self.name()
        if scope is None:
            return log_change(self.graph, name, None)
        if sparql is not None and rows is not None:
            self.own.expect(name, NamedNode(scope[0]), scope[1], sparql, rows)
        return log_change(self.graph, name, [scope[0]], scope[1])

    def name(self) -> str:
        """A fresh record name, remembered as this client's own (``on_theirs``)."""
        name = uuid.uuid4().hex
        with self._lock:
            self._made[name] = None
            if len(self._made) > MAX_MADE:
                self._made.popitem(last=False)
        return name

    def scoped(self) -> list[NamedNode] | None:
        """The subjects of this thread's ``scope`` block; None outside one."""
        scope: tuple[str, list[NamedNode]] | None = getattr(self._scope, "touches", None)
        return None if scope is None else scope[1]

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
        answer was cut at the row cap. A bounded look first (``_bounded``), the full one
        when that cannot tell."""
        if cursor is not None:
            found = self._bounded(server, cursor, slack_s, own_default)
            if found is not None:
                return found
        return self._full(server, cursor, slack_s, own_default)

    def _bounded(
        self,
        server: Reader,
        cursor: tuple[float, frozenset[str]],
        slack_s: float,
        own_default: bool,
    ) -> tuple[Changes, bool, bool] | None:
        """A look bounded by what is new (``bounded_query``): the records dated at or after
        ``fresh`` (the previous look's server time less ``FRESH_S``) in full, and the count
        of those dated in ``[since, fresh)``. When the count is the number of records of
        that span this cursor has read, none committed there after the previous look, and
        the look is done; otherwise None (look in full).

        A record the server counts is one with a date in the span; the client counts the
        records this cursor read that have one date, in UTC (``exact_us``: to the
        microsecond, so both sides order it against the span's whole milliseconds alike),
        lying there (``loglines``: two bisections). So both agree on every record it read,
        and any record it has not read makes the server's count the larger: records are
        added, never removed inside the window (the log is pruned of records older than
        ``retention_s``, which the look's horizon tells, and of records no rdfmem client
        writes, which a client never counts). A record it read but cannot count (another
        date form, several dates, one a prune removes) in the span means a full look,
        without asking. Deleting a record it read while writing one it did not, both in
        the span, is a stranger's doing it cannot see (as a stranger deleting a record
        before any reader saw it)."""
        since, seen = cursor
        low, fresh = xsd_instant(since), xsd_instant(since + slack_s - FRESH_S)
        low_us, fresh_us = exact_us(low), exact_us(fresh)
        if low_us is None or fresh_us is None or fresh_us <= low_us:
            return None
        with self._lock:
            if self._full_for > 0:  # a log this client cannot count lately: look in full
                self._full_for -= 1
                return None
            line = self._line(since, seen)
        if line.odd_since(since):  # a record it cannot count as the server does is in the
            self._missing()  # span: the counts would differ (on Virtuoso, every record:
            return None  # it writes dates without a time zone)
        known = line.count(low_us, fresh_us)
        skip = line.since(fresh_us - 1000)[-MAX_FRESH_SKIPPED:]  # read since ``fresh``
        buckets = self._buckets(low_us, fresh_us)
        rows = server.select_rows(bounded_query(self.graph, low, fresh, skip, buckets))
        clock = self._clocked(rows)
        if buckets is not None and (clock is None or bucket_of(clock) > buckets[0][-1]):
            return None  # records may be filed past the buckets read: look in full
        count, rest = counted(rows)
        cut = len(rest) > MAX_CHANGE_ROWS  # (a cut look reports everything changed)
        if count != known and not cut:
            self._missing(asked=True)
            return None
        look = read_look(rest, cursor, slack_s, own_default)
        changes = look.changes
        left, recent = changes.cursor
        # The next cursor holds the names this one held (the records read before, most still
        # in the window) and those read now; the names of records older than the window are
        # dropped only once they are many (a copy of the names is a pass over them all).
        new = recent - seen
        names = seen | new if new else seen
        read = {n: (look.read[n][0], d) for n, d in look.dated.items()}
        after = line.advance(left, names, read)
        if len(names) > 2 * (len(after.names) + len(after.odd)) + 256:
            after.recent = names = recent.union(names_of(after, left))
        changes = replace(changes, cursor=(left, names))
        self._remember(look, left, slack_s)
        with self._lock:
            self.bounded += 1
            self._misses = 0
            self._keep_line(after)
        return changes, look.prune, cut

    def _buckets(self, low_us: int, fresh_us: int) -> tuple[list[str], list[str], list[str]] | None:
        """The buckets a bounded look reads (from ``fresh`` to the server time expected
        now), those it counts whole (wholly inside ``[low, fresh)``) and those it counts by
        date (the span's first and last); None when the server's clock is not known in the
        form records are filed by, or when the buckets would be many."""
        with self._lock:
            clock = self._clock
        if clock is None or not clock[2]:
            return None
        expected = clock[0] + (time.monotonic() - clock[1]) + AHEAD_S
        first, last = low_us // 1_000_000, fresh_us // 1_000_000
        if not first <= last <= expected or expected - first > MAX_BUCKETS:
            return None  # (counted before any list is made: a cursor may be hours old)
        edges = [bucket_of(first)] if first == last else [bucket_of(first), bucket_of(last)]
        return buckets_between(last, expected), buckets_between(first + 1, last - 1), edges

    def _clocked(self, rows: Sequence[Any]) -> float | None:
        """The server's clock in a look's answer, kept for the next bounded look."""
        found = clock_of(rows)
        if found is None:
            return None
        with self._lock:
            self._clock = (found[0], time.monotonic(), found[1])
        return found[0]

    def _missing(self, *, asked: bool = False) -> None:
        """A bounded look could not tell (``asked``: after its request): after
        ``MISSES_IN_A_ROW`` of them, the next ``FULL_AFTER_MISSES`` looks are full ones."""
        with self._lock:
            self.missed += int(asked)
            self._misses += 1
            if self._misses >= MISSES_IN_A_ROW:
                self._misses, self._full_for = 0, FULL_AFTER_MISSES

    def _line(self, since: float, recent: frozenset[str]) -> Line:
        """The line of the cursor (``since``, ``recent``): kept from the look that made
        it, or made from the records remembered (call with ``_lock`` held)."""
        found = self._lines.get(id(recent))
        if found is not None and found.recent is recent and found.start == since:
            return found
        return self._keep_line(line_of(since, recent, self._dated))

    def _keep_line(self, line: Line) -> Line:
        """Keep ``line`` for its cursor's next look; the oldest lines beyond ``MAX_LINES``
        are dropped (call with ``_lock`` held)."""
        self._lines[id(line.recent)] = line
        while len(self._lines) > MAX_LINES:
            del self._lines[next(iter(self._lines))]
        return line

    def _full(
        self,
        server: Reader,
        cursor: tuple[float, frozenset[str]] | None,
        slack_s: float,
        own_default: bool,
    ) -> tuple[Changes, bool, bool]:
        """A look at every record of the window, leaving out by name the largest ones
        this cursor has read."""
        since = 0.0 if cursor is None else cursor[0]
        seen = frozenset() if cursor is None else cursor[1]
        with self._lock:
            # The records this cursor has already read are left out by name, the largest
            # first (the position this client keeps): a record is read once, not per look.
            known = [(w, n, at) for n, (at, w) in self._read.items() if n in seen and at >= since]
            skip = {n: at for _, n, at in sorted(known, reverse=True)[:MAX_SKIPPED]}
        rows = server.select_rows(look_query(self.graph, xsd_instant(since), list(skip)))
        self._clocked(rows)
        look = read_look(rows, cursor, slack_s, own_default)
        changes = look.changes
        left, recent = changes.cursor
        still = {n for n, at in skip.items() if at >= left}  # left out, still in the window
        if still:
            changes = replace(changes, cursor=(left, recent | still))
        self._remember(look, left, slack_s)
        return changes, look.prune, len(rows) > MAX_CHANGE_ROWS

    def _remember(self, look: Look, left: float, slack_s: float) -> None:
        """Keep what a look read: the sizes of the latest records (to leave them out of
        full looks) and the dates of every record of the last two windows (to count them
        in bounded looks), at most ``MAX_DATED``; and what this client's own records read
        tell of their subjects (``own_writes``)."""
        changes = look.changes
        whole = [g.value for g in changes.whole if isinstance(g, NamedNode)]
        self.own.read(look.new, look.pairs_of, whole, changes.everything)
        if self.on_theirs is not None and look.new:
            with self._lock:
                theirs = [n for n in look.new if n.rsplit(":", 1)[-1] not in self._made]
            named = {x for n in theirs for pair in look.pairs_of.get(n, ()) for x in pair}
            if named:
                self.on_theirs(named)
        with self._lock:
            self._read.update(look.read)
            if len(self._read) > 4 * MAX_SKIPPED:  # bounded: the latest records are kept
                kept = sorted(
                    ((at, w, n) for n, (at, w) in self._read.items() if at >= left), reverse=True
                )[: 2 * MAX_SKIPPED]  # (half: sorted again only every few hundred records)
                self._read = {n: (at, w) for at, w, n in kept}
            for name, dates in look.dated.items():
                self._dated[name] = (look.read[name][0], dates)
            over = len(self._dated) > MAX_DATED
            if over or left - self._dated_trimmed > TRIM_EVERY_S:
                self._dated_trimmed = left
                oldest = left - slack_s  # a cursor one window behind still counts
                dated = {n: e for n, e in self._dated.items() if e[0] >= oldest}
                if len(dated) > MAX_DATED:
                    latest = heapq.nlargest(MAX_DATED, dated.items(), key=lambda i: i[1][0])
                    dated = dict(latest)
                self._dated = dated
