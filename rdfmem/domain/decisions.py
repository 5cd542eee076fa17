"""An agent's decision graph (from Nous.Decisions) kept as RDF in one named graph.

Goals, decisions, options, actions, outcomes, observations and revisits are nodes; typed
edges (leads_to, chosen, rejected, requires, blocks, enables, supersedes) join them. This
module gathers the public names of the modules that hold them:

* ``decision_models``: ``Node``, ``Edge``, their types and statuses, ``utc_now``;
* ``decision_reader``: reads and the five named queries (``ontologies/queries/*.rq``),
  answered from the graph's index on an embedded store and by SPARQL on a remote one, the
  same either way;
* ``decision_graph``: ``DecisionGraph``, the reader that also writes;
* ``decision_queries``: the RDF and SPARQL text, in pure functions.

>>> from rdfmem import RdfStore
>>> graph = DecisionGraph(RdfStore())
>>> goal = graph.add_node(Node(id="g", type="goal", label="Ship v1"))
>>> plan = graph.add_node(Node(id="d", type="decision", label="Use RDF"))
>>> edge = graph.add_edge(Edge(from_id="g", to_id="d", type="leads_to"))
>>> [n.label for n in graph.query("descendants", node_id="g")]
['Use RDF']
>>> [n.id for n in graph.query("path_between", from_id="g", to_id="d")]
['g', 'd']
"""

from rdfmem.domain.decision_graph import DecisionGraph
from rdfmem.domain.decision_models import (
    DEFAULT_GRAPH,
    Edge,
    EdgeType,
    Node,
    NodeStatus,
    NodeType,
    utc_now,
)

__all__ = [
    "DEFAULT_GRAPH",
    "DecisionGraph",
    "Edge",
    "EdgeType",
    "Node",
    "NodeStatus",
    "NodeType",
    "utc_now",
]
