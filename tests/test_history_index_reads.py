"""The version index reads the history with the cheapest queries Oxigraph answers (no
``FILTER`` in them): what it reads must still be the versions rdfmem wrote, also when
something else was written into a history graph around the store (issue 24)."""

from __future__ import annotations

import datetime as dt
import time

from conftest import StoreFactory

UTC = dt.timezone.utc
HISTORY = "urn:rdfmem:history:urn:rdfmem:graph:store"
SPECIALIZES = "http://www.w3.org/ns/prov#specializationOf"


def test_a_stray_blank_node_in_a_history_graph_hides_no_version(
    make_store: StoreFactory,
) -> None:
    store = make_store(history=True)
    store.set("a", 1)
    store.set("b", 1)
    time.sleep(0.02)  # a clock's resolution must not put a write at the instant read
    middle = dt.datetime.now(UTC)
    time.sleep(0.02)
    store.set("a", 2)
    store.delete("b")
    # Written around rdfmem: a blank node that claims to be a version of "a", and a
    # literal that claims to be a versioned resource.
    store.sparql_update(
        f"INSERT DATA {{ GRAPH <{HISTORY}> {{ _:stray <{SPECIALIZES}> <urn:rdfmem:store:a> . "
        f'<urn:rdfmem:version:20260101T000000.000000Z-00000000-0> <{SPECIALIZES}> "b" }} }}'
    )
    now = dt.datetime.now(UTC)
    assert store.keys(as_of=middle) == ["a", "b"] and store.keys(as_of=now) == ["a"]
    assert store.get("a", as_of=middle) == 1 and store.get("a", as_of=now) == 2
    assert store.get("b", "gone", as_of=now) == "gone"
    assert [v.value for v in store.history("a")] == [1, 2]
