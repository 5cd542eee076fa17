"""SPARQL results as rdfmem returns them: rows of terms, a bool, or triples, each serialisable.

Writing and parsing of every wire format is pyoxigraph's. When rows have already been read
into Python, they are handed back to pyoxigraph as SPARQL JSON (the one format small enough
to write here exactly) and pyoxigraph writes the format asked for.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, overload

from pyoxigraph import (
    BlankNode,
    Literal,
    NamedNode,
    QueryResultsFormat,
    QuerySolutions,
    RdfFormat,
    Triple,
    parse_query_results,
    serialize,
)

from rdfmem.core.errors import QueryError
from rdfmem.core.formats import rdf_format, results_format

__all__ = ["GraphResult", "SelectResult", "Row"]

Row = dict[str, NamedNode | BlankNode | Literal]


class SelectResult(Sequence[Row]):
    """The rows of a SELECT: each a dict from variable name (no ``?``) to term.

    Unbound variables are left out of a row. ``variables`` keeps the projection order.

    >>> from rdfmem import RdfStore
    >>> store = RdfStore()
    >>> store.assert_("urn:a", "urn:says", "hi")
    >>> result = store.query("SELECT ?who ?what WHERE { ?who <urn:says> ?what }")
    >>> [row["what"].value for row in result]
    ['hi']
    >>> result.serialize("csv").decode().splitlines()
    ['who,what', 'urn:a,hi']
    """

    def __init__(self, solutions: QuerySolutions) -> None:
        self.variables: list[str] = [v.value for v in solutions.variables]
        self._raw: QuerySolutions | None = solutions
        self._rows: list[Row] | None = None

    @property
    def rows(self) -> list[Row]:
        """The rows, read on first use.

        Raises:
            QueryError: evaluating the query failed while its solutions were read.
        """
        if self._rows is None:
            raw, self._raw = self._raw, None
            names = self.variables
            rows: list[Row] = []
            if raw is not None:
                try:
                    for solution in raw:
                        row: Row = {}
                        for i, name in enumerate(names):
                            term = solution[i]
                            if term is not None:
                                row[name] = term
                        rows.append(row)
                except (OSError, RuntimeError, ValueError) as exc:
                    # Solutions are computed as they are read: an evaluation error (a failed
                    # SERVICE call …) surfaces here. Drop the solutions on this thread, as
                    # pyoxigraph requires, before the error travels.
                    del raw
                    raise QueryError(f"SPARQL query failed: {exc}") from exc
            self._rows = rows
        return self._rows

    @overload
    def __getitem__(self, index: int) -> Row: ...
    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...
    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        return self.rows[index]

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[Row]:
        return iter(self.rows)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SelectResult):
            return self.rows == other.rows
        if isinstance(other, list):
            return self.rows == other
        return NotImplemented

    def __repr__(self) -> str:
        return f"SelectResult(variables={self.variables!r}, rows={len(self)})"

    def serialize(self, format: str | QueryResultsFormat = "json") -> bytes:
        """The rows in SPARQL results JSON, XML, CSV or TSV.

        Raises:
            FormatError: an unknown format name.
        """
        fmt = results_format(format)
        if self._raw is not None:
            # Solutions can be read once: write them as JSON, and keep a parse of that so
            # the rows stay readable afterwards.
            data = bytes(self._raw.serialize(format=QueryResultsFormat.JSON) or b"")
            self._raw = _solutions(data)
        else:
            data = solutions_json(self.variables, self.rows)
        if fmt == QueryResultsFormat.JSON:
            return data
        return bytes(_solutions(data).serialize(format=fmt) or b"")


def _solutions(data: bytes) -> QuerySolutions:
    parsed = parse_query_results(data, QueryResultsFormat.JSON)
    assert isinstance(parsed, QuerySolutions)
    return parsed


class GraphResult(Sequence[Triple]):
    """The triples of a CONSTRUCT or DESCRIBE."""

    def __init__(self, triples: Sequence[Triple]) -> None:
        self.triples = list(triples)

    @overload
    def __getitem__(self, index: int) -> Triple: ...
    @overload
    def __getitem__(self, index: slice) -> list[Triple]: ...
    def __getitem__(self, index: int | slice) -> Triple | list[Triple]:
        return self.triples[index]

    def __len__(self) -> int:
        return len(self.triples)

    def __iter__(self) -> Iterator[Triple]:
        return iter(self.triples)

    def __repr__(self) -> str:
        return f"GraphResult(triples={len(self)})"

    def serialize(
        self, format: str | RdfFormat = "turtle", *, prefixes: dict[str, str] | None = None
    ) -> bytes:
        """The triples in an RDF format (Turtle, N-Triples, RDF/XML, JSON-LD …).

        Raises:
            FormatError: an unknown format name.
        """
        return bytes(
            serialize(self.triples, None, rdf_format(format), prefixes=prefixes or {}) or b""
        )


def _term_json(term: NamedNode | BlankNode | Literal) -> dict[str, Any]:
    if isinstance(term, NamedNode):
        return {"type": "uri", "value": term.value}
    if isinstance(term, BlankNode):
        return {"type": "bnode", "value": term.value}
    out: dict[str, Any] = {"type": "literal", "value": term.value}
    if term.language:
        out["xml:lang"] = term.language
    elif term.datatype.value != "http://www.w3.org/2001/XMLSchema#string":
        out["datatype"] = term.datatype.value
    return out


def solutions_json(variables: Sequence[str], rows: Sequence[Row]) -> bytes:
    """SPARQL 1.1 Query Results JSON for rows already read into Python."""
    doc = {
        "head": {"vars": list(variables)},
        "results": {"bindings": [{k: _term_json(v) for k, v in row.items()} for row in rows]},
    }
    return json.dumps(doc, ensure_ascii=False).encode("utf-8")
