"""memory.jsonl files as they come (issue 22, items 5 and 7): line separators that JSON
allows inside strings, Windows line ends, and big files whose entities repeat."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rdfmem import RdfStore
from rdfmem.cli import cli
from rdfmem.mcp import KnowledgeGraph, read_jsonl, write_jsonl

ODD = "one\u2028two\u2029three\u0085four"


def _entity(name: str, observations: list[str]) -> str:
    record = {"type": "entity", "name": name, "entityType": "t", "observations": observations}
    return json.dumps(record, ensure_ascii=False)


def test_unicode_line_separators_inside_strings_are_text_not_line_ends() -> None:
    text = _entity(f"A{ODD}", [ODD]) + "\n"
    model = read_jsonl(text)  # before: "line 1: not JSON" (split at U+2028)
    entity = model.entities[f"A{ODD}"]
    assert entity.observations == [ODD]
    assert read_jsonl(write_jsonl(model)).entities[f"A{ODD}"].observations == [ODD]


def test_windows_line_ends_are_read(tmp_path: Path) -> None:
    text = _entity("A", ["x"]) + "\r\n" + _entity("B", ["y"]) + "\r\n"
    assert sorted(read_jsonl(text).entities) == ["A", "B"]


def test_rdfmem_import_takes_its_own_export_jsonl_with_separators(tmp_path: Path) -> None:
    store = tmp_path / "store"
    kg = KnowledgeGraph(RdfStore.open(store))
    kg.create_entities([{"name": "Note", "entityType": "t", "observations": [ODD]}])
    kg.store.close()
    exported = tmp_path / "memory.jsonl"
    done = CliRunner().invoke(cli, ["export-jsonl", str(store), "-o", str(exported)])
    assert done.exit_code == 0, done.output
    other = tmp_path / "other"
    done = CliRunner().invoke(cli, ["import", str(other), str(exported)])
    assert done.exit_code == 0, done.output
    again = KnowledgeGraph(RdfStore.open(other))
    assert again.open_nodes(["Note"])["entities"][0]["observations"] == [ODD]
    again.store.close()


@pytest.mark.timeout(120)
def test_a_repeated_entity_merges_300_000_observations_in_order() -> None:
    # 3,000 lines of one entity, 100 new observations each (and one repeat per line):
    # 0.1 s now; the list-membership merge took 40 s at 100,000 and minutes here.
    lines = [_entity("Big", [f"o{i * 100 + j}" for j in range(100)] + ["o0"]) for i in range(3000)]
    entity = read_jsonl("\n".join(lines) + "\n").entities["Big"]
    assert len(entity.observations) == 300_000
    assert entity.observations[:3] == ["o0", "o1", "o2"]
    assert entity.observations[-1] == "o299999"


def test_add_observations_to_an_entity_of_100_000_stays_exact() -> None:
    kg = KnowledgeGraph(RdfStore())
    kg.create_entities(
        [{"name": "Big", "entityType": "t", "observations": [f"o{i}" for i in range(100_000)]}]
    )
    items = [{"entityName": "Big", "contents": [f"o{i}", f"new{i}"]} for i in range(0, 2000, 2)]
    added = kg.add_observations(items)
    assert [a["addedObservations"] for a in added[:2]] == [["new0"], ["new2"]]
    kg.delete_observations([{"entityName": "Big", "observations": ["o1", "new0", "missing"]}])
    observations = kg.open_nodes(["Big"])["entities"][0]["observations"]
    assert len(observations) == 100_000 + 1000 - 2
    assert "o1" not in observations and "new0" not in observations and "new2" in observations
