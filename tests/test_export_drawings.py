"""``rdfmem export``: vectors left out unless ``--with-vectors`` (and made again by ``rdfmem
load``), and ``--format mermaid|dot`` drawings of one graph, on the demo memory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from rdfmem import RdfStore
from rdfmem.cli import cli
from rdfmem.cli.demo import run_demo
from rdfmem.domain.generalisations import Generalisations
from rdfmem.domain.memories import Memories

VECTOR = "float32Vector"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("export")
    run_demo(folder, history=False)  # the vectors and triples counted here: no versions
    return folder / "store"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_an_export_leaves_vectors_out_and_is_less_than_half_the_size(
    demo: Path, tmp_path: Path
) -> None:
    lean, full = tmp_path / "lean.trig", tmp_path / "full.trig"
    assert run("export", str(demo), "-o", str(lean))[0] == 0
    code, output = run("export", str(demo), "-o", str(full), "--with-vectors")
    assert code == 0, output
    assert VECTOR not in lean.read_text() and full.read_text().count(VECTOR) == 8
    saved = 1 - lean.stat().st_size / full.stat().st_size
    print(f"demo TriG: {full.stat().st_size} bytes with vectors, {lean.stat().st_size} without")
    assert saved >= 0.5
    scope = ["--format", "turtle", "--graph", "urn:rdfmem:memories:project:search-api"]
    code, text = run("export", str(demo), *scope)
    assert code == 0 and VECTOR not in text and "Search Latency" in text
    assert VECTOR in run("export", str(demo), *scope, "--with-vectors")[1]
    assert re.search(r"Wrote 2\d\d triples", run("export", str(demo), "-o", str(lean))[1])


def test_loading_an_export_without_vectors_makes_them_again(demo: Path, tmp_path: Path) -> None:
    lean = tmp_path / "lean.trig"
    run("export", str(demo), "-o", str(lean))
    code, output = run("load", str(tmp_path / "again"), str(lean))
    assert code == 0, output
    assert "Made vectors for 8 memories and generalisations" in output
    with RdfStore.open(tmp_path / "again") as store:
        memories = Memories(store, project="search-api", ranking="vector")
        found = [m.title for m, _ in memories.search("how fast is search at p95?")]
        assert found[0] == "Search Latency"
        assert memories.read("project", "Search Latency").embeddings is not None
        gens = Generalisations(store, "search-team")
        assert gens.search("index on the database")[0][0].id == "index-first"
    with RdfStore.open(demo) as original, RdfStore.open(tmp_path / "again") as store:
        # The same embedder makes the same vectors: the loaded store holds what was left out.
        assert sorted(
            q.object.value
            for q in original.match(None, None, None, None)
            if VECTOR in str(q.object)
        ) == sorted(
            q.object.value for q in store.match(None, None, None, None) if VECTOR in str(q.object)
        )


def test_loading_without_embedding_still_reads_every_memory(demo: Path, tmp_path: Path) -> None:
    lean = tmp_path / "lean.trig"
    run("export", str(demo), "-o", str(lean))
    code, output = run("load", str(tmp_path / "plain"), str(lean), "--no-embed")
    assert code == 0 and "Made vectors" not in output
    with RdfStore.open(tmp_path / "plain") as store:
        memories = Memories(store, project="search-api", session="2024-06-03-standup")
        assert len(memories.list()) == 4
        assert memories.read("project", "Deploy Steps").embeddings is None
        assert memories.search("deploy feature flag")[0][0].title == "Deploy Steps"  # keywords


def test_mermaid_and_dot_draw_one_graph(demo: Path, tmp_path: Path) -> None:
    decisions = ["--graph", "urn:rdfmem:graph:decisions"]
    code, text = run("export", str(demo), "--format", "mermaid", *decisions)
    assert code == 0 and text.startswith("flowchart LR\n")
    assert len(re.findall(r'^  n\d+\["', text, re.M)) == 12
    assert len(re.findall(r"-->\|", text)) == 13 and '-->|"supersedes"|' in text
    assert "class " in text and " superseded" in text
    out = tmp_path / "decisions.dot"
    code, output = run("export", str(demo), "-o", str(out), *decisions)
    assert code == 0 and "Drew 12 nodes and 13 edges" in output
    dot = out.read_text()
    assert dot.startswith('digraph "urn:rdfmem:graph:decisions" {') and dot.rstrip().endswith("}")
    assert dot.count(" -> ") == 13 and 'label="chosen"' in dot
    code, text = run(
        "export", str(demo), "--format", "dot", "--graph", "urn:rdfmem:memories:global"
    )
    assert code == 0 and "Eli's Preferences" in text and 'label="topic"' in text


def test_a_drawing_needs_one_graph_and_says_which(demo: Path) -> None:
    code, output = run("export", str(demo), "--format", "mermaid")
    assert code == 1 and "--graph IRI" in output and "urn:rdfmem:graph:decisions" in output
    code, output = run("export", str(demo), "--format", "svgz")
    assert code == 1 and "mermaid or dot" in output
