"""``RdfBaseStore`` beyond LangGraph's own tests: RDF a SPARQL user can read, creation times,
``delete_namespace``, TTL, hostile input, other writers; on every backend (``make_store``:
Oxigraph in memory and on disk, rdflib, a real Oxigraph server)."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pyshacl
import pytest
import rdflib
from langgraph.store.base import IndexConfig, InvalidNamespaceError, PutOp

from rdfmem import InvalidValue, RdfStore
from rdfmem.core.ontology import ontology_path
from rdfmem.core.results import SelectResult
from rdfmem.embeddings import HashingEmbedder
from rdfmem.langgraph import RdfBaseStore

_EMBEDDER = HashingEmbedder(dimension=64)


@pytest.fixture
def no_pending_garbage() -> None:
    """Collect garbage on the main thread first. After a SELECT on rdflib, pyparsing keeps
    frames of ``TripleStore.query`` (and the unsendable pyoxigraph ``QuerySolutions`` in them)
    until a later parse makes them cyclic garbage, and pyoxigraph raises when the collector
    frees one on another thread (reported; a test that ran earlier can leave some)."""
    gc.collect()


def threaded(test: Callable[..., None]) -> Callable[..., None]:
    """For tests that use the store from worker threads: Oxigraph in memory, on disk and a
    server (LangGraph's own suite runs on rdflib, in a fresh process)."""
    backends = ["oxigraph-memory", "oxigraph-disk", "oxigraph-server"]
    marked = pytest.mark.parametrize("make_store", backends, indirect=True)(test)
    return pytest.mark.usefixtures("no_pending_garbage")(marked)  # type: ignore[no-any-return]


def embed(texts: Sequence[str]) -> list[list[float]]:
    """A deterministic offline embedding function, as a user would pass one."""
    return [[float(x) for x in row] for row in _EMBEDDER.embed(list(texts))]


def indexed(store: RdfStore, fields: list[str] | None = None) -> RdfBaseStore:
    return RdfBaseStore(store, index=IndexConfig(dims=64, embed=embed, fields=fields))


def select(store: RdfStore, sparql: str) -> list[dict[str, Any]]:
    result = store.query(sparql)
    assert isinstance(result, SelectResult)
    return [dict(row) for row in result]


def test_items_are_rdf_a_sparql_user_can_read(store: RdfStore) -> None:
    lg = RdfBaseStore(store)
    lg.put(("users", "123"), "prefs", {"theme": "dark", "size": 3})
    rows = select(
        store,
        """PREFIX rm: <https://w3id.org/rdfmem#>
        PREFIX dcterms: <http://purl.org/dc/terms/>
        SELECT ?ns ?key ?value ?created ?modified WHERE { GRAPH ?g {
            ?item a rm:StoreItem ; rm:namespace ?ns ; rm:key ?key ; rm:value ?value ;
                  dcterms:created ?created ; dcterms:modified ?modified } }""",
    )
    [row] = rows
    assert (row["ns"].value, row["key"].value) == ("users.123", "prefs")
    assert row["value"].datatype.value.endswith("#JSON")
    assert rdflib.Literal(row["value"].value).toPython()  # JSON text
    item = lg.get(("users", "123"), "prefs")
    assert item is not None and item.value == {"theme": "dark", "size": 3}
    assert row["created"].value.startswith(item.created_at.strftime("%Y-%m-%dT%H:%M:%S"))


def test_stored_items_conform_to_the_shapes() -> None:
    store = RdfStore()
    lg = indexed(store)
    lg.put(("docs",), "a", {"text": "hello world"}, ttl=5)
    lg.put(("docs", "x"), "b", {"text": "more"}, index=False)
    union = rdflib.Graph().parse(
        data=store.export("turtle", graph="urn:rdfmem:graph:langgraph"), format="turtle"
    )
    shapes = rdflib.Graph().parse(ontology_path() / "shapes.ttl")
    conforms, _, report = pyshacl.validate(union, shacl_graph=shapes)
    assert conforms, report
    assert len(union) > 10


def test_an_update_keeps_created_and_moves_updated(store: RdfStore) -> None:
    lg = RdfBaseStore(store)
    lg.put(("n",), "k", {"v": 1})
    first = lg.get(("n",), "k")
    lg.put(("n",), "k", {"v": 2})
    second = lg.get(("n",), "k")
    assert first is not None and second is not None
    assert second.value == {"v": 2}
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    # Seen the same by another object reading the store afresh.
    again = RdfBaseStore(store).get(("n",), "k")
    assert again is not None and again.created_at == first.created_at
    item = "urn:rdfmem:langgraph:item:n:k"
    for predicate in ["http://purl.org/dc/terms/created", "https://w3id.org/rdfmem#value"]:
        assert store.count(subject=item, predicate=predicate) == 1


def test_delete_namespace_removes_the_prefix_and_below_only(store: RdfStore) -> None:
    lg = indexed(store)
    for ns in [("a",), ("a", "b"), ("a", "b", "c"), ("ab",), ("b", "a")]:
        lg.put(ns, "k1", {"text": "one"})
        lg.put(ns, "k2", {"text": "two"})
    assert lg.delete_namespace(("a", "b")) == 4
    assert lg.list_namespaces() == [("a",), ("ab",), ("b", "a")]
    assert lg.delete_namespace(("a",)) == 2
    assert lg.list_namespaces() == [("ab",), ("b", "a")]
    assert [i.key for i in lg.search((), query="one")][:1] == ["k1"]
    # 2 items left in each of two namespaces, each with its one vector.
    assert store.count(predicate="https://w3id.org/rdfmem#vectorOf") == 4
    with pytest.raises(InvalidNamespaceError):
        lg.delete_namespace(())
    with pytest.raises(InvalidNamespaceError):
        lg.delete_namespace(("a.b",))


def test_semantic_search_fields_and_unindexed_items(store: RdfStore) -> None:
    lg = indexed(store, fields=["title", "notes[*].text"])
    lg.put(("docs",), "deploy", {"title": "deploying the api", "notes": [{"text": "prod"}]})
    lg.put(("docs",), "pie", {"title": "apple pie recipe", "notes": []})
    lg.put(("docs",), "quiet", {"title": "deploying quietly"}, index=False)
    found = lg.search(("docs",), query="how do we deploy the api?", limit=3)
    assert [i.key for i in found] == ["deploy", "pie", "quiet"]
    assert found[0].score is not None and found[0].score > 0.3
    assert found[2].score is None  # not indexed: after the scored ones, unscored
    assert lg.search(("docs",), query="apple pie", filter={"title": {"$ne": "x"}})[0].key == "pie"


def test_ttl_sweep_refresh_and_omit_expired(store: RdfStore) -> None:
    lg = RdfBaseStore(store, ttl={"default_ttl": 60, "refresh_on_read": True})
    lg.put(("t",), "soon", {"v": 1}, ttl=0.00001)  # expires in under a millisecond
    lg.put(("t",), "later", {"v": 2})  # default_ttl: an hour
    lg.put(("t",), "never", {"v": 3}, ttl=None)
    time.sleep(0.01)
    assert lg.sweep_ttl() == 1
    assert lg.get(("t",), "soon") is None
    assert sorted(i.key for i in lg.search(("t",))) == ["later", "never"]

    def expires() -> str:
        rows = select(
            store,
            "SELECT ?e WHERE { GRAPH ?g { ?i <https://w3id.org/rdfmem#key> 'later' ; "
            "<https://w3id.org/rdfmem#expires> ?e } }",
        )
        return str(rows[0]["e"].value)

    before = expires()
    lg.get(("t",), "later", refresh_ttl=False)
    assert expires() == before
    lg.get(("t",), "later")
    assert expires() > before

    hiding = RdfBaseStore(store, ttl={"omit_expired": True})
    hiding.put(("h",), "gone", {"v": 1}, ttl=0.00001)
    time.sleep(0.01)
    assert hiding.get(("h",), "gone") is None
    assert hiding.search(("h",)) == []
    assert ("h",) not in hiding.list_namespaces()
    assert RdfBaseStore(store).get(("h",), "gone") is not None  # not yet swept


def test_ttl_sweeper_thread_starts_and_stops() -> None:
    lg = RdfBaseStore(ttl={"sweep_interval_minutes": 1})
    done = lg.start_ttl_sweeper()
    assert lg.stop_ttl_sweeper(timeout=5)
    assert done.result(timeout=5) is None


def test_cancelling_the_ttl_sweeper_stops_it_without_a_thread_crash() -> None:
    # LangGraph stops a sweeper by cancelling its future; the thread then tried to set the
    # result of the cancelled future and died with InvalidStateError (issue 22, item 9).
    crashes: list[BaseException | None] = []

    def record(args: threading.ExceptHookArgs) -> None:
        crashes.append(args.exc_value)

    previous = threading.excepthook
    threading.excepthook = record
    try:
        lg = RdfBaseStore(ttl={"sweep_interval_minutes": 1})
        done = lg.start_ttl_sweeper()
        assert done.cancel()
        sweeper = lg._sweeper
        assert sweeper is not None
        sweeper.join(timeout=5)
        assert not sweeper.is_alive()
    finally:
        threading.excepthook = previous
    assert crashes == []


HOSTILE = [
    'quote " and \\ backslash',
    "brace } ; DROP ALL ; {",
    "angle <urn:x> > newline\nand tab\t",
    "percent %41 colon : hash # slash /",
    "ünïcödé 表 🙂",
]


def test_hostile_labels_keys_and_values_round_trip(store: RdfStore) -> None:
    lg = RdfBaseStore(store)
    store.assert_("urn:keep", "urn:p", "untouched", "urn:other")
    for i, text in enumerate(HOSTILE):
        lg.put((text, "x"), text, {"t": text, "q": "} } INSERT DATA { <urn:a> <urn:b> 1 }"})
        lg.put(("n",), f"{i}{text}", {"n": i})
    for text in HOSTILE:
        item = lg.get((text, "x"), text)
        assert item is not None and item.value["t"] == text
        assert item.namespace == (text, "x")
    assert sorted(lg.list_namespaces(suffix=("x",))) == sorted((t, "x") for t in HOSTILE)
    assert len(lg.search(("n",), limit=100)) == len(HOSTILE)
    assert not store.ask(subject="urn:a", predicate="urn:b", object=None)
    assert store.count(graph="urn:other") == 1


def test_bad_input_raises_and_writes_nothing(store: RdfStore) -> None:
    lg = indexed(store)
    lg.put(("n",), "kept", {"text": "kept"})
    before = store.count()
    with pytest.raises(InvalidValue):
        lg.batch([PutOp(("n",), "ok", {"v": 1}), PutOp(("n",), "bad", {"v": {1, 2}})])
    with pytest.raises(InvalidValue):
        lg.batch([PutOp(("n",), "bad", "not a mapping")])  # type: ignore[arg-type]
    wrong = RdfBaseStore(store, index={"dims": 3, "embed": embed})
    with pytest.raises(InvalidValue, match="dims=3"):
        wrong.put(("n",), "bad", {"text": "x"})
    with pytest.raises(InvalidValue, match="operator"):
        lg.search(("n",), filter={"text": {"$regex": "k"}})
    assert store.count() == before
    assert lg.get(("n",), "ok") is None
    assert lg.get(("n",), "kept") is not None


def test_writes_that_bypass_the_store_object_are_seen(store: RdfStore) -> None:
    first, second = RdfBaseStore(store), RdfBaseStore(store)
    first.put(("n",), "a", {"v": 1})
    assert second.get(("n",), "a") is not None  # second's view is loaded now
    first.put(("n",), "b", {"v": 2})
    assert [i.key for i in second.search(("n",))] == ["a", "b"]
    store.sparql_update(
        "DELETE { GRAPH ?g { ?i ?p ?o } } "
        "WHERE { GRAPH ?g { ?i <https://w3id.org/rdfmem#key> 'a' ; ?p ?o } }"
    )
    assert first.get(("n",), "a") is None
    assert second.list_namespaces() == [("n",)]
    store.clear_graph("urn:rdfmem:graph:langgraph")
    assert second.list_namespaces() == []


# The embedded stores, whose write lock a thread can hold (a server has no such lock).
@pytest.mark.parametrize("make_store", ["oxigraph-memory", "oxigraph-disk"], indirect=True)
@pytest.mark.usefixtures("no_pending_garbage")
def test_abatch_leaves_the_event_loop_free(store: RdfStore) -> None:
    lg = RdfBaseStore(store)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store.exclusive():
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(30)

    async def main() -> bool:
        put = asyncio.create_task(lg.aput(("n",), "k", {"v": 1}))
        for _ in range(20):
            await asyncio.sleep(0)  # the loop keeps running while the put waits
        waiting = not put.done()
        release.set()
        await put
        return waiting

    try:
        assert asyncio.run(main())
    finally:
        release.set()
        holder.join()
    assert lg.get(("n",), "k") is not None


@threaded
def test_async_twins(store: RdfStore) -> None:
    lg = indexed(store)

    async def main() -> None:
        await lg.aput(("a", "b"), "k", {"text": "async memory about tea"})
        item = await lg.aget(("a", "b"), "k")
        assert item is not None and item.value["text"].startswith("async")
        found = await lg.asearch(("a",), query="tea")
        assert [i.key for i in found] == ["k"] and found[0].score
        assert await lg.alist_namespaces(prefix=("a",)) == [("a", "b")]
        assert await lg.adelete_namespace(("a",)) == 1
        assert await lg.aget(("a", "b"), "k") is None

    asyncio.run(main())


def test_every_term_written_is_in_the_vocabulary() -> None:
    from rdfmem.langgraph import vocab

    declared = {str(s) for s in rdflib.Graph().parse(ontology_path() / "rdfmem.ttl").subjects()}
    used = [vocab.ITEM, vocab.VECTOR, vocab.NAMESPACE, vocab.KEY, vocab.VALUE, vocab.EXPIRES]
    used += [vocab.TTL_MINUTES, vocab.VECTOR_OF, vocab.FIELD]
    assert [t.value for t in used if t.value not in declared] == []
    assert vocab.DEFAULT_GRAPH in declared


def test_a_sweep_spares_an_item_refreshed_since_it_was_read(store: RdfStore) -> None:
    from datetime import datetime, timezone

    from pyoxigraph import NamedNode

    from rdfmem.langgraph.requests import delete_request
    from rdfmem.langgraph.vocab import DEFAULT_GRAPH, item_iri

    lg = indexed(store)
    lg.put(("t",), "fresh", {"text": "read by another client"}, ttl=60)
    # A sweeper that saw the item expired deletes it only if it is still expired.
    store.sparql_update(
        delete_request(
            NamedNode(DEFAULT_GRAPH),
            [item_iri(("t",), "fresh")],
            expired_before=datetime.now(timezone.utc),
        )
    )
    assert lg.get(("t",), "fresh") is not None
    assert [i.key for i in lg.search(("t",), query="another client")] == ["fresh"]


def test_reads_in_a_batch_see_the_store_before_its_puts(store: RdfStore) -> None:
    from langgraph.store.base import GetOp, SearchOp

    lg = RdfBaseStore(store)
    lg.put(("n",), "old", {"v": 0})
    got, _, found, _ = lg.batch(
        [
            GetOp(("n",), "new"),
            PutOp(("n",), "new", {"v": 1}),
            SearchOp(("n",)),
            PutOp(("n",), "old", None),
        ]
    )
    assert got is None
    assert [i.key for i in found] == ["old"]  # type: ignore[union-attr]
    assert [i.key for i in lg.search(("n",))] == ["new"]


def test_a_search_refreshes_the_ttl_of_what_it_returns(store: RdfStore) -> None:
    lg = RdfBaseStore(store, ttl={"default_ttl": 10})
    lg.put(("t",), "a", {"v": 1})

    def expires() -> str:
        return str(
            select(
                store, "SELECT ?e WHERE { GRAPH ?g { ?i <https://w3id.org/rdfmem#expires> ?e } }"
            )[0]["e"].value
        )

    before = expires()
    lg.search(("t",), refresh_ttl=False)
    assert expires() == before
    lg.search(("t",))
    assert expires() > before


@threaded
def test_threads_writing_and_reading_at_once_lose_nothing(store: RdfStore) -> None:
    lg = RdfBaseStore(store)

    def work(t: int) -> None:
        for i in range(25):
            lg.put(("n", f"t{t}"), f"k{i}", {"i": i})
            assert lg.get(("n", f"t{t}"), f"k{i}") is not None
            lg.search(("n",), limit=5)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(lg.search(("n",), limit=1000)) == 100
    assert len(RdfBaseStore(store).search(("n",), limit=1000)) == 100  # read afresh


def test_item_vectors_are_found_by_rdfmem_vector_search(store: RdfStore) -> None:
    import numpy as np
    from pyoxigraph import NamedNode

    from rdfmem.embeddings import VectorIndex

    lg = indexed(store)
    lg.put(("docs",), "tea", {"text": "green tea every morning"})
    lg.put(("docs",), "cat", {"text": "the cat is called Miso"})
    query = np.asarray(embed(["which tea?"])[0], dtype=np.float32)
    hits = VectorIndex(store).search([NamedNode("urn:rdfmem:graph:langgraph")], query, 1)
    assert [subject.value for _, subject, _ in hits] == ["urn:rdfmem:langgraph:item:docs:tea#%24"]


def test_items_and_vectors_outlive_the_process_on_disk(tmp_path: Any) -> None:
    with RdfStore.open(tmp_path / "agent") as rdf:
        lg = indexed(rdf)
        lg.put(("memories", "eli"), "tea", {"text": "drinks green tea"}, ttl=60)
        lg.put(("memories", "eli"), "cat", {"text": "has a cat called Miso"})
        created = lg.get(("memories", "eli"), "tea").created_at  # type: ignore[union-attr]
    with RdfStore.open(tmp_path / "agent") as rdf:
        lg = indexed(rdf)
        item = lg.get(("memories", "eli"), "tea", refresh_ttl=False)
        assert item is not None and item.created_at == created
        found = lg.search(("memories",), query="what does eli drink? tea")
        assert [i.key for i in found][:1] == ["tea"] and found[0].score
        assert lg.list_namespaces() == [("memories", "eli")]


def test_writes_to_other_graphs_do_not_reload_the_items(monkeypatch: pytest.MonkeyPatch) -> None:
    from rdfmem.langgraph.sources import Mirror
    from rdfmem.memories import Memories, Memory

    loads: list[int] = []
    real = Mirror.load

    def counted(self: Mirror, quads: Any) -> None:
        loads.append(1)
        real(self, quads)

    monkeypatch.setattr(Mirror, "load", counted)
    store = RdfStore()
    lg = indexed(store)
    lg.put(("n",), "a", {"text": "green tea"})
    assert lg.get(("n",), "a") is not None
    assert len(loads) == 1  # the first read
    store.set("counter", 1)  # a key/value entry
    Memories(store).save(Memory("global", "Tea", "Eli drinks green tea."))
    assert [i.key for i in lg.search(("n",), query="tea")] == ["a"]
    assert len(loads) == 1
    store.sparql_update("INSERT DATA { <urn:x> <urn:y> <urn:z> }")  # scope unknown: reload
    assert lg.get(("n",), "a") is not None
    assert len(loads) == 2
