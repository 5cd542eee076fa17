"""Leases over a SPARQL server that isolates nothing but single writes.

The only thing rdfmem assumes of a server is that **a write it acknowledged is seen by every
read that starts afterwards**. Oxigraph server does not isolate concurrent ``DELETE/INSERT
… WHERE`` requests (8 writers x 200 increments of one counter left 33 values), so no lease
may rest on one conditional update. This protocol needs only inserts, deletes and reads.

A *claim* is a node of the lease graph, written by one request::

    <urn:rdfmem:lease:TOKEN> rm:leaseOn <subject>, … ;      # what it claims
        rm:leaseHolder "host/pid/client" ; rm:leaseTtl 10000 ;
        rm:leaseStart ?now ;                                  # the server's NOW()
        rm:leaseSaw <claim>, … .     # the ticketed claims this same request saw
        # later, maybe: rm:leaseTicket 3

To acquire subjects S, a client

1. inserts its claim (token: a fresh UUID);
2. reads every claim on S together with the server's ``NOW()``. A claim is *live* while
   ``now - start < ttl`` by the server's clock (so clients' clocks never matter); dead
   claims are ignored and deleted (takeover). If its own claim is the only live one, it
   holds S (**fast path**: 2 requests);
3. otherwise it takes a ticket, one more than the highest live ticket, written onto its
   claim (**bakery**), and re-reads until no live claim *blocks* it: a claim whose
   ``(ticket, token)`` is smaller, or a claim without a ticket (a holder from the fast
   path, or a client between steps 1 and 3) that did not see our ticket when inserted.
   Past ``max_wait_ms`` it deletes its claim and raises ``LeaseDenied`` naming a holder;
4. releases by deleting its claim.

Why no two clients ever hold the same subject at once. Say *i* and *j* both hold it, each
having passed its final read ``R_i`` / ``R_j``, and each keeps its claim until it releases.

* Both won on the fast path: *j*'s insert was acknowledged after ``R_i`` (else ``R_i`` sees
  it); so ``R_j`` comes after *i*'s insert and sees *i*. Contradiction.
* *i* by the fast path, *j* by tickets: the same argument shows *j*'s insert follows
  ``R_i``, so ``R_j`` sees *i*'s claim, which has no ticket and saw nothing of *j*'s (it
  was inserted before *j*'s claim existed): it blocks *j*. Contradiction.
* Both by tickets (Lamport's bakery): if *j*'s ticket was written before ``R_i``, ``R_i``
  saw it and *i* passed, so ``(t_i, i) < (t_j, j)``; symmetrically. Both orders cannot
  hold, so one of them, say *j*, wrote its ticket after ``R_i``: ``R_i`` saw *j* without a
  ticket, or not at all. Not at all: *j*'s insert came after ``R_i``, so after *i* wrote
  ``t_i``; *j* read the tickets after its insert and took ``t_j > t_i``. Without a ticket:
  *i* passed, so *j*'s claim saw ``t_i`` when inserted, and again ``t_j > t_i``. Either
  way ``R_j`` sees ``(t_i, i)`` smaller than its own: blocked. Contradiction.

A ticketless claim that saw our ticket cannot enter before us (it will draw a higher
ticket, and it cannot win the fast path beside our claim), so it need not hold us up:
a client coming back for the next lease does not stall the line. Progress: the lowest
``(ticket, token)`` among live claims is never blocked once every claim has its ticket,
and tickets only grow while claims are live, so nobody starves. A crashed client's claim
dies after its ttl; a client waiting longer than a third of its ttl renews its claim.

Reads need not be snapshots (Virtuoso reads committed rows as it goes): a claim seen
half-written counts as live, ticketless and blind to us, and of a claim being renewed the
later start counts, which can only make a reader wait longer.

A lease is a promise in time: past its ttl another client may take it over. The holder
stops trusting its lease a little before ``expires_at`` (a fifth of the ttl, at most 1 s,
measured from before its claim was sent, so earlier than the server's own view): a write
after that raises ``LeaseExpired`` instead of being sent, and so does a release (after
deleting the claim all the same).

A key/value read-modify-write (``Leases.exclusive``) costs three requests when nobody else
wants the key: insert the claim; read the claims, and with them the entry itself when one
query reads one snapshot (Oxigraph server); send the write and the release together.

The protocol is written as generators of steps (``Select``, ``Update``, ``Sleep``) with no
I/O, run by ``run``; tests interleave several of them step by step against a local store.
"""

from __future__ import annotations

import os
import random
import re
import socket
import threading
import time
import uuid
from calendar import timegm
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, TypeVar

from pyoxigraph import Literal, NamedNode

from .errors import BackingError, LeaseDenied, LeaseExpired
from .ontology import RDFMEM
from .terms import sparql_term

__all__ = [
    "Claim",
    "Lease",
    "Leases",
    "Pace",
    "Select",
    "Sleep",
    "Update",
    "acquire",
    "check",
    "delete_claims",
    "release",
    "run",
]

LEASE_ON = NamedNode(RDFMEM + "leaseOn")
LEASE_HOLDER = NamedNode(RDFMEM + "leaseHolder")
LEASE_START = NamedNode(RDFMEM + "leaseStart")
LEASE_TTL = NamedNode(RDFMEM + "leaseTtl")
LEASE_TICKET = NamedNode(RDFMEM + "leaseTicket")
LEASE_SAW = NamedNode(RDFMEM + "leaseSaw")
CLAIM_PREFIX = "urn:rdfmem:lease:"
#: The subject of a claim on every subject (``exclusive([])``: ``restore``, ``clear``): it
#: conflicts with every claim, and every claim with it.
EVERY = NamedNode("urn:rdfmem:lease-on:every-subject")
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
    deadline: float  # time.monotonic() after which the claim is not trusted any more
    expires_at: int  # ms since the epoch (wall clock), for the caller
    #: The subjects' quads as the winning read saw them (``acquire(prefetch=True)``).
    prefetch: list[Row] | None = None

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


def _conflicting(subjects: Sequence[NamedNode]) -> str:
    """A group binding ``?s`` to every subject a claim on ``subjects`` conflicts with: the
    subjects and ``EVERY``; any subject at all for a claim on ``EVERY``."""
    if EVERY in subjects:
        return ""
    return f"VALUES ?s {{ {_values([*subjects, EVERY])} }}"


def _insert_claim(graph: NamedNode, claim: Claim, holder: str, ttl_ms: int) -> str:
    # The claim also notes the ticketed claims this very request saw (rm:leaseSaw).
    g, c = sparql_term(graph), sparql_term(claim.node)
    on = ", ".join(sparql_term(s) for s in claim.subjects)
    return (
        f"INSERT {{ GRAPH {g} {{ {c} {LEASE_ON} {on} ; {LEASE_HOLDER} "
        f"{sparql_term(Literal(holder))} ; {LEASE_TTL} {int(ttl_ms)} ; "
        f"{LEASE_START} ?now ; {LEASE_SAW} ?seen . }} }} WHERE {{ BIND(NOW() AS ?now) "
        f"OPTIONAL {{ GRAPH {g} {{ {_conflicting(claim.subjects)} "
        f"?seen {LEASE_ON} ?s ; {LEASE_TICKET} ?t . }} }} }}"
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
    graph: NamedNode, subjects: Sequence[NamedNode], me: NamedNode, prefetch: bool = False
) -> str:
    # Only rm:leaseOn is required: a claim seen half-written counts as live, ticketless and
    # blind to us, which can only make a reader wait longer. With ``prefetch``, the same
    # read also brings the subjects' own quads (?ps ?pp ?po ?pg), saving the holder a read.
    g = sparql_term(graph)
    body = (
        f"{{ GRAPH {g} {{ {_conflicting(subjects)} ?c {LEASE_ON} ?s . "
        f"OPTIONAL {{ ?c {LEASE_HOLDER} ?holder }} OPTIONAL {{ ?c {LEASE_START} ?start }} "
        f"OPTIONAL {{ ?c {LEASE_TTL} ?ttl }} OPTIONAL {{ ?c {LEASE_TICKET} ?ticket }} "
        f"OPTIONAL {{ ?c {LEASE_SAW} ?saw FILTER(?saw = {sparql_term(me)}) }} }} }}"
    )
    if prefetch:
        body += (
            f" UNION {{ VALUES ?ps {{ {_values(subjects)} }} GRAPH ?pg {{ ?ps ?pp ?po }} "
            f"FILTER(?pg != {g}) }}"
        )
    return (
        "SELECT ?c ?holder ?start ?ttl ?ticket ?saw ?ps ?pp ?po ?pg (NOW() AS ?now) "
        f"WHERE {{ {body} }}"
    )


_INSTANT = re.compile(
    r"^(-?\d{4,})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?$"
)


def instant(text: str) -> float:
    """Seconds since the epoch of an ``xsd:dateTime`` (no time zone is read as UTC).

    >>> instant("1970-01-01T00:00:01.5Z"), instant("1970-01-01T01:00:00+01:00")
    (1.5, 0.0)

    Raises:
        BackingError: the text is not a dateTime.
    """
    m = _INSTANT.match(text.strip())
    if m is None:
        raise BackingError(f"the server's NOW() is not an xsd:dateTime: {text!r}")
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    seconds = float(timegm((year, month, day, hour, minute, second, 0, 0, 0)))
    if m.group(7):
        seconds += float("0." + m.group(7))
    zone = m.group(8)
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return seconds


@dataclass
class _Seen:
    token: str
    holder: str = "?"
    start: float | None = None
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
                seen.start = start if seen.start is None else max(seen.start, start)
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
    clock: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
    pace: Pace | None = None,
    prefetch: bool = False,
    ignore: frozenset[str] = frozenset(),
) -> Steps[Claim]:
    """The steps that acquire ``subjects`` (no subjects: every subject); returns the claim
    held. ``pace`` (how long a holder usually keeps a lease) spaces the polls of a waiting
    client; claims whose tokens are in ``ignore`` (this client's own) never block it.

    Raises:
        LeaseDenied: another holder kept a subject past ``max_wait_ms``.
    """
    subjects = tuple(sorted(set(subjects), key=lambda s: s.value)) or (EVERY,)
    prefetch = prefetch and EVERY not in subjects
    ttl_ms = max(1, int(ttl_ms))
    give_up = clock() + max(0, max_wait_ms) / 1000.0
    margin = min(ttl_ms / 5000.0, 1.0)
    pace = pace or Pace()
    while True:
        started, started_wall = clock(), wall()
        claim = Claim(
            token=uuid.uuid4().hex,
            subjects=subjects,
            label=label,
            deadline=started + ttl_ms / 1000.0 - margin,
            expires_at=int(started_wall * 1000) + ttl_ms,
        )
        yield Update(_insert_claim(graph, claim, holder, ttl_ms))
        ticket: int | None = None
        ahead: frozenset[str] = frozenset()
        moved = clock()
        while True:
            rows = yield Select(_read_claims(graph, subjects, claim.node, prefetch))
            claims = _seen(rows or [])
            mine = claims.pop(claim.token, None)
            for token in ignore:
                claims.pop(token, None)
            dead = [NamedNode(CLAIM_PREFIX + t) for t, c in claims.items() if c.dead()]
            live = [c for c in claims.values() if not c.dead()]
            if mine is None or mine.dead():
                # Our own claim was taken for dead (we were slower than its ttl): retract
                # it and start again with a new one.
                yield Update(delete_claims(graph, [claim.node]))
                break
            if prefetch:
                claim.prefetch = [r for r in rows or [] if "ps" in r]
            if not live:
                if dead:
                    yield Update(delete_claims(graph, dead))
                return claim
            if ticket is None:
                ticket = 1 + max((c.ticket or 0 for c in live), default=0)
                write = (
                    f"INSERT DATA {{ GRAPH {sparql_term(graph)} {{ {sparql_term(claim.node)} "
                    f"{LEASE_TICKET} {ticket} }} }}"
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


@dataclass
class Pace:
    """How long this client's leases are usually held (a moving average, in seconds)."""

    hold: float = 0.005

    def held(self, seconds: float) -> None:
        self.hold = min(1.0, max(0.0005, 0.8 * self.hold + 0.2 * seconds))


def release(graph: NamedNode, claim: Claim) -> Steps[None]:
    """The step that gives a claim up (deleting it; idempotent)."""
    yield Update(delete_claims(graph, [claim.node]))


class Wire(Protocol):
    """What the protocol needs of a server connection."""

    def select_rows(self, sparql: str) -> list[dict[str, Any]]: ...

    def send_update(self, sparql: str) -> None: ...

    def snapshot_reads(self) -> bool:
        """True when one query reads one consistent state of the server."""
        ...


def run(steps: Steps[T], wire: Wire) -> T:
    """Run protocol steps against a connection, blocking."""
    reply: Any = None
    while True:
        try:
            step = steps.send(reply)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        reply = None
        if isinstance(step, Select):
            reply = wire.select_rows(step.sparql)
        elif isinstance(step, Update):
            wire.send_update(step.sparql)
        else:
            time.sleep(step.seconds)


# -- the client side: held leases, local exclusion, fencing ---------------------------------


class _SubjectLocks:
    """Threads of one client take turns per subject; ``[]`` means every subject."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy: set[str] = set()
        self._all = False

    @contextmanager
    def hold(self, subjects: Sequence[NamedNode]) -> Iterator[None]:
        names = {s.value for s in subjects}
        with self._cond:
            while self._all or (not names and self._busy) or (names & self._busy):
                self._cond.wait()
            if names:
                self._busy |= names
            else:
                self._all = True
        try:
            yield
        finally:
            with self._cond:
                if names:
                    self._busy -= names
                else:
                    self._all = False
                self._cond.notify_all()


@dataclass
class Leases:
    """The leases one client holds on one server, and its local turn-taking.

    ``exclusive`` is what the key/value layer holds around each read-modify-write: a claim
    of its own (``ttl_ms``, ``wait_ms``), or the lease this client already holds on the
    subject (``acquire``).
    """

    wire: Wire
    graph: NamedNode
    ttl_ms: int = 10_000
    wait_ms: int = 30_000
    holder: str = field(
        default_factory=lambda: f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
    )

    def __post_init__(self) -> None:
        self.held: dict[str, Claim] = {}
        self._held_lock = threading.Lock()
        self._locks = _SubjectLocks()
        self._active = threading.local()
        self.pace = Pace()

    def acquire(
        self, subjects: Sequence[NamedNode], ttl_ms: int, max_wait_ms: int, label: str
    ) -> Claim:
        """Acquire and keep a lease until ``release``.

        Raises:
            LeaseDenied: another holder kept it past ``max_wait_ms``.
            Unreachable: the server did not answer.
        """
        claim = run(
            acquire(
                self.graph,
                subjects,
                holder=self.holder,
                ttl_ms=ttl_ms,
                max_wait_ms=max_wait_ms,
                label=label,
                pace=self.pace,
            ),
            self.wire,
        )
        with self._held_lock:
            self.held[claim.token] = claim
        return claim

    def release(self, token: str) -> None:
        """Give a held lease up; unknown or released tokens are a no-op.

        Raises:
            LeaseExpired: the lease had expired (its claim is deleted all the same).
        """
        with self._held_lock:
            claim = self.held.pop(token, None)
        if claim is None:
            return
        run(release(self.graph, claim), self.wire)
        if time.monotonic() >= claim.deadline:
            raise _expired(claim, " before it was released: another client may have held it")

    def forget(self, token: str) -> None:
        """Delete the claim ``token`` on the server, held here or not (idempotent)."""
        if re.fullmatch(r"[0-9a-f]{32}", token):
            self.wire.send_update(delete_claims(self.graph, [NamedNode(CLAIM_PREFIX + token)]))

    def _covering(self, subject: NamedNode) -> Claim | None:
        with self._held_lock:
            for claim in self.held.values():
                if subject in claim.subjects:
                    return claim
        return None

    @contextmanager
    def exclusive(self, subjects: Sequence[NamedNode]) -> Iterator[None]:
        """Hold ``subjects`` against every client of the server for one read-modify-write.

        The section's last write travels with the release of its claim, in one request.

        Raises:
            LeaseDenied: another client held a subject longer than ``wait_ms``.
            LeaseExpired: this client holds a lease on a subject, and it has expired.
        """
        with self._locks.hold(subjects):
            fences: list[Claim] = []
            missing: list[NamedNode] = []
            for subject in subjects:
                covering = self._covering(subject)
                if covering is None:
                    missing.append(subject)
                elif covering not in fences:
                    fences.append(covering)
            if not subjects:  # every subject: under this client's own leases too
                with self._held_lock:
                    fences = list(self.held.values())
                missing = [EVERY]
            for claim in fences:
                check(claim)
            own: Claim | None = None
            if missing:
                label = missing[0].value if len(missing) == 1 else f"{len(missing)} subjects"
                own = run(
                    acquire(
                        self.graph,
                        missing,
                        holder=self.holder,
                        ttl_ms=self.ttl_ms,
                        max_wait_ms=self.wait_ms,
                        label=label,
                        pace=self.pace,
                        prefetch=self.wire.snapshot_reads(),
                        ignore=frozenset(c.token for c in fences),
                    ),
                    self.wire,
                )
                fences.append(own)
            won = time.monotonic()
            section = _Section(fences, own)
            stack = self._sections()
            stack.append(section)
            try:
                yield
            except BaseException:
                stack.pop()
                self._close(section, raise_expired=False)
                raise
            stack.pop()
            self._close(section, raise_expired=True)
            if own is not None:
                self.pace.held(time.monotonic() - won)

    def _sections(self) -> list[_Section]:
        stack: list[_Section] = self._active.__dict__.setdefault("stack", [])
        return stack

    def _close(self, section: _Section, *, raise_expired: bool) -> None:
        parts, expired = list(section.pending), None
        if parts:
            try:
                for claim in section.fences:
                    check(claim)
            except LeaseExpired as exc:
                parts, expired = [], exc
        if section.own is not None:
            parts.append(delete_claims(self.graph, [section.own.node]))
        if parts:
            self.wire.send_update(" ; ".join(parts))
        if expired is not None and raise_expired:
            raise expired

    def write(self, requests: Sequence[str]) -> None:
        """Send updates, checking first that every lease this thread writes under holds.

        Inside a section holding its own claim, a write of one request waits to travel
        with the release (reads in between send it first: ``flush``).

        Raises:
            LeaseExpired: a lease this thread writes under has expired; nothing is sent.
        """
        stack = self._sections()
        for section in stack:
            for claim in section.fences:
                check(claim)
        if stack:
            stack[-1].wrote = True
        if stack and stack[-1].own is not None and len(requests) == 1:
            self.flush()
            stack[-1].pending.append(requests[0])
            return
        self.flush()
        for request in requests:
            self.wire.send_update(request)

    def prefetched(self, subject: NamedNode) -> list[Row] | None:
        """The quads of ``subject`` read with this thread's claim on it (rows of ``?pp ?po
        ?pg``), while nothing has been written since; None when there are none to trust."""
        stack = self._active.__dict__.get("stack")
        if not stack or stack[-1].wrote or stack[-1].own is None:
            return None
        own = stack[-1].own
        if own.prefetch is None or subject not in own.subjects:
            return None
        return [
            r
            for r in own.prefetch
            if r.get("ps") == subject and "pp" in r and "po" in r and "pg" in r
        ]

    def flush(self) -> None:
        """Send the writes this thread deferred, so that a read sees them."""
        for section in self._active.__dict__.get("stack", ()):
            while section.pending:
                self.wire.send_update(section.pending.pop(0))


@dataclass
class _Section:
    """One ``exclusive`` block: the claims it writes under, its own claim, deferred writes."""

    fences: list[Claim]
    own: Claim | None
    pending: list[str] = field(default_factory=list)
    wrote: bool = False


def check(claim: Claim) -> None:
    """Raise ``LeaseExpired`` when ``claim`` is no longer to be trusted."""
    if time.monotonic() >= claim.deadline:
        raise _expired(claim)


def _expired(claim: Claim, what: str = "; nothing was written") -> LeaseExpired:
    return LeaseExpired(
        f"the lease on {claim.label!r} (token {claim.token}) expired{what}",
        subject=claim.label,
        token=claim.token,
    )
