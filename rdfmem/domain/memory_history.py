"""The past of memories, on a store keeping history: ``Memories.history``, and the reads
``as_of=`` a moment (``Memories.read``, ``list``, ``search``).

Every ``save`` and ``forget`` of a memory appends, to its own SPARQL update, the
operations of ``RdfStore.versioning_update``: the memory's quads after the write (or a
tombstone) become a version in ``urn:rdfmem:history:<scope graph>``, with the write's time,
agent and reason, in the same request. So:

* ``history(scope, title)`` is the memory's versions, oldest first, each ``.value`` the
  ``Memory`` it was (None once forgotten);
* ``read(..., as_of=t)`` is the version in effect at ``t`` (``RdfStore.as_of_quads``);
* ``list(..., as_of=t)`` and ``search(..., as_of=t)`` run over the scopes' graphs as they
  were at ``t``, rebuilt in a fresh in-memory store (``rdfmem.domain.past.snapshot``): the
  same queries and the same ranking as now, over the memories alive then. A memory saved
  before history was kept has no version, and is not in the past.

>>> import datetime as dt
>>> from rdfmem import RdfStore
>>> from rdfmem.domain.memories import Memories, Memory
>>> memories = Memories(RdfStore(history=True, agent="urn:agent:notes"))
>>> _ = memories.save(Memory("global", "Office", "The office is in Ghent."))
>>> before = dt.datetime.now(dt.timezone.utc)
>>> with memories.store.attributed(by="urn:agent:mover", why="the team moved"):
...     _ = memories.save(Memory("global", "Office", "The office is in Leuven."))
>>> [(v.value.content, v.by) for v in memories.history("global", "Office")]
[('The office is in Ghent.', 'urn:agent:notes'), ('The office is in Leuven.', 'urn:agent:mover')]
>>> memories.read("global", "Office", as_of=before).content
'The office is in Ghent.'
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import replace

from pyoxigraph import NamedNode

from rdfmem.core.errors import MemoryNotFound
from rdfmem.core.terms import sparql_term
from rdfmem.domain.memory_model import Memory
from rdfmem.domain.memory_rdf import memory_from_quads
from rdfmem.domain.past import moment_of, require_history, snapshot
from rdfmem.store.history import StateLines
from rdfmem.store.history_reads import Version
from rdfmem.store.rdfstore import RdfStore

__all__ = ["past_store", "read_as_of", "versioned", "versions"]


def versioned(
    store: RdfStore,
    update: str,
    graph: NamedNode,
    subject: NamedNode,
    state: Sequence[str] | None = None,
) -> str:
    """``update`` followed by the operations recording ``subject``'s version, when the
    store keeps history (call inside the write's ``exclusive`` section).

    ``state``: when ``update`` replaces all of the memory's quads, the N-Triples lines it
    writes for it (``memory_rdf._triples``; ``[]`` for ``forget``): an embedded store then
    writes the version as data, with no pattern to evaluate nor tombstone to test
    (``RdfStore.versioning_update``'s ``states``). When ``update`` ends with the
    ``INSERT DATA`` of exactly those lines into ``graph`` (as ``Memories.save`` writes it),
    they are passed as ``StateLines.sent``: the request already holds them as data, so the
    version's copy checks them for its own needs only, not term by term."""
    if not store.keeps_history:
        return update
    states = None
    if state is not None:
        # The lines are ``update``'s own INSERT DATA of the memory (``Memories.save``):
        # checked here in one comparison, so the version's copy skips the term checks.
        body = "\n".join(state)
        sent = update.endswith(f"INSERT DATA {{ GRAPH {sparql_term(graph)} {{\n{body}\n}} }}")
        states = {subject: StateLines(tuple(state), sent=sent and bool(state))}
    return update + " ;\n" + store.versioning_update(graph, [subject], states=states)


def versions(store: RdfStore, graph: NamedNode, subject: NamedNode) -> list[Version]:
    """Every version of the memory at ``subject``, oldest first, ``.value`` its ``Memory``
    (None once forgotten, or when the version is not a whole memory).

    Raises:
        HistoryUnavailable: the store keeps no history.
    """
    require_history(store)
    return [
        replace(v, value=None if v.deleted else memory_from_quads(v.state))
        for v in store.history_of(graph, subject)
    ]


def read_as_of(
    store: RdfStore, graph: NamedNode, subject: NamedNode, moment: object, what: str
) -> Memory:
    """The memory at ``subject`` as it was at ``moment``.

    Raises:
        HistoryUnavailable: the store keeps no history.
        InvalidValue: ``moment`` is not a datetime.
        MemoryNotFound: no memory there at that moment (``what`` names it).
    """
    t = moment_of(store, moment)
    found = memory_from_quads(store.as_of_quads(graph, subject, t) or ())
    if found is None:
        raise MemoryNotFound(f"no {what} at {t.isoformat()} (in the history kept)")
    return found


def past_store(store: RdfStore, graphs: list[NamedNode], moment: object) -> RdfStore:
    """A new in-memory store holding the scope ``graphs`` as they were at ``moment``.

    Raises:
        HistoryUnavailable: the store keeps no history.
        InvalidValue: ``moment`` is not a datetime.
    """
    t: _dt.datetime = moment_of(store, moment)
    return snapshot(store, graphs, t)
