"""What the domain's writes tell a SPARQL client about themselves (issue 21, remote turns).

``self_contained()`` wraps a domain write whose update reads nothing but the triples its
lease claim's read brought (``Memories.save``, ``DecisionGraph``'s writes): on a SPARQL
server keeping the change log, what it leaves is then known to the client, whose followers
do not read it back (``rdfmem.backends.sparql.own_writes``). Elsewhere a no-op.
"""

from __future__ import annotations

from rdfmem.backends.prefetch import self_contained

__all__ = ["self_contained"]
