"""Results that are safe to hold, and reads that never go stale (issue 20).

What a user saw before: reading an embedded result on another thread aborted the process
(SIGABRT); a raw write to a pyoxigraph ``Store`` handed to rdfmem left ``get`` answering the
old value; ``close()`` did not release an on-disk store while a result was alive;
``TypedStore.aupdate_many`` raised ``AttributeError``; ``TypedStore.restore`` wrote values
that fail the schema.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import rdflib
from pydantic import BaseModel
from pyoxigraph import Store

from rdfmem import OxigraphBackend, RdflibBackend, RdfStore, SchemaError, TypedStore

HELD_ON_OTHER_THREADS = """
import asyncio, gc, sys, threading
from rdfmem import RdfStore

store = RdfStore.open(sys.argv[1]) if len(sys.argv) > 1 else RdfStore()
for i in range(50):
    store.assert_(f"urn:s{i}", "urn:p", i, "urn:g")
rows = store.query("SELECT ?s ?o WHERE { GRAPH ?g { ?s ?p ?o } }")
quads = store.triples("urn:g")
seen = []
thread = threading.Thread(target=lambda: seen.append((len(list(rows)), len(list(quads)))))
thread.start(); thread.join()
assert seen == [(50, 50)], seen

async def node():
    # what an async LangGraph node does: run the query off the loop, read it on the loop
    found = await asyncio.to_thread(store.query, "SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }")
    return sum(1 for _ in found)
assert asyncio.run(node()) == 50

made = []
thread = threading.Thread(target=lambda: made.append(store.query("SELECT * { GRAPH ?g { ?s ?p ?o } }")))
thread.start(); thread.join()
del made[:]
thread = threading.Thread(target=gc.collect)   # freed on a thread that did not make them
thread.start(); thread.join()
store.close()
print("held", len(rows))
"""


@pytest.mark.parametrize("where", ["memory", "disk"])
def test_results_are_read_on_other_threads_without_aborting(tmp_path: Path, where: str) -> None:
    args = [str(tmp_path / "store")] if where == "disk" else []
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(HELD_ON_OTHER_THREADS), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]  # -6 (SIGABRT) before
    assert run.stdout.strip() == "held 50"


def test_a_result_outlives_close_and_does_not_pin_the_store(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = RdfStore.open(path)
    store.set("k", 1)
    store.assert_("urn:a", "urn:p", "v")
    rows = store.query("SELECT ?o WHERE { <urn:a> <urn:p> ?o }")
    quads = store.triples()
    store.close()
    again = RdfStore.open(path)  # StoreAlreadyOpen before, while `rows` was alive
    assert again.get("k") == 1
    assert [r["o"].value for r in rows] == ["v"]
    assert len(list(quads)) == 2
    again.close()


def test_a_raw_write_to_a_handed_in_oxigraph_store_is_seen_at_once() -> None:
    raw = Store()
    store = RdfStore(OxigraphBackend(store=raw))
    store.set("k", 1)
    assert store.get("k") == 1 and store.has("k")
    raw.update("DELETE WHERE { GRAPH ?g { ?s <urn:rdfmem:store:value> ?o } }")
    assert store.get("k") is None
    assert not store.has("k")
    assert store.capabilities.exclusive_writer is False


def test_two_rdflib_backends_on_one_dataset_read_each_others_writes() -> None:
    dataset = rdflib.Dataset()
    one, two = RdfStore(RdflibBackend(dataset)), RdfStore(RdflibBackend(dataset))
    one.set("k", 1)
    assert two.get("k") == 1
    two.set("k", 2)
    assert one.get("k") == 2
    assert two.delete("k") and not one.has("k")


def test_a_write_straight_through_the_backend_moves_the_generation() -> None:
    store = RdfStore()
    store.set("k", 1)
    before = store.generation
    assert store.get("k") == 1  # cached now
    store.backend.update("DELETE WHERE { GRAPH ?g { ?s <urn:rdfmem:store:value> ?o } }")
    assert store.generation > before
    assert store.get("k") is None


class Pipeline(BaseModel):
    budget: int
    notes: list[str] = []


def test_typed_aupdate_many_works_and_is_validated() -> None:
    typed = TypedStore(RdfStore(), Pipeline)
    typed.set("budget", 10)

    async def main() -> dict[str, object]:
        return await typed.aupdate_many(
            ["budget", "notes"], lambda cur: {"budget": cur["budget"] + 1, "notes": ["a"]}
        )

    assert asyncio.run(main()) == {"budget": 11, "notes": ["a"]}
    assert typed.get("budget") == 11
    with pytest.raises(SchemaError):
        typed.update_many(["budget"], lambda cur: {"budget": "lots"})
    assert typed.get("budget") == 11  # nothing written


def test_typed_restore_refuses_values_outside_the_schema() -> None:
    typed = TypedStore(RdfStore(), Pipeline)
    typed.set("budget", 5)
    bad = {"version": 1, "type": "rdfmem-store-v1", "entries": [{"key": "budget", "value": "x"}]}
    with pytest.raises(SchemaError):
        typed.restore(bad)
    unknown = {"version": 1, "type": "rdfmem-store-v1", "entries": [{"key": "other", "value": 1}]}
    with pytest.raises(SchemaError):
        typed.restore(unknown)
    assert typed.get("budget") == 5  # left as it was
    good = {"version": 1, "type": "rdfmem-store-v1", "entries": [{"key": "budget", "value": 7}]}
    typed.restore(good)
    assert typed.get("budget") == 7
