"""The lease protocol's steps: claims, the SPARQL that writes and reads them, and
``acquire`` / ``release`` as generators of ``Select``, ``Update`` and ``Sleep`` steps with
no I/O (run by ``rdfmem.backends.sparql.leases.run``).

Why these steps never give two clients one subject at once: ``rdfmem.backends.sparql.leases``.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar

from pyoxigraph import Literal, NamedNode

from rdfmem.backends.sparql.lease_time import clock, guard_s, instant, until
from rdfmem.core.errors import BackingError, LeaseDenied
from rdfmem.core.ontology import RDFMEM
from rdfmem.core.terms import sparql_term

__all__ = [
    "CLAIM_PREFIX",
    "EVERY",
    "LEASE_FENCE",
    "LEASE_START",
    "RANGE_DELIMITERS",
    "RANGE_PREFIX",
    "Claim",
    "Lease",
    "Pace",
    "Row",
    "Select",
    "Sleep",
    "Step",
    "Steps",
    "Update",
    "Confirmed",
    "acquire",
    "clock",
    "confirm",
    "delete_claims",
    "guard_s",
    "instant",
    "range_node",
    "release",
    "sweep",
    "until",
]

LEASE_ON = NamedNode(RDFMEM + "leaseOn")
LEASE_HOLDER = NamedNode(RDFMEM + "leaseHolder")
LEASE_START = NamedNode(RDFMEM + "leaseStart")
LEASE_TTL = NamedNode(RDFMEM + "leaseTtl")
LEASE_TICKET = NamedNode(RDFMEM + "leaseTicket")
LEASE_SAW = NamedNode(RDFMEM + "leaseSaw")
#: The claim's fencing counter, moved on by each write made under it (``lease_fence``).
LEASE_FENCE = NamedNode(RDFMEM + "leaseFence")
CLAIM_PREFIX = "urn:rdfmem:lease:"
#: The subject of a claim on every subject (``exclusive([])``: ``restore``, ``clear``): it
#: conflicts with every claim, and every claim with it.
EVERY = NamedNode("urn:rdfmem:lease-on:every-subject")
#: A claim on ``RANGE_PREFIX + p`` claims every subject whose IRI starts with ``p`` (``p``
#: ends with ``:``, ``/`` or ``#``): see ``range_node``.
RANGE_PREFIX = "urn:rdfmem:lease-range:"
#: The characters a range prefix may end with.
RANGE_DELIMITERS = ":/#"
T = TypeVar("T")
Row: TypeAlias = Mapping[str, Any]


@dataclass(frozen=True)
class Lease:
    """Exclusive write authority over ``subject`` until ``expires_at``.

    ``expires_at`` is in milliseconds since the epoch, by this machine's clock.
    """

    token: str
    expires_at: int
    subject: str


@dataclass
class Claim:
    """A claim this client holds: its node, subjects and the local instant it stops."""

    token: str
    subjects: tuple[NamedNode, ...]
    label: str
    deadline: float  # clock() after which the claim is not trusted any more
    expires_at: int  # ms since the epoch (wall clock), for the caller
    ttl_ms: int = 10_000
    #: When the claim ends by the server's clock (``until``), from its latest start read.
    until: str | None = None
    #: The fencing counter values the server may hold for this claim (``lease_fence``):
    #: one, or two after a fenced request that got no answer.
    fence: tuple[int, ...] = (0,)
    #: Held while a fenced request of this claim is on its way (they go one at a time).
    gate: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)
    #: The subjects' quads as the winning read saw them (``acquire(prefetch=True)``).
    prefetch: list[Row] | None = None
    #: It had to wait for another client's claim (a sign of contention).
    waited: bool = False
    #: Another client claimed something in the range ``acquire(near=...)`` asked about.
    crowded: bool = False

    def covers(self, subject: NamedNode) -> bool:
        """Whether holding this claim excludes every other client from ``subject``."""
        if subject in self.subjects or EVERY in self.subjects:
            return True
        return any(
            s.value.startswith(RANGE_PREFIX)
            and subject.value.startswith(s.value[len(RANGE_PREFIX) :])
            for s in self.subjects
        )

    @property
    def node(self) -> NamedNode:
        return NamedNode(CLAIM_PREFIX + self.token)

    def lease(self) -> Lease:
        return Lease(self.token, self.expires_at, self.label)


@dataclass(frozen=True)
class Select:
    """Run a SELECT; the step's reply is its rows (variable name to term)."""

    sparql: str


@dataclass(frozen=True)
class Update:
    """Run a SPARQL Update."""

    sparql: str


@dataclass(frozen=True)
class Sleep:
    """Wait before the next step."""

    seconds: float


Step: TypeAlias = Select | Update | Sleep
Steps: TypeAlias = Generator[Step, "list[Row] | None", T]


# -- the protocol, as pure step generators --------------------------------------------------


def _values(subjects: Sequence[NamedNode]) -> str:
    return " ".join(sparql_term(s) for s in subjects)


def range_node(prefix: str) -> NamedNode:
    """The subject of a claim on every IRI that starts with ``prefix``, which must end
    with ``:``, ``/`` or ``#`` (a claim on it conflicts with each claim on such an IRI, and
    with each claim on a range that contains it or lies within it).

    >>> range_node("urn:rdfmem:memory:session:").value
    'urn:rdfmem:lease-range:urn:rdfmem:memory:session:'
    """
    if not prefix or prefix[-1] not in RANGE_DELIMITERS:
        raise ValueError(f"a lease range ends with one of {RANGE_DELIMITERS!r}: {prefix!r}")
    return NamedNode(RANGE_PREFIX + prefix)


def _ranges_over(iri: str) -> list[NamedNode]:
    """The range subjects that contain ``iri``: one per prefix ending at a delimiter (for
    a range subject, the ranges containing its prefix, itself included)."""
    text = iri[len(RANGE_PREFIX) :] if iri.startswith(RANGE_PREFIX) else iri
    cuts = [i + 1 for i, ch in enumerate(text) if ch in RANGE_DELIMITERS]
    return [NamedNode(RANGE_PREFIX + text[:cut]) for cut in cuts]


def _in_ranges(var: str, prefixes: Sequence[str]) -> str:
    """A filter expression: ``var`` is an IRI in one of the ranges ``prefixes``, or the
    subject of a range within one of them."""
    return " || ".join(
        f"STRSTARTS(STR({var}), {sparql_term(Literal(text))})"
        for prefix in prefixes
        for text in (prefix, RANGE_PREFIX + prefix)
    )


def _conflicting(var: str, subjects: Sequence[NamedNode]) -> str:
    """A group binding ``var`` to every claim node that conflicts with a claim on
    ``subjects`` (and ``?s`` to what that claim is on). Claims conflict when one is on
    ``EVERY``, or they share a subject, or one is on a range holding a subject (or a range)
    of the other. The relation is symmetric, which the exclusion argument needs: each of
    two conflicting claims' reads finds the other."""
    on = f"{var} {LEASE_ON} ?s ."
    if EVERY in subjects:
        return on
    exact = dict.fromkeys([*subjects, EVERY])
    for subject in subjects:
        exact.update(dict.fromkeys(_ranges_over(subject.value)))
    group = f"{{ VALUES ?s {{ {_values(list(exact))} }} {on} }}"
    ranges = [s.value[len(RANGE_PREFIX) :] for s in subjects if s.value.startswith(RANGE_PREFIX)]
    if ranges:
        group += f" UNION {{ {on} FILTER({_in_ranges('?s', ranges)}) }}"
    return group


def _insert_claim(graph: NamedNode, claim: Claim, holder: str, ttl_ms: int) -> str:
    # The claim also notes the ticketed claims this very request saw (rm:leaseSaw).
    g, c = sparql_term(graph), sparql_term(claim.node)
    on = ", ".join(sparql_term(s) for s in claim.subjects)
    return (
        f"INSERT {{ GRAPH {g} {{ {c} {LEASE_ON} {on} ; {LEASE_HOLDER} "
        f"{sparql_term(Literal(holder))} ; {LEASE_TTL} {int(ttl_ms)} ; "
        f"{LEASE_START} ?now ; {LEASE_SAW} ?seen . }} }} "
        f"WHERE {{ BIND(NOW() AS ?now) "
        f"OPTIONAL {{ GRAPH {g} {{ {_conflicting('?seen', claim.subjects)} "
        f"?seen {LEASE_TICKET} ?t . }} }} }}"
    )


def delete_claims(graph: NamedNode, nodes: Sequence[NamedNode]) -> str:
    """The update deleting the claims ``nodes``."""
    g = sparql_term(graph)
    return (
        f"DELETE {{ GRAPH {g} {{ ?c ?p ?o }} }} WHERE {{ GRAPH {g} {{ "
        f"VALUES ?c {{ {_values(nodes)} }} ?c ?p ?o }} }}"
    )


def _renew_claim(graph: NamedNode, claim: Claim) -> str:
    # Only the start moves; a claim deleted meanwhile (taken for dead) stays deleted.
    g, c = sparql_term(graph), sparql_term(claim.node)
    return (
        f"DELETE {{ GRAPH {g} {{ {c} {LEASE_START} ?old }} }} "
        f"INSERT {{ GRAPH {g} {{ {c} {LEASE_START} ?now }} }} "
        f"WHERE {{ GRAPH {g} {{ {c} {LEASE_START} ?old }} BIND(NOW() AS ?now) }}"
    )


def _read_claims(
    graph: NamedNode,
    subjects: Sequence[NamedNode],
    me: NamedNode,
    prefetch: Sequence[NamedNode] = (),
    near: str | None = None,
) -> str:
    # Only rm:leaseOn is required: a claim seen half-written counts as live, ticketless and
    # blind to us, which can only make a reader wait longer. With ``prefetch``, the same
    # read also brings those subjects' own quads (?ps ?pp ?po ?pg), saving the holder a read;
    # with ``near``, the claims on anything in that range (?n), conflicting or not.
    g = sparql_term(graph)
    body = (
        f"{{ GRAPH {g} {{ {_conflicting('?c', subjects)} "
        f"OPTIONAL {{ ?c {LEASE_HOLDER} ?holder }} OPTIONAL {{ ?c {LEASE_START} ?start }} "
        f"OPTIONAL {{ ?c {LEASE_TTL} ?ttl }} OPTIONAL {{ ?c {LEASE_TICKET} ?ticket }} "
        f"OPTIONAL {{ ?c {LEASE_SAW} ?saw FILTER(?saw = {sparql_term(me)}) }} }} }}"
    )
    if prefetch:
        body += (
            f" UNION {{ VALUES ?ps {{ {_values(prefetch)} }} GRAPH ?pg {{ ?ps ?pp ?po }} "
            f"FILTER(?pg != {g}) }}"
        )
    if near is not None:
        body += (
            f" UNION {{ GRAPH {g} {{ ?n {LEASE_ON} ?ns FILTER({_in_ranges('?ns', [near])}) }} }}"
        )
    return (
        "SELECT ?c ?holder ?start ?ttl ?ticket ?saw ?ps ?pp ?po ?pg ?n (NOW() AS ?now) "
        f"WHERE {{ {body} }}"
    )


@dataclass
class _Seen:
    token: str
    holder: str = "?"
    start: float | None = None
    start_text: str = ""
    ttl: float | None = None
    ticket: int | None = None
    now: float | None = None
    saw_me: bool = False

    def dead(self) -> bool:
        if self.start is None or self.ttl is None or self.now is None:
            return False  # half-written: live
        return self.now - self.start >= self.ttl


def _seen(rows: Sequence[Row]) -> dict[str, _Seen]:
    claims: dict[str, _Seen] = {}
    for row in rows:
        node = row.get("c")
        if not isinstance(node, NamedNode) or not node.value.startswith(CLAIM_PREFIX):
            continue
        seen = claims.setdefault(node.value[len(CLAIM_PREFIX) :], _Seen(node.value))
        seen.token = node.value[len(CLAIM_PREFIX) :]
        try:
            if isinstance(row.get("holder"), Literal):
                seen.holder = row["holder"].value
            if isinstance(row.get("start"), Literal):  # the latest, while being renewed
                start = instant(row["start"].value)
                if seen.start is None or start > seen.start:
                    seen.start, seen.start_text = start, row["start"].value
            if isinstance(row.get("now"), Literal):
                seen.now = instant(row["now"].value)
            if isinstance(row.get("ttl"), Literal):
                seen.ttl = float(row["ttl"].value) / 1000.0
            if isinstance(row.get("saw"), NamedNode):
                seen.saw_me = True
            if isinstance(row.get("ticket"), Literal):
                ticket = int(row["ticket"].value)
                seen.ticket = ticket if seen.ticket is None else min(seen.ticket, ticket)
        except ValueError as exc:
            raise BackingError(f"malformed lease claim {node.value}: {exc}", cause=exc) from exc
    return claims


def acquire(
    graph: NamedNode,
    subjects: Sequence[NamedNode],
    *,
    holder: str,
    ttl_ms: int,
    max_wait_ms: int,
    label: str,
    clock: Callable[[], float] = clock,
    wall: Callable[[], float] = time.time,
    pace: Pace | None = None,
    prefetch: Sequence[NamedNode] = (),
    ignore: frozenset[str] = frozenset(),
    near: str | None = None,
) -> Steps[Claim]:
    """The steps that acquire ``subjects`` (no subjects: every subject); returns the claim
    held. ``pace`` (how long a holder usually keeps a lease) spaces the polls of a waiting
    client; claims whose tokens are in ``ignore`` (this client's own) never block it. The
    winning read also brings the quads of the ``prefetch`` subjects (``Claim.prefetch``):
    ask for them only where one query reads one state of the server. With ``near`` (a
    range prefix), the claim notes whether another client claimed anything in that range
    (``Claim.crowded``), conflicting or not.

    Raises:
        LeaseDenied: another holder kept a subject past ``max_wait_ms``.
    """
    subjects = tuple(sorted(set(subjects), key=lambda s: s.value)) or (EVERY,)
    prefetch = () if EVERY in subjects else tuple(prefetch)
    ttl_ms = max(1, int(ttl_ms))
    give_up = clock() + max(0, max_wait_ms) / 1000.0
    margin = guard_s(ttl_ms)
    pace = pace or Pace()
    while True:
        started, started_wall = clock(), wall()
        claim = Claim(
            token=uuid.uuid4().hex,
            subjects=subjects,
            label=label,
            deadline=started + ttl_ms / 1000.0 - margin,
            expires_at=int(started_wall * 1000) + ttl_ms,
            ttl_ms=ttl_ms,
        )
        yield Update(_insert_claim(graph, claim, holder, ttl_ms))
        ticket: int | None = None
        ahead: frozenset[str] = frozenset()
        moved = clock()
        ends: dict[str, tuple[float, float]] = {}  # others' claims: end, guard (server time)
        while True:
            rows = yield Select(_read_claims(graph, subjects, claim.node, prefetch, near))
            read_at = clock()
            claim.crowded = claim.crowded or any(
                isinstance(r.get("n"), NamedNode)
                and r["n"] != claim.node
                and r["n"].value[len(CLAIM_PREFIX) :] not in ignore
                for r in rows or []
            )
            claims = _seen(rows or [])
            mine = claims.pop(claim.token, None)
            for token in ignore:
                claims.pop(token, None)
            dead = [NamedNode(CLAIM_PREFIX + t) for t, c in claims.items() if c.dead()]
            live = [c for c in claims.values() if not c.dead()]
            for token, seen in claims.items():
                if seen.start is not None and seen.ttl is not None:
                    ends[token] = (seen.start + seen.ttl, guard_s(seen.ttl * 1000))
            if mine is None or mine.dead():
                # Our own claim was taken for dead (we were slower than its ttl): retract
                # it and start again with a new one.
                yield Update(delete_claims(graph, [claim.node]))
                break
            if mine.start_text:
                claim.until = until(mine.start_text, ttl_ms)
            if prefetch:
                claim.prefetch = [r for r in rows or [] if "ps" in r]
            if not live:
                if dead:
                    yield Update(delete_claims(graph, dead))
                yield from _past_ended(claim, ends, live, mine.now, read_at, clock)
                return claim
            claim.waited = True
            if ticket is None:
                ticket = 1 + max((c.ticket or 0 for c in live), default=0)
                # Only onto the claim while it exists: a ticket that arrives late (a
                # slow or repeating network) must not leave a fragment of a deleted claim.
                g, c = sparql_term(graph), sparql_term(claim.node)
                write = (
                    f"INSERT {{ GRAPH {g} {{ {c} {LEASE_TICKET} {ticket} }} }} "
                    f"WHERE {{ GRAPH {g} {{ {c} {LEASE_ON} ?on }} }}"
                )
                if dead:
                    write += " ; " + delete_claims(graph, dead)
                yield Update(write)
                continue  # the bakery needs a read after the ticket is written
            blockers = [
                c
                for c in live
                if (c.ticket is None and not c.saw_me)
                or (c.ticket is not None and (c.ticket, c.token) < (ticket, claim.token))
            ]
            if dead:
                yield Update(delete_claims(graph, dead))
            if not blockers:
                yield from _past_ended(claim, ends, live, mine.now, read_at, clock)
                return claim
            now = clock()
            if now >= give_up:
                yield Update(delete_claims(graph, [claim.node]))
                holding = min(blockers, key=lambda c: (c.ticket is not None, c.ticket or 0))
                raise LeaseDenied(
                    f"lease on {label!r} is held by {holding.holder}; gave up after "
                    f"{max_wait_ms} ms",
                    subject=label,
                    holder=holding.holder,
                )
            if now - started > ttl_ms / 3000.0:
                # A long wait: renew our claim's start, so it stays live and, once we
                # hold it, still has most of its ttl ahead.
                started, started_wall = now, wall()
                yield Update(_renew_claim(graph, claim))
                claim.deadline = started + ttl_ms / 1000.0 - margin
                claim.expires_at = int(started_wall * 1000) + ttl_ms
            # Poll about when the line should have moved: soon when next, later further
            # back, and less and less often while a holder keeps its lease long.
            tokens = frozenset(c.token for c in blockers)
            if tokens != ahead:
                ahead, moved = tokens, now
            pause = pace.hold * (len(blockers) - 0.5)
            if now - moved > 4 * pace.hold:
                pause = max(pause, (now - moved) / 4)
            pause = min(max(pause, 0.0005), 0.05, give_up - now)
            yield Sleep(pause * random.uniform(0.8, 1.2))
        if clock() >= give_up:
            raise LeaseDenied(
                f"lease on {label!r}: our claim outlived its ttl of {ttl_ms} ms before it "
                "could be confirmed; use a longer ttl",
                subject=label,
                holder=holder,
            )


def _past_ended(
    claim: Claim,
    ends: Mapping[str, tuple[float, float]],
    live: Sequence[_Seen],
    now: float | None,
    read_at: float,
    clock: Callable[[], float],
) -> Steps[None]:
    """Before holding: when a claim seen in this acquisition is gone or dead after its end
    (it may have been taken for dead, with a write of its holder admitted by the fence just
    before its guard and still committing), wait until its end plus its guard by the
    server's clock, and drop what the read brought (it may predate that write). Nothing to
    wait for when every claim met was released before its end, as a holder releases."""
    if now is None:
        return
    here = {c.token for c in live}
    late = [end + guard for token, (end, guard) in ends.items() if token not in here and end <= now]
    if not late:
        return
    pause = max(late) - now - (clock() - read_at)
    if pause > 0:
        claim.prefetch = None
        yield Sleep(pause)


@dataclass
class Confirmed:
    """What a holder's read of its own claim found."""

    alive: bool  # the claim is still there and live by the server's clock
    others: bool  # another client's claim conflicts with it: someone waits
    rows: list[Row]  # the prefetched subjects' quads


def confirm(
    graph: NamedNode,
    claim: Claim,
    prefetch: Sequence[NamedNode] = (),
    ignore: frozenset[str] = frozenset(),
) -> Steps[Confirmed]:
    """The step with which a client that kept ``claim`` after a write begins its next
    section under it: one read of the claims that conflict with it (do others wait?) and
    of the ``prefetch`` subjects' quads (claims in ``ignore``, this client's own, are no
    one waiting). The claim excludes every other client while it lives, so that read
    needs no snapshot: nobody else writes those subjects meanwhile."""
    rows = yield Select(_read_claims(graph, claim.subjects, claim.node, prefetch))
    claims = _seen(rows or [])
    mine = claims.pop(claim.token, None)
    if mine is not None and mine.start_text:
        claim.until = until(mine.start_text, claim.ttl_ms)
    for token in ignore:  # this client's other claims
        claims.pop(token, None)
    return Confirmed(
        alive=mine is not None and not mine.dead(),
        others=any(not c.dead() for c in claims.values()),
        rows=[r for r in rows or [] if "ps" in r],
    )


@dataclass
class Pace:
    """How long this client's leases are usually held (a moving average, in seconds)."""

    hold: float = 0.005

    def held(self, seconds: float) -> None:
        self.hold = min(1.0, max(0.0005, 0.8 * self.hold + 0.2 * seconds))


def release(graph: NamedNode, claim: Claim) -> Steps[None]:
    """The step that gives a claim up (deleting it; idempotent)."""
    yield Update(delete_claims(graph, [claim.node]))


def sweep(graph: NamedNode) -> Steps[int]:
    """The steps that delete every dead claim in the lease graph (left by clients killed
    or cut off while holding them; a contender deletes only those in its way): one read
    and, when there are some, one delete. Returns how many were deleted."""
    g = sparql_term(graph)
    rows = yield Select(
        f"SELECT ?c ?on ?start ?ttl (NOW() AS ?now) WHERE {{ GRAPH {g} {{ "
        f"{{ ?c {LEASE_ON} ?on }} UNION {{ ?c {LEASE_FENCE} ?fence }} "
        f"OPTIONAL {{ ?c {LEASE_START} ?start }} OPTIONAL {{ ?c {LEASE_TTL} ?ttl }} }} }}"
    )
    rows = rows or []
    # A fence counter whose claim is gone (no rm:leaseOn, which only a release deletes): a
    # late copy of a fenced write that a server without isolation (Virtuoso) applied
    # while the claim was being released. It claims nothing; it is litter.
    owned = {r.get("c") for r in rows if r.get("on") is not None}
    litter = {r["c"] for r in rows if isinstance(r.get("c"), NamedNode)} - owned
    dead = [NamedNode(CLAIM_PREFIX + t) for t, c in _seen(rows).items() if c.dead()]
    dead += sorted(
        (n for n in litter if n.value.startswith(CLAIM_PREFIX) and n not in dead),
        key=lambda n: n.value,
    )
    if dead:
        yield Update(delete_claims(graph, dead))
    return len(dead)
