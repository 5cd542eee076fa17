"""The subject lists of a process that started from the owner's indexes, asked for off the
request path.

An attached process answers "does this subject exist?" (a new node, edge or memory) without
a request once it holds every subject of the graph (``GET /subjects``:
``rdfmem.backends.attached_changes``). Listing 30,000 subjects costs the owner about 100 ms;
a process that reads everything at its first look pays it there, hidden in a longer wait.
A process the owner handed its indexes to (``rdfmem.backends.owner_indexes``) would pay it
in its first turn, so it asks here instead: the check that wanted the list is answered by a
request, and the list is taken, with the generation it was read at, by the replica, which
adds what the notes held name since (``Replica.adopt_listing``). Each graph on a thread
of its own: the owner lists them at once (one at a time, the lists came twice as late,
after 33-36 turns run back to back at 10,000 against 16-18).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from rdfmem.backends.attached_changes import Replica

__all__ = ["Lister"]


class Lister:
    """Asks for the subjects of the graphs given to ``later`` with ``get(target)`` (a
    JSON answer, or None), into ``replica``."""

    def __init__(self, get: Callable[[str], Any], replica: Replica) -> None:
        self._get = get
        self._replica = replica

    def later(self, graph: str) -> None:
        """Ask for every subject of ``graph`` now, off the caller's path."""
        thread = threading.Thread(target=self._list, args=(graph,), name="rdfmem-subjects")
        thread.daemon = True
        thread.start()

    def _list(self, graph: str) -> None:
        # No list (the owner gone, the store closed): asked again after more questions.
        with contextlib.suppress(Exception):
            found = self._get("/subjects?" + urlencode({"graph": graph, "since": -1}))
            if isinstance(found, dict):
                epoch, generation = str(found["epoch"]), int(found["generation"])
                self._replica.adopt_listing(graph, epoch, generation, found.get("listed"))
