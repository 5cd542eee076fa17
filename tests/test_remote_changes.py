"""The change log: a reader asks what changed since it last looked, in one small query,
and never misses an rdfmem write that returned before it asked."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import httpx
import pytest
from pyoxigraph import DefaultGraph, NamedNode
from servers import Server

from rdfmem import BackingError

EX = "http://example.org/"


WRITER = """
import sys
from rdfmem import RdfStore
store = RdfStore.connect(sys.argv[1], sys.argv[2], change_log=True)
for i in range(int(sys.argv[3])):
    store.assert_("http://example.org/s", "http://example.org/p", i, graph=f"urn:g{i}")
    print(i, flush=True)   # the write has returned
    sys.stdin.readline()   # wait for the reader
store.close()
"""


def test_after_another_process_writes_the_next_look_includes_it(server: Server) -> None:
    reader = server.connect(change_log=True)
    first = reader.backend.changes_since()
    assert first.everything  # a first look knows nothing yet
    cursor = first.cursor
    with subprocess.Popen(
        [sys.executable, "-c", WRITER, server.query_url, server.update_url, "5"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as writer:
        assert writer.stdin is not None and writer.stdout is not None
        for i in range(5):
            assert writer.stdout.readline().strip() == str(i)
            changes = reader.backend.changes_since(cursor)
            assert not changes.everything
            assert changes.graphs == {NamedNode(f"urn:g{i}")}  # this write, no older one
            cursor = changes.cursor
            assert reader.ask(subject=EX + "s", object=i, graph=f"urn:g{i}")
            writer.stdin.write("\n")
            writer.stdin.flush()
        assert writer.wait(timeout=60) == 0
    again = reader.backend.changes_since(cursor)
    assert (again.graphs, again.everything) == (frozenset(), False)
    reader.close()


def test_key_value_and_default_graph_writes_name_their_graphs(server: Server) -> None:
    a, b = server.connect(change_log=True), server.connect(change_log=True)
    cursor = b.backend.changes_since().cursor
    a.set("k", 1)
    a.assert_(EX + "s", EX + "p", "o")
    changes = b.backend.changes_since(cursor)
    default = DefaultGraph() if a.backend.default_graph is None else a.backend.default_graph
    assert changes.graphs == {NamedNode(a.graph), default}
    assert not changes.everything
    # Each write touched one graph and one subject: that is all a reader fetches again.
    key = NamedNode("urn:rdfmem:store:k")
    assert changes.subjects == {(NamedNode(a.graph), key), (default, NamedNode(EX + "s"))}
    assert changes.whole == frozenset()
    a.close()
    b.close()


def test_a_large_write_names_its_graph_not_its_subjects(server: Server) -> None:
    a, b = server.connect(change_log=True), server.connect(change_log=True)
    cursor = b.backend.changes_since().cursor
    a.load(" ".join(f"<{EX}s{i}> <{EX}p> {i} ." for i in range(100)), "turtle", graph=EX + "g")
    asyncio.run(a.aset("k", 1))  # the async path logs its subject too
    changes = b.backend.changes_since(cursor)
    assert changes.whole == {NamedNode(EX + "g")}
    assert changes.subjects == {(NamedNode(a.graph), NamedNode("urn:rdfmem:store:k"))}
    a.close()
    b.close()


def test_raw_updates_through_rdfmem_mean_everything_and_others_are_not_logged(
    server: Server,
) -> None:
    a, b = server.connect(change_log=True), server.connect(change_log=True)
    cursor = b.backend.changes_since().cursor
    a.sparql_update(f"INSERT DATA {{ GRAPH <{EX}g> {{ <{EX}s> <{EX}p> 1 }} }}")
    changes = b.backend.changes_since(cursor)
    assert changes.everything  # a raw update's scope is unknown: read everything again
    cursor = changes.cursor
    # A client that is not rdfmem writes no record: the documented rule says so, and a
    # reader that must see such writes looks with cursor=None (everything).
    httpx.post(
        server.update_url,
        data={"update": f"INSERT DATA {{ GRAPH <{EX}g> {{ <{EX}s> <{EX}p> 2 }} }}"},
    ).raise_for_status()
    assert not b.backend.changes_since(cursor).everything
    assert b.backend.changes_since(None).everything
    a.close()
    b.close()


def test_the_log_is_hidden_from_reads_of_every_graph(server: Server) -> None:
    store = server.connect(change_log=True)
    store.set("k", 1)
    assert [q.graph_name for q in store.triples()] == [NamedNode(store.graph)]
    store.close()


def test_a_pruned_log_makes_an_old_cursor_read_everything(server: Server) -> None:
    a, b = server.connect(change_log=True), server.connect(change_log=True)
    cursor = b.backend.changes_since().cursor
    a.set("k", 1)
    a.backend.changes_since(None, retention_s=0.0)  # prunes everything up to now
    assert b.backend.changes_since(cursor).everything
    a.close()
    b.close()


def test_without_the_change_log_nothing_is_logged_and_asking_is_an_error(server: Server) -> None:
    # Off by default: the log is a named graph every outside GRAPH ?g query would see.
    store = server.connect()
    store.set("k", 1)
    store.sparql_update(f"INSERT DATA {{ GRAPH <{EX}g> {{ <{EX}s> <{EX}p> 1 }} }}")
    rows = store.query("SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }")
    graphs = {r["g"].value for r in rows} - set(getattr(server, "system_graphs", ()))
    # The lease graph holds this client's claim on "k" while it is kept (lease_linger_ms).
    assert graphs - {store.backend.lease_graph.value} == {store.graph, EX + "g"}
    with pytest.raises(BackingError, match="change_log=True"):
        store.backend.changes_since()
    store.close()
