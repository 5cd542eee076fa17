"""Whether a lease section's own claim is kept after its write (``Leases``, kept claims):
the rule, apart from the client's state it reads."""

from __future__ import annotations

from rdfmem.backends.sparql.lease_contention import Contention
from rdfmem.backends.sparql.lease_local import Section
from rdfmem.backends.sparql.lease_steps import EVERY, clock, range_node

__all__ = ["keepable"]


def keepable(
    section: Section, *, linger_ms: int, ttl_ms: int, contention: Contention, reuse: float
) -> bool:
    """True when ``section``'s own claim should be kept for this client's next section:
    nobody met on its subjects, time left on it, and (on one subject of a range) a subject
    written again and again. ``reuse``: how often kept claims served again lately."""
    own = section.own
    if own is None or linger_ms <= 0 or EVERY in own.subjects:
        return False
    if section.others or own.waited or contention.contended(own.subjects):
        return False
    now = clock()
    if own.deadline - now <= ttl_ms / 2000.0:
        return False
    within = section.within
    if within is not None and own.subjects == (range_node(within),):
        return True
    # Most kept claims lingered out unused (each then cost a request to delete): keep
    # one in eight, to notice when they would serve again.
    if reuse < 0.3 and not contention.sample():
        return False
    if within is None:
        return True
    # A claim on one subject of a range this client may not claim whole (others write
    # there) is kept only for a subject it writes again and again: a new memory's
    # claim would never be used again.
    again = contention.again(own.subjects)
    return again or not contention.contended([range_node(within)])
