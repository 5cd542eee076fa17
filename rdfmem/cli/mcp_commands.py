"""``rdfmem mcp``, ``import`` and ``export-jsonl``: the MCP memory server and its files."""

from __future__ import annotations

from pathlib import Path

import click

from rdfmem.cli.group import cli, store_argument
from rdfmem.cli.stores import open_store, store_errors
from rdfmem.core.errors import RdfMemError, StoreAlreadyOpen
from rdfmem.store.rdfstore import RdfStore

__all__ = ["export_jsonl", "import_", "mcp_command"]


def _mcp_store(spec: str, update_url: str | None = None, *, create: bool = True) -> RdfStore:
    """The store ``rdfmem mcp`` serves; a held on-disk store says how to share it."""
    try:
        return open_store(spec, create=create, update_url=update_url)
    except click.ClickException as exc:
        if isinstance(exc.__cause__, StoreAlreadyOpen):
            raise click.ClickException(
                f"the store at {spec} is open in another process (another rdfmem mcp, an "
                "agent or rdfmem serve); an on-disk store has one owner. Share it with many "
                f"clients through one server: rdfmem mcp {spec} --http, or keep the memory "
                "on a SPARQL server: rdfmem mcp http://HOST:7878/query"
            ) from exc
        raise


@cli.command("mcp")
@store_argument
@click.option("--http", "use_http", is_flag=True, help="Streamable HTTP at /mcp, not stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address (--http).")
@click.option("--port", default=7880, show_default=True, type=click.IntRange(0, 65535))
@click.option("--project", metavar="NAME", help="Keep this project's memory apart.")
@click.option(
    "--query-timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(0.001),
    help="Seconds a sparql_query may run.",
)
@click.option(
    "--max-rows",
    default=1000,
    show_default=True,
    type=click.IntRange(min=1),
    help="Rows a sparql_query returns at most.",
)
@click.option("--update-url", metavar="URL", help="SPARQL Update URL of a server STORE.")
def mcp_command(
    store: str,
    use_http: bool,
    host: str,
    port: int,
    project: str | None,
    query_timeout: float,
    max_rows: int,
    update_url: str | None,
) -> None:
    """Serve STORE to agents over the Model Context Protocol: a drop-in for the official
    memory server (same nine tools), plus rdfmem's memories, decisions and SPARQL.

    \b
    Examples:
      rdfmem mcp ~/.rdfmem/memory                   # stdio, for an MCP host
      rdfmem mcp ~/.rdfmem/memory --http --port 7880  # many clients, http://…/mcp
      rdfmem mcp http://127.0.0.1:7878/query --project webapp
    """
    try:
        from rdfmem.mcp.server import serve_http, serve_stdio
        from rdfmem.mcp.services import Services
    except ImportError as exc:
        raise click.ClickException(
            f"rdfmem mcp needs the MCP SDK ({exc.name or exc}): pip install 'rdfmem[mcp]'"
        ) from exc
    if project is not None and not project:
        raise click.UsageError("--project takes a non-empty name")
    spec = str(Path(store).expanduser()) if "://" not in store else store
    opened = _mcp_store(spec, update_url)
    services = Services(opened, project, query_timeout=query_timeout, max_rows=max_rows)
    try:
        if use_http:
            click.echo(f"rdfmem mcp: serving {store} at http://{host}:{port}/mcp", err=True)
            serve_http(services, host=host, port=port)
        else:
            serve_stdio(services)
    finally:
        opened.close()


@cli.command("import")
@store_argument
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--project", metavar="NAME", help="Import into this project's graph.")
def import_(store: str, file: Path, project: str | None) -> None:
    """Import an MCP memory server's memory.jsonl into STORE's knowledge graph: all of it,
    or nothing when a line is broken.

    \b
    Example:
      rdfmem import ~/.rdfmem/memory memory.jsonl
    """
    from rdfmem.mcp import Client, KnowledgeGraph, read_jsonl

    try:
        model = read_jsonl(file.read_text(encoding="utf-8"), source=str(file))
    except (RdfMemError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"nothing imported: {exc}") from exc
    opened = _mcp_store(store)
    with store_errors(opened):
        graph = KnowledgeGraph(opened, project)
        entities, observations, relations = graph.import_model(model, Client("rdfmem import"))
    click.echo(
        f"Imported {entities} entities, {observations} observations and {relations} "
        f"relations from {file}",
        err=True,
    )


@cli.command("export-jsonl")
@store_argument
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="File.")
@click.option("--project", metavar="NAME", help="Export this project's graph.")
def export_jsonl(store: str, output: Path | None, project: str | None) -> None:
    """Write STORE's knowledge graph as an MCP memory server's memory.jsonl.

    \b
    Example:
      rdfmem export-jsonl ~/.rdfmem/memory -o memory.jsonl
    """
    from rdfmem.mcp import KnowledgeGraph, write_jsonl

    with store_errors(_mcp_store(store, create=False)) as opened:
        text = write_jsonl(KnowledgeGraph(opened, project).model())
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        click.echo(f"Wrote {text.count(chr(10))} lines to {output}", err=True)
