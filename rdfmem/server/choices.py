"""What the query page offers for each named query's parameters: the ids, levels, topics and
graphs present in the store, read with a few bounded queries.

A parameter is offered values by its name: ``node_id``, ``from_id`` and ``to_id`` the ids of
decision nodes, ``id`` the ids of generalisations, ``level`` their levels, ``topic`` the
topics of memories, ``graph`` the named graphs.

>>> from rdfmem import RdfStore
>>> from rdfmem.domain.decisions import DecisionGraph, Node
>>> store = RdfStore()
>>> _ = DecisionGraph(store).add_node(Node(id="ship", type="goal", label="Ship it"))
>>> found = read_choices(store)
>>> found.values["node_id"], found.graphs
(['ship'], ['urn:rdfmem:graph:decisions'])
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rdfmem.core.ontology import PREFIXES, RDFMEM
from rdfmem.core.results import SelectResult
from rdfmem.store.rdfstore import RdfStore

__all__ = ["MAX_CHOICES", "Choices", "read_choices", "read_graphs"]

#: The most values offered for one parameter (and graphs listed).
MAX_CHOICES = 500

_DCT = PREFIXES["dcterms"]
_PREFIXES = f"PREFIX rm: <{RDFMEM}>\nPREFIX dcterms: <{_DCT}>\n"
#: Parameter names -> the query listing the values the store holds for them (as ?v).
_SOURCES: dict[tuple[str, ...], str] = {
    ("node_id", "from_id", "to_id"): (
        "SELECT ?v (MIN(?when) AS ?first) WHERE { GRAPH ?g { ?n dcterms:identifier ?v ; "
        "rm:status ?s . OPTIONAL { ?n dcterms:created ?when } } } GROUP BY ?v ORDER BY ?first ?v"
    ),
    ("id",): (
        "SELECT DISTINCT ?v WHERE { GRAPH ?g { ?x a rm:Generalisation ; dcterms:identifier ?v } }"
        " ORDER BY ?v"
    ),
    ("level",): (
        "SELECT DISTINCT ?v WHERE { GRAPH ?g { ?x a rm:Generalisation ; rm:level ?v } } ORDER BY ?v"
    ),
    ("topic",): (
        "SELECT DISTINCT ?v WHERE { GRAPH ?g { ?m a rm:Memory ; rm:topic ?v } } ORDER BY ?v"
    ),
}
_GRAPHS = "SELECT DISTINCT ?v WHERE { GRAPH ?v { ?s ?p ?o } } ORDER BY ?v"


@dataclass
class Choices:
    """Values to offer, by parameter name, and the named graphs of the store."""

    values: dict[str, list[str]] = field(default_factory=dict)
    graphs: list[str] = field(default_factory=list)

    def offered(self, name: str) -> list[str]:
        """The values offered for the parameter ``name`` (the graphs for ``graph``)."""
        return self.graphs if name == "graph" else self.values.get(name, [])


def _column(store: RdfStore, sparql: str) -> list[str]:
    rows = store.query(f"{_PREFIXES}{sparql} LIMIT {MAX_CHOICES}")
    assert isinstance(rows, SelectResult)
    return [row["v"].value for row in rows if "v" in row]


def read_graphs(store: RdfStore) -> list[str]:
    """The named graphs of ``store``, in IRI order (at most ``MAX_CHOICES``)."""
    return _column(store, _GRAPHS)


def read_choices(store: RdfStore) -> Choices:
    """The values the page offers, read from ``store`` (one query per kind, each at most
    ``MAX_CHOICES`` rows)."""
    found = Choices(graphs=read_graphs(store))
    for names, sparql in _SOURCES.items():
        values = _column(store, sparql)
        for name in names:
            found.values[name] = values
    return found
