"""One process of ``bench_processes.py``: an rdfmem user driven over stdin, line by line.

Commands (one a line; each answered by one JSON line on stdout, ``{"ok": false, "error":
"Type: message"}`` when it raised):

* ``open PATH``: ``RdfStore.open(PATH)``; answers the seconds it took;
* ``updates N``: ``N`` x ``store.update("counter", +1)``; answers each call's seconds;
* ``turn I``: one agent turn (``workload.rdfmem_turn``) with ids from ``I``; its seconds,
  the requests it sent to the owner (an attached process; 0 in the owner), and whether the
  memory vectors' HNSW graph is in place after it: ``built`` here, ``taken`` from the file
  another process of the store saved (``rdfmem.store.indexes.graphfile``), or ``none``;
* ``get KEY``: the value under ``KEY``;
* ``close``: closes the store. End of input closes it too and exits.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workload import rdfmem_turn

from rdfmem import RdfStore
from rdfmem.domain.embeddings import EMBEDDING


def graph_state(store: RdfStore) -> str:
    """``built``, ``taken`` or ``none``: the HNSW graph of this process's memory vectors
    (private parts, read only: the library has no public view of them)."""
    hub: Any = store.indexes
    follower = store.follower(EMBEDDING) if hub is None else None
    sets = list(hub._vectors.values()) if hub is not None else []
    if follower is not None:
        sets = list(follower.sets.values())
    blocks = [b for s in sets for b in s._blocks.values() if b.ann is not None]
    if any(b.adopted for b in blocks):
        return "taken"
    return "built" if blocks else "none"


def main() -> None:
    store: RdfStore | None = None
    turn: Callable[[int], None] | None = None
    sent: list[int] = []  # the requests an attached process sent to the owner in a turn
    for line in sys.stdin:
        command, _, argument = line.strip().partition(" ")
        reply: dict[str, Any] = {"ok": True}
        seconds: list[float] = []  # the calls done, also when one raised
        try:
            if command == "open":
                t0 = time.perf_counter()
                store = RdfStore.open(argument)
                reply["seconds"] = time.perf_counter() - t0
                turn = rdfmem_turn(store, random.Random(argument))
                backend = store.backend
                if not hasattr(backend, "requests_sent"):  # an attached process counts
                    client = getattr(backend, "client", None)  # its own; another, by hook
                    if client is not None:
                        client.event_hooks["request"].append(lambda _: sent.append(1))
            elif command == "updates":
                assert store is not None, "open first"
                for _ in range(int(argument)):
                    t0 = time.perf_counter()
                    store.update("counter", lambda c: (c or 0) + 1)
                    seconds.append(time.perf_counter() - t0)
                reply["seconds"] = seconds
            elif command == "turn":
                assert turn is not None, "open first"
                assert store is not None
                sent.clear()
                before = getattr(store.backend, "requests_sent", 0)
                t0 = time.perf_counter()
                turn(int(argument))
                reply["seconds"] = time.perf_counter() - t0
                reply["requests"] = len(sent) + getattr(store.backend, "requests_sent", 0) - before
                reply["graph"] = graph_state(store)
            elif command == "get":
                assert store is not None, "open first"
                reply["value"] = store.get(argument)
            elif command == "close":
                if store is not None:
                    store.close()
                store = turn = None
            else:
                raise ValueError(f"unknown command {command!r}")
        except Exception as exc:  # the parent reports it: that is the measurement
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "seconds": seconds}
        print(json.dumps(reply), flush=True)
    if store is not None:
        store.close()


if __name__ == "__main__":
    main()
