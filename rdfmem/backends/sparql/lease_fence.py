"""Fenced writes: a write under a claim lands only while the server still holds that claim
for this client, judged by the server in the write's own request.

A client trusts its claim until a deadline on its own clock, but a request can spend any
time on the way (a slow network, a proxy that retries, a suspended laptop), so that clock
alone cannot keep a late write from landing after another client took the subject over.
So every write made under claims travels behind a **fence**, in the same request::

    INSERT { GRAPH <F> { … } } WHERE { { SELECT (COUNT(*) AS ?holding) WHERE {
        <claim> rm:leaseFence 7  FILTER(NOW() < "…its end…"^^xsd:dateTime) } }
        FILTER(?holding = 0) } ;
    CREATE GRAPH <F> ; DROP SILENT GRAPH <F> ;
    DELETE { <claim> rm:leaseFence 7 } … ; INSERT { <claim> rm:leaseFence 8 } … ;
    … the write …

The claim's end is its start as the server wrote it (the server's ``NOW()``, read back with
the claims) plus its time to live, written in the server's own form (neither server adds a
fractional duration to a ``dateTime``): the claim is live by the server's clock, the clock
by which other clients take a dead claim over. ``rm:leaseFence`` is a counter that each
fenced request moves on (a claim has none until its first fence: 0), so a request
delivered twice, or a stale one delivered after a newer one, finds it moved.

When the fence does not hold, the first operation writes a triple into the graph ``F``
named for this request, and ``CREATE GRAPH`` of a graph that holds triples fails (Oxigraph
server: "already exists", and the whole request is rolled back; Virtuoso: "contains triples
already", and it stops there, keeping ``F``, which the client then drops), so the server
stops before the write and answers with an error. The client learns that its write was
refused from the answer itself: the uncontended write keeps its single request. Only after
an error does the client read its claim (``Fence.state``), to tell a refusal
(``LeaseExpired``, nothing written) from another failure.

Why so: Virtuoso answers ``FILTER NOT EXISTS`` (and ``OPTIONAL`` + ``!BOUND``) over this
pattern wrongly, and applies neither half of a ``DELETE/INSERT`` whose ``DELETE`` template
holds an unbound variable; it also ran ``MOVE`` of a missing graph without error. What is
here was checked on both servers.

**The guard.** Neither server isolates a request from the others: the fence is judged when
the request starts (``NOW()`` is the same for its whole run, on Virtuoso the time its
transaction began), its write becomes visible when it commits, and Virtuoso's readers see
the last committed rows without waiting for a writer. A write admitted just before its
claim's end and still running on the server when the claim ended was seen to land after a
client that took the claim for dead had read the entry: both increments reported, one kept
(``tests/test_remote_late_write.py``; the likely cause of the 239 of 240 seen once on
Virtuoso under load).
So a write passes the fence only while its claim has ``guard_s`` (a fifth of its time to
live, at most 1 s) of life left, the same reserve the client keeps by its own clock, and a
client taking a subject over from a claim that ended waits that guard past its end before
it reads (``lease_steps.acquire``): a write is lost now only if it runs on the server for
longer than twice the guard after it was admitted. A renewal writes no data: its fence
needs the claim live, no more. Two copies of one request arriving at the same instant
can both pass the fence on Oxigraph server; rdfmem's writes are ``DELETE DATA`` /
``INSERT DATA`` of given quads, which land once however often they are applied. On
Virtuoso, a refused copy that nobody waits for (a repeating network) leaves its one-triple
graph ``F``, hidden from reads like a scratch graph and dropped as abandoned an hour later
(``rdfmem.backends.sparql.writes.drop_abandoned``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass

from pyoxigraph import Literal, NamedNode

from rdfmem.backends.sparql.lease_steps import (
    LEASE_FENCE,
    LEASE_START,
    Claim,
    Row,
    clock,
    guard_s,
    instant,
    until,
)
from rdfmem.backends.sparql.oneop import refused_at
from rdfmem.backends.sparql.wire import STAGING_PREFIX
from rdfmem.core.errors import BackingError, LeaseExpired, QueryError, StoreError
from rdfmem.core.terms import sparql_term

__all__ = ["Fence", "check", "expired", "learn_end", "renewal", "send_fenced", "started"]


@dataclass
class Fence:
    """The fence of one request under ``claims`` (all of them must hold). With ``guard``
    (writes), each claim must have at least ``guard_s`` of its life left when the request
    starts on the server; without (a renewal, which writes no data), only be live."""

    graph: NamedNode
    claims: Sequence[Claim]
    guard: bool = True

    def __post_init__(self) -> None:
        # Named like a scratch graph (hidden from reads; ``drop_abandoned`` clears one a
        # server might ever keep), with the time it was made.
        base = f"{STAGING_PREFIX}{int(time.time() * 1000)}-fence-{uuid.uuid4().hex}"
        self.gate = NamedNode(base)
        self.next = [max(c.fence) + 1 for c in self.claims]

    def wrap(self, request: str) -> str:
        """``request`` behind the fence, as one request."""
        g, gate = sparql_term(self.graph), sparql_term(self.gate)
        holds, moves = [], []
        for i, (claim, nxt) in enumerate(zip(self.claims, self.next, strict=True)):
            c, f = sparql_term(claim.node), f"?f{i}"
            # A claim has no counter until its first fence (0): a claim written with one
            # made Virtuoso misjudge the cost of reading the claims.
            accepted = " || ".join(f"COALESCE({f}, 0) = {n}" for n in claim.fence)
            # A write admitted at the very end of a claim could still be committing when a
            # taker reads the subject (neither server isolates a request: the fence is
            # judged at its start, the write lands at its end): writes need a guard left.
            end = claim.until
            if end and self.guard:
                end = until(end.split('"')[1], -int(guard_s(claim.ttl_ms) * 1000))
            live = f"NOW() < {end}" if end else "false"  # never read: refused
            holds.append(
                f"GRAPH {g} {{ {c} {LEASE_START} ?s{i} OPTIONAL {{ {c} {LEASE_FENCE} {f} }} "
                f"FILTER({accepted}) }} FILTER({live})"
            )
            # Two operations: Virtuoso applies neither half of a DELETE/INSERT whose
            # DELETE template holds a variable left unbound (no counter yet).
            moves.append(
                f"DELETE {{ GRAPH {g} {{ {c} {LEASE_FENCE} ?f }} }} "
                f"WHERE {{ GRAPH {g} {{ {c} {LEASE_FENCE} ?f }} }} ;\n"
                f"INSERT {{ GRAPH {g} {{ {c} {LEASE_FENCE} {nxt} }} }} "
                f"WHERE {{ GRAPH {g} {{ {c} {LEASE_START} ?s }} }}"
            )
        first = sparql_term(self.claims[0].node)
        return (
            f"INSERT {{ GRAPH {gate} {{ {gate} {LEASE_FENCE} {first} }} }} "
            # Counted, not negated: Virtuoso answers FILTER NOT EXISTS (and OPTIONAL + !BOUND)
            # over this pattern wrongly; COUNT is right on both servers.
            f"WHERE {{ {{ SELECT (COUNT(*) AS ?holding) WHERE {{ {' '.join(holds)} }} }} "
            f"FILTER(?holding = 0) }} ;\n"
            f"CREATE GRAPH {gate} ;\nDROP SILENT GRAPH {gate} ;\n"
            + " ;\n".join(moves)
            + f" ;\n{request}"
        )

    def passed(self) -> None:
        """The request was applied: each claim's counter moved on."""
        for claim, nxt in zip(self.claims, self.next, strict=True):
            claim.fence = (nxt,)

    def unsure(self) -> None:
        """No answer came (it may have been applied): the next fence accepts either."""
        for claim, nxt in zip(self.claims, self.next, strict=True):
            claim.fence = (*claim.fence, nxt)

    def named_in(self, error: BaseException) -> bool:
        """Whether ``error`` is this fence's refusal (creating its gate failed)."""
        return refused_at(error, self.gate)

    def cleared(self) -> str:
        """The update that drops what a refusal may have left (Virtuoso keeps ``F``)."""
        return f"DROP SILENT GRAPH {sparql_term(self.gate)}"

    def state(self) -> str:
        """The read that tells, after an error, whether the fence refused the request."""
        g = sparql_term(self.graph)
        nodes = " ".join(sparql_term(c.node) for c in self.claims)
        return (
            f"SELECT ?c ?f ?start (NOW() AS ?now) WHERE {{ VALUES ?c {{ {nodes} }} "
            f"OPTIONAL {{ GRAPH {g} {{ ?c {LEASE_FENCE} ?f }} }} "
            f"OPTIONAL {{ GRAPH {g} {{ ?c {LEASE_START} ?start }} }} }}"
        )

    def refused(self, rows: Sequence[Row]) -> Claim | None:
        """The claim that was not this client's any more when the request came (the
        request was refused: nothing of it was written), judged from ``state``'s rows;
        None when every claim held (the error was something else). A claim whose counter
        moved past the fence was fenced through: the request's later part failed."""
        lost: Claim | None = None
        for claim, nxt in zip(self.claims, self.next, strict=True):
            found = [r for r in rows if r.get("c") == claim.node]
            counters = {_int(r.get("f")) for r in found} - {None}
            if not counters and any(r.get("start") is not None for r in found):
                counters = {0}  # no fence passed yet
            starts = [r["start"].value for r in found if isinstance(r.get("start"), Literal)]
            now = [r["now"].value for r in found if isinstance(r.get("now"), Literal)]
            if nxt in counters:
                claim.fence = (nxt,)
                continue
            # Live as the fence judged it: with its guard left, for a guarded (write) fence.
            life = claim.ttl_ms / 1000.0 - (guard_s(claim.ttl_ms) if self.guard else 0.0)
            alive = bool(starts and now) and (
                instant(now[0]) - max(instant(s) for s in starts) < life
            )
            if not alive or not counters & set(claim.fence):
                lost = lost or claim
        return lost


def renewal(graph: NamedNode, claim: Claim) -> str:
    """The update that renews ``claim`` (its start moves to the server's ``NOW()``), to be
    sent behind its fence: it renews only a claim still this client's. Its new end is
    then read (``started``)."""
    g, c = sparql_term(graph), sparql_term(claim.node)
    return (
        f"DELETE {{ GRAPH {g} {{ {c} {LEASE_START} ?old }} }} "
        f"INSERT {{ GRAPH {g} {{ {c} {LEASE_START} ?now }} }} "
        f"WHERE {{ GRAPH {g} {{ {c} {LEASE_START} ?old }} BIND(NOW() AS ?now) }}"
    )


def started(graph: NamedNode, claim: Claim) -> str:
    """The read of ``claim``'s start (rows of ``?start``), to learn its end (``until``)."""
    g, c = sparql_term(graph), sparql_term(claim.node)
    return f"SELECT ?start WHERE {{ GRAPH {g} {{ {c} {LEASE_START} ?start }} }}"


def send_fenced(
    send: Callable[[str], None],
    read: Callable[[str], Sequence[Row]],
    fence: Fence,
    request: str,
) -> None:
    """Send ``request`` behind ``fence`` (``send``); after an error answer, read the claims
    (``read``) to tell a refusal from another failure.

    Raises:
        LeaseExpired: the fence refused it: nothing of it was written.
        Unreachable, QueryError, BackingError: it failed otherwise.
    """
    try:
        send(fence.wrap(request))
    except (QueryError, BackingError) as exc:
        try:
            lost = fence.refused(read(fence.state()))
        except StoreError:
            fence.unsure()
            raise exc from None
        if lost is None and fence.named_in(exc):
            # The server names the gate: the fence did not hold when the request came, though
            # the claim looks alive now (its end as this client knew it was earlier than its
            # latest renewal's, when reading that back failed): nothing was written.
            lost = fence.claims[0]
        if lost is not None:
            with suppress(StoreError):
                send(fence.cleared())
            raise expired(
                lost, " before its write reached the server; nothing was written"
            ) from exc
        raise
    except BaseException:
        # No answer: applied or not. (A refusal on Virtuoso then keeps ``F``: not dropped
        # here, where the server may not answer again for a whole timeout; it is hidden
        # from reads and dropped as abandoned.)
        fence.unsure()
        raise
    fence.passed()


def learn_end(claim: Claim, rows: Sequence[Row]) -> None:
    """Note ``claim``'s end from a read of its start (``started``): the latest start."""
    starts = [r["start"].value for r in rows if isinstance(r.get("start"), Literal)]
    if starts:
        claim.until = until(max(starts, key=instant), claim.ttl_ms)


def check(claim: Claim) -> None:
    """Raise ``LeaseExpired`` when ``claim`` is no longer to be trusted by this client's
    clock (the server's fence judges the write again)."""
    if clock() >= claim.deadline:
        raise expired(claim)


def expired(claim: Claim, what: str = "; nothing was written") -> LeaseExpired:
    """The error of a lease that ran out (``what`` ends its message)."""
    return LeaseExpired(
        f"the lease on {claim.label!r} (token {claim.token}) expired{what}",
        subject=claim.label,
        token=claim.token,
    )


def _int(term: object) -> int | None:
    if isinstance(term, Literal):
        try:
            return int(term.value)
        except ValueError:
            return None
    return None
