"""Queries someone else wrote, sent to this process by a process attached to its store.

``rdfmem query STORE`` in a terminal while ``rdfmem mcp STORE`` or ``rdfmem serve STORE``
owns the store sends its query to the owner (``rdfmem.backends.owner``) with a time limit
(``LIMIT_HEADER``). The owner runs it in the query sandbox (``rdfmem.store.sandbox``), as
``rdfmem serve`` and the MCP ``sparql_query`` tool run theirs: in a child process killed at
the limit and capped in memory, so a runaway query from a terminal cannot stall the agent
that owns the memory. The library's own reads from attached processes carry no limit and
run as before.

After a takeover (the owner exited or was killed, and an attached process opened the
store's files: ``AttachedBackend.reattach``), the new owner guards the queries sent to it
the same way: its sandbox's children read the backend it opened (``_Owned``), never its
socket (which would send the query back to the process they guard), and are retired when
that backend's write generation moves (the other processes write through it too).
"""

from __future__ import annotations

import threading
from typing import Any

from pyoxigraph import NamedNode

from rdfmem.backends.base import Backend
from rdfmem.core.errors import TimedOut
from rdfmem.store.children import ReadSource
from rdfmem.store.rdfstore import RdfStore

__all__ = ["OwnerReads", "guard_owner_reads", "limit_sent_queries"]


def _serialised_answer(
    store: ReadSource, sparql: str, default: list[str], named: list[str]
) -> tuple[str, bytes]:
    """The job a sandbox child runs: the owner's answer to one query."""
    from rdfmem.backends.owner import serialised

    result = store.backend.query(
        sparql,
        default_graph=[NamedNode(g) for g in default] or None,
        named_graphs=[NamedNode(g) for g in named] or None,
    )
    return serialised(result)


class _Owned:
    """The backend a process took over, as the sandbox reads it: its children query it
    where they run, and its own write generation retires them (an ``RdfStore`` over it
    would add a second index hub, whose ``close`` saves an empty index set)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    @property
    def generation(self) -> int:
        return self.backend.generation


class OwnerReads:
    """``OwnerServer.guarded`` for ``store``: a sandbox made at the first guarded query."""

    def __init__(self, store: ReadSource, memory_cap: int | None = None) -> None:
        self.store = store
        self.memory_cap = memory_cap
        self._sandbox: Any = None
        self._lock = threading.Lock()

    def __call__(
        self, sparql: str, default: list[NamedNode], named: list[NamedNode], seconds: float
    ) -> tuple[str, bytes]:
        with self._lock:
            if self._sandbox is None:
                from rdfmem.store.sandbox import DEFAULT_MEMORY_CAP, Sandbox

                cap = DEFAULT_MEMORY_CAP if self.memory_cap is None else self.memory_cap
                self._sandbox = Sandbox(self.store, size=1, memory_cap=cap)
            sandbox = self._sandbox
        job = {"sparql": sparql, "default": [g.value for g in default]}
        job["named"] = [g.value for g in named]
        try:
            answer: tuple[str, bytes] = sandbox.run(_serialised_answer, job, timeout=seconds)
        except TimedOut:
            raise TimedOut(
                f"the query ran longer than its time limit of {seconds:g} s and was stopped; "
                "narrow it (a LIMIT, fewer joins) or give a longer --timeout"
            ) from None
        return answer

    def close(self) -> None:
        with self._lock:
            if self._sandbox is not None:
                self._sandbox.close()
                self._sandbox = None


def guard_owner_reads(store: RdfStore) -> None:
    """When ``store``'s process owns it and serves it to others, or once it takes it over,
    run the queries they send with a time limit through the sandbox (see the module
    docstring)."""
    on_takeover = getattr(store.backend, "guard_owned_reads", None)
    if on_takeover is not None:  # attached: guards the backend it opens on takeover
        on_takeover(_guard_of)
        return
    guard = getattr(store.backend, "guard_reads", None)
    if guard is not None:
        guard(OwnerReads(store))


def _guard_of(owned: Backend) -> OwnerReads:
    """The guard of the backend a process opened on takeover (a sandbox at its first
    guarded query; none before)."""
    return OwnerReads(_Owned(owned))


def limit_sent_queries(store: RdfStore, seconds: float) -> None:
    """Send ``store``'s queries with a time limit of ``seconds``, and wait for each at most
    that long (plus 5 s for the answer): an attached store's owner runs them in its sandbox,
    a server bounds them its own way. Nothing changes for a store this process evaluates."""
    client = getattr(store.backend, "client", None)
    if client is not None:
        from rdfmem.backends.owner import LIMIT_HEADER

        client.headers[LIMIT_HEADER] = f"{seconds:g}"
        client.timeout = seconds + 5.0


RdfStore.opened_hooks.append(guard_owner_reads)
