"""The README and the pages of docs/: their Python examples run, in order, as a user would
paste them; the README keeps the two set-up commands (the test one is what CI runs), stays a
five-minute read and links every page; every relative link and anchor resolves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
LINK = re.compile(r"\]\(([^)\s]+)\)")
SERVER = "# needs a server"


def blocks(page: Path) -> list[str]:
    return BLOCK.findall(page.read_text(encoding="utf-8"))


def name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_the_readme_has_examples_and_the_two_setup_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert blocks(README)
    assert "pip install -e . && rdfmem demo" in text
    assert 'pip install -e ".[test]" && python -m pytest' in text


def test_the_readme_test_command_is_what_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'pip install -e ".[test]" && python -m pytest' in ci.splitlines()


def test_the_readme_is_a_five_minute_read_that_links_the_docs() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250, "the details belong in docs/"
    for page in ("layout.md", "contract.md", "leases.md", "benchmarks.md"):
        assert (DOCS / page).is_file(), page
        assert f"](docs/{page}" in text, page
    assert "](benchmarks/results/" in text


def test_the_benchmark_notes_link_every_result_file() -> None:
    notes = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    results = sorted((ROOT / "benchmarks" / "results").glob("*.md"))
    assert results
    for result in results:
        assert f"](../benchmarks/results/{result.name})" in notes, result.name


def test_the_layout_page_names_every_floor_and_where_to_start() -> None:
    layout = (DOCS / "layout.md").read_text(encoding="utf-8")
    floors = sorted(p.parent.name for p in (ROOT / "rdfmem").glob("*/__init__.py"))
    assert floors
    for floor in floors:
        assert f"`{floor}/`" in layout, floor
    for start in ("rdfmem/core/errors.py", "rdfmem/store/rdfstore.py", "rdfmem/domain/"):
        assert start in layout, start
        assert (ROOT / start).exists(), start


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lowercase, punctuation dropped, spaces to -."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    headings = re.findall(r"^#+ (.+)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_every_relative_link_resolves(page: Path) -> None:
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # http(s): not fetched by the tests
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.exists(), f"{name(page)} links to {target}, which does not exist"
        if anchor:
            assert anchor in anchors(file), f"{name(page)} links to {target}: no such heading"


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p)], ids=name)
def test_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "readme"}
    for number, code in enumerate(blocks(page), start=1):
        if code.lstrip().startswith(SERVER):
            continue  # run by test_server_examples_run
        try:
            exec(compile(code, f"{name(page)} python block {number}", "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the failure is the message
            raise AssertionError(
                f"{name(page)} python block {number} failed: {exc!r}\n{code}"
            ) from exc


def test_the_contract_examples_include_the_remote_store() -> None:
    assert any(code.lstrip().startswith(SERVER) for code in blocks(DOCS / "contract.md"))


def test_server_examples_run(oxigraph_server) -> None:  # type: ignore[no-untyped-def]
    served = [code for page in PAGES for code in blocks(page) if code.lstrip().startswith(SERVER)]
    assert served
    base = oxigraph_server.query_url.rsplit("/", 1)[0]
    for code in served:
        exec(compile(code.replace("http://127.0.0.1:7878", base), "a docs example", "exec"), {})
