"""``rdfmem demo`` end to end in a temporary folder, then the same memory served and queried."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pyoxigraph as ox
import pytest
from click.testing import CliRunner
from SPARQLWrapper import JSON, SPARQLWrapper

from rdfmem import RdfStore
from rdfmem.cli import cli
from rdfmem.cli.demo import run_demo
from rdfmem.core.ontology import named_query, ontology_path
from rdfmem.server import BackgroundServer


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("demo")
    result = CliRunner().invoke(cli, ["demo", str(folder)])
    assert result.exit_code == 0, result.output
    return folder, result.output


def section(output: str, title: str) -> str:
    """The text of one query's table in the demo's output."""
    start = output.index(f"== {title}")
    end = output.find("\n== ", start + 1)
    return output[start : end if end != -1 else len(output)]


def test_demo_runs_every_named_query(demo: tuple[Path, str]) -> None:
    _, output = demo
    names = sorted(p.stem for p in (ontology_path() / "queries").glob("*.rq"))
    for name in names:
        assert f"== {name.replace('_', ' ').capitalize()}" in output, name
    assert "skipped" not in output


def test_demo_tables_tell_the_story(demo: tuple[Path, str]) -> None:
    _, output = demo
    path = section(output, "Path between")
    ids = [line.split("|")[0].strip() for line in path.splitlines()[4:9]]
    assert ids == ["ship-v2", "pick-backend", "postgres-fts", "gin-index", "p95-120ms"]
    recent = section(output, "Recent decisions")
    assert "redis-cache" in recent and "superseded" in recent
    goals = section(output, "Active goals")
    assert "Ship the v2 search API by Friday" in goals and "(2 rows)" in goals
    assert "Try an index on the existing database" in section(output, "Generalisation lineage")
    assert "Standup Notes" in section(output, "Memories by topic")
    assert "rdfmem serve" in output and "rdfmem query" in output


def test_demo_writes_a_store_and_exports_that_agree(demo: tuple[Path, str]) -> None:
    folder, _ = demo
    triples = list(ox.parse(path=folder / "memory.ttl", format=ox.RdfFormat.TURTLE))
    quads = list(ox.parse(path=folder / "memory.trig", format=ox.RdfFormat.TRIG))
    assert len(triples) > 100
    assert len(quads) >= len(triples)  # the Turtle export merges identical triples of graphs
    graphs = {q.graph_name.value for q in quads if isinstance(q.graph_name, ox.NamedNode)}
    assert "urn:rdfmem:graph:decisions" in graphs and "urn:rdfmem:graph:store" in graphs
    with RdfStore.open(folder / "store") as store:
        assert len(list(store.triples())) == len(quads)
        assert store.with_namespace("agent").get("limits") == {"p95_ms": 200, "max_results": 50}
        assert store.with_namespace("agent").get("token_budget") == 120_000 - 18_500


def test_demo_data_conforms_to_the_shapes(demo: tuple[Path, str]) -> None:
    folder, _ = demo
    result = CliRunner().invoke(cli, ["validate", str(folder / "store")])
    assert result.exit_code == 0, result.output
    assert "no violations" in result.output


def test_served_demo_answers_named_queries_and_raw_rq(demo: tuple[Path, str]) -> None:
    folder, _ = demo
    with RdfStore.open(folder / "store") as store, BackgroundServer(store) as server:
        path = httpx.get(
            server.url + "/queries/path_between",
            params={"from_id": "ship-v2", "to_id": "p95-120ms"},
            headers={"Accept": "text/csv"},
        )
        assert path.status_code == 200
        assert "node/postgres-fts" in path.text
        recent = httpx.get(server.url + "/queries/recent_decisions", params={"limit": "1"})
        rows = recent.json()["results"]["bindings"]
        assert [r["id"]["value"] for r in rows] == ["lru-cache"]
        bad = httpx.get(server.url + "/queries/recent_decisions", params={"limit": "1; DROP"})
        assert bad.status_code == 400
        wrapper = SPARQLWrapper(server.sparql_url)
        wrapper.setQuery(named_query("active_goals"))  # the shipped file, unchanged
        wrapper.setReturnFormat(JSON)
        result = wrapper.queryAndConvert()
        assert isinstance(result, dict)
        labels = {b["label"]["value"] for b in result["results"]["bindings"]}
        assert labels == {
            "Ship the v2 search API by Friday",
            "Keep search p95 latency under 200 ms",
        }


def test_demo_replaces_its_own_folder_and_refuses_others(tmp_path: Path) -> None:
    first = run_demo(tmp_path / "d")
    second = run_demo(tmp_path / "d")  # replaced, not doubled
    for report in (first, second):
        goals = next(s for s in report.queries if s.name == "active_goals")
        assert len(goals.rows) == 2
    other = tmp_path / "other"
    other.mkdir()
    RdfStore.open(other / "store").close()
    result = CliRunner().invoke(cli, ["demo", str(other)])
    assert result.exit_code == 1 and "not made by rdfmem demo" in result.output


def test_demo_skips_a_missing_part_cleanly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rdfmem.domain.decisions", None)  # as if not installed
    report = run_demo(tmp_path / "d")
    assert any(line.startswith("decision graph:") for line in report.skipped)
    assert {s.name for s in report.queries} >= {"memories_by_topic", "generalisations_by_level"}
    assert (tmp_path / "d" / "memory.ttl").is_file()
