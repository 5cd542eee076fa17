"""The W3C SPARQL test suites, obtained from a registry package, read into test cases.

The suites are W3C test data (W3C test suite licence). They are not committed here: the
rdflib source distribution on PyPI ships them (``test/data/suites/w3c``), so ``suites_dir``
downloads that sdist once with pip into a cache folder and keeps only the two suites used:
``sparql11`` (SPARQL 1.1 query and update) and ``dawg-data-r2`` (SPARQL 1.0, for ``dataset``
and ``graph``: FROM and GRAPH). ``RDFMEM_W3C_SUITES`` may name a folder that already holds
them (``…/w3c``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from pyoxigraph import BlankNode, Literal, NamedNode, RdfFormat, parse

__all__ = ["Case", "SUITES", "load_cases", "suites_dir"]

#: The sdist that ships the suites (pinned: the data, not the library, is what is used).
RDFLIB_SDIST = "7.6.0"
SUITES: dict[str, tuple[str, list[str]]] = {
    "sparql11-query": (
        "sparql11",
        [
            "aggregates",
            "bind",
            "bindings",
            "construct",
            "csv-tsv-res",
            "exists",
            "functions",
            "grouping",
            "json-res",
            "negation",
            "project-expression",
            "property-path",
            "subquery",
        ],
    ),
    "sparql11-update": (
        "sparql11",
        [
            "add",
            "basic-update",
            "clear",
            "copy",
            "delete",
            "delete-data",
            "delete-insert",
            "delete-where",
            "drop",
            "move",
            "update-silent",
        ],
    ),
    "data-r2": ("dawg-data-r2", ["dataset", "graph"]),
}

MF = "http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#"
QT = "http://www.w3.org/2001/sw/DataAccess/tests/test-query#"
UT = "http://www.w3.org/2009/sparql/tests/test-update#"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
DAWGT = "http://www.w3.org/2001/sw/DataAccess/tests/test-dawg#"


def suites_dir() -> Path | None:
    """The folder holding ``sparql11`` and ``dawg-data-r2``, fetched once from PyPI; None
    when it cannot be had (no registry reachable)."""
    given = os.environ.get("RDFMEM_W3C_SUITES")
    if given:
        return Path(given)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    target = cache / "rdfmem" / f"w3c-suites-rdflib-{RDFLIB_SDIST}"
    if (target / "sparql11" / "manifest-all.ttl").is_file():
        return target
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                f"rdflib=={RDFLIB_SDIST}",
                "--no-binary",
                ":all:",
                "--no-deps",
                "-q",
                "-d",
                tmp,
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        archives = list(Path(tmp).glob("rdflib-*.tar.gz"))
        if done.returncode != 0 or not archives:
            return None
        prefix = f"rdflib-{RDFLIB_SDIST}/test/data/suites/w3c/"
        partial = target.with_name(target.name + ".partial")
        with tarfile.open(archives[0]) as archive:
            members = []
            for member in archive.getmembers():
                if not member.name.startswith(prefix) or not member.isfile():
                    continue
                rest = member.name[len(prefix) :]
                if rest.split("/")[0] not in ("sparql11", "dawg-data-r2"):
                    continue
                member.name = rest
                members.append(member)
            archive.extractall(partial, members=members, filter="data")
        if not target.exists():
            partial.replace(target)
    return target


@dataclass
class Case:
    """One evaluation test: what to load, what to run, what it must give."""

    id: str
    kind: str  # "query" or "update"
    request: Path
    data: list[Path] = field(default_factory=list)
    graph_data: list[tuple[str, Path]] = field(default_factory=list)
    result: Path | None = None
    result_data: list[Path] = field(default_factory=list)
    result_graphs: list[tuple[str, Path]] = field(default_factory=list)


def _path(term: object) -> Path:
    assert isinstance(term, NamedNode) and term.value.startswith("file://"), term
    return Path(term.value[len("file://") :])


def _read(manifest: Path) -> dict[object, dict[str, list[object]]]:
    graph: dict[object, dict[str, list[object]]] = {}
    for quad in parse(path=str(manifest), format=RdfFormat.TURTLE, base_iri=manifest.as_uri()):
        graph.setdefault(quad.subject, {}).setdefault(quad.predicate.value, []).append(quad.object)
    return graph


def _list(graph: dict[object, dict[str, list[object]]], head: object) -> list[object]:
    items = []
    while isinstance(head, (NamedNode, BlankNode)) and head != NamedNode(RDF + "nil"):
        node = graph.get(head, {})
        items.extend(node.get(RDF + "first", []))
        head = node.get(RDF + "rest", [NamedNode(RDF + "nil")])[0]
    return items


def _one(node: dict[str, list[object]], predicate: str) -> object | None:
    values = node.get(predicate)
    return values[0] if values else None


def _graph_data(
    graph: dict[object, dict[str, list[object]]], node: dict[str, list[object]], prefix: str
) -> list[tuple[str, Path]]:
    out = []
    for item in node.get(prefix + "graphData", []):
        if isinstance(item, NamedNode):  # qt:graphData <file>: named by its own IRI
            out.append((item.value, _path(item)))
        else:  # ut:graphData [ ut:graph <file> ; rdfs:label "name" ]
            inner = graph.get(item, {})
            label = _one(inner, RDFS + "label")
            file = _one(inner, UT + "graph")
            assert isinstance(label, Literal), item
            out.append((label.value, _path(file)))
    return out


def load_cases(root: Path, suite: str) -> list[Case]:
    """The evaluation tests of one suite (``sparql11-query``, ``sparql11-update``, ``data-r2``),
    withdrawn tests left out."""
    folder, parts = SUITES[suite]
    cases: list[Case] = []
    for part in parts:
        manifest = root / folder / part / "manifest.ttl"
        graph = _read(manifest)
        entries: list[object] = []
        for node in graph.values():
            for head in node.get(MF + "entries", []):
                entries.extend(_list(graph, head))
        for entry in entries:
            node = graph.get(entry, {})
            kinds = {t.value for t in node.get(RDF + "type", []) if isinstance(t, NamedNode)}
            if DAWGT + "Withdrawn" in {
                getattr(a, "value", "") for a in node.get(DAWGT + "approval", [])
            }:
                continue
            action = graph.get(_one(node, MF + "action"), {})
            result = _one(node, MF + "result")
            name = f"{folder}/{part}/{getattr(entry, 'value', entry).rsplit('#', 1)[-1]}"
            if MF + "QueryEvaluationTest" in kinds:
                query = _one(action, QT + "query")
                if query is None or not isinstance(result, NamedNode):
                    continue
                cases.append(
                    Case(
                        id=name,
                        kind="query",
                        request=_path(query),
                        data=[_path(d) for d in action.get(QT + "data", [])],
                        graph_data=_graph_data(graph, action, QT),
                        result=_path(result),
                    )
                )
            elif MF + "UpdateEvaluationTest" in kinds or UT + "UpdateEvaluationTest" in kinds:
                request = _one(action, UT + "request")
                outcome = graph.get(result, {})
                cases.append(
                    Case(
                        id=name,
                        kind="update",
                        request=_path(request),
                        data=[_path(d) for d in action.get(UT + "data", [])],
                        graph_data=_graph_data(graph, action, UT),
                        result_data=[_path(d) for d in outcome.get(UT + "data", [])],
                        result_graphs=_graph_data(graph, outcome, UT),
                    )
                )
    return cases


def rdf_format_of(path: Path) -> RdfFormat:
    """The RDF format of a test file, by its extension."""
    suffix = path.suffix.lower()
    return {
        ".ttl": RdfFormat.TURTLE,
        ".nt": RdfFormat.N_TRIPLES,
        ".rdf": RdfFormat.RDF_XML,
        ".trig": RdfFormat.TRIG,
        ".nq": RdfFormat.N_QUADS,
    }.get(suffix, RdfFormat.TURTLE)
