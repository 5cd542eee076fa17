"""Running the lease protocol's steps (``rdfmem.backends.sparql.lease_steps``) against a
server connection, blocking: what the steps need of the connection (``Wire``), and the
runner (``run``). The async twin is ``rdfmem.store.remote.NetworkEntries.arun``.
"""

from __future__ import annotations

import time
from typing import Any, Protocol, TypeVar

from rdfmem.backends.sparql.lease_steps import Select, Steps, Update

__all__ = ["Wire", "run"]

T = TypeVar("T")


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
