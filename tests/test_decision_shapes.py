"""The SHACL shapes of the decision graph (``ontologies/shapes.ttl``), checked with pyshacl.

What ``DecisionGraph`` writes conforms, on each embedded backend; each kind of broken data
written behind its back is reported with the shape's message.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pyshacl
import pytest
import rdflib

from rdfmem import OxigraphBackend, RdflibBackend, RdfStore
from rdfmem.core.ontology import ontology_path
from rdfmem.decisions import DecisionGraph, Edge, Node

RM = "https://w3id.org/rdfmem#"
DCT = "http://purl.org/dc/terms/"
XSD = "http://www.w3.org/2001/XMLSchema#"


@pytest.fixture(scope="module")
def shapes() -> rdflib.Graph:
    return rdflib.Graph().parse(ontology_path() / "shapes.ttl")


@pytest.fixture(params=["oxigraph", "rdflib"])
def graph(request: pytest.FixtureRequest) -> Iterator[DecisionGraph]:
    backend = OxigraphBackend() if request.param == "oxigraph" else RdflibBackend()
    with RdfStore(backend) as store:
        yield DecisionGraph(store)


def workflow(graph: DecisionGraph) -> None:
    graph.add_nodes(
        [
            Node(id="goal", type="goal", label="Ship v1", confidence=1.0),
            Node(id="dec", type="decision", label="Pick a store", rationale="paths", confidence=0),
            Node(id="opt", type="option", label="Oxigraph", metadata={"licence": "MIT"}),
            Node(id="act", type="action", label="Benchmark it", status="completed"),
            Node(id="out", type="outcome", label="Fast enough"),
            Node(id="obs", type="observation", label='Loads "2 s" <fast>\n'),
            Node(id="rev", type="revisit", label="Check again in May", status="rejected"),
            Node(id="dec2", type="decision", label="Pick again"),
        ]
    )
    for a, b, kind in [
        ("goal", "dec", "leads_to"),
        ("dec", "opt", "chosen"),
        ("dec", "opt", "requires"),
        ("dec", "act", "rejected"),
        ("act", "out", "leads_to"),
        ("obs", "dec", "blocks"),
        ("out", "rev", "enables"),
        ("rev", "goal", "leads_to"),
    ]:
        graph.add_edge(Edge(from_id=a, to_id=b, type=kind, metadata={"by": "test"}))  # type: ignore[arg-type]
    graph.update_node("goal", {"status": "completed"})
    graph.supersede("dec", "dec2", "cheaper")
    graph.add_node(Node(id="gone", type="goal", label="Gone"))
    graph.add_edge(Edge(from_id="gone", to_id="goal", type="leads_to"))
    graph.delete_node("gone")


def validate(graph: DecisionGraph, shapes: rdflib.Graph) -> tuple[bool, str]:
    data = rdflib.Graph().parse(
        data=graph.store.export("turtle", graph=graph.graph), format="turtle"
    )
    conforms, _, text = pyshacl.validate(data, shacl_graph=shapes)
    return bool(conforms), str(text)


def test_what_decision_graph_writes_conforms(graph: DecisionGraph, shapes: rdflib.Graph) -> None:
    workflow(graph)
    conforms, report = validate(graph, shapes)
    assert conforms, report


def break_it(graph: DecisionGraph, update: str) -> None:
    graph.store.sparql_update(
        f"PREFIX rm: <{RM}> PREFIX dcterms: <{DCT}> PREFIX xsd: <{XSD}> "
        + update.replace("GRAPH_", f"<{graph.graph}>")
        .replace("NODE_", f"<{graph._node_iri('dec2')}>")
        .replace("OTHER_", f"<{graph._node_iri('out')}>")
    )


BREAKAGES = {
    "confidence outside 0..1": (
        "DELETE WHERE { GRAPH GRAPH_ { NODE_ rm:confidence ?c } } ; "
        'INSERT DATA { GRAPH GRAPH_ { NODE_ rm:confidence "1.5"^^xsd:double } }',
        "rm:confidence, a double from 0 to 1",
    ),
    "unknown status": (
        "DELETE WHERE { GRAPH GRAPH_ { NODE_ rm:status ?s } } ; "
        "INSERT DATA { GRAPH GRAPH_ { NODE_ rm:status rm:PausedStatus } }",
        "exactly one rm:status",
    ),
    "two node types": (
        "INSERT DATA { GRAPH GRAPH_ { NODE_ a rm:Goal } }",
        "exactly one node type",
    ),
    "no creation time": (
        "DELETE WHERE { GRAPH GRAPH_ { NODE_ dcterms:created ?t } }",
        "exactly one dcterms:created",
    ),
    "a time with no time zone": (
        "DELETE WHERE { GRAPH GRAPH_ { NODE_ dcterms:modified ?t } } ; "
        'INSERT DATA { GRAPH GRAPH_ { NODE_ dcterms:modified "2025-01-01T00:00:00"^^xsd:dateTime } }',
        "xsd:dateTime with a time zone",
    ),
    "metadata that is not rdf:JSON": (
        'INSERT DATA { GRAPH GRAPH_ { NODE_ rm:metadata "{}" } }',
        "rm:metadata, an rdf:JSON object",
    ),
    "an edge to a node that is gone": (
        "DELETE WHERE { GRAPH GRAPH_ { OTHER_ ?p ?o } }",
        "enters exactly one node of its graph",
    ),
    "an edge without its direct triples": (
        "DELETE WHERE { GRAPH GRAPH_ { ?a rm:leadsTo OTHER_ } }",
        "direct triples of a decision-graph edge are missing",
    ),
    "a link without an edge": (
        "INSERT DATA { GRAPH GRAPH_ { NODE_ rm:linksTo OTHER_ } }",
        "no decision-graph edge resource behind it",
    ),
    "an unknown edge type": (
        "DELETE { GRAPH GRAPH_ { ?e rm:edgeType ?t } } INSERT { GRAPH GRAPH_ { ?e rm:edgeType rm:likes } } "
        "WHERE { GRAPH GRAPH_ { ?e rm:edgeType ?t ; rm:toNode OTHER_ } }",
        "exactly one rm:edgeType",
    ),
}


@pytest.mark.parametrize("broken", sorted(BREAKAGES))
def test_broken_data_is_reported(broken: str, shapes: rdflib.Graph) -> None:
    with RdfStore() as store:
        graph = DecisionGraph(store)
        workflow(graph)
        update, message = BREAKAGES[broken]
        break_it(graph, update)
        conforms, report = validate(graph, shapes)
    assert not conforms
    assert message in report, report


def test_node_times_keep_microseconds_in_utc(graph: DecisionGraph) -> None:
    when = dt.datetime(2025, 5, 1, 10, 0, 0, 123456, tzinfo=dt.timezone.utc)
    graph.add_node(Node(id="n", type="goal", label="x", created_at=when))
    rows = graph.store.select(subject=graph._node_iri("n"), predicate=DCT + "created", object="?t")
    assert [row["t"].value for row in rows] == ["2025-05-01T10:00:00.123456Z"]
