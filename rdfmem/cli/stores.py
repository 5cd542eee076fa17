"""Opening the store a command names: a folder, ``:memory:`` or a SPARQL endpoint URL."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import click

from rdfmem.core.errors import RdfMemError, StoreAlreadyOpen
from rdfmem.store.rdfstore import RdfStore

__all__ = ["open_store", "store_errors", "store_session", "text_arg", "update_url_for"]


def update_url_for(query_url: str) -> str:
    """Where a server takes updates when only its query URL is given: a last ``/query``
    becomes ``/update`` (Oxigraph server, Fuseki); any other URL takes both.

    >>> update_url_for("http://127.0.0.1:7878/query")
    'http://127.0.0.1:7878/update'
    >>> update_url_for("http://127.0.0.1:8890/sparql")
    'http://127.0.0.1:8890/sparql'
    """
    trimmed = query_url.rstrip("/")
    return trimmed[: -len("query")] + "update" if trimmed.endswith("/query") else query_url


def open_store(
    spec: str,
    *,
    create: bool = False,
    token: str | None = None,
    update_url: str | None = None,
    history: bool = False,
    agent: str | None = None,
) -> RdfStore:
    """The store named on the command line. On a SPARQL server, updates go to
    ``update_url``, else to ``update_url_for(spec)``. ``history``: it keeps every write's
    past, attributed to ``agent`` when a write names nobody (``docs/history.md``).

    Raises:
        click.ClickException: no store there (and ``create`` is false), or it is held open by
            another process.
    """
    options: dict[str, Any] = {"history": True, "agent": agent} if history else {}
    if spec == ":memory:":
        return RdfStore(**options)
    if spec.startswith(("http://", "https://")):
        try:
            headers = {"Authorization": f"Bearer {token}"} if token else None
            remote: RdfStore = RdfStore.connect(
                spec, update_url or update_url_for(spec), headers=headers, **options
            )
            return remote
        except ImportError as exc:  # pragma: no cover - until rdfmem.store.remote ships
            raise click.ClickException(f"remote stores are not available: {exc}") from exc
    path = Path(spec)
    if not create and not path.exists():
        raise click.ClickException(
            f"no store at {spec} (give the folder of an on-disk store, :memory: or a URL)"
        )
    if path.exists() and not path.is_dir():
        raise click.ClickException(f"{spec} is a file, not the folder of an on-disk store")
    try:
        return RdfStore.open(path, **options)
    except StoreAlreadyOpen as exc:
        raise click.ClickException(
            f"{exc} (rdfmem processes share a store; another program holding it does not)"
        ) from exc


@contextmanager
def store_errors(store: RdfStore) -> Iterator[RdfStore]:
    """Use ``store`` and close it; rdfmem's errors become one-line command errors."""
    try:
        yield store
    except RdfMemError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        store.close()


def store_session(
    spec: str, *, create: bool = False, token: str | None = None
) -> AbstractContextManager[RdfStore]:
    """The store named on the command line, open for one command."""
    return store_errors(open_store(spec, create=create, token=token))


def text_arg(text: str | None, file: Path | None, what: str) -> str:
    if file is not None:
        if text is not None:
            raise click.UsageError(f"give the {what} as an argument or with --file, not both")
        return file.read_text(encoding="utf-8")
    if text is None or text == "-":
        if sys.stdin.isatty() and text is None:
            raise click.UsageError(f"give a {what} (an argument, --file FILE, or '-' for stdin)")
        return sys.stdin.read()
    return text
