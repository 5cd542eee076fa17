"""Edits that carry their change record replace the old value on every server.

On Virtuoso, a write with the change log put its record in the same operation as the edit;
Virtuoso then kept the old value of a literal of a datatype it does not know (``rdf:JSON``:
every key/value entry; a memory's vector) beside the new one: ``update`` read the old value
again and again, and two clients counting both wrote 2 for ever."""

from __future__ import annotations

from servers import Server

from rdfmem import Memories, Memory


def _bump(n: int | None) -> int:
    return (n or 0) + 1


def test_updates_with_the_change_log_replace_the_value(server: Server) -> None:
    a, b = server.connect(change_log=True), server.connect(change_log=True)
    try:
        for i in range(10):
            assert (a if i % 2 else b).update("n", _bump) == i + 1
        a.set("doc", {"title": "first", "tags": ["x"]})
        b.set("doc", {"title": "second", "tags": []})
        assert (a.get("n"), a.get("doc"), b.get("doc")) == (
            10,
            *[{"title": "second", "tags": []}] * 2,
        )
        rows = server.rows(
            "SELECT ?v WHERE { GRAPH <urn:rdfmem:graph:store> { <urn:rdfmem:store:n> ?p ?v } }"
        )
        assert [r["v"]["value"] for r in rows] == ["10"]  # one value, not every one written
    finally:
        a.close()
        b.close()


def test_a_memory_saved_again_keeps_one_vector_and_one_text(server: Server) -> None:
    store = server.connect(change_log=True)
    try:
        memories = Memories(store)
        memories.save(Memory("global", "plan", "meet on Monday"))
        memories.save(Memory("global", "plan", "meet on Tuesday instead"))
        assert memories.read("global", "plan").content == "meet on Tuesday instead"
        found = memories.search("Tuesday", limit=5)
        assert [m.content for m, _ in found] == ["meet on Tuesday instead"]
        counts = server.rows(
            "SELECT ?p (COUNT(?o) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } "
            "FILTER(CONTAINS(STR(?s), 'plan')) } GROUP BY ?p"
        )
        assert counts and all(r["n"]["value"] == "1" for r in counts), counts
    finally:
        store.close()
