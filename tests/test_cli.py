"""The ``rdfmem`` command line through click's test runner (and once as a real process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pyoxigraph as ox
import pytest
from click.testing import CliRunner
from servers import Server

import rdfmem.cli.files
from rdfmem import RdfStore
from rdfmem.cli import cli, format_table
from rdfmem.server import BackgroundServer

TURTLE = """@prefix ex: <urn:ex:> .
ex:alice ex:says "hello" ; ex:age 42 .
ex:bob ex:knows ex:alice .
"""


def run(*args: str, input: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), input=input)
    return result.exit_code, result.output


@pytest.fixture
def store_path(tmp_path: Path) -> str:
    """An on-disk store holding the Turtle above in the graph <urn:ex:g>."""
    data = tmp_path / "data.ttl"
    data.write_text(TURTLE, encoding="utf-8")
    path = str(tmp_path / "store")
    code, output = run("load", path, str(data), "--graph", "urn:ex:g")
    assert code == 0, output
    return path


@pytest.mark.parametrize(
    "command", ["demo", "serve", "query", "update", "export", "load", "validate", "stats"]
)
def test_every_command_has_help_with_an_example(command: str) -> None:
    code, output = run(command, "--help")
    assert code == 0
    assert "Example" in output and "rdfmem " + command in output


def test_python_dash_m_runs_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rdfmem", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    assert "serve" in done.stdout and "demo" in done.stdout


def test_query_prints_a_table_csv_and_json(store_path: str) -> None:
    query = "SELECT ?who ?what WHERE { GRAPH ?g { ?who <urn:ex:says> ?what } }"
    code, output = run("query", store_path, query)
    assert code == 0
    assert output.splitlines()[0].split() == ["who", "|", "what"]
    assert "<urn:ex:alice> | hello" in output and "(1 row)" in output
    code, output = run("query", store_path, query, "-o", "csv")
    assert output.splitlines() == ["who,what", "urn:ex:alice,hello"]
    code, output = run("query", store_path, query, "-o", "json")
    assert json.loads(output)["results"]["bindings"][0]["what"]["value"] == "hello"


def test_query_ask_construct_stdin_and_file(store_path: str, tmp_path: Path) -> None:
    assert run("query", store_path, "ASK { GRAPH ?g { ?s ?p 42 } }")[1].strip() == "true"
    code, output = run(
        "query",
        store_path,
        "CONSTRUCT { ?s <urn:ex:knows> ?o } WHERE { GRAPH ?g { ?s <urn:ex:knows> ?o } }",
        "-o",
        "ntriples",
    )
    assert code == 0
    assert output.strip() == "<urn:ex:bob> <urn:ex:knows> <urn:ex:alice> ."
    code, output = run("query", store_path, "-", input="ASK { GRAPH ?g { ?s ?p ?o } }")
    assert output.strip() == "true"
    query_file = tmp_path / "q.rq"
    query_file.write_text("SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }")
    code, output = run("query", store_path, "-f", str(query_file), "-o", "tsv")
    assert output.splitlines()[1] == "3"


def test_named_query_with_parameters(store_path: str) -> None:
    code, output = run("query", store_path, "--named", "memories_by_topic", "-p", "topic=x")
    assert code == 0 and "(0 rows)" in output
    code, output = run("query", store_path, "--named", "memories_by_topic")
    assert code == 1 and "needs the parameter 'topic'" in output
    code, output = run("query", store_path, "--named", "memories_by_topic", "-p", "bad")
    assert code == 2 and "NAME=VALUE" in output
    code, output = run("query", store_path, "--named", "no_such_query")
    assert code == 1 and "known:" in output
    code, output = run("query", store_path, "--named", "memories_by_topic", "ASK {}")
    assert code == 2


def test_query_errors_exit_non_zero(store_path: str, tmp_path: Path) -> None:
    code, output = run("query", store_path, "SELECT * WHERE {")
    assert code == 1 and "syntax error" in output.lower()
    code, output = run("query", str(tmp_path / "nowhere"), "ASK {}")
    assert code == 1 and "no store at" in output
    assert not (tmp_path / "nowhere").exists()  # a read never creates a store
    code, output = run("query", store_path, "ASK {}", "-f", str(tmp_path / "x.rq"))
    assert code == 2


def test_a_store_open_in_another_store_is_read_through_it(store_path: str) -> None:
    with RdfStore.open(store_path) as holder:
        holder.assert_("urn:ex:held", "urn:ex:p", "yes")
        code, output = run("query", store_path, "ASK { <urn:ex:held> ?p 'yes' }")
        assert (code, output.strip()) == (0, "true")  # attached to the holder


def test_a_store_held_by_a_program_that_does_not_serve_it_is_explained(store_path: str) -> None:
    from rdfmem.backends.oxigraph import OxigraphBackend

    holder = OxigraphBackend(store_path, serve=False)
    try:
        code, output = run("query", store_path, "ASK {}")
    finally:
        holder.close()
    assert code == 1
    assert "does not serve it" in output and "another program" in output


def test_update_then_query(store_path: str) -> None:
    code, _ = run("update", store_path, "INSERT DATA { <urn:ex:carol> <urn:ex:says> 'hi' }")
    assert code == 0
    assert run("query", store_path, "ASK { <urn:ex:carol> ?p 'hi' }")[1].strip() == "true"
    code, output = run("update", store_path, "INSERT DATA { <urn:ex:oops> }")
    assert code == 1 and "syntax error" in output.lower()


def test_sparql_update_and_its_hidden_old_name_update_both_run(store_path: str) -> None:
    for command, who in (("sparql-update", "dave"), ("update", "erin")):
        code, output = run(
            command, store_path, f"INSERT DATA {{ <urn:ex:{who}> <urn:ex:says> 'hi' }}"
        )
        assert code == 0, output
        assert run("query", store_path, f"ASK {{ <urn:ex:{who}> ?p 'hi' }}")[1].strip() == "true"
    code, output = run("sparql-update", store_path, "INSERT DATA { <urn:ex:oops> }")
    assert code == 1 and "syntax error" in output.lower()


def test_help_lists_sparql_update_and_hides_update() -> None:
    code, output = run("--help")
    assert code == 0
    commands = [
        line.split()[0] for line in output.split("Commands:")[1].splitlines() if line.strip()
    ]
    assert "sparql-update" in commands and "query" in commands
    assert "update" not in commands
    code, output = run("sparql-update", "--help")
    assert code == 0 and "Example" in output and "rdfmem sparql-update " in output


def test_load_refuses_bad_input_and_keeps_the_store(store_path: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.ttl"
    bad.write_text(TURTLE + "ex:carol ex:knows .\n", encoding="utf-8")
    code, output = run("load", store_path, str(bad))
    assert code == 1 and "Turtle" in output
    code, output = run(
        "query", store_path, "SELECT (COUNT(*) AS ?n) { GRAPH ?g {?s ?p ?o} }", "-o", "csv"
    )
    assert output.splitlines()[1] == "3"
    code, output = run("load", store_path, str(bad), "--progress")
    assert code == 1 and "bad.ttl" in output


def test_load_with_a_progress_bar(tmp_path: Path) -> None:
    data = tmp_path / "many.nt"
    data.write_text(
        "".join(f'<urn:ex:s{i}> <urn:ex:p> "{i}" .\n' for i in range(2000)), encoding="utf-8"
    )
    code, output = run("load", str(tmp_path / "s"), str(data), "--progress")
    assert code == 0
    assert "Reading many.nt" in output and "2000 triples" in output


def test_export_formats_and_graphs(store_path: str, tmp_path: Path) -> None:
    out = tmp_path / "all.trig"
    code, output = run("export", store_path, "-o", str(out))
    assert code == 0 and "Wrote 3 triples" in output
    quads = list(ox.parse(out.read_bytes(), ox.RdfFormat.TRIG))
    assert {q.graph_name for q in quads} == {ox.NamedNode("urn:ex:g")}
    code, output = run("export", store_path, "--format", "ntriples", "--graph", "urn:ex:g")
    assert code == 0, output
    assert len(list(ox.parse(output.encode(), ox.RdfFormat.N_TRIPLES))) == 3
    code, output = run("export", store_path, "--format", "turtle")
    assert code == 1 and "--format trig" in output  # it would leave the named graph out
    code, output = run("export", store_path, "--format", "nope")
    assert code == 1 and "unknown RDF format" in output


def test_a_triple_format_backup_of_a_multi_graph_store_is_refused_not_empty(
    store_path: str, tmp_path: Path
) -> None:
    backup = tmp_path / "backup.ttl"
    code, output = run("export", store_path, "-o", str(backup))
    assert code == 1 and "named graphs" in output and "trig" in output
    assert not backup.exists()  # before: an empty file and "Wrote 3 triples"
    code, output = run("export", store_path, "-o", str(backup), "--graph", "urn:ex:g")
    assert code == 0 and "Wrote 3 triples" in output
    assert len(list(ox.parse(backup.read_bytes(), ox.RdfFormat.TURTLE))) == 3


def test_a_triple_format_export_of_the_default_graph_counts_what_it_wrote(tmp_path: Path) -> None:
    data = tmp_path / "d.nt"
    data.write_text('<urn:ex:a> <urn:ex:p> "1" .\n<urn:ex:b> <urn:ex:p> "2" .\n', encoding="utf-8")
    store = str(tmp_path / "s")
    assert run("load", store, str(data))[0] == 0
    out = tmp_path / "default.nt"
    code, output = run("export", store, "-o", str(out))
    assert code == 0 and "Wrote 2 triples" in output
    assert len(out.read_text().splitlines()) == 2


def test_export_shows_progress_graph_by_graph(
    store_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run("update", store_path, "INSERT DATA { GRAPH <urn:ex:h> { <urn:ex:x> <urn:ex:y> 1 } }")
    monkeypatch.setattr(rdfmem.cli.files, "_PROGRESS_TRIPLES", 1)  # "large" from one triple on
    out = tmp_path / "all.nq"
    code, output = run("export", store_path, "-o", str(out))
    assert code == 0 and "Exporting" in output
    quads = list(ox.parse(out.read_bytes(), ox.RdfFormat.N_QUADS))
    assert len(quads) == 4
    assert {q.graph_name.value for q in quads} == {"urn:ex:g", "urn:ex:h"}


def test_stats(store_path: str) -> None:
    run("update", store_path, "INSERT DATA { <urn:ex:alice> a <urn:ex:Person> }")
    store = RdfStore.open(store_path)
    store.with_namespace("agent").set("task", "x")
    store.set("plain", 1)
    store.close()
    code, output = run("stats", store_path, "--json")
    assert code == 0
    doc = json.loads(output)
    assert {"graph": "urn:ex:g", "triples": 3} in doc["graphs"]
    assert {"graph": None, "triples": 1} in doc["graphs"]
    assert doc["keys"] == [{"namespace": "", "keys": 1}, {"namespace": "agent", "keys": 1}]
    assert doc["types"] == [{"type": "<urn:ex:Person>", "nodes": 1}]
    code, output = run("stats", store_path)
    assert "Triples per graph" in output and "(default graph)" in output


def test_validate_reports_readable_violations(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    code, output = run("update", path, "INSERT DATA { <urn:ex:a> <urn:ex:b> 'c' }")
    assert code == 0, output
    code, output = run("validate", path)
    assert code == 0 and "no violations" in output
    broken = (
        "PREFIX rm: <https://w3id.org/rdfmem#> "
        "INSERT DATA { GRAPH <urn:rdfmem:memories:global> { <urn:ex:m> a rm:Memory } }"
    )
    code, output = run("update", path, broken)
    assert code == 0, output
    code, output = run("validate", path)
    assert code == 1
    assert "Violation" in output and "focus node: <urn:ex:m>" in output
    assert "violation(s)" in output


def test_query_and_update_a_served_store(tmp_path: Path) -> None:
    store = RdfStore()
    store.assert_("urn:ex:a", "urn:ex:b", "c", graph="urn:ex:g")
    with BackgroundServer(store, allow_update=True, token="t0k") as server:
        code, output = run("query", server.sparql_url, "SELECT ?o { GRAPH ?g { ?s ?p ?o } }")
        assert code == 0 and "| c" not in output and "c" in output.splitlines()[2]
        update = "INSERT DATA { GRAPH <urn:ex:g> { <urn:ex:x> <urn:ex:y> 1 } }"
        code, output = run("update", server.sparql_url, update)
        assert code == 1 and "403" in output
        code, output = run("update", server.sparql_url, update, "--token", "t0k")
        assert code == 0
    assert store.count(graph="urn:ex:g") == 2


def test_an_oxigraph_server_is_named_by_its_query_url(oxigraph_server: Server) -> None:
    # Oxigraph server takes updates at /update only: the CLI sends them there.
    oxigraph_server.wipe()
    query_url = oxigraph_server.query_url
    code, output = run("update", query_url, "INSERT DATA { <urn:ex:s> <urn:ex:p> 'kept' }")
    assert code == 0, output
    code, output = run("query", query_url, "SELECT ?o { <urn:ex:s> <urn:ex:p> ?o }", "-o", "csv")
    assert code == 0 and output.splitlines() == ["o", "kept"]


def test_serve_runs_until_stopped(store_path: str) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "RDFMEM_TOKEN": ""}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rdfmem",
            "serve",
            store_path,
            "--port",
            str(port),
            "--no-access-log",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None, process.stderr.read()  # type: ignore[union-attr]
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert health.json()["status"] == "ok"
        answer = httpx.get(
            f"http://127.0.0.1:{port}/sparql",
            params={"query": "SELECT ?o { GRAPH ?g { <urn:ex:alice> <urn:ex:age> ?o } }"},
        )
        assert answer.json()["results"]["bindings"][0]["o"]["value"] == "42"
    finally:
        process.terminate()
        _, err = process.communicate(timeout=20)
    assert f"127.0.0.1:{port}" in err.decode()


def test_serve_refuses_a_file_as_store(tmp_path: Path) -> None:
    path = tmp_path / "file.txt"
    path.write_text("x")
    code, output = run("serve", str(path))
    assert code == 1 and "is a file" in output


def test_format_table_cuts_long_cells_and_shortens_iris() -> None:
    rows = [{"s": ox.NamedNode("https://w3id.org/rdfmem#Goal"), "o": ox.Literal("x" * 100)}]
    table = format_table(["s", "o"], rows, width=20)
    assert "rm:Goal" in table
    assert "x" * 19 + "…" in table and "x" * 20 not in table
