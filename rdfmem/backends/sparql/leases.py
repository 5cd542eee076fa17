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

A lease is a promise in time: past its ttl another client may take it over. So every
write under a claim is **fenced** (``lease_fence``): the server applies it, in the same
request, only while the claim is live by its own clock and its fencing counter is where
the client left it, and refuses it otherwise (``LeaseExpired``, nothing written); a late,
repeated or stale request cannot land. The client also stops trusting a lease a little
before its end (a fifth of the ttl, at most 1 s, on a clock that counts suspend: ``clock``)
and renews a claim of its own when a quarter of its ttl is left, so long sections go on.
The server keeps the same reserve (``guard_s``): it admits a write only while its claim has
that much life left, and a client taking over from a claim that ended waits as much past
its end, since a write admitted at the end may still be committing (``lease_fence``).

A read-modify-write (``Leases.exclusive``) costs three requests when nobody else wants the
subject: insert the claim; read the claims, and with them the subject's quads when one
query reads one snapshot (Oxigraph server); send the write and the release together (a
write of one request made inside the block waits to travel with the release). The argument
above is unchanged by that: the write and the claim's deletion commit in one request, so
the write is made while the claim is held. When the server refuses that request, the
release is sent again alone. ``restore`` and ``clear_graph`` claim ``EVERY``.

Three is the least on such a server for a *new* claim: the claim's insert must be
acknowledged before the read that confirms it (two conditional updates can read one state
and both write, the lost update measured above), and the write must follow that read.

A claim kept after a section for the client's next one (see ``Leases``) is a claim held
across several sections; the argument holds for any length of holding, since the holder
trusts its claim only until its deadline (checked before each write), and the read that
confirms a kept claim only tells whether someone waits and brings the subjects' quads.

A claim may also be on a *range* (``range_node(prefix)``): every IRI starting with the
prefix. Two claims conflict when one is on ``EVERY``, they share a subject, or one is on a
range containing a subject or a range of the other; each read of claims asks for exactly
the claims conflicting with its own, and the relation is symmetric, so the argument goes
through unchanged with "a claim on S" read as "a claim conflicting with S".

The protocol is written as generators of steps (``Select``, ``Update``, ``Sleep``) with no
I/O (``lease_steps``), run by ``run`` (``lease_run``); tests interleave several of them
step by step against a local store. Beside ``Leases`` live the claims it keeps
(``lease_kept``), its memory of contention (``lease_contention``), its threads' sections.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field

from pyoxigraph import NamedNode

from rdfmem.backends.prefetch import taken
from rdfmem.backends.sparql.lease_contention import Contention
from rdfmem.backends.sparql.lease_fence import (
    Fence,
    check,
    expired,
    learn_end,
    renewal,
    send_fenced,
    started,
)
from rdfmem.backends.sparql.lease_keepable import keepable
from rdfmem.backends.sparql.lease_kept import KeptClaims
from rdfmem.backends.sparql.lease_local import Section, SubjectLocks, fences_of, own_covering
from rdfmem.backends.sparql.lease_run import Wire, run
from rdfmem.backends.sparql.lease_steps import (
    CLAIM_PREFIX,
    EVERY,
    Claim,
    Lease,
    Pace,
    Row,
    Select,
    Sleep,
    Steps,
    Update,
    acquire,
    clock,
    confirm,
    delete_claims,
    instant,
    range_node,
    release,
)
from rdfmem.core.errors import BackingError, LeaseExpired, QueryError, StoreError

__all__ = [
    "EVERY",
    "Claim",
    "Lease",
    "Leases",
    "Pace",
    "Row",
    "Select",
    "Sleep",
    "Steps",
    "Update",
    "acquire",
    "check",
    "delete_claims",
    "instant",
    "range_node",
    "release",
    "run",
    "Wire",
]

# -- the client side: held leases, local exclusion, fencing ---------------------------------


@dataclass
class Leases:
    """The leases one client holds on one server, and its local turn-taking.

    ``exclusive`` is what the key/value layer holds around each read-modify-write: a claim
    of its own (``ttl_ms``, ``wait_ms``), or the lease this client already holds on the
    subject (``acquire``).

    **Kept claims** (``linger_ms``, 0 turns them off). Taking a claim costs two requests
    before the section may read (insert, then confirm), so a section's own claim is not
    deleted with its write when nobody else wanted its subjects: it is kept, and the
    client's next section on those subjects begins with one read that both checks for
    waiters and brings the entry (``confirm``), then writes: two requests. A kept claim is
    deleted after ``linger_ms`` unused, at ``close``, or with the write of a section whose
    read found another client's claim waiting on it. Subjects on which this client met
    another one (it waited, or found someone waiting) are not kept for a while
    (``Contention.CONTENDED_S`` and more).

    A section given ``within`` (a range prefix, ``range_node``) claims the whole range
    instead of its subject once ``Contention.ESCALATE_AFTER`` sections in a row in that
    range met nobody: a client saving one new memory after another then holds one kept
    claim on its scope, and each save is two requests. Another client's claim in the range
    conflicts with it and stops the escalation on both sides (``Contention.contend``), so
    clients that share a range settle on claims of their subjects. The cost of all this to
    another client: it may wait up to ``linger_ms`` for a claim kept here, once per such
    period.

    Every write of this client's own that it sends (``write``, ``flush``, the deferred
    write sent with a release) is counted by calling ``on_write`` once per request sent,
    also when the request failed (it may have been applied): the backend's ``wrote``.
    """

    wire: Wire
    graph: NamedNode
    ttl_ms: int = 10_000
    wait_ms: int = 30_000
    holder: str = field(
        default_factory=lambda: f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
    )
    linger_ms: int = 250
    on_write: Callable[[], None] = field(default=lambda: None)

    def __post_init__(self) -> None:
        self.held: dict[str, Claim] = {}
        self._held_lock = threading.Lock()
        self._locks = SubjectLocks()
        self._active = threading.local()
        self.pace = Pace()
        self._kept = KeptClaims(
            linger_s=self.linger_ms / 1000.0, spare_s=self.ttl_ms / 2000.0, delete=self._delete
        )
        self.contention = Contention()

    def acquire(
        self, subjects: Sequence[NamedNode], ttl_ms: int, max_wait_ms: int, label: str
    ) -> Claim:
        """Acquire and keep a lease until ``release``.

        Raises:
            LeaseDenied: another holder kept it past ``max_wait_ms``.
            Unreachable: the server did not answer.
        """
        self.surrender(subjects)
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
        if clock() >= claim.deadline:
            raise expired(claim, " before it was released: another client may have held it")

    def forget(self, token: str) -> None:
        """Delete the claim ``token`` on the server, held here or not (idempotent)."""
        if re.fullmatch(r"[0-9a-f]{32}", token):
            self.wire.send_update(delete_claims(self.graph, [NamedNode(CLAIM_PREFIX + token)]))

    def surrender(self, subjects: Sequence[NamedNode]) -> None:
        """Delete this client's kept claims that cover any of ``subjects`` (all of them for
        none), so that a claim taken outside ``exclusive`` (a held lease) does not wait for
        them."""
        request = self.surrendering(subjects)
        if request is not None:
            self.wire.send_update(request)

    def surrendering(self, subjects: Sequence[NamedNode]) -> str | None:
        """``surrender`` for a caller that sends the request itself (the async twins): the
        kept claims covering ``subjects`` are kept no more, and this update deletes them;
        None when there are none."""
        claims = self._kept.take_covering(subjects)
        return delete_claims(self.graph, [c.node for c in claims]) if claims else None

    def close(self) -> None:
        """Delete every kept claim (one request; a server that does not answer lets them
        expire)."""
        self._delete(self._kept.close())

    def _delete(self, claims: Sequence[Claim]) -> None:
        if claims:
            with suppress(StoreError):
                self.wire.send_update(delete_claims(self.graph, [c.node for c in claims]))

    def holds(self, token: str) -> bool:
        """Whether this client holds the lease ``token`` (acquired, not yet released)."""
        with self._held_lock:
            return token in self.held

    def covering(self, subject: NamedNode) -> Claim | None:
        """The lease this client holds (``acquire``) on ``subject``, if any: a write to
        ``subject`` goes ahead under it instead of taking a claim of its own."""
        with self._held_lock:
            for claim in self.held.values():
                if subject in claim.subjects:
                    return claim
        return None

    @contextmanager
    def exclusive(
        self,
        subjects: Sequence[NamedNode],
        within: str | None = None,
        prefetch: Sequence[NamedNode] = (),
    ) -> Iterator[None]:
        """Hold ``subjects`` against every client of the server for one read-modify-write.

        The section's last write travels with the release of its claim, in one request, or
        alone when the claim is kept (see the class). ``within``: a range prefix that
        contains every subject, which this client may claim instead (``range_node``).
        ``prefetch``: more subjects whose quads the claim's read brings (``prefetched``;
        also ``rdfmem.backends.prefetch``), when the section makes a claim of its own.

        Raises:
            LeaseDenied: another client held a subject longer than ``wait_ms``.
            LeaseExpired: this client holds a lease on a subject, and it has expired.
        """
        extra = (*prefetch, *taken())
        with self._locks.hold(subjects):
            fences: list[Claim] = []
            missing: list[NamedNode] = []
            for subject in subjects:
                covering = self.covering(subject) or own_covering(self._sections(), subject)
                if covering is None:
                    missing.append(subject)
                elif covering not in fences:
                    fences.append(covering)
            if not subjects:  # every subject: under this client's own leases too
                with self._held_lock:
                    fences = list(self.held.values())
                missing = [EVERY]
            self._keep_alive(fences)
            section = Section(fences, None, within=within)
            if missing:
                self._claim(section, missing, extra)
            won = clock()
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
            if section.own is not None:
                self.pace.held(clock() - won)

    def _claim(
        self, section: Section, missing: list[NamedNode], extra: Sequence[NamedNode] = ()
    ) -> None:
        """Give ``section`` a claim of its own on ``missing``: a kept one when it covers
        them and is still alive (one read), else a new one; its read brings the quads of
        ``missing`` and ``extra``."""
        wanted = [*missing, *(s for s in extra if s not in missing)]
        kept = self._kept.take(missing)
        if kept is not None:
            try:
                seen = run(confirm(self.graph, kept, wanted, ignore=self._kept.mine()), self.wire)
            except BaseException:
                self._drop(kept)
                raise
            if seen.alive:
                section.own, section.prefetch = kept, seen.rows
                section.prefetch_for = frozenset(wanted)
                section.others = seen.others
                if seen.others:
                    self.contention.contend(kept.subjects, section.within)
                section.fences.append(kept)
                return
            self._drop(kept)
        target = missing
        within = section.within
        if within is not None and EVERY not in missing and self.contention.escalate(within):
            target = [range_node(within)]
        label = target[0].value if len(target) == 1 else f"{len(target)} subjects"
        own = run(
            acquire(
                self.graph,
                target,
                holder=self.holder,
                ttl_ms=self.ttl_ms,
                max_wait_ms=self.wait_ms,
                label=label,
                pace=self.pace,
                prefetch=wanted if self.wire.snapshot_reads() else (),
                ignore=frozenset(c.token for c in section.fences) | self._kept.mine(),
                # Whether others write in the range matters only while it may be claimed.
                near=None
                if within is None or self.contention.contended([range_node(within)])
                else within,
            ),
            self.wire,
        )
        self.contention.claimed(
            [*own.subjects, *missing], within, waited=own.waited, crowded=own.crowded
        )
        section.own, section.prefetch = own, own.prefetch
        section.prefetch_for = frozenset(wanted)
        self._kept.using(own)
        section.fences.append(own)

    def _drop(self, kept: Claim) -> None:
        """Stop keeping ``kept`` and delete it on the server."""
        self._kept.done(kept, keep=False)
        self._delete([kept])

    def _sections(self) -> list[Section]:
        stack: list[Section] = self._active.__dict__.setdefault("stack", [])
        return stack

    def _close(self, section: Section, *, raise_expired: bool) -> None:
        parts, lapsed = list(section.pending), None
        fences = self._fences(section)
        if parts:
            try:
                self._keep_alive(fences)
            except LeaseExpired as exc:
                parts, lapsed = [], exc
        own = section.own
        keep = (
            raise_expired
            and lapsed is None
            and keepable(
                section,
                linger_ms=self.linger_ms,
                ttl_ms=self.ttl_ms,
                contention=self.contention,
                reuse=self._kept.reuse,
            )
        )
        writes = bool(parts)  # the section's deferred write goes in this request
        if own is not None and not keep:
            parts.append(delete_claims(self.graph, [own.node]))
        try:
            if parts:
                self._send(" ; ".join(parts), write=writes, fences=fences if writes else ())
        except BaseException as exc:
            if own is not None:
                self._kept.done(own, keep=False)
                refused = (QueryError, BackingError, LeaseExpired)
                if isinstance(exc, refused) and (keep or len(parts) > 1):
                    # The server refused the deferred write (all of the request, the
                    # release with it): release alone, so others need not wait for the
                    # claim's ttl.
                    with suppress(StoreError):
                        self.wire.send_update(delete_claims(self.graph, [own.node]))
            if isinstance(exc, LeaseExpired) and not raise_expired:
                return  # the section's own error is the one to report
            raise
        if own is not None:
            self._kept.done(own, keep=keep, brief=keep and self.contention.met(own))
            if (
                keep
                and section.within is not None
                and own.subjects != (range_node(section.within),)
            ):
                self.contention.calm(section.within)
        if lapsed is not None and raise_expired:
            raise lapsed

    def deferring(self) -> bool:
        """True inside an ``exclusive`` block of this thread that holds its own claim: a
        write of one request then travels with the release (``write``)."""
        stack: list[Section] = self._active.__dict__.get("stack", [])
        return bool(stack) and stack[-1].own is not None

    def write(self, requests: Sequence[str]) -> None:
        """Send updates, checking first that every lease this thread writes under holds.

        Inside a section holding its own claim, a write of one request waits to travel
        with the release (reads in between send it first: ``flush``).

        Raises:
            LeaseExpired: a lease this thread writes under has expired; nothing is sent.
        """
        stack = self._sections()
        fences = self._fences()
        self._keep_alive(fences)
        for section in stack:  # an enclosing section's prefetch is stale now too
            section.wrote = True
        if stack and stack[-1].own is not None and len(requests) == 1:
            self.flush()
            stack[-1].pending.append(requests[0])
            return
        self.flush()
        for request in requests:
            self._send(request, fences=fences)

    def section(self) -> Section | None:
        """This thread's innermost ``exclusive`` section (``lease_local``); None outside."""
        stack = self._active.__dict__.get("stack")
        return stack[-1] if stack else None

    def prefetched(self, subject: NamedNode) -> list[Row] | None:
        """``Section.prefetched`` of this thread's innermost section (None outside one)."""
        section = self.section()
        return None if section is None else section.prefetched(subject)

    def flush(self) -> None:
        """Send the writes this thread deferred, so that a read sees them; renew the
        claims this thread writes under when their trusted time runs low."""
        local = self._active.__dict__
        if local.get("quiet") or not local.get("stack"):
            return
        fences = self._fences()
        self._keep_alive(fences)
        for section in local["stack"]:
            while section.pending:
                self._send(section.pending.pop(0), fences=fences)

    def keep_alive(self) -> None:
        """Renew this thread's own claims when a quarter of their time to live is left (a
        long section that keeps talking to the server: a large staged write).

        Raises:
            LeaseExpired: a claim was not this client's any more; nothing was renewed.
        """
        if not self._active.__dict__.get("quiet"):
            self._keep_alive(self._fences())

    def _fences(self, closing: Section | None = None) -> list[Claim]:
        """The claims this thread's writes go under (``closing``: a section just popped)."""
        closed = [closing] if closing else []
        return fences_of([*self._active.__dict__.get("stack", ()), *closed])

    def _keep_alive(self, claims: Sequence[Claim]) -> None:
        # A lease the caller holds (``acquire``) keeps the time to live asked for; a
        # section's own claim is renewed when a quarter of its time is left (a kept claim is
        # taken with more than half: sections of a busy writer do not renew).
        with self._held_lock:
            held = [c for c in claims if c.token in self.held]
        for claim in held:
            check(claim)
        due = [c for c in claims if c.deadline - clock() < c.ttl_ms / 4000.0 and c not in held]
        for claim in due:
            self._renew(claim)

    def _renew(self, claim: Claim) -> None:
        sent = clock()
        try:
            self._send(renewal(self.graph, claim), write=False, fences=[claim], guard=False)
        except LeaseExpired:
            raise expired(claim) from None
        claim.deadline = sent + claim.ttl_ms / 1000.0 - min(claim.ttl_ms / 5000.0, 1.0)
        # Its new end by the server's clock, for the fences to come (a failed read: the old)
        with suppress(StoreError):
            learn_end(claim, self.wire.select_rows(started(self.graph, claim)))

    def _send(
        self,
        request: str,
        *,
        write: bool = True,
        fences: Sequence[Claim] = (),
        guard: bool = True,
    ) -> None:
        """Send an update; when it holds a write (``write``), count it (``on_write``),
        also when it failed: it may have been applied. With ``fences`` (the claims it is
        made under), the server applies it only while each claim is this client's
        (``lease_fence``).

        Raises:
            LeaseExpired: the server refused it: a claim was not this client's any more.
        """
        try:
            if not fences:
                self.wire.send_update(request)
                return
            with ExitStack() as gates:
                for claim in sorted(fences, key=lambda c: c.token):
                    gates.enter_context(claim.gate)
                self._fenced(request, fences, guard)
        finally:
            if write:
                self.on_write()

    def _fenced(self, request: str, fences: Sequence[Claim], guard: bool) -> None:
        local = self._active.__dict__

        def quietly(sparql: str) -> Sequence[Row]:  # a read sending no deferred write
            local["quiet"] = True
            try:
                return self.wire.select_rows(sparql)
            finally:
                local["quiet"] = False

        fence = Fence(self.graph, fences, guard=guard)
        send_fenced(self.wire.send_update, quietly, fence, request)
