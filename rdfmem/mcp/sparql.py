"""``sparql_query``: a read-only SPARQL query, guarded as ``rdfmem serve`` guards its
endpoint: ``SERVICE`` and ``LOAD`` refused before anything runs (``find_forbidden``), a
time limit, and a cap on the rows returned.

pyoxigraph cannot stop a running query, so each runs on a small pool of threads; the caller
gets its answer or a timeout on time, and a runaway query keeps only its own thread.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from rdfmem.core.errors import QueryError, QueryTimedOut
from rdfmem.core.guard import find_forbidden
from rdfmem.core.results import GraphResult, SelectResult
from rdfmem.core.terms import sparql_term
from rdfmem.mcp.graph import Client
from rdfmem.mcp.services import Services
from rdfmem.mcp.specs import READ, Reply, Spec, json_text, obj, string

__all__ = ["SPARQL_TOOL", "QueryTimedOut"]

_SLOTS = threading.BoundedSemaphore(2)  # queries running at once, runaway ones included
_UPDATE_WORDS = ("INSERT", "DELETE", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY")


def _run(services: Services, sparql: str, cap: int) -> dict[str, Any]:
    result = services.store.query(sparql)
    if isinstance(result, bool):
        return {"boolean": result}
    if isinstance(result, GraphResult):
        lines = [
            f"{sparql_term(t.subject)} {sparql_term(t.predicate)} {sparql_term(t.object)} ."
            for t in result.triples[:cap]
        ]
        return {"triples": lines, "truncated": len(result) > cap}
    assert isinstance(result, SelectResult)
    rows = result.rows
    out = [{k: sparql_term(v) for k, v in row.items()} for row in rows[:cap]]
    return {"variables": result.variables, "rows": out, "truncated": len(rows) > cap}


def run_query(services: Services, sparql: str) -> dict[str, Any]:
    """The answer to ``sparql`` (SELECT: variables and rows of N-Triples terms; ASK: a
    boolean; CONSTRUCT/DESCRIBE: N-Triples lines), at most ``services.max_rows`` of them.

    Raises:
        QueryError: SERVICE or LOAD in the text, an update, or a query that does not parse.
        QueryTimedOut: the query ran longer than ``services.query_timeout`` seconds.
    """
    found = find_forbidden(sparql)
    if found is not None:
        raise QueryError(
            f"{found.keyword} at line {found.line}, column {found.column} is refused: this "
            "server does not reach the network"
        )
    deadline = time.monotonic() + services.query_timeout
    if not _SLOTS.acquire(timeout=services.query_timeout):
        raise QueryTimedOut(
            f"every query thread stayed busy for {services.query_timeout:g} s (earlier queries "
            "are still running); try again later"
        )
    box: dict[str, Any] = {}
    done = threading.Event()

    def job() -> None:
        try:
            box["answer"] = _run(services, sparql, services.max_rows)
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc
        finally:
            _SLOTS.release()
            done.set()

    threading.Thread(target=job, name="rdfmem-mcp-query", daemon=True).start()
    if not done.wait(max(0.0, deadline - time.monotonic())):
        raise QueryTimedOut(
            f"the query ran longer than the time limit of {services.query_timeout:g} s; "
            "narrow it (a LIMIT, fewer joins)"
        )
    error = box.get("error")
    if isinstance(error, QueryError) and any(w in sparql.upper() for w in _UPDATE_WORDS):
        raise QueryError(f"{error} (sparql_query only reads: updates are refused)") from error
    if error is not None:
        raise error
    answer: dict[str, Any] = box["answer"]
    return answer


def _sparql_query(s: Services, a: dict[str, Any], c: Client) -> Reply:
    answer = run_query(s, a["query"])
    return Reply(answer, json_text(answer))


SPARQL_TOOL = Spec(
    "sparql_query",
    "SPARQL Query",
    "Run a read-only SPARQL 1.1 query (SELECT, ASK, CONSTRUCT, DESCRIBE) over all of "
    "memory. The knowledge graph is in GRAPH <urn:rdfmem:graph:knowledge> (with --project, "
    "urn:rdfmem:graph:knowledge:PROJECT), in the vocabulary PREFIX rm: "
    "<https://w3id.org/rdfmem#> (rm:KnowledgeEntity, rm:entityName, rm:entityType, "
    "rm:hasObservation/rm:observationText, rm:KnowledgeRelation, rm:relationFrom, "
    "rm:relationTo, rm:relationType; prov:generatedAtTime, prov:wasAttributedTo). Terms come "
    "back in N-Triples form; rows are capped and a time limit applies.",
    obj({"query": string("The SPARQL query")}, ["query"], closed=True, top=True),
    READ,
    _sparql_query,
)
