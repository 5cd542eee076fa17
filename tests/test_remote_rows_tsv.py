"""rdfmem's own SELECTs read an Oxigraph server's rows as TSV (``answers.rows_accept``,
issue 21's remote turns: written and parsed in less than half the time of JSON), against a
real server: every kind of term comes back as it went in, a large answer is read whole
again and again, and a server restarted under a client takes its next update once."""

from __future__ import annotations

from pathlib import Path

from pyoxigraph import BlankNode, Literal, NamedNode
from servers import OxigraphServer

EX = "http://example.org/"


def test_every_kind_of_term_reads_back_as_written(tmp_path: Path) -> None:
    server = OxigraphServer(tmp_path)
    try:
        server.start()
        store = server.connect()
        s, p, g = NamedNode(EX + "s"), NamedNode(EX + "p"), NamedNode(EX + "g")
        objects = {
            Literal('tab\there, line\nthere, "quoted", back\\slash, é ☃ 𝄞'),
            Literal("chat", language="fr"),
            Literal("42", datatype=NamedNode("http://www.w3.org/2001/XMLSchema#integer")),
            Literal(
                '{"a": [1, "\\t"]}',
                datatype=NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#JSON"),
            ),
            NamedNode(EX + "o?x=1&y=%20"),
        }
        store.assert_many([(s, p, o, g) for o in objects] + [(s, p, BlankNode(), g)])
        read = [q.object for q in store.triples(g)]
        assert {o for o in read if not isinstance(o, BlankNode)} == objects
        assert sum(isinstance(o, BlankNode) for o in read) == 1
        assert store.backend.server.lower().startswith("oxigraph")  # so TSV was asked for
        store.close()
    finally:
        server.stop()


def test_a_large_answer_is_read_whole(tmp_path: Path) -> None:
    server = OxigraphServer(tmp_path)
    try:
        server.start()
        store = server.connect()
        lines = "".join(f'<{EX}s{i}> <{EX}p> "{"x" * 200} {i}\\n\\ttab" .\n' for i in range(20_000))
        store.load(lines, format="ntriples")
        for _ in range(3):  # read by rdfmem's own SELECT, in pages of chunks
            quads = list(store.triples())
            assert len(quads) == 20_000
        assert {q.object.value for q in quads if q.subject.value == f"{EX}s7"} == {
            f"{'x' * 200} 7\n\ttab"
        }
        store.close()
    finally:
        server.stop()


def test_a_restarted_server_takes_the_next_update_once(tmp_path: Path) -> None:
    server = OxigraphServer(tmp_path)
    try:
        server.start()
        store = server.connect(change_log=True)
        store.set("k", 1)
        assert store.update("n", lambda n: (n or 0) + 1) == 1
        server.stop()
        server.start()
        assert store.update("n", lambda n: (n or 0) + 1) == 2  # an update, applied once
        assert store.get("k") == 1 and store.get("n") == 2
        store.close()
    finally:
        server.stop()
