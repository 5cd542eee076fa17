"""``rdfmem``: the command line (also ``python -m rdfmem``). Thin commands over library calls.

STORE is a folder holding an on-disk Oxigraph store, ``:memory:`` for a fresh in-memory one,
or the URL of a SPARQL endpoint (``http://…``; reads, and updates where the server allows).
Errors print one line and exit with status 1; bad usage exits with status 2.

The commands' modules are imported when a command runs (``rdfmem.cli.group``), so a command
loads only what it uses.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from rdfmem.cli.group import cli, main

if TYPE_CHECKING:
    from rdfmem.cli.commands import serve
    from rdfmem.cli.render import format_table
    from rdfmem.cli.stores import open_store

_WHERE = {
    "serve": "rdfmem.cli.commands",
    "format_table": "rdfmem.cli.render",
    "open_store": "rdfmem.cli.stores",
}

__all__ = ["cli", "format_table", "main", "open_store", "serve"]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'rdfmem.cli' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
