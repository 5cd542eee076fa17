"""``rdfmem mcp``, ``import`` and ``export-jsonl``: the MCP memory server and its files."""

from __future__ import annotations

import os
import secrets
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rdfmem.cli.group import cli, store_argument
from rdfmem.core.errors import RdfMemError, StoreAlreadyOpen, StoreError
from rdfmem.mcp.toolsets import DEFAULT

if TYPE_CHECKING:
    from rdfmem.store.rdfstore import RdfStore

__all__ = ["export_jsonl", "import_", "mcp_command"]


#: The agent ``rdfmem mcp`` attributes a write to when its client sent no ``clientInfo`` name.
MCP_AGENT = "urn:rdfmem:agent:rdfmem-mcp"


def _mcp_store(
    spec: str, update_url: str | None = None, *, create: bool = True, history: bool = False
) -> RdfStore:
    """The store ``rdfmem mcp`` serves; a held on-disk store says how to share it."""
    from rdfmem.cli.stores import open_store

    try:
        return open_store(
            spec, create=create, update_url=update_url, history=history, agent=MCP_AGENT
        )
    except click.ClickException as exc:
        if isinstance(exc.__cause__, StoreAlreadyOpen):
            raise click.ClickException(
                f"the store at {spec} is open in another process (another rdfmem mcp, an "
                "agent or rdfmem serve); an on-disk store has one owner. Share it with many "
                f"clients through one server: rdfmem mcp {spec} --http, or keep the memory "
                "on a SPARQL server: rdfmem mcp http://HOST:7878/query"
            ) from exc
        raise


def _holder_args(
    store: str | None,
    tools: str,
    project: str | None,
    query_timeout: float,
    max_rows: int,
    update_url: str | None,
    embedder: str,
    history: bool,
) -> list[str]:
    """``rdfmem``'s arguments for a holder serving as this command would (a store's path
    made absolute: the holder may serve starters from other folders)."""
    args = ["mcp"]
    if store is not None:
        remote = store.startswith(("http://", "https://")) or store == ":memory:"
        args.append(store if remote else os.path.abspath(os.path.expanduser(store)))
    args += ["--tools", tools, "--query-timeout", repr(query_timeout)]
    args += ["--max-rows", str(max_rows), "--embedder", embedder]
    args.append("--history" if history else "--no-history")
    if project is not None:
        args += ["--project", project]
    if update_url is not None:
        args += ["--update-url", update_url]
    return args


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rdfmem")
    except PackageNotFoundError:
        return "unknown"


def _served(spec: str, update_url: str | None, history: bool) -> RdfStore:
    """``_mcp_store`` for a server opening its store on first need: a failure is an rdfmem
    error, which each tool call reports."""
    try:
        return _mcp_store(spec, update_url, history=history)
    except click.ClickException as exc:
        raise StoreError(exc.message) from exc


class _McpCommand(click.Command):
    """``rdfmem mcp``, and ``rdfmem mcp config …`` (the host configuration command)."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        if args[:1] == ["config"]:
            from rdfmem.cli.mcp_config import config_command

            name = f"{info_name or 'mcp'} config"
            return config_command.make_context(name, args[1:], parent=parent, **extra)
        return super().make_context(info_name, args, parent=parent, **extra)


@cli.command("mcp", cls=_McpCommand)
@click.argument("store", metavar="[STORE]", required=False)
@click.option(
    "--tools",
    default=DEFAULT,
    show_default=True,
    envvar="RDFMEM_MCP_TOOLS",
    metavar="official|memory|all|NAME,…",
    help="Tools to offer: the official nine, those and memory_*, every one, or names.",
)
@click.option("--http", "use_http", is_flag=True, help="Streamable HTTP at /mcp, not stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address (--http).")
@click.option("--port", default=7880, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token",
    envvar="RDFMEM_TOKEN",
    help="Bearer token every --http call must carry (env RDFMEM_TOKEN; generated when missing).",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="Also answer to Host NAME (--http; localhost, IP addresses and --host always; '*': any).",
)
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
@click.option(
    "--embedder",
    default="hashing",
    show_default=True,
    envvar="RDFMEM_EMBEDDER",
    metavar="SPEC",
    help="Memory search vectors: hashing, sentence-transformers[:FOLDER] or module:attribute "
    "(env RDFMEM_EMBEDDER).",
)
@click.option(
    "--history/--no-history",
    default=True,
    show_default=True,
    envvar="RDFMEM_MCP_HISTORY",
    help="Keep every write's past: who (the MCP client), when, what (history, asOf).",
)
@click.option(
    "--keep-warm",
    default=0.0,
    show_default=True,
    envvar="RDFMEM_MCP_KEEP_WARM",
    type=click.FloatRange(0),
    metavar="SECONDS",
    help="Serve stdio sessions from a holder process kept for SECONDS after the last one "
    "ends: later starts answer at once (0: each start serves alone).",
)
@click.option("--hold-at", hidden=True, type=click.Path(path_type=Path))
def mcp_command(
    store: str | None,
    tools: str,
    use_http: bool,
    host: str,
    port: int,
    token: str | None,
    allowed_hosts: tuple[str, ...],
    project: str | None,
    query_timeout: float,
    max_rows: int,
    update_url: str | None,
    embedder: str,
    history: bool,
    keep_warm: float,
    hold_at: Path | None,
) -> None:
    """Serve STORE to agents over the Model Context Protocol: a drop-in for the official
    memory server (same nine tools), plus rdfmem's memories, decisions and SPARQL.

    Without STORE, the memory is MEMORY_FILE_PATH (the official server's variable), else
    ~/.rdfmem/memory. A memory.jsonl (as STORE or in the variable) is imported once into
    the store folder beside it, memory.jsonl.rdfmem/, and never changed.

    \b
    Examples:
      rdfmem mcp ~/.rdfmem/memory                   # stdio, for an MCP host
      MEMORY_FILE_PATH=~/memory.jsonl rdfmem mcp    # the official server's memory
      rdfmem mcp ~/.rdfmem/memory --http --port 7880  # many clients, http://…/mcp
      rdfmem mcp http://127.0.0.1:7878/query --project webapp
      rdfmem mcp ~/.rdfmem/memory --embedder mypackage.embed:make_embedder
      rdfmem mcp config --client claude-desktop     # a host's configuration
    """
    listener = None
    if hold_at is not None:  # a holder: listen first, so starters can queue at once
        from rdfmem.mcp.handoff import listen_at

        listener = listen_at(hold_at)
    elif keep_warm > 0 and not use_http:
        from rdfmem.mcp.handoff import hand_off, holder_path

        args = _holder_args(
            store, tools, project, query_timeout, max_rows, update_url, embedder, history
        )
        args += ["--keep-warm", f"{keep_warm!r}"]
        shape = [*args, os.environ.get("MEMORY_FILE_PATH"), os.getcwd(), sys.executable]
        status = hand_off(args, holder_path([*shape, _version()]))
        if status is not None:
            sys.exit(status)
    from rdfmem.mcp.place import opener, where
    from rdfmem.mcp.toolsets import choose

    try:
        chosen = choose(tools)
    except RdfMemError as exc:
        raise click.BadParameter(str(exc), param_hint="--tools") from exc
    if project is not None and not project:
        raise click.UsageError("--project takes a non-empty name")
    from rdfmem.domain.embedder_spec import check_spec

    try:
        check_spec(embedder)
    except RdfMemError as exc:
        raise click.BadParameter(str(exc), param_hint="--embedder") from exc
    try:
        from rdfmem.mcp.server import serve_http, serve_stdio
        from rdfmem.mcp.services import Services
    except ImportError as exc:
        raise click.ClickException(
            f"rdfmem mcp needs the MCP SDK ({exc.name or exc}): pip install 'rdfmem[mcp]'"
        ) from exc
    place = where(store, os.environ)

    def log(message: str) -> None:
        click.echo(f"rdfmem mcp: {message}", err=True)

    open_it = opener(place, lambda spec: _served(spec, update_url, history), project, log)
    services = Services.later(
        open_it, project, query_timeout=query_timeout, max_rows=max_rows, embedder=embedder
    )
    try:
        if use_http:
            if not token:
                token = secrets.token_urlsafe(24)
                click.echo(f"rdfmem mcp: calls need: Authorization: Bearer {token}", err=True)
            click.echo(f"rdfmem mcp: serving {place.store} at http://{host}:{port}/mcp", err=True)
            serve_http(
                services, chosen, host=host, port=port, token=token, allowed_hosts=allowed_hosts
            )
        elif listener is not None and hold_at is not None:
            from rdfmem.mcp.holder import hold

            hold(services, chosen, listener, hold_at, keep_warm or 600.0)
        else:
            serve_stdio(services, chosen)
    finally:
        with _finishing_on_sigterm():
            services.close()


@contextmanager
def _finishing_on_sigterm() -> Iterator[None]:
    """A block that a SIGTERM does not cut short: an MCP host closes the server's stdin,
    waits, then sends SIGTERM and, a while later, SIGKILL. Closing the store (its indexes
    kept, its writes flushed) goes on through the SIGTERM, so the next start does not
    replay the write-ahead log (minutes after a first start's import)."""
    try:
        previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    except ValueError:  # not the main thread (an embedding caller): signals are theirs
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


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
    from rdfmem.cli.stores import store_errors

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
    from rdfmem.cli.stores import store_errors
    from rdfmem.mcp import KnowledgeGraph, write_jsonl

    with store_errors(_mcp_store(store, create=False)) as opened:
        text = write_jsonl(KnowledgeGraph(opened, project).model())
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        click.echo(f"Wrote {text.count(chr(10))} lines to {output}", err=True)
