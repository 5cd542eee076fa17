"""``rdfmem mcp config``: the configuration that starts ``rdfmem mcp`` from an MCP host,
printed or merged into the host's file (``rdfmem.mcp.hosts``)."""

from __future__ import annotations

from pathlib import Path

import click

from rdfmem.core.errors import RdfMemError
from rdfmem.mcp.hosts import CLIENTS, config_path, entry, snippet, write_config

__all__ = ["config_command"]


@click.command("config")
@click.option("--client", type=click.Choice(CLIENTS), required=True, help="The MCP host.")
@click.option("--write", is_flag=True, help="Merge into the host's file (a backup first).")
@click.option(
    "--store",
    metavar="PATH",
    help="The memory (a store folder or a memory.jsonl); default: MEMORY_FILE_PATH of an "
    "existing entry, else ~/.rdfmem/memory.",
)
@click.option("--name", default="memory", show_default=True, help="The server's name.")
@click.option("--tools", metavar="PRESET|NAMES", help="rdfmem mcp --tools.")
@click.option("--project", metavar="NAME", help="rdfmem mcp --project.")
@click.option(
    "--keep-warm",
    type=click.FloatRange(0),
    metavar="SECONDS",
    help="rdfmem mcp --keep-warm: later sessions served by a warm holder process.",
)
@click.option(
    "--file",
    "file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The host's file (default: where the host keeps it).",
)
def config_command(
    client: str,
    write: bool,
    store: str | None,
    name: str,
    tools: str | None,
    project: str | None,
    keep_warm: float | None,
    file: Path | None,
) -> None:
    """Print (or --write) an MCP host's configuration for rdfmem mcp, with an absolute
    command that works without the virtualenv on the host's PATH.

    \b
    Examples:
      rdfmem mcp config --client claude-desktop
      rdfmem mcp config --client cursor --store ~/.rdfmem/memory --write
      rdfmem mcp config --client claude-code --keep-warm 600 --write
    """
    args: list[str] = []
    if store:
        args.append(str(Path(store).expanduser().absolute()))
    if tools:
        args += ["--tools", tools]
    if project:
        args += ["--project", project]
    if keep_warm:
        args += ["--keep-warm", f"{keep_warm:g}"]
    new = entry(client, args)
    path = file or config_path(client)
    if not write:
        click.echo(snippet(client, name, new))
        click.echo(f"# {client} reads this from {path} (add --write to merge it there)", err=True)
        return
    try:
        backup = write_config(client, path, name, new)
    except (RdfMemError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    kept = f" (the old file is at {backup})" if backup else ""
    click.echo(f"Wrote server {name!r} into {path}{kept}; restart {client} to use it", err=True)
