"""What a user gets: the public names, and a wheel that carries the vocabulary."""

from __future__ import annotations

import subprocess
import sys
import types
import zipfile
from pathlib import Path

import rdfmem

ROOT = Path(__file__).resolve().parent.parent


def test_all_lists_exactly_the_public_names() -> None:
    public = {
        name
        for name in dir(rdfmem)  # the names are loaded lazily: dir lists them all
        if not name.startswith("_") and not isinstance(getattr(rdfmem, name), types.ModuleType)
    }
    assert set(rdfmem.__all__) == public
    assert len(rdfmem.__all__) == len(set(rdfmem.__all__))


def test_the_design_names_are_importable_from_rdfmem() -> None:
    for name in [
        "RdfStore",
        "TypedStore",
        "OxigraphBackend",
        "RdflibBackend",
        "RdfMemError",
        "StoreError",
        "IncompatibleSnapshot",
        "KeyNotFound",
        "BackingError",
        "LeaseDenied",
        "LeaseExpired",
        "Unreachable",
        "QueryError",
        "ContextUpdate",
        "Checkpoint",
    ]:
        assert name in rdfmem.__all__, name


def test_py_typed_is_shipped() -> None:
    assert (Path(rdfmem.__file__).parent / "py.typed").is_file()


def test_the_wheel_carries_ontologies_and_finds_them_installed(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
    )
    [wheel] = tmp_path.glob("rdfmem-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path / "site")
    assert {
        "rdfmem/py.typed",
        "rdfmem/ontologies/rdfmem.ttl",
        "rdfmem/ontologies/shapes.ttl",
    } <= names
    shipped_queries = {n for n in names if n.startswith("rdfmem/ontologies/queries/")}
    assert shipped_queries == {
        "rdfmem/ontologies/queries/" + p.name
        for p in (ROOT / "ontologies" / "queries").glob("*.rq")
    }
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import rdfmem; "
        "p = rdfmem.ontology_path(); print(p); assert (p / 'rdfmem.ttl').is_file()"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "site")],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    ).stdout
    assert Path(out.strip()) == tmp_path / "site" / "rdfmem" / "ontologies"


def test_ontology_path_in_the_checkout_is_the_repository_folder() -> None:
    assert rdfmem.ontology_path() == ROOT / "ontologies"
