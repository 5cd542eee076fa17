"""The README's Python examples run, in order, as a user would paste them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def blocks() -> list[str]:
    return BLOCK.findall(README.read_text(encoding="utf-8"))


def test_the_readme_has_examples_and_the_two_setup_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert blocks()
    assert "pip install -e . && rdfmem demo" in text
    assert 'pip install -e ".[test]" && python -m pytest' in text


def test_the_readme_test_command_is_what_ci_runs() -> None:
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert 'pip install -e ".[test]" && python -m pytest' in ci.splitlines()


def test_readme_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "readme"}
    for number, code in enumerate(blocks(), start=1):
        if code.lstrip().startswith("# needs a server"):
            continue  # run by test_readme_server_examples_run
        try:
            exec(compile(code, f"README.md python block {number}", "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the failure is the message
            raise AssertionError(f"README python block {number} failed: {exc!r}\n{code}") from exc


def test_readme_server_examples_run(oxigraph_server) -> None:  # type: ignore[no-untyped-def]
    served = [code for code in blocks() if code.lstrip().startswith("# needs a server")]
    assert served
    base = oxigraph_server.query_url.rsplit("/", 1)[0]
    for code in served:
        exec(compile(code.replace("http://127.0.0.1:7878", base), "README.md", "exec"), {})
