"""``rdfmem query``'s text, run where it can be stopped (issue 23: one sandbox for every
surface).

A query typed at a terminal is someone else's text to the process that owns the memory, as
a query sent to ``rdfmem serve`` or to the MCP ``sparql_query`` tool is, and it gets the same
bounds: a time limit, after which it is stopped (its CPU back), and a memory cap.

* **This process owns the store** (a folder nobody else has open, ``:memory:``): the query
  runs in a sandbox child (``rdfmem.store.sandbox``), which renders the answer too, so
  nothing of it is evaluated here.
* **Another process owns it** (``rdfmem mcp`` or ``rdfmem serve`` is running on it): the
  query goes to the owner with its limit (``LIMIT_HEADER``), and the owner runs it in its
  own sandbox (``rdfmem.store.owner_reads``): a runaway query stalls neither process.
* **A SPARQL server** (a URL): the server bounds its queries (``rdfmem serve`` in its
  sandbox); this command waits for it at most the time limit.
"""

from __future__ import annotations

from typing import Any

import click

from rdfmem.core.errors import ChildFailed, TimedOut
from rdfmem.store.owner_reads import limit_sent_queries
from rdfmem.store.rdfstore import RdfStore

__all__ = ["bounded_query"]


def _rendered(
    store: RdfStore, text: str, bindings: Any, allow_network: bool, output: str
) -> dict[str, str]:
    """The job a sandbox child runs: the query's printed answer, or the error to print."""
    from rdfmem.cli.render import render_result

    try:
        result = store.query(text, bindings=bindings, allow_network=allow_network)
        return {"out": render_result(result, output, store)}
    except click.ClickException as exc:
        return {"error": exc.message}


def bounded_query(
    store: RdfStore,
    text: str,
    *,
    bindings: dict[str, Any] | None,
    allow_network: bool,
    output: str,
    timeout: float,
    memory_cap: int,
) -> str:
    """What ``rdfmem query`` prints for ``text`` on ``store``, run as the module says.

    Raises:
        click.ClickException: the query ran past ``timeout`` seconds or past its memory cap,
            or its answer does not fit ``output``.
        RdfMemError: the store refused the query (``store_errors`` prints it).
    """
    if store.capabilities.embedded:
        from rdfmem.store.sandbox import Sandbox

        job = {"text": text, "bindings": bindings, "allow_network": allow_network}
        job["output"] = output
        try:
            with Sandbox(store, size=1, memory_cap=memory_cap) as sandbox:
                answer: dict[str, str] = sandbox.run(_rendered, job, timeout=timeout)
        except TimedOut:
            raise click.ClickException(_too_long(timeout)) from None
        except ChildFailed as exc:
            raise click.ClickException(
                f"the query was stopped: {exc} (give a larger --memory-cap, in MiB, or "
                "narrow the query)"
            ) from None
        if "error" in answer:
            raise click.ClickException(answer["error"])
        return answer["out"]
    limit_sent_queries(store, timeout)  # an attached store's owner, or a server
    from rdfmem.cli.render import render_result

    return render_result(
        store.query(text, bindings=bindings, allow_network=allow_network), output, store
    )


def _too_long(timeout: float) -> str:
    return (
        f"the query ran longer than the time limit of {timeout:g} s and was stopped; narrow "
        "it (a LIMIT, fewer joins) or give a longer --timeout"
    )
