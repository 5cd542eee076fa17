"""SPARQL text, read just enough to place pre-bound variables.

A small lexer (strings, IRIs, comments and braces are told apart, nothing is parsed
further) feeds two pure functions: ``query_shape`` (the query form, whether a dataset is
stated, whether named graphs are used) and ``inject_values`` (``VALUES`` for pre-bound
variables). What they add to a query is built with ``sparql_term`` only and never puts a
line break before caller text, so it can neither break out of a string nor end a comment,
even where this lexer reads the text otherwise than the server's parser does (a prefixed
name such as ``ex:a\\'b`` holds an escaped quote that this lexer takes for a string).
Updates are never rewritten at all (``SparqlBackend.update`` sends them as written).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import InvalidTerm, QueryError
from ..terms import sparql_term

__all__ = ["inject_values", "query_shape"]

_VARNAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<comment>\#[^\n\r]*)
  | (?P<string>\"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\"|'''(?:[^'\\]|\\.|'(?!''))*'''
               |"(?:[^"\\\n\r]|\\.)*"|'(?:[^'\\\n\r]|\\.)*')
  | (?P<iri><[^<>"{}|^`\\\x00-\x20]*>)
  | (?P<open>\{) | (?P<close>\})
  | (?P<var>[?$][A-Za-z0-9_\u00b7\u00c0-\uffff]+)
  | (?P<word>[A-Za-z_][A-Za-z0-9_\-]*)
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)


def _words(sparql: str) -> Iterator[tuple[str, str, int, int]]:
    """``(kind, upper-cased text, start, end)`` of each token outside strings and comments;
    words of prefixed names (``ex:from``) are reported as ``name``."""
    for m in _TOKEN.finditer(sparql):
        kind = m.lastgroup or "other"
        if kind in ("space", "comment", "string"):
            continue
        text = m.group()
        if kind == "word":
            before = sparql[m.start() - 1] if m.start() else ""
            after = sparql[m.end()] if m.end() < len(sparql) else ""
            if before == ":" or after == ":":
                kind = "name"
        yield kind, text.upper(), m.start(), m.end()


def query_shape(sparql: str) -> tuple[str, bool, bool]:
    """``(form, states its dataset, uses named graphs)``: ``SELECT``, ``ASK`` or ``GRAPH``
    (``CONSTRUCT``, ``DESCRIBE``); a ``FROM`` clause; a ``GRAPH`` pattern.

    >>> query_shape("CONSTRUCT WHERE { ?s ?p '# GRAPH' }")
    ('GRAPH', False, False)
    """
    words = [text for kind, text, _, _ in _words(sparql) if kind == "word"]
    form = next((w for w in words if w in ("SELECT", "ASK", "CONSTRUCT", "DESCRIBE")), "")
    form = "GRAPH" if form in ("CONSTRUCT", "DESCRIBE") else form or "SELECT"
    return form, "FROM" in words, "GRAPH" in words


def inject_values(sparql: str, bindings: Mapping[str, Any]) -> str:
    """``sparql`` with ``VALUES`` pre-binding ``bindings`` (name to term) at the start of the
    outermost ``WHERE`` group and of every sub-select.

    >>> from pyoxigraph import NamedNode
    >>> inject_values("SELECT ?n WHERE { ?s <urn:name> ?n }", {"s": NamedNode("urn:a")})
    'SELECT ?n WHERE { VALUES (?s) { (<urn:a>) } ?s <urn:name> ?n }'
    >>> from pyoxigraph import Literal
    >>> inject_values("ASK { FILTER(?x = 1) }", {"x": Literal("'}")})
    'ASK { VALUES (?x) { ("\\'}") } FILTER(?x = 1) }'

    Raises:
        InvalidTerm: a name that is not a SPARQL variable name.
        QueryError: the query has no group to bind in.
    """
    for name in bindings:
        if not _VARNAME.match(name):
            raise InvalidTerm(f"invalid variable name {name!r}: use letters, digits and '_'")
    names = " ".join("?" + n for n in bindings)
    values = " ".join(sparql_term(t) for t in bindings.values())
    block = f" VALUES ({names}) {{ ({values}) }}"
    places: list[int] = []
    form = None
    pending = False  # the next '{' opens the WHERE group of a SELECT / ASK / DESCRIBE
    template = False  # the next '{' opens a CONSTRUCT template, no place for VALUES
    short: list[int] = []  # CONSTRUCT WHERE { T }: where WHERE, '{' and '}' are
    depth = 0
    for kind, text, start, end in _words(sparql):
        if kind == "word" and text in ("SELECT", "ASK", "DESCRIBE", "CONSTRUCT"):
            form = form or text
            template, pending = text == "CONSTRUCT", text != "CONSTRUCT"
        elif kind == "word" and text == "WHERE" and template:
            form, template, pending = "CONSTRUCT-WHERE", False, False
            short.append(start)
        elif kind == "open":
            if form == "CONSTRUCT-WHERE" and depth == 0:
                short.append(end)
            elif template:
                template, pending = False, True
            elif pending:
                places.append(end)
                pending = False
            depth += 1
        elif kind == "close":
            depth -= 1
            if form == "CONSTRUCT-WHERE" and depth == 0 and len(short) == 2:
                short.append(start)
    if form == "CONSTRUCT-WHERE" and len(short) == 3:
        # The short form's pattern may hold triples only: spell it out in full.
        where, open_, close = short
        pattern = sparql[open_:close]
        return f"{sparql[:where]}{{{pattern} }} WHERE {{{block}{pattern} }}{sparql[close + 1 :]}"
    if form == "DESCRIBE" and not places:
        return f"{sparql}\nWHERE {{{block} }}"  # at the very end: no caller text follows
    if not places:
        raise QueryError("cannot bind variables: the query has no WHERE group")
    out, last = [], 0
    for place in places:
        out.append(sparql[last:place])
        out.append(block)
        last = place
    out.append(sparql[last:])
    return "".join(out)
