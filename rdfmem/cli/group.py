"""The ``rdfmem`` command group, the console script, and options shared by commands.

Commands live in modules that register them on ``cli`` when imported; the group imports a
module only when one of its commands runs (or help lists them all), so ``rdfmem mcp``
starts without loading the store, rdflib or the SPARQL server.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib import import_module
from typing import Any, TypeVar

import click

__all__ = ["COMMAND_MODULES", "cli", "graph_option", "main", "store_argument"]

F = TypeVar("F", bound=Callable[..., Any])


#: The modules holding commands, and the commands each registers.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "rdfmem.cli.commands": ("demo", "serve", "query", "sparql-update", "update"),
    "rdfmem.cli.files": ("export", "load", "validate", "stats"),
    "rdfmem.cli.mcp_commands": ("mcp", "import", "export-jsonl"),
}


class _LazyGroup(click.Group):
    """A group that imports a command's module when the command is asked for."""

    def _load(self, name: str | None) -> None:
        for module, names in COMMAND_MODULES.items():
            if name is None or name in names:
                import_module(module)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            self._load(cmd_name)
        if cmd_name not in self.commands:  # a command not in the table: load every module
            self._load(None)
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load(None)
        return super().list_commands(ctx)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rdfmem")
def cli() -> None:
    """rdfmem: an AI agent's memory in RDF.

    Start with `rdfmem demo`, then serve or query what it built.
    """


def store_argument(f: F) -> F:
    return click.argument("store", metavar="STORE")(f)


def graph_option(f: F) -> F:
    return click.option(
        "-g", "--graph", metavar="IRI", help="One named graph (default: the default graph)."
    )(f)


def main(argv: Sequence[str] | None = None) -> None:
    """The ``rdfmem`` console script."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="rdfmem")
