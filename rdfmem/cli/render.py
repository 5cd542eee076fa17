"""How a command prints query results: tables of short terms, or a results format."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click
from pyoxigraph import BlankNode, Literal, NamedNode, RdfFormat

from rdfmem.core.errors import FormatError
from rdfmem.core.formats import rdf_format, results_format
from rdfmem.core.ontology import PREFIXES
from rdfmem.core.results import GraphResult, SelectResult
from rdfmem.store.rdfstore import RdfStore

__all__ = ["format_table", "render_result", "short", "write_result"]


def short(term: object, prefixes: dict[str, str]) -> str:
    if isinstance(term, NamedNode):
        for name, iri in prefixes.items():
            if term.value.startswith(iri) and len(term.value) > len(iri):
                local = term.value[len(iri) :]
                plain = local.replace("-", "").replace("_", "").replace(":", "").replace(".", "")
                if plain.isalnum() and local[0].isalnum() and local[-1] != ".":
                    return f"{name}:{local}"
        return f"<{term.value}>"
    if isinstance(term, BlankNode):
        return f"_:{term.value}"
    if isinstance(term, Literal):
        return term.value
    return "" if term is None else str(term)


def format_table(
    variables: Sequence[str],
    rows: Sequence[dict[str, Any]],
    *,
    prefixes: dict[str, str] | None = None,
    width: int = 60,
) -> str:
    """Rows of terms as a plain text table: IRIs shortened with ``prefixes``, literals by
    their text, long cells cut at ``width`` characters.

    >>> print(format_table(["who", "n"], [{"who": NamedNode("urn:a"), "n": Literal(3)}]))
    who     | n
    --------+--
    <urn:a> | 3
    <BLANKLINE>
    (1 row)
    """
    names = PREFIXES if prefixes is None else prefixes
    cells = []
    for row in rows:
        line = []
        for var in variables:
            text = " ".join(short(row.get(var), names).split())
            line.append(text if len(text) <= width else text[: width - 1] + "…")
        cells.append(line)
    widths = [max([len(v)] + [len(line[i]) for line in cells]) for i, v in enumerate(variables)]
    out = [" | ".join(v.ljust(w) for v, w in zip(variables, widths, strict=True)).rstrip()]
    out.append("-+-".join("-" * w for w in widths))
    out.extend(
        " | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells
    )
    out.append("")
    out.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return "\n".join(out)


def write_result(result: Any, output: str, store: RdfStore) -> None:
    click.echo(render_result(result, output, store), nl=False)


def render_result(result: Any, output: str, store: RdfStore) -> str:
    """What ``rdfmem query`` prints for ``result`` in ``output``'s format, newline ended.

    Raises:
        click.ClickException: a format that does not fit the result's form.
    """
    if isinstance(result, bool):
        if output == "json":
            return json.dumps({"head": {}, "boolean": result}) + "\n"
        return ("true" if result else "false") + "\n"
    if isinstance(result, GraphResult):
        fmt = "turtle" if output in ("table", "json") else output
        try:
            prefixes = store.prefixes if rdf_format(fmt) == RdfFormat.TURTLE else None
            data = result.serialize(rdf_format(fmt), prefixes=prefixes)
        except FormatError as exc:
            raise click.ClickException(f"{exc} (CONSTRUCT and DESCRIBE give triples)") from exc
        return data.decode("utf-8")
    assert isinstance(result, SelectResult)
    if output == "table":
        return format_table(result.variables, list(result), prefixes=store.prefixes) + "\n"
    try:
        text = result.serialize(results_format(output)).decode("utf-8")
    except FormatError as exc:
        raise click.ClickException(f"{exc} (SELECT gives rows)") from exc
    return text if text.endswith("\n") else text + "\n"
