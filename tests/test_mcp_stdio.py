"""``rdfmem mcp STORE`` over stdio, through the SDK's own ``ClientSession``: every tool, the
resource, bad input, one owner per on-disk store, and the JSONL import/export commands."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import ClientSession, MCPError
from test_mcp_support import call, every_tool, ok, rdfmem_params, stdio_session, text_of

from rdfmem.cli import cli

OFFICIAL = [
    "create_entities",
    "create_relations",
    "add_observations",
    "delete_entities",
    "delete_observations",
    "delete_relations",
    "read_graph",
    "search_nodes",
    "open_nodes",
]


def test_the_official_tools_with_their_hints_and_the_resource() -> None:
    async def main() -> None:
        async with stdio_session(rdfmem_params(":memory:")) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert list(tools)[:9] == OFFICIAL
            for name, tool in tools.items():
                assert tool.description and tool.annotations is not None, name
            hints = {
                n: (
                    tools[n].annotations.read_only_hint,  # type: ignore[union-attr]
                    tools[n].annotations.destructive_hint,  # type: ignore[union-attr]
                    tools[n].annotations.idempotent_hint,  # type: ignore[union-attr]
                )
                for n in OFFICIAL
            }
            assert hints["read_graph"] == hints["open_nodes"] == (True, False, True)
            assert hints["delete_entities"] == hints["delete_relations"] == (False, True, True)
            assert hints["create_entities"] == hints["add_observations"] == (False, False, False)
            assert tools["sparql_query"].annotations.read_only_hint  # type: ignore[union-attr]
            resources = (await session.list_resources()).resources
            assert [str(r.uri) for r in resources] == ["memory://knowledge-graph"]
            assert resources[0].mime_type == "application/json"
            with pytest.raises(MCPError, match="memory://elsewhere not found"):
                await session.read_resource("memory://elsewhere")
            assert (await session.list_tools()).tools  # and the server goes on

    anyio.run(main)


def test_every_tool_over_stdio(tmp_path: Path) -> None:
    async def main() -> None:
        async with stdio_session(rdfmem_params(str(tmp_path / "mem"))) as s:
            await every_tool(s)

    anyio.run(main)


def test_bad_input_is_a_tool_error_nothing_is_written_and_the_server_goes_on() -> None:
    bad: list[tuple[str, Any, str]] = [
        ("create_entities", {"entities": [{"name": 1, "entityType": "t", "observations": []}]},
         "entities[0].name: expected a string, received a number"),
        ("create_entities", {"entities": "Alice"}, "entities: expected an array"),
        ("create_entities", {}, "entities: required, but missing"),
        ("add_observations", {"observations": [{"entityName": "Alice", "contents": [None]}]},
         "contents[0]: expected a string, received null"),
        ("add_observations", {"observations": [{"entityName": "Alice", "contents": ["new"]},
                                               {"entityName": "Ghost", "contents": ["x"]}]},
         "Entity with name Ghost not found"),
        ("create_entities", {"entities": [{"name": "Big", "entityType": "t",
                                           "observations": ["x" * 200_000]}]},
         "200,000 characters"),
        ("create_entities", {"entities": [{"name": "e", "entityType": "t",
                                           "observations": ["o"] * 20_000}]},
         "20000 items"),
        ("no_such_tool", {}, "Tool no_such_tool not found"),
        ("sparql_query", {"query": "LOAD <http://example.org/x.ttl>"}, "LOAD at line 1"),
        ("sparql_query", {"query": "INSERT DATA { <urn:a> <urn:b> <urn:c> }"}, "only reads"),
        ("sparql_query", {"query": "SELECT * WHERE {"}, "error at 1:17"),
        ("memory_save", {"scope": "global", "title": "--", "content": "x"}, "title"),
        ("memory_save", {"scope": "galaxy", "title": "A", "content": "x"}, "must be one of"),
        ("decision_add_edge", {"from_id": "a", "to_id": "b", "type": "leads_to"}, "a"),
        ("decision_query", {"name": "path_between"}, "needs"),
        ("generalisation_list", {}, "pass id"),
    ]  # fmt: skip

    async def main() -> None:
        async with stdio_session(rdfmem_params(":memory:")) as s:
            alice = {"name": "Alice", "entityType": "person", "observations": ["a"]}
            ok(await call(s, "create_entities", {"entities": [alice]}))
            before = ok(await call(s, "read_graph", {}))
            for name, arguments, message in bad:
                result = await s.call_tool(name, arguments)
                assert result.is_error, (name, arguments)
                assert message in text_of(result), (message, text_of(result))
            assert ok(await call(s, "read_graph", {})) == before
            count = ok(await call(s, "sparql_query", {"query": "SELECT * { ?s ?p ?o }"}))
            assert all("urn:a" not in str(b) for b in count["results"]["bindings"])

    anyio.run(main)


def test_rows_are_capped_and_a_time_limit_applies() -> None:
    async def main() -> None:
        params = rdfmem_params(":memory:", "--max-rows", "3", "--query-timeout", "0.5")
        async with stdio_session(params) as s:
            many = [{"name": f"e{i}", "entityType": "t", "observations": []} for i in range(10)]
            ok(await call(s, "create_entities", {"entities": many}))
            capped = ok(
                await call(s, "sparql_query", {"query": "SELECT * { GRAPH ?g { ?s ?p ?o } }"})
            )
            assert len(capped["results"]["bindings"]) == 3 and capped["truncated"] is True
            slow = (
                "SELECT (COUNT(*) AS ?n) { GRAPH ?g { ?a ?b ?c } GRAPH ?h { ?d ?e ?f } "
                "GRAPH ?i { ?x ?y ?z } GRAPH ?j { ?k ?l ?m } }"
            )
            result = await s.call_tool("sparql_query", {"query": slow})
            assert result.is_error and "time limit of 0.5 s" in text_of(result)
            assert ok(await call(s, "open_nodes", {"names": ["e1"]}))["entities"]

    anyio.run(main)


def test_a_disk_store_keeps_memory_and_has_one_owner(tmp_path: Path) -> None:
    folder = str(tmp_path / "memory")

    async def main() -> None:
        entity = {"name": "Alice", "entityType": "person", "observations": ["a"]}
        async with stdio_session(rdfmem_params(folder, "--project", "web")) as s:
            ok(await call(s, "create_entities", {"entities": [entity]}))
            # A second server starts (it opens its store on first need): it shares the
            # store (its own project's graph is empty), or, where a store has one owner,
            # answers each call with why it cannot and how to share the memory instead.
            async with stdio_session(rdfmem_params(folder)) as second:
                answer = await second.call_tool("read_graph", {})
                if answer.is_error:
                    assert "open in another process" in text_of(answer)
                    assert "--http" in text_of(answer) and "SPARQL server" in text_of(answer)
                else:
                    assert ok(answer) == {"entities": [], "relations": []}
        async with stdio_session(rdfmem_params(folder, "--project", "web")) as s:
            assert ok(await call(s, "read_graph", {}))["entities"] == [entity]
        async with stdio_session(rdfmem_params(folder)) as s:
            assert ok(await call(s, "read_graph", {})) == {"entities": [], "relations": []}

    anyio.run(main)


def test_import_and_export_jsonl(tmp_path: Path) -> None:
    lines = [
        '{"type":"entity","name":"A","entityType":"t","observations":["o1","ü \\"q\\""]}',
        '{"type":"entity","name":"B","entityType":"t","observations":[]}',
        '{"type":"relation","from":"A","to":"B","relationType":"r"}',
    ]
    source = tmp_path / "memory.jsonl"
    source.write_text("\n".join(lines), encoding="utf-8")  # the official file has no last \n
    store = str(tmp_path / "store")
    runner = CliRunner()
    result = runner.invoke(cli, ["import", store, str(source)])
    assert result.exit_code == 0, result.output
    assert "Imported 2 entities, 2 observations and 1 relations" in result.output
    exported = runner.invoke(cli, ["export-jsonl", store])
    assert exported.exit_code == 0, exported.output
    assert exported.stdout.splitlines() == lines, exported.output

    broken = tmp_path / "broken.jsonl"
    broken.write_text(lines[1].replace("B", "C") + '\n{"type":"entity","name":"D"}\n')
    failed = runner.invoke(cli, ["import", store, str(broken)])
    assert failed.exit_code == 1
    assert "nothing imported" in failed.output and "line 2" in failed.output
    again = runner.invoke(cli, ["export-jsonl", store, "-o", str(tmp_path / "out.jsonl")])
    assert again.exit_code == 0
    assert (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines() == lines


def test_without_the_sdk_the_command_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['mcp'] = None; from rdfmem.cli import main; "
        "main(['mcp', ':memory:'])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "pip install 'rdfmem[mcp]'" in done.stderr


def test_subscribers_hear_that_the_graph_changed_and_clients_are_credited() -> None:
    from mcp import MCPDeprecationWarning, stdio_client
    from mcp.types import Implementation, ResourceUpdatedNotification

    heard: list[str] = []

    async def handler(message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            heard.append(str(message.params.uri))

    async def main() -> None:
        with open(os.devnull, "w") as devnull:
            async with (
                stdio_client(rdfmem_params(":memory:"), errlog=devnull) as (read, write),
                ClientSession(
                    read, write, message_handler=handler,
                    client_info=Implementation(name="test-host", version="9.1"),
                ) as s,
            ):  # fmt: skip
                await s.initialize()
                with warnings.catch_warnings():  # the protocol version the official server
                    warnings.simplefilter("ignore", MCPDeprecationWarning)  # speaks has it
                    await s.subscribe_resource("memory://knowledge-graph")
                alice = {"name": "Alice", "entityType": "person", "observations": ["a"]}
                ok(await call(s, "create_entities", {"entities": [alice]}))
                ok(await call(s, "read_graph", {}))
                with anyio.fail_after(10):
                    while not heard:
                        await anyio.sleep(0.01)
                assert heard == ["memory://knowledge-graph"]
                query = (
                    "PREFIX prov: <http://www.w3.org/ns/prov#> SELECT ?label WHERE { GRAPH ?g "
                    "{ ?e prov:wasAttributedTo ?who . ?who "
                    "<http://www.w3.org/2000/01/rdf-schema#label> ?label } "
                    "FILTER(!STRSTARTS(STR(?g), 'urn:rdfmem:history:')) }"
                )
                answer = ok(await call(s, "sparql_query", {"query": query}))
                labels = {b["label"]["value"] for b in answer["results"]["bindings"]}
                assert labels == {"test-host 9.1"}

    anyio.run(main)
