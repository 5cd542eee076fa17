"""``rdfmem``: the command line (also ``python -m rdfmem``). Thin commands over library calls.

STORE is a folder holding an on-disk Oxigraph store, ``:memory:`` for a fresh in-memory one,
or the URL of a SPARQL endpoint (``http://…``; reads, and updates where the server allows).
Errors print one line and exit with status 1; bad usage exits with status 2.
"""

from __future__ import annotations

from rdfmem.cli import commands, files, mcp_commands  # noqa: F401  (each registers its commands)
from rdfmem.cli.commands import serve
from rdfmem.cli.group import cli, main
from rdfmem.cli.render import format_table
from rdfmem.cli.stores import open_store

__all__ = ["cli", "format_table", "main", "open_store", "serve"]
