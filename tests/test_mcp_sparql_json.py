"""MCP ``sparql_query`` answers in the formats every SPARQL client reads (issue 26, item 6):
the SPARQL 1.1 Query Results JSON format for SELECT and ASK, Turtle for CONSTRUCT and
DESCRIBE; and it refuses every update, whatever the backend would do (issue 23, item 2).
Through the SDK's own client over stdio to a spawned ``rdfmem mcp``; each answer is read back
with pyoxigraph's own parsers, as another SPARQL client would."""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

import anyio
import pyoxigraph as ox
from test_mcp_support import call, ok, rdfmem_params, stdio_session, text_of

from rdfmem import RdfStore
from rdfmem.mcp.services import Services
from rdfmem.mcp.sparql_answer import answer

_PEOPLE = [
    {"name": "Alice", "entityType": "person", "observations": ['says "hi"', "café"]},
    {"name": "Bob", "entityType": "person", "observations": []},
]
_NAMES = (
    "PREFIX rm: <https://w3id.org/rdfmem#> SELECT ?e ?n WHERE { GRAPH ?g "
    "{ ?e rm:entityName ?n } } ORDER BY ?n"
)
_CONSTRUCT = (
    "PREFIX rm: <https://w3id.org/rdfmem#> CONSTRUCT { ?e rm:entityName ?n } WHERE "
    "{ GRAPH ?g { ?e rm:entityName ?n } }"
)


def test_select_ask_and_construct_answer_in_standard_formats() -> None:
    async def main() -> None:
        async with stdio_session(rdfmem_params(":memory:", "--max-rows", "1")) as s:
            ok(await call(s, "create_entities", {"entities": _PEOPLE}))
            select = await call(s, "sparql_query", {"query": _NAMES})
            doc = ok(select)
            assert doc["head"] == {"vars": ["e", "n"]} and doc["truncated"] is True
            assert doc["results"]["bindings"][0]["n"] == {"type": "literal", "value": "Alice"}
            assert doc["results"]["bindings"][0]["e"]["type"] == "uri"
            # Another SPARQL client reads the text as it is: pyoxigraph's JSON reader.
            parsed = ox.parse_query_results(text_of(select).encode(), ox.QueryResultsFormat.JSON)
            assert isinstance(parsed, ox.QuerySolutions)
            assert [str(row["n"]) for row in parsed] == ['"Alice"']

            ask = ok(await call(s, "sparql_query", {"query": "ASK { GRAPH ?g { ?s ?p ?o } }"}))
            assert ask == {"head": {}, "boolean": True}

            built = await call(s, "sparql_query", {"query": _CONSTRUCT})
            assert not built.is_error
            data = ok(built) if built.structured_content else None
            assert data is not None and data["format"] == "text/turtle"
            assert data["triples"] == 1 and data["truncated"] is True
            triples = list(ox.parse(data["turtle"].encode(), ox.RdfFormat.TURTLE))
            assert len(triples) == 1
            # The text a host shows is the Turtle itself (and says it was cut).
            text = text_of(built)
            assert text.startswith(data["turtle"]) and "cut at 1 triples" in text
            assert len(list(ox.parse(text.encode(), ox.RdfFormat.TURTLE))) == 1

    anyio.run(main)


def test_updates_are_refused_over_mcp_and_nothing_changes() -> None:
    updates = [
        "CLEAR ALL",
        "DROP ALL",
        "\\u0044ROP ALL",
        "INSERT DATA { GRAPH <urn:ex:g> { <urn:ex:a> <urn:ex:b> <urn:ex:c> } }",
        "DELETE WHERE { GRAPH ?g { ?s ?p ?o } }",
        "LOAD <http://127.0.0.1:9/x.ttl>",
        "ASK {} # \\u000A CLEAR ALL",
    ]

    async def main() -> None:
        async with stdio_session(rdfmem_params(":memory:")) as s:
            ok(await call(s, "create_entities", {"entities": _PEOPLE}))
            before = ok(await call(s, "sparql_query", {"query": _NAMES}))
            for update in updates:
                result = await s.call_tool("sparql_query", {"query": update})
                assert result.is_error, update
                assert "only reads" in text_of(result) or "LOAD" in text_of(result), update
            assert ok(await call(s, "sparql_query", {"query": _NAMES})) == before

    anyio.run(main)


def test_blank_nodes_languages_and_datatypes_keep_their_json_spelling() -> None:
    store = RdfStore()
    store.assert_("urn:ex:a", "urn:ex:says", ox.Literal("salut", language="fr"))
    store.assert_("urn:ex:a", "urn:ex:age", 42)
    store.assert_("urn:ex:a", "urn:ex:knows", ox.BlankNode("b1"))
    doc = answer(
        "SELECT ?p ?o WHERE { <urn:ex:a> ?p ?o } ORDER BY ?p",
        store=store,
        max_rows=10,
    )
    by_predicate = {b["p"]["value"]: b["o"] for b in doc["results"]["bindings"]}
    assert by_predicate["urn:ex:says"] == {"type": "literal", "value": "salut", "xml:lang": "fr"}
    assert by_predicate["urn:ex:age"] == {
        "type": "literal",
        "value": "42",
        "datatype": "http://www.w3.org/2001/XMLSchema#integer",
    }
    assert by_predicate["urn:ex:knows"]["type"] == "bnode"
    assert doc["truncated"] is False
    json.dumps(doc)  # plain JSON all through
    described = answer("DESCRIBE <urn:ex:a>", store=store, max_rows=10)
    assert described["triples"] == 3 and described["truncated"] is False
    store.close()


def test_only_max_rows_plus_one_rows_are_read() -> None:
    # 200 x 200 x 200 rows: reading them all would take minutes; the answer takes the first
    # max_rows + 1 and stops.
    store = RdfStore()
    for i in range(200):
        store.assert_(f"urn:ex:s{i}", "urn:ex:p", i)
    services = Services(store, max_rows=5)
    doc = answer("SELECT * { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }", store=services.store, max_rows=5)
    assert len(doc["results"]["bindings"]) == 5 and doc["truncated"] is True
    store.close()


def _mcp_servers() -> list[int]:
    """This test process's children that run ``rdfmem mcp``."""
    found = []
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):
            for pid in (task / "children").read_text().split():
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if b"mcp" in cmdline and b"rdfmem" in cmdline:
                    found.append(int(pid))
    return found


def _tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its children (the sandbox's query processes)."""
    pids = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            pids += [int(p) for p in (task / "children").read_text().split()]
    total = 0
    for one in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _threads(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


def test_a_runaway_sparql_query_stops_at_its_limit_and_leaves_nothing_running() -> None:
    # Four nested scans: billions of rows, minutes of CPU if nothing stopped it. It used to
    # go on on a thread after the caller heard "time limit" (issue 23).
    runaway = (
        "SELECT (COUNT(*) AS ?n) { GRAPH ?g { ?a ?b ?c } GRAPH ?h { ?d ?e ?f } "
        "GRAPH ?i { ?x ?y ?z } GRAPH ?j { ?k ?l ?m } }"
    )
    many = [{"name": f"e{i}", "entityType": "t", "observations": ["o"]} for i in range(40)]

    async def main() -> dict[str, float]:
        params = rdfmem_params(":memory:", "--query-timeout", "1")
        async with stdio_session(params) as s:
            ok(await call(s, "create_entities", {"entities": many}))
            ok(await call(s, "sparql_query", {"query": "ASK {}"}))
            (server,) = _mcp_servers()
            threads = _threads(server)
            began = time.monotonic()
            result = await s.call_tool("sparql_query", {"query": runaway})
            took = time.monotonic() - began
            assert result.is_error and "time limit of 1 s" in text_of(result)
            began = time.monotonic()
            assert ok(await call(s, "sparql_query", {"query": "ASK {}"})) == {
                "head": {},
                "boolean": True,
            }
            quick = time.monotonic() - began
            await anyio.sleep(3)
            used = _tree_cpu(server)
            await anyio.sleep(1)
            return {
                "took": took,
                "quick": quick,
                "idle": _tree_cpu(server) - used,
                "threads_before": threads,
                "threads_after": _threads(server),
            }

    seen = anyio.run(main)
    print(f"MCP runaway: {seen}")
    assert seen["took"] < 1 + 2.0  # target: limit + 1 s
    assert seen["quick"] < 2.0  # the next query is not stuck behind it
    assert seen["idle"] < 0.3  # no query left burning the CPU
    assert seen["threads_after"] <= seen["threads_before"]  # no thread left behind
