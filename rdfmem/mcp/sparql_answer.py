"""What ``sparql_query`` answers, in the formats every SPARQL client reads: the SPARQL 1.1
Query Results JSON format for SELECT and ASK, Turtle for CONSTRUCT and DESCRIBE, both written
by pyoxigraph. At most ``max_rows`` rows (or triples) are written and ``max_rows + 1`` read
(the extra one only says that more exist): the rest of the result is never evaluated.

>>> from rdfmem import RdfStore
>>> store = RdfStore()
>>> store.assert_("urn:ex:a", "urn:ex:says", "hi")
>>> answer("SELECT ?o WHERE { ?s ?p ?o }", store=store, max_rows=10)["results"]
{'bindings': [{'o': {'type': 'literal', 'value': 'hi'}}]}
>>> answer("ASK { ?s ?p 'hi' }", store=store, max_rows=10)
{'head': {}, 'boolean': True}
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from pyoxigraph import (
    QueryBoolean,
    QueryResultsFormat,
    QuerySolutions,
    RdfFormat,
    Triple,
    parse_query_results,
    serialize,
)

from rdfmem.core.results import Row, solutions_json
from rdfmem.store.rdfstore import RdfStore

__all__ = ["TURTLE", "answer"]

TURTLE = "text/turtle"


def answer(sparql: str, *, store: RdfStore, max_rows: int) -> dict[str, Any]:
    """The answer to the query ``sparql`` as plain JSON-ready data:

    * SELECT: ``{"truncated": bool, "head": {"vars": …}, "results": {"bindings": …}}``
      (SPARQL 1.1 Query Results JSON, with ``truncated`` first, which its readers skip);
    * ASK: ``{"head": {}, "boolean": bool}``;
    * CONSTRUCT, DESCRIBE: ``{"format": "text/turtle", "turtle": …, "triples": n,
      "truncated": bool}``.

    Raises:
        QueryError: the query does not parse or fails.
    """
    result = store.stream(sparql)
    if isinstance(result, (bool, QueryBoolean)):
        return {"head": {}, "boolean": bool(result)}
    if isinstance(result, QuerySolutions):
        variables = [v.value for v in result.variables]
        rows: list[Row] = []
        for solution in itertools.islice(result, max_rows + 1):
            rows.append({v: t for v in variables if (t := solution[v]) is not None})
        kept = rows[:max_rows]
        # Handed to pyoxigraph's reader and written again by its writer: the format exactly.
        parsed = parse_query_results(solutions_json(variables, kept), QueryResultsFormat.JSON)
        body = parsed.serialize(format=QueryResultsFormat.JSON) or b"{}"
        # ``truncated`` comes first: streaming readers (pyoxigraph's) skip an unknown member
        # before ``head`` but stop at one after the bindings.
        doc: dict[str, Any] = {"truncated": len(rows) > max_rows}
        doc.update(json.loads(body))
        return doc
    triples: list[Triple] = list(itertools.islice(result, max_rows + 1))
    shown = triples[:max_rows]
    text = serialize(shown, None, RdfFormat.TURTLE, prefixes=dict(store.prefixes)) or b""
    return {
        "format": TURTLE,
        "turtle": bytes(text).decode("utf-8"),
        "triples": len(shown),
        "truncated": len(triples) > max_rows,
    }
