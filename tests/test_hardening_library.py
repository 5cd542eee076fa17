"""Issue 10 (library and backends) and issue 16: no request reaches the network unasked,
caller text round-trips, hostile RDF/XML is refused, loads are atomic and data never becomes
a pattern. Each test failed before its fix."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyoxigraph import DefaultGraph, Literal, NamedNode, Variable

from rdfmem import (
    FormatError,
    InvalidTerm,
    NetworkAccessRefused,
    OxigraphBackend,
    QueryError,
    RdflibBackend,
    RdfStore,
)
from rdfmem.cli import cli


class Listener:
    """A TCP listener on loopback that counts the connections made to it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/"
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


def _fetching_queries(url: str) -> list[str]:
    return [
        f"SELECT * WHERE {{ SERVICE <{url}> {{ ?s ?p ?o }} }}",
        f"SELECT * WHERE {{ SERVICE SILENT <{url}> {{ ?s ?p ?o }} }}",
        f"PREFIX e: <{url}> SELECT * WHERE {{ ?s ?p ?o OPTIONAL {{ sErViCe e: {{ ?s ?p ?o }} }} }}",
    ]


def _fetching_updates(url: str) -> list[str]:
    return [
        f"LOAD <{url}>",
        f"LOAD SILENT <{url}> INTO GRAPH <urn:g>",
        f"INSERT {{ ?s ?p ?o }} WHERE {{ SERVICE <{url}> {{ ?s ?p ?o }} }}",
    ]


# -- issue 16: the library and the CLI refuse SERVICE and LOAD unless asked --------------------


def test_query_and_update_refuse_service_and_load_on_every_backend(
    store: RdfStore, listener: Listener
) -> None:
    store.assert_("urn:s", "urn:p", "kept")
    for text in _fetching_queries(listener.url):
        with pytest.raises(NetworkAccessRefused, match="allow_network=True"):
            store.query(text)
    for text in _fetching_updates(listener.url):
        with pytest.raises(NetworkAccessRefused, match="allow_network"):
            store.sparql_update(text)
    # Spellings that hide the keyword from a reader that skips escapes, or show it to one
    # that expands them everywhere: refused or harmless, never a connection.
    for text in [
        f'SELECT * WHERE {{ ?s ?p "\\u0022 }} SERVICE <{listener.url}> {{ ?s ?p ?o }} #" }}',
        f"SELECT * WHERE {{ ?s ?p ?o }} # \\u000a SERVICE <{listener.url}> {{ ?s ?p ?o }}",
        f"SELECT * WHERE {{ SERVIC\\u0045 <{listener.url}> {{ ?s ?p ?o }} }}",
        f"LO\\u0041D <{listener.url}>",
    ]:
        with contextlib.suppress(QueryError):
            if text.startswith("LO"):
                store.sparql_update(text)
            else:
                list(store.query(text))
    assert listener.connections == 0
    assert store.count(graph=DefaultGraph()) == 1
    # Text that only mentions the words is no request to the network.
    rows = store.query("SELECT ?o WHERE { ?s <urn:p> ?o FILTER(?o != 'SERVICE LOAD') }")
    assert [r["o"] for r in rows] == [Literal("kept")]


def test_the_refusal_is_a_query_error_that_says_where(store: RdfStore) -> None:
    with pytest.raises(QueryError, match="LOAD at line 2, column 1"):
        store.sparql_update("# a comment\nLOAD <http://example.org/>")


def test_allow_network_lets_oxigraph_fetch(listener: Listener) -> None:
    # The listener does count: the same query, allowed, connects (then fails to parse).
    store = RdfStore()
    with pytest.raises(QueryError):  # the listener is no endpoint; the error is rdfmem's
        list(store.query(_fetching_queries(listener.url)[0], allow_network=True))
    assert listener.connections >= 1


def test_the_rdflib_backend_never_fetches_even_when_allowed(listener: Listener) -> None:
    # Issue 10 item 3: the guard reads text; the rdflib backend itself cannot fetch at all,
    # whatever text reaches it (here the guard is switched off).
    store = RdfStore(backend=RdflibBackend())
    for text in _fetching_queries(listener.url):
        if "SILENT" in text:  # a failed SERVICE SILENT gives one empty solution
            assert list(store.query(text, allow_network=True)) == [{}]
            continue
        with pytest.raises(NetworkAccessRefused):
            store.query(text, allow_network=True)
    for text in _fetching_updates(listener.url):
        if "SILENT" in text:  # a LOAD that fails is no error when SILENT: nothing happens
            store.sparql_update(text, allow_network=True)
            continue
        with pytest.raises(NetworkAccessRefused):
            store.sparql_update(text, allow_network=True)
    assert store.count() == 0
    # SERVICE hidden from a text guard by escapes that rdflib would have expanded.
    hidden = [
        f'SELECT * WHERE {{ ?s ?p "\\u0022 }} SERVICE <{listener.url}> {{ ?s ?p ?o }} #" }}',
        f"SELECT * WHERE {{ ?s ?p ?o }} # \\u000a SERVICE <{listener.url}> {{ ?s ?p ?o }}",
    ]
    for text in hidden:
        with contextlib.suppress(QueryError):
            store.query(text, allow_network=True)
    assert listener.connections == 0


@pytest.mark.parametrize("command", ["query", "update"])
def test_cli_refuses_service_and_load_without_a_traceback(listener: Listener, command: str) -> None:
    text = (
        _fetching_queries(listener.url)[0]
        if command == "query"
        else _fetching_updates(listener.url)[0]
    )
    result = CliRunner().invoke(cli, [command, ":memory:", text])
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit), result.exception
    assert "would reach the network" in result.output
    assert "Traceback" not in result.output
    assert listener.connections == 0


def test_cli_query_in_a_subprocess_exits_non_zero_with_one_line(listener: Listener) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "rdfmem", "query", ":memory:", _fetching_queries(listener.url)[0]],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "would reach the network" in done.stderr
    assert "Traceback" not in done.stderr
    assert listener.connections == 0


# -- issue 10 item 4: FROM / FROM NAMED name graphs of the store only ------------------------


def test_from_reads_stored_graphs_and_never_files_or_urls(
    store: RdfStore, listener: Listener, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.ttl"
    secret.write_text('<urn:x> <urn:y> "local file" .', encoding="utf-8")
    store.assert_("urn:a", "urn:p", "in g1", graph="urn:g1")
    store.assert_("urn:b", "urn:p", "in g2", graph="urn:g2")
    store.assert_("urn:c", "urn:p", "in default")
    rows = store.query("SELECT ?o FROM <urn:g1> WHERE { ?s ?p ?o }")
    assert [r["o"] for r in rows] == [Literal("in g1")]
    rows = store.query("SELECT ?g ?o FROM NAMED <urn:g2> WHERE { GRAPH ?g { ?s ?p ?o } }")
    assert [(r["g"], r["o"]) for r in rows] == [(NamedNode("urn:g2"), Literal("in g2"))]
    for iri in (secret.as_uri(), listener.url):
        assert list(store.query(f"SELECT * FROM <{iri}> WHERE {{ ?s ?p ?o }}")) == []
        named = f"SELECT * FROM NAMED <{iri}> WHERE {{ GRAPH ?g {{ ?s ?p ?o }} }}"
        assert list(store.query(named)) == []
    assert listener.connections == 0


def test_using_in_updates_reads_stored_graphs_only(store: RdfStore, listener: Listener) -> None:
    store.assert_("urn:a", "urn:p", "one", graph="urn:g1")
    store.sparql_update("INSERT { GRAPH <urn:out> { ?s ?p ?o } } USING <urn:g1> WHERE { ?s ?p ?o }")
    assert store.count(graph="urn:out") == 1
    store.sparql_update(
        f"INSERT {{ GRAPH <urn:out2> {{ ?s ?p ?o }} }} USING <{listener.url}> WHERE {{ ?s ?p ?o }}"
    )
    assert store.count(graph="urn:out2") == 0
    assert listener.connections == 0


def test_rdflib_narrows_the_dataset_like_oxigraph() -> None:
    stores = [RdfStore(), RdfStore(backend=RdflibBackend())]
    answers = []
    for store in stores:
        store.assert_("urn:a", "urn:p", "g1", graph="urn:g1")
        store.assert_("urn:b", "urn:p", "g2", graph="urn:g2")
        rows = store.query("SELECT ?o WHERE { ?s ?p ?o }", default_graph="urn:g2", named_graphs=[])
        answers.append([r["o"].value for r in rows])
    assert answers == [["g2"], ["g2"]]


# -- issue 10 item 12: caller text round-trips byte for byte ----------------------------------

TRICKY = [
    "say\\u0022hi",
    "\\U0001F600 and \\u00e9",
    "ends with a backslash \\",
    "\\\\u0022",
    "control \x00\x01\x1f\x7f chars",
    "quote \" ' and \\' and \\\"",
    "line\nbreak\r\ttab",
    "\\uD800 not a character",
]


@pytest.mark.parametrize("text", TRICKY)
def test_caller_text_round_trips_through_sparql_on_every_backend(
    store: RdfStore, text: str
) -> None:
    store.assert_("urn:node", "urn:label", text)
    store.assert_("urn:other", "urn:label", 'say"hi')
    # A join compiles to SPARQL text with the literal in it.
    rows = store.select([("?n", "urn:label", Literal(text)), ("?n", "urn:label", "?l")])
    assert [(r["n"], r["l"].value) for r in rows] == [(NamedNode("urn:node"), text)]
    assert store.count([("?n", "urn:label", Literal(text)), ("?n", "?p", "?o")]) == 1
    rows = store.query("SELECT * WHERE { ?n <urn:label> ?l }", bindings={"l": text})
    assert [r["n"] for r in rows] == [NamedNode("urn:node")]
    store.sparql_update(f"INSERT DATA {{ <urn:copy> <urn:label> {Literal(text)} }}")
    [copy] = store.select(subject="urn:copy", predicate="urn:label", object="?l")
    assert copy["l"].value == text


# -- issue 10 item 14: RDF/XML entity expansion is bounded --------------------------------------


def _laughs(levels: int) -> bytes:
    entities = '<!ENTITY a0 "xxxxxxxxxx">' + "".join(
        f'<!ENTITY a{i} "{f"&a{i - 1};" * 10}">' for i in range(1, levels)
    )
    return (
        f'<?xml version="1.0"?><!DOCTYPE rdf:RDF [{entities}]>'
        '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
        'xmlns:ex="http://example.org/"><rdf:Description rdf:about="http://example.org/s">'
        f"<ex:p>&a{levels - 1};</ex:p></rdf:Description></rdf:RDF>"
    ).encode()


def test_rdfxml_entity_bombs_are_a_format_error_on_every_backend(store: RdfStore) -> None:
    store.assert_("urn:s", "urn:p", "kept")
    for levels in (9, 12):  # 9 levels aborted the process; 8 built a 100 MB literal
        with pytest.raises(FormatError, match="entities would expand"):
            store.load(_laughs(levels), "xml")
    assert store.count() == 1


def test_rdfxml_with_namespace_entities_still_loads(store: RdfStore) -> None:
    owl = b"""<?xml version="1.0"?>
<!DOCTYPE rdf:RDF [
  <!-- the usual OWL header; don't mind the quote ] -->
  <!ENTITY ex "http://example.org/" >
  <!ENTITY rdf "http://www.w3.org/1999/02/22-rdf-syntax-ns#" >
]>
<rdf:RDF xmlns:rdf="&rdf;" xmlns:ex="&ex;">
  <rdf:Description rdf:about="&ex;s"><ex:p>&ex;o</ex:p></rdf:Description>
</rdf:RDF>"""
    assert store.load(owl, "xml") == 1
    [row] = store.select(subject="http://example.org/s", object="?o")
    assert row["o"] == Literal("http://example.org/o")


def test_cli_load_refuses_an_entity_bomb(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.rdf"
    bomb.write_bytes(_laughs(9))
    for flag in ("--progress", "--no-progress"):
        result = CliRunner().invoke(cli, ["load", str(tmp_path / "db"), str(bomb), flag])
        assert result.exit_code == 1, result.output
        assert "entities would expand" in result.output
        assert "Traceback" not in result.output


# -- issue 10 item 15 / issue 15: loads are atomic, blank nodes renamed per load -------------


def test_a_load_with_one_bad_triple_loads_nothing_on_every_backend(store: RdfStore) -> None:
    good = "".join(f"<urn:s{i}> <urn:p> {i} .\n" for i in range(1000))
    triple_term = "<urn:a> <urn:b> <<( <urn:c> <urn:d> <urn:e> )>> .\n"
    try:
        store.load(good + triple_term, "turtle")
    except (FormatError, InvalidTerm, QueryError):
        pass
    else:  # a backend that holds RDF 1.2 triple terms loads all of it
        assert store.count() == 1001
        return
    assert store.count() == 0


def test_rdflib_load_of_a_triple_term_loads_nothing() -> None:
    store = RdfStore(backend=RdflibBackend())
    good = "".join(f"<urn:s{i}> <urn:p> {i} .\n" for i in range(1000))
    with pytest.raises(InvalidTerm):
        store.load(good + "<urn:a> <urn:b> <<( <urn:c> <urn:d> <urn:e> )>> .\n", "turtle")
    assert store.count() == 0


def test_blank_nodes_are_renamed_per_load_on_every_backend(store: RdfStore) -> None:
    doc = '_:x <urn:p> "one" . _:x <urn:q> "two" .'
    store.load(doc, "turtle")
    store.load(doc, "turtle", graph="urn:g")
    store.load(doc.encode(), "turtle")
    subjects = {q.subject for q in store.triples()}
    assert len(subjects) == 3  # one per load, shared within a document
    assert all(store.count(subject=s) == 2 for s in subjects)


# -- issue 10 item 16: data never becomes a variable ----------------------------------------


def test_question_mark_strings_are_data_where_data_is_given(store: RdfStore) -> None:
    store.assert_("urn:node", "urn:label", "?x")
    store.assert_("urn:other", "urn:label", "something else")
    # Stored as the literal it is, and read back.
    assert store.ask(("urn:node", "urn:label", Literal("?x")))
    assert not store.ask(("urn:other", "urn:label", Literal("?x")))
    assert store.retract("urn:node", "urn:label", "?x")
    assert store.count(predicate="urn:label") == 1
    with pytest.raises(InvalidTerm):
        store.assert_("?x", "urn:label", "a subject must be an IRI")
    with pytest.raises(InvalidTerm):
        store.assert_("urn:node", "urn:label", "x", graph="?g")
    with pytest.raises(InvalidTerm):
        store.assert_("urn:node", "urn:label", Variable("x"))
    with pytest.raises(InvalidTerm):
        list(store.triples("?g"))
    rows = store.query("SELECT * WHERE { ?s <urn:label> ?l }", bindings={"l": "?x"})
    assert list(rows) == []


def test_variables_are_explicit_terms_in_patterns(store: RdfStore) -> None:
    store.assert_("urn:doc", "urn:author", NamedNode("urn:alice"))
    store.assert_("urn:alice", "urn:name", "Alice")
    explicit = store.select(
        [(Variable("doc"), "urn:author", Variable("who")), (Variable("who"), "urn:name", "Alice")]
    )
    short = store.select([("?doc", "urn:author", "?who"), ("?who", "urn:name", "Alice")])
    assert explicit == short == [{"doc": NamedNode("urn:doc"), "who": NamedNode("urn:alice")}]
    assert store.count(subject=Variable("s"), object=Literal("Alice")) == 1


# -- both embedded backends agree on what they hold ------------------------------------------


def test_both_embedded_backends_refuse_the_same_escape_outside_strings() -> None:
    for backend in (OxigraphBackend(), RdflibBackend()):
        with pytest.raises(QueryError):
            RdfStore(backend=backend).query("SEL\\u0045CT * WHERE { ?s ?p ?o }")


def test_cli_allow_network_opts_in(listener: Listener) -> None:
    text = _fetching_queries(listener.url)[0]
    result = CliRunner().invoke(cli, ["query", ":memory:", "--allow-network", text])
    assert result.exit_code == 1  # the listener is no SPARQL endpoint: a one-line error
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.output.startswith("Error: SPARQL query failed")
    assert listener.connections >= 1


def test_a_failed_service_call_in_a_construct_is_a_query_error(listener: Listener) -> None:
    text = f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ SERVICE <{listener.url}> {{ ?s ?p ?o }} }}"
    with pytest.raises(QueryError):
        RdfStore().query(text, allow_network=True)
    assert listener.connections >= 1


def test_exclusive_given_a_list_says_to_pass_each_subject(store: RdfStore) -> None:
    """A list where subjects go (``exclusive(["urn:a"])``) is an rdfmem error that says
    how to call it, not a TypeError from deep inside."""
    with pytest.raises(InvalidTerm, match="its own argument"):
        store.exclusive(["urn:a"])  # type: ignore[arg-type]
