"""``sparql_query``: a read-only SPARQL query, guarded as ``rdfmem serve`` guards its
endpoint: ``SERVICE`` and ``LOAD`` refused before anything runs (``find_forbidden``), a
time limit, and a cap on the rows returned.

pyoxigraph cannot stop a running query, so on a store this process evaluates (Oxigraph,
rdflib) each runs in the sandbox (``rdfmem.store.sandbox``): a kept child process, killed at
the time limit (its CPU and memory back at once, no thread left behind) and capped in memory.
On a remote store the query runs on its server; this process waits for it on a thread, at
most until the time limit.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

from rdfmem.core.errors import ChildFailed, QueryError, QueryTimedOut, TimedOut
from rdfmem.core.guard import find_forbidden, query_form
from rdfmem.mcp.graph import Client
from rdfmem.mcp.services import Services
from rdfmem.mcp.sparql_answer import TURTLE, answer
from rdfmem.mcp.specs import READ, Reply, Spec, json_text, obj, string
from rdfmem.store.rdfstore import RdfStore
from rdfmem.store.sandbox import Sandbox

__all__ = ["SPARQL_TOOL", "QueryTimedOut"]

_SLOTS = threading.BoundedSemaphore(2)  # queries running at once, runaway ones included
_SANDBOXES: weakref.WeakKeyDictionary[RdfStore, Sandbox] = weakref.WeakKeyDictionary()
_SANDBOXES_LOCK = threading.Lock()


def _sandbox(store: RdfStore) -> Sandbox:
    with _SANDBOXES_LOCK:
        sandbox = _SANDBOXES.get(store)
        if sandbox is None:
            sandbox = _SANDBOXES[store] = Sandbox(store, size=2)
        return sandbox


def _answer(store: RdfStore, sparql: str, max_rows: int) -> dict[str, Any]:
    """``answer`` as the sandbox calls it, in its child."""
    return answer(sparql, store=store, max_rows=max_rows)


def run_query(services: Services, sparql: str) -> dict[str, Any]:
    """The answer to ``sparql`` (``rdfmem.mcp.sparql_answer.answer``: SPARQL 1.1 Query
    Results JSON for SELECT and ASK, Turtle for CONSTRUCT and DESCRIBE), at most
    ``services.max_rows`` rows or triples of it.

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
    try:
        query_form(sparql)  # an update is refused here, whatever the backend would do
    except QueryError as exc:
        raise QueryError(f"sparql_query only reads: {exc}") from None
    deadline = time.monotonic() + services.query_timeout
    if not _SLOTS.acquire(timeout=services.query_timeout):
        raise QueryTimedOut(
            f"every query thread stayed busy for {services.query_timeout:g} s (earlier queries "
            "are still running); try again later"
        )
    if not services.store.capabilities.embedded:
        return _on_thread(services, sparql, deadline)
    try:
        result: dict[str, Any] = _sandbox(services.store).run(
            _answer, {"sparql": sparql, "max_rows": services.max_rows}, deadline=deadline
        )
    except TimedOut:
        raise QueryTimedOut(_too_long(services)) from None
    except ChildFailed as exc:
        raise QueryError(f"the query failed: {exc}") from None
    finally:
        _SLOTS.release()
    return result


def _too_long(services: Services) -> str:
    return (
        f"the query ran longer than the time limit of {services.query_timeout:g} s; "
        "narrow it (a LIMIT, fewer joins)"
    )


def _on_thread(services: Services, sparql: str, deadline: float) -> dict[str, Any]:
    """A remote store's query, waited for on a thread until ``deadline``; the thread ends
    when the store's client gives up (its own timeout)."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def job() -> None:
        try:
            box["answer"] = answer(sparql, store=services.store, max_rows=services.max_rows)
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc
        finally:
            _SLOTS.release()
            done.set()

    threading.Thread(target=job, name="rdfmem-mcp-query", daemon=True).start()
    if not done.wait(max(0.0, deadline - time.monotonic())):
        raise QueryTimedOut(_too_long(services))
    error = box.get("error")
    if error is not None:
        raise error
    result: dict[str, Any] = box["answer"]
    return result


def _sparql_query(s: Services, a: dict[str, Any], c: Client) -> Reply:
    found = run_query(s, a["query"])
    if found.get("format") != TURTLE:
        return Reply(found, json_text(found))
    text = found["turtle"]
    if found["truncated"]:
        text += f"# cut at {found['triples']} triples (the server's --max-rows)\n"
    return Reply(found, text)


SPARQL_TOOL = Spec(
    "sparql_query",
    "SPARQL Query",
    "Run a read-only SPARQL 1.1 query (SELECT, ASK, CONSTRUCT, DESCRIBE) over all of "
    "memory. The knowledge graph is in GRAPH <urn:rdfmem:graph:knowledge> (with --project, "
    "urn:rdfmem:graph:knowledge:PROJECT), in the vocabulary PREFIX rm: "
    "<https://w3id.org/rdfmem#> (rm:KnowledgeEntity, rm:entityName, rm:entityType, "
    "rm:hasObservation/rm:observationText, rm:KnowledgeRelation, rm:relationFrom, "
    "rm:relationTo, rm:relationType; prov:generatedAtTime, prov:wasAttributedTo). Answers in "
    "the SPARQL 1.1 JSON results format (CONSTRUCT/DESCRIBE: Turtle); rows are capped "
    '("truncated") and a time limit applies.',
    obj({"query": string("The SPARQL query")}, ["query"], closed=True, top=True),
    READ,
    _sparql_query,
)
