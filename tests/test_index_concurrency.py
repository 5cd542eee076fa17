"""Threads writing and reading at once never see a torn index (issue 11)."""

from __future__ import annotations

import threading
from typing import Any

from rdfmem import DecisionGraph, Memories, Memory, RdfStore


def test_readers_never_see_a_half_written_chain_or_memory() -> None:
    store = RdfStore()
    graph = DecisionGraph(store)
    memories = Memories(store)
    graph.add_node({"id": "n0", "type": "goal", "label": "root"})
    errors: list[BaseException] = []
    done = threading.Event()

    def write() -> None:
        try:
            for i in range(1, 120):
                graph.add_node({"id": f"n{i}", "type": "decision", "label": f"step {i}"})
                graph.add_edge({"from_id": f"n{i - 1}", "to_id": f"n{i}", "type": "leads_to"})
                memories.save(Memory("global", f"Note {i}", f"deploy step {i}"))
                store.update("turns", lambda n: (n or 0) + 1)
                if i % 10 == 0:  # a bypass: every index rebuilds while readers read
                    store.sparql_update("INSERT DATA { <urn:x> <urn:y> <urn:z> }")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            done.set()

    def read() -> None:
        seen: dict[str, Any] = {"descendants": 0, "search": 0}  # what this thread saw last
        try:
            while not done.is_set():
                chain = [n.id for n in graph.query("descendants", node_id="n0")]
                # a chain n1 … nk: never a gap, never a node without its edge
                assert chain == [f"n{i}" for i in range(1, len(chain) + 1)]
                assert len(chain) >= seen["descendants"]  # never goes back in time
                seen["descendants"] = len(chain)
                recent = [int(n.id[1:]) for n in graph.query("recent_decisions", limit=3)]
                # the newest decisions, consecutive, at least as new as the chain read before
                if recent:
                    assert recent == list(range(recent[0], recent[0] - len(recent), -1))
                    assert recent[0] >= len(chain)
                hits = memories.search("deploy step", limit=5)
                assert all(m.title.startswith("Note ") for m, _ in hits)
                assert len(hits) >= min(5, seen["search"])
                seen["search"] = len(hits)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write)] + [threading.Thread(target=read) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [n.id for n in graph.query("descendants", node_id="n0")] == [
        f"n{i}" for i in range(1, 120)
    ]
    assert store.get("turns") == 119
    assert len(memories.search("deploy step", limit=200)) == 119
