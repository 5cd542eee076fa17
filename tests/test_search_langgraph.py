"""RdfBaseStore without an IndexConfig ranks a query by keywords (BM25)."""

from __future__ import annotations

from rdfmem.langgraph import RdfBaseStore


def test_a_query_without_an_index_ranks_by_keywords_and_keeps_every_item() -> None:
    store = RdfBaseStore()
    store.put(("docs",), "deploy", {"text": "Deploying the API to production on Fridays"})
    store.put(("docs",), "pie", {"text": "Grandma's apple pie recipe"})
    store.put(("docs",), "tea", {"text": "Eli drinks green tea"})
    found = store.search(("docs",), query="how do we deploy the api?", limit=3)
    assert [i.key for i in found] == ["deploy", "pie", "tea"]  # the rest follow, in order
    assert [i.score for i in found] == [1.0, None, None]
    assert [i.key for i in store.search(("docs",), query="apple pie", limit=1)] == ["pie"]
    page = store.search(("docs",), query="tea", limit=1, offset=1)
    assert [(i.key, i.score) for i in page] == [("deploy", None)]
    only = store.search(("docs",), query="tea", filter={"text": {"$ne": "x"}}, limit=5)
    assert only[0].key == "tea"
    store.close()
