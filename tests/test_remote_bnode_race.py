"""Two clients removing and adding blank-node triples at once on a remote store (issue 22,
left from last time: the blank-node removal race).

SPARQL cannot name an existing blank node, so rdfmem removes ``<a> <p> _:b`` by pattern
after checking that ``_:b`` is the only blank node the pattern matches. Before, another
client's look-alike added between that check and the delete was removed with it, and a
replace (remove + add) could land half. Now the delete is conditional, in the write's one
operation, on the pattern still matching the nodes the check counted. Real servers; the
second client is a real client on its own connection (an httpx event hook only chooses
when it writes).
"""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Iterator

import httpx
import pytest
from pyoxigraph import BlankNode, DefaultGraph, Literal, NamedNode, Quad
from servers import Server

from rdfmem import InvalidTerm, RemoteStore

EX = "http://example.org/"
P, TAG = NamedNode(EX + "p"), NamedNode(EX + "tag")


@pytest.fixture
def clients(server: Server) -> Iterator[tuple[RemoteStore, RemoteStore]]:
    a, b = server.connect(), server.connect()
    yield a, b
    a.close()
    b.close()


def _linked(store: RemoteStore, subject: str) -> list[str]:
    """The tags of the blank nodes ``subject`` links to by ``p``."""
    rows = store.query(f"SELECT ?t WHERE {{ <{subject}> <{P.value}> ?x . ?x <{TAG.value}> ?t }}")
    return sorted(str(r["t"].value) for r in rows)


def _node(store: RemoteStore, tag: str) -> BlankNode:
    [row] = store.query(f'SELECT ?x WHERE {{ ?x <{TAG.value}> "{tag}" }}')
    node = row["x"]
    assert isinstance(node, BlankNode)
    return node


def _before_the_blank_delete(store: RemoteStore, act: object) -> list[str]:
    """Run ``act()`` once, just before ``store`` sends the update deleting by pattern."""
    done: list[str] = []

    def hook(request: httpx.Request) -> None:
        body = urllib.parse.unquote_plus(request.read().decode())
        if body.startswith("update=") and "isBlank" in body and not done:
            done.append(body)
            act()  # type: ignore[operator]

    store.backend.client.event_hooks["request"].append(hook)
    return done


def test_a_look_alike_added_meanwhile_is_not_removed(
    server: Server, clients: tuple[RemoteStore, RemoteStore]
) -> None:
    a, b = clients
    a.load(f'<{EX}s> <{P.value}> [ <{TAG.value}> "A" ] .', "turtle")
    mine = _node(a, "A")
    done = _before_the_blank_delete(
        a, lambda: b.load(f'<{EX}s> <{P.value}> [ <{TAG.value}> "B" ] .', "turtle")
    )
    # Checked: one blank node matches. B's node arrives before the delete: the delete
    # does not land, and A, checking again, finds two look-alikes and says so.
    with pytest.raises(InvalidTerm, match="2 blank nodes"):
        a.retract(EX + "s", P.value, mine)
    assert done
    assert _linked(b, EX + "s") == ["A", "B"]  # B's node was not removed, nor A's
    assert server.scratch_graphs() == []  # nor is anything of the refused write left


def test_a_replace_lands_whole_or_not_at_all(clients: tuple[RemoteStore, RemoteStore]) -> None:
    a, b = clients
    a.load(f'<{EX}s> <{P.value}> [ <{TAG.value}> "A" ] .', "turtle")
    mine = _node(a, "A")
    _before_the_blank_delete(
        a, lambda: b.load(f'<{EX}s> <{P.value}> [ <{TAG.value}> "B" ] .', "turtle")
    )
    old = Quad(NamedNode(EX + "s"), P, mine, DefaultGraph())
    new = Quad(NamedNode(EX + "s"), P, Literal("replaced"), DefaultGraph())
    with pytest.raises(InvalidTerm):
        a.backend.apply([old], [new])  # every rdfmem write goes through the backend's apply
    assert _linked(b, EX + "s") == ["A", "B"]
    assert not b.ask(subject=EX + "s", predicate=P.value, object=Literal("replaced"))


def test_a_node_removed_meanwhile_leaves_the_rest_of_the_write_whole(
    clients: tuple[RemoteStore, RemoteStore],
) -> None:
    """B removes A's node between A's check and A's write: A's write, checked again, has
    nothing of it to remove and adds what it adds."""
    a, b = clients
    a.load(f'<{EX}s> <{P.value}> [ <{TAG.value}> "A" ] .', "turtle")
    mine = _node(a, "A")
    _before_the_blank_delete(a, lambda: b.retract(EX + "s", P.value, _node(b, "A")))
    old = Quad(NamedNode(EX + "s"), P, mine, DefaultGraph())
    new = Quad(NamedNode(EX + "s"), P, Literal("replaced"), DefaultGraph())
    a.backend.apply([old], [new])
    assert _linked(b, EX + "s") == []
    assert b.ask(subject=EX + "s", predicate=P.value, object=Literal("replaced"))


def test_threads_removing_and_adding_look_alikes_never_remove_the_wrong_one(
    server: Server, clients: tuple[RemoteStore, RemoteStore]
) -> None:
    """Round after round, A removes its node from a subject while B adds a look-alike to
    the same subject at the same moment: B's node is never removed, and A's is gone
    exactly when A's removal said so."""
    a, b = clients
    rounds = 40
    for i in range(rounds):
        a.load(f'<{EX}s{i}> <{P.value}> [ <{TAG.value}> "A{i}" ] .', "turtle")
    nodes = [_node(a, f"A{i}") for i in range(rounds)]
    barrier = threading.Barrier(2, timeout=60)
    removed: dict[int, bool] = {}
    failures: list[BaseException] = []

    def remove() -> None:
        try:
            for i in range(rounds):
                barrier.wait()
                try:
                    removed[i] = a.retract(f"{EX}s{i}", P.value, nodes[i])
                except InvalidTerm:  # B's look-alike came first: refused, nothing removed
                    removed[i] = False
        except BaseException as exc:  # reported by the test thread
            failures.append(exc)

    def add() -> None:
        try:
            for i in range(rounds):
                barrier.wait()
                b.load(f'<{EX}s{i}> <{P.value}> [ <{TAG.value}> "B{i}" ] .', "turtle")
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=remove), threading.Thread(target=add)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not failures, failures
    for i in range(rounds):
        expected = [f"B{i}"] if removed[i] else [f"A{i}", f"B{i}"]
        assert _linked(b, f"{EX}s{i}") == expected, (i, removed[i])
    assert server.scratch_graphs() == []
