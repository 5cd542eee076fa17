"""The house holds by itself: floors that import only downwards, no import circles (lazy
imports included), small modules, and no reach past ``RdfStore`` into ``store.backend``.

docs/layout.md says what each floor is; these tests make it true.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "rdfmem"
MAX_LINES = 600
#: Floors above the store: they speak to RdfStore's public API only.
ABOVE_THE_STORE = ("domain", "server", "mcp", "langgraph", "cli")


def test_the_floors_contract_is_kept() -> None:
    # import-linter's own command, on the contract in pyproject.toml.
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports_command as c; c()",
            "--no-cache",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 kept, 0 broken" in run.stdout


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circles_counting_lazy_and_type_checking_imports() -> None:
    # grimp reads every import statement: inside functions and TYPE_CHECKING blocks too.
    graph = grimp.build_graph("rdfmem", cache_dir=None)
    assert _cycles(graph) == []


def test_the_circle_finder_finds_a_circle() -> None:
    graph = grimp.ImportGraph()
    for name in ("p", "p.a", "p.b", "p.c"):
        graph.add_module(name)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.a")
    graph.add_import(importer="p.c", imported="p.a")
    assert _cycles(graph) == [["p.a", "p.b"]]


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_module_is_over_600_lines() -> None:
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in _modules()}
    assert {p: n for p, n in sizes.items() if n > MAX_LINES} == {}


def _backend_reads(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{path.name}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "backend"
    ]


def test_domain_and_surfaces_never_reach_into_store_backend() -> None:
    reads = [
        where
        for floor in ABOVE_THE_STORE
        for path in sorted((PACKAGE / floor).rglob("*.py"))
        for where in _backend_reads(path)
    ]
    assert reads == []


def test_the_backend_read_finder_finds_one(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("def f(store):\n    return store.backend.generation\n")
    assert len(_backend_reads(sample)) == 1


def test_every_folder_is_a_floor() -> None:
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == {"core", "backends", "store", *ABOVE_THE_STORE}


@pytest.mark.parametrize(
    "path",
    [
        "rdfmem.decisions",
        "rdfmem.memories",
        "rdfmem.generalisations",
        "rdfmem.context",
        "rdfmem.checkpoint",
        "rdfmem.embeddings",
        "rdfmem.mcp",
        "rdfmem.langgraph",
    ],
)
def test_public_import_paths_keep_working(path: str) -> None:
    import importlib

    module = importlib.import_module(path)
    assert module.__all__
    for name in module.__all__:
        assert hasattr(module, name), f"{path}.{name}"


def test_the_core_floor_does_no_io() -> None:
    # Pure: no module of core/ imports a library that talks to disks, sockets or processes.
    forbidden = {"socket", "subprocess", "httpx", "threading", "sqlite3", "shutil", "os"}
    found = []
    for path in sorted((PACKAGE / "core").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module.split(".")[0]]
            found += [f"{path.name}: {n}" for n in names if n in forbidden]
    assert found == []
