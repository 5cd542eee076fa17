"""What this client's own writes left on the server, so that its followers do not read
them back (``SparqlBackend.known_quads``).

A domain write (``Memories.save``, ``DecisionGraph.add_node`` …) sends a SPARQL update
under a lease whose claim's read brought the triples of the subjects it names
(``Leases.prefetched``), declares the graph and subjects it changes (``scope``), and says
that its update reads nothing else (``rdfmem.backends.prefetch.self_contained``); its
change record goes in the same request. When the record is made, the update is run here
on a small in-memory store holding those prefetched triples, and the triples the declared
subjects hold afterwards are kept under the record's name (*expected*). The record is in
the log only if the write committed, so when a look reads it, the expectation becomes what
the server holds (*known*) for each of its subjects, unless another client's record in the
same look names the subject too (their order is unknown). Any later record of another
client naming the subject, its graph whole, or everything, forgets it. A follower reads a
subject again only after a look (``follow``), so a subject known then holds exactly those
triples: the follower's read is answered here, with no request.

Known triples answer only outside a lease section (inside one, the claim's read is the
truth) and never for the graph standing for rdfmem's default graph. Writes are expected
only on a server with ``snapshot_reads`` (Oxigraph server), which keeps literals as sent:
Virtuoso, for one, gives dates back without their time zone. An update the
in-memory store cannot run (another dialect) or a subject whose triples were not all
prefetched keeps nothing: the follower reads the server, as before.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from pyoxigraph import NamedNode, Quad, Store

from rdfmem.backends.prefetch import contained

__all__ = ["MAX_EXPECTED", "MAX_KNOWN", "OwnWrites", "expecting", "known_quads", "wrote_in_section"]

#: Records made and not yet read by a look, kept at most (a write that failed leaves one).
MAX_EXPECTED = 4096
#: Subjects whose triples are known at most (the oldest are forgotten).
MAX_KNOWN = 20_000

Pair = tuple[str, str]

#: What an update may make differently on the server and here (a time, a random value, a
#: blank node): such an update expects nothing (a string of its data that only looks so,
#: as well: the subject is then read from the server).
_VOLATILE = re.compile(r"(?i)\b(NOW|RAND|UUID|STRUUID|BNODE)\s*\(|_:|\[\s*\]")


class OwnWrites:
    """The expected and known triples of this client's own writes (see the module)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # Record name -> (its order among this client's records, what its subjects hold).
        self._expected: OrderedDict[str, tuple[int, dict[Pair, list[Quad]]]] = OrderedDict()
        self._made = 0
        self._known: OrderedDict[Pair, list[Quad]] = OrderedDict()
        self.answered = 0  # reads answered here (for tests and benchmarks)

    def expect(
        self,
        name: str,
        graph: NamedNode,
        subjects: Sequence[NamedNode],
        sparql: str,
        rows: Sequence[Mapping[str, Any]],
    ) -> None:
        """Run ``sparql`` on the prefetched ``rows`` (``?ps ?pp ?po ?pg``, covering every
        subject it reads) and keep what ``subjects`` hold in ``graph`` afterwards, as the
        expectation of record ``name``."""
        if not subjects or _VOLATILE.search(sparql):
            return
        local = Store()
        try:
            local.extend(
                Quad(r["ps"], r["pp"], r["po"], r["pg"])
                for r in rows
                if "ps" in r and "pp" in r and "po" in r and isinstance(r.get("pg"), NamedNode)
            )
            local.update(sparql)
        except (SyntaxError, OSError, ValueError, TypeError, RuntimeError):
            return  # a dialect Oxigraph does not run: nothing is expected
        after = {
            (graph.value, s.value): [
                Quad(q.subject, q.predicate, q.object, graph)
                for q in local.quads_for_pattern(s, None, None, graph)
            ]
            for s in subjects
        }
        with self._lock:
            self._made += 1
            self._expected[name] = (self._made, after)
            while len(self._expected) > MAX_EXPECTED:
                self._expected.popitem(last=False)

    def read(
        self,
        names: Sequence[str],
        pairs_of: Mapping[str, frozenset[Pair]],
        whole: Sequence[str],
        everything: bool,
    ) -> None:
        """What a look read: ``names`` of the records new to it, the subjects each trusted
        one names (``pairs_of``), the graphs changed whole, or ``everything``."""
        with self._lock:
            if everything:
                self._known.clear()
            elif whole:
                gone = set(whole)
                for pair in [p for p in self._known if p[0] in gone]:
                    del self._known[pair]
            # A subject two of this client's records name: the later one's (its writes to
            # one subject go one after the other, under its lease, in the order made).
            mine: dict[Pair, tuple[int, list[Quad]]] = {}
            theirs: set[Pair] = set()
            for name in names:
                pairs = pairs_of.get(name, frozenset())
                expected = self._expected.pop(name.rsplit(":", 1)[-1], None)
                if expected is None:
                    theirs.update(pairs)
                    continue
                order, after = expected
                for pair in pairs:
                    quads = after.get(pair)
                    if quads is None:
                        theirs.add(pair)
                    elif pair not in mine or mine[pair][0] < order:
                        mine[pair] = (order, quads)
            for pair in theirs:
                self._known.pop(pair, None)
            if everything:
                return  # what a look that reports everything read is not told apart
            for pair, (_, quads) in mine.items():
                if pair not in theirs and pair[0] not in whole:
                    self._known.pop(pair, None)
                    self._known[pair] = quads
            while len(self._known) > MAX_KNOWN:
                self._known.popitem(last=False)

    def known(self, graph: NamedNode, subjects: Sequence[NamedNode]) -> list[Quad] | None:
        """The triples of every one of ``subjects`` in ``graph`` when all are known;
        else None."""
        found: list[Quad] = []
        with self._lock:
            for subject in subjects:
                quads = self._known.get((graph.value, subject.value))
                if quads is None:
                    return None
                found.extend(quads)
            self.answered += 1
        return found


def known_quads(
    backend: Any, own: OwnWrites, graph: NamedNode, subjects: Sequence[NamedNode]
) -> list[Quad] | None:
    """The quads of ``subjects`` in ``graph`` a SPARQL client knows without a request
    (``rdfmem.store.known_rows``): inside a lease section, those its claim's read brought
    (``Leases.prefetched``); outside one, those its own writes left (``OwnWrites.known``);
    None for the graph standing for rdfmem's default graph, or when not all are known."""
    if graph == getattr(backend, "default_graph", None):
        return None
    if backend.leases.section() is None:
        return own.known(graph, subjects)
    quads: list[Quad] = []
    for subject in subjects:
        rows = backend.leases.prefetched(subject)
        if rows is None:
            return None
        quads.extend(Quad(subject, r["pp"], r["po"], graph) for r in rows if r["pg"] == graph)
    return quads


def wrote_in_section(leases: Any) -> None:
    """Note that this thread's section wrote (what its claim read is stale: nothing more
    is expected from it, ``Section.rows_for``)."""
    section = leases.section()
    if section is not None:
        section.wrote = True


def expecting(backend: Any) -> bool:
    """Whether this thread's update's effect may be computed client-side: a domain write
    (``self_contained``: it reads only what its claim's read brought) on a server that
    keeps literals as sent (``snapshot_reads``: Oxigraph server; Virtuoso, for one, gives
    dates back without their time zone)."""
    return contained() and bool(backend.snapshot_reads())
