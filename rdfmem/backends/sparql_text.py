"""SPARQL text, read just enough to place pre-bound variables and to route the default graph.

A small lexer (strings, IRIs, comments and braces are told apart, nothing is parsed
further) feeds three pure functions: ``query_shape`` (the query form, whether a dataset is
stated, whether named graphs are used), ``inject_values`` (``VALUES`` for pre-bound
variables) and ``route_default_graph`` (an update's writes to the default graph sent to a
named graph). What they add to a query is built with ``sparql_term`` only, so no caller
text can break out of its place; text they cannot read is sent as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from pyoxigraph import NamedNode

from ..errors import InvalidTerm, QueryError
from ..terms import sparql_term

__all__ = ["inject_values", "query_shape", "route_default_graph"]

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
        return f"{sparql[:where]}{{{pattern}\n}} WHERE {{{block}{pattern}\n}}{sparql[close + 1 :]}"
    if form == "DESCRIBE" and not places:
        return f"{sparql}\nWHERE {{{block} }}"
    if not places:
        raise QueryError("cannot bind variables: the query has no WHERE group")
    out, last = [], 0
    for place in places:
        out.append(sparql[last:place])
        out.append(block)
        last = place
    out.append(sparql[last:])
    return "".join(out)


_OPERATIONS = {"INSERT", "DELETE", "WITH", "LOAD", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY"}


def route_default_graph(sparql: str, graph: NamedNode) -> str:
    """A SPARQL Update whose writes to the default graph go to the named graph ``graph``.

    Triples outside ``GRAPH`` in ``INSERT DATA``, ``DELETE DATA`` and ``DELETE WHERE`` are
    wrapped in ``GRAPH graph``; ``DELETE/INSERT … WHERE`` without ``WITH`` gets ``WITH
    graph``; ``DEFAULT`` in ``CLEAR``, ``DROP``, ``ADD``, ``MOVE``, ``COPY`` becomes ``GRAPH
    graph``; ``LOAD`` without ``INTO`` loads into it. Nothing else of the text changes.

    >>> print(route_default_graph('INSERT DATA { <urn:s> <urn:p> "}" . '
    ...     'GRAPH <urn:g> { <urn:s> <urn:p> 1 } }', NamedNode("urn:d")))
    INSERT DATA { GRAPH <urn:d> { <urn:s> <urn:p> "}" .
    } GRAPH <urn:g> { <urn:s> <urn:p> 1 } }
    >>> route_default_graph("DELETE { ?s ?p 1 } WHERE { ?s ?p 1 }", NamedNode("urn:d"))
    'WITH <urn:d> DELETE { ?s ?p 1 } WHERE { ?s ?p 1 }'
    """
    target = sparql_term(graph)
    tokens = list(_words(sparql))
    operations: list[list[tuple[str, str, int, int]]] = [[]]
    depth = 0
    for token in tokens:
        kind, text = token[0], token[1]
        depth += (kind == "open") - (kind == "close")
        if kind == "other" and text == ";" and depth == 0:
            operations.append([])
        else:
            operations[-1].append(token)
    edits: list[tuple[int, int, str]] = []

    def wrap_unnamed(op: list[tuple[str, str, int, int]], i: int) -> None:
        """Wrap the triples outside GRAPH in the brace group opening at ``op[i]``."""
        start, level = op[i][3], 0
        for kind, text, s, e in op[i:]:
            if kind == "word" and text == "GRAPH" and level == 1:
                edits.append((start, s, ""))
            elif kind == "open":
                level += 1
            elif kind == "close":
                level -= 1
                if level == 1:
                    start = e
                elif level == 0:
                    edits.append((start, s, ""))
                    return

    for op in operations:
        words = [(i, t[1]) for i, t in enumerate(op) if t[0] == "word"]
        first = next((n for n, (_, text) in enumerate(words) if text in _OPERATIONS), None)
        if first is None:
            continue
        at, verb = words[first]
        following = op[at + 1][1] if at + 1 < len(op) and op[at + 1][0] == "word" else ""
        if verb in ("INSERT", "DELETE") and following in ("DATA", "WHERE"):
            brace = next(i for i in range(at, len(op)) if op[i][0] == "open")
            wrap_unnamed(op, brace)
        elif verb in ("INSERT", "DELETE"):
            edits.append((op[at][2], op[at][2], f"WITH {target} "))
        elif verb == "LOAD" and not any(text == "INTO" for _, text in words):
            edits.append((op[-1][3], op[-1][3], f" INTO GRAPH {target}"))
        elif verb in ("CLEAR", "DROP", "ADD", "MOVE", "COPY"):
            for i, text in words:
                if text == "DEFAULT":
                    edits.append((op[i][2], op[i][3], f"GRAPH {target}"))
    out = sparql
    for start, end, replacement in sorted(edits, reverse=True):
        if replacement:
            out = out[:start] + replacement + out[end:]
            continue
        core = out[start:end].strip().lstrip(".").strip()
        if core:
            out = out[:start] + f" GRAPH {target} {{ {core}\n}} " + out[end:]
    return out
