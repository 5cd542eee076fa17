"""``rdfmem demo``, ``serve``, ``query`` and ``sparql-update`` (also ``update``, hidden)."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from rdfmem.cli.group import cli, store_argument
from rdfmem.cli.query_run import bounded_query
from rdfmem.cli.render import format_table
from rdfmem.cli.stores import store_session, text_arg
from rdfmem.core.errors import RdfMemError

__all__ = ["demo", "query", "serve", "sparql_update", "update"]

F = TypeVar("F", bound=Callable[..., Any])


@cli.command()
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path), default="rdfmem-demo")
def demo(folder: Path) -> None:
    """Build a realistic agent memory on disk in FOLDER, run every named query on it and
    write a Turtle export.

    \b
    Example:
      rdfmem demo ./agent-memory
    """
    from rdfmem.cli.demo import run_demo

    try:
        report = run_demo(folder)
    except RdfMemError as exc:
        raise click.ClickException(str(exc)) from exc
    for line in report.built:
        click.echo(line)
    for section in report.queries:
        click.echo()
        click.secho(f"== {section.title}", bold=True)
        if section.sparql_params:
            click.echo(f"   named query {section.name} with {section.sparql_params}")
        click.echo(format_table(section.variables, section.rows, prefixes=report.prefixes))
    for line in report.skipped:
        click.echo(f"(skipped: {line})")
    click.echo()
    click.echo(f"Wrote {report.store_path} (the store) and {report.export_path} (Turtle).")
    click.echo("Next:")
    click.echo(f"  rdfmem serve {report.store_path}     # then open http://127.0.0.1:7879/")
    click.echo(
        "  curl -H 'Accept: text/csv' http://127.0.0.1:7879/sparql "
        "--data-urlencode 'query=SELECT * WHERE { GRAPH ?g { ?s ?p ?o } } LIMIT 10'"
    )
    click.echo(f"  rdfmem query {report.store_path} --named active_goals")
    click.echo(f"  rdfmem stats {report.store_path}")


@cli.command()
@store_argument
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=7879, show_default=True, type=click.IntRange(0, 65535))
@click.option("--allow-update", is_flag=True, help="Accept SPARQL Update (with the token).")
@click.option(
    "--token",
    envvar="RDFMEM_TOKEN",
    help="Bearer token updates must carry (env RDFMEM_TOKEN; generated when missing).",
)
@click.option("--cors", multiple=True, metavar="ORIGIN", help="Allow browser calls from ORIGIN.")
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="Also answer to Host NAME (localhost, IP addresses and --host are always; '*': any).",
)
@click.option(
    "--max-connections",
    default=None,
    type=click.IntRange(min=1),
    help="At most this many open connections (default: derived from the descriptor limit).",
)
@click.option(
    "--workers",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="Reader processes on the one socket (an on-disk store); 0: this process answers.",
)
@click.option(
    "--header-timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0.001),
    help="Seconds a client may take to send a request's headers (and, x3, its body).",
)
@click.option("--timeout", default=30.0, show_default=True, type=click.FloatRange(min=0.001))
@click.option("--max-concurrent", default=4, show_default=True, type=click.IntRange(min=1))
@click.option("--max-result-bytes", default=64 << 20, show_default=True, type=click.IntRange(min=1))
@click.option("--max-body", default=1 << 20, show_default=True, type=click.IntRange(min=1))
@click.option("--access-log/--no-access-log", default=True, show_default=True)
def serve(
    store: str,
    host: str,
    port: int,
    allow_update: bool,
    token: str | None,
    cors: tuple[str, ...],
    allowed_hosts: tuple[str, ...],
    max_connections: int | None,
    workers: int,
    header_timeout: float,
    timeout: float,
    max_concurrent: int,
    max_result_bytes: int,
    max_body: int,
    access_log: bool,
) -> None:
    """Serve STORE over the SPARQL 1.1 Protocol (and /store, /queries, /health).

    \b
    Example:
      rdfmem serve agent.db --port 7879
      curl 'http://127.0.0.1:7879/sparql?query=ASK%7B%7D'
    """
    from rdfmem.server import serve as run

    if allow_update and not token:
        token = secrets.token_urlsafe(24)
        click.echo(f"Updates need: Authorization: Bearer {token}", err=True)
    with store_session(store, create=True) as opened:
        run(
            opened,
            announce=lambda url: click.echo(
                f"Serving {store} at {url}/sparql (Ctrl-C stops)", err=True
            ),
            host=host,
            port=port,
            access_log=access_log,
            allow_update=allow_update,
            token=token,
            cors=cors,
            allowed_hosts=allowed_hosts,
            max_connections=max_connections,
            workers=workers,
            header_timeout=header_timeout,
            body_timeout=3 * header_timeout,
            timeout=timeout,
            max_concurrent=max_concurrent,
            max_result_bytes=max_result_bytes,
            max_body=max_body,
        )


_QUERY_FORMATS = ["table", "json", "csv", "tsv", "xml", "turtle", "ntriples", "jsonld", "rdfxml"]


@cli.command()
@store_argument
@click.argument("sparql", required=False)
@click.option("-f", "--file", type=click.Path(dir_okay=False, path_type=Path), help="Query file.")
@click.option("-n", "--named", metavar="NAME", help="Run a shipped named query instead.")
@click.option("-p", "--param", multiple=True, metavar="NAME=VALUE", help="Named query parameter.")
@click.option(
    "-o", "--output", type=click.Choice(_QUERY_FORMATS), default="table", show_default=True
)
@click.option(
    "--allow-network", is_flag=True, help="Let SERVICE reach the network (refused by default)."
)
@click.option(
    "--timeout",
    type=click.FloatRange(0.1, 3600),
    default=30.0,
    show_default=True,
    help="Seconds the query may run; it is stopped then.",
)
@click.option(
    "--memory-cap",
    type=click.IntRange(16, 1 << 20),
    default=1024,
    show_default=True,
    help="MiB the query may allocate (a store this command opens itself).",
)
def query(
    store: str,
    sparql: str | None,
    file: Path | None,
    named: str | None,
    param: tuple[str, ...],
    output: str,
    allow_network: bool,
    timeout: float,
    memory_cap: int,
) -> None:
    """Run a SPARQL query (or a named query) on STORE and print the result.

    The query is stopped at --timeout and capped at --memory-cap, where it runs: in a
    child process of this command, or of the process that holds STORE open (rdfmem mcp,
    rdfmem serve), so it never stalls that process.

    \b
    Examples:
      rdfmem query agent.db 'SELECT * WHERE { ?s ?p ?o } LIMIT 5'
      rdfmem query agent.db --named recent_decisions -p limit=3 -o csv
      rdfmem query http://127.0.0.1:7879/sparql -f goals.rq -o json
    """
    bindings: dict[str, Any] | None = None
    if named is not None:
        from rdfmem.server.named import load_named_query

        if sparql is not None or file is not None:
            raise click.UsageError("give a query or --named NAME, not both")
        try:
            definition = load_named_query(named)
        except KeyError as exc:
            raise click.ClickException(str(exc.args[0])) from exc
        given = {}
        for item in param:
            key, eq, value = item.partition("=")
            if not eq:
                raise click.UsageError(f"--param takes NAME=VALUE, not {item!r}")
            given[key] = value
        try:
            text, prepared = definition.prepare(given)
        except RdfMemError as exc:
            raise click.ClickException(str(exc)) from exc
        bindings = dict(prepared)
    else:
        if param:
            raise click.UsageError("--param goes with --named")
        text = text_arg(sparql, file, "query")
    with store_session(store) as opened:
        printed = bounded_query(
            opened,
            text,
            bindings=bindings,
            allow_network=allow_network,
            output=output,
            timeout=timeout,
            memory_cap=memory_cap << 20,
        )
    click.echo(printed, nl=False)


def _update_params(f: F) -> F:
    """The arguments and options of ``sparql-update`` and its old name ``update``."""
    decorators = [
        store_argument,
        click.argument("sparql", required=False),
        click.option(
            "-f", "--file", type=click.Path(dir_okay=False, path_type=Path), help="Update file."
        ),
        click.option(
            "--token",
            envvar="RDFMEM_TOKEN",
            help="Bearer token for a served store (env RDFMEM_TOKEN).",
        ),
        click.option(
            "--allow-network",
            is_flag=True,
            help="Let LOAD and SERVICE reach the network (refused by default).",
        ),
    ]
    for decorate in reversed(decorators):
        f = decorate(f)
    return f


def _run_update(
    store: str, sparql: str | None, file: Path | None, token: str | None, allow_network: bool
) -> None:
    text = text_arg(sparql, file, "update")
    with store_session(store, create=True, token=token) as opened:
        opened.sparql_update(text, allow_network=allow_network)
    click.echo("OK", err=True)


@cli.command("sparql-update")
@_update_params
def sparql_update(
    store: str, sparql: str | None, file: Path | None, token: str | None, allow_network: bool
) -> None:
    """Run a SPARQL 1.1 Update on STORE (all of it or none of it).

    \b
    Example:
      rdfmem sparql-update agent.db 'INSERT DATA { <urn:a> <urn:b> "c" }'
      RDFMEM_TOKEN=… rdfmem sparql-update http://127.0.0.1:7879/sparql -f fix.ru
    """
    _run_update(store, sparql, file, token, allow_network)


@cli.command("update", hidden=True)
@_update_params
def update(
    store: str, sparql: str | None, file: Path | None, token: str | None, allow_network: bool
) -> None:
    """The old name of `rdfmem sparql-update`, kept so scripts that use it still run.

    \b
    Example:
      rdfmem update agent.db 'INSERT DATA { <urn:a> <urn:b> "c" }'
    """
    _run_update(store, sparql, file, token, allow_network)
