"""The ``rdfmem`` command group, the console script, and options shared by commands."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

__all__ = ["cli", "graph_option", "main", "store_argument"]

F = TypeVar("F", bound=Callable[..., Any])


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
