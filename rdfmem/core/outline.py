"""The outline of a SPARQL query as far as pre-bound variables need it, and the one rule for
binding a variable a ``SELECT`` does not project, for every backend.

**The rule** (``check_bindings``): a ``SELECT`` that does not project a pre-bound variable
(nor writes ``SELECT *``) is refused with ``QueryError``, before anything runs, as embedded
Oxigraph refuses it (SEP-0007: a pre-bound variable is one the ``SELECT`` shows). Embedded
Oxigraph, rdflib and a remote store all ask this one function, so they refuse the same
queries with the same message. ``ASK``, ``CONSTRUCT`` and ``DESCRIBE`` have no projection:
any variable may be bound.

A small lexer, no parser: it tells strings, IRIs, comments, variables, numbers, words and
brackets apart (``tokens``); ``outline`` finds the groups, the projection and the
assignments (``rdfmem.backends.sparql.bind`` writes ``VALUES`` from it). Pure, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from rdfmem.core.errors import QueryError

__all__ = ["Outline", "Token", "check_bindings", "outline", "query_shape", "tokens"]

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<comment>\#[^\n\r]*)
  | (?P<string>\"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\"|'''(?:[^'\\]|\\.|'(?!''))*'''
               |"(?:[^"\\\n\r]|\\.)*"|'(?:[^'\\\n\r]|\\.)*')
  | (?P<iri><[^<>"{}|^`\\\x00-\x20]*>)
  | (?P<open>\{) | (?P<close>\}) | (?P<lparen>\() | (?P<rparen>\))
  | (?P<var>[?$][A-Za-z0-9_\u00b7\u00c0-\uffff]+)
  | (?P<number>[0-9]+)
  | (?P<word>[A-Za-z_][A-Za-z0-9_\-]*)
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_FORMS = ("SELECT", "ASK", "CONSTRUCT", "DESCRIBE")


class Token(NamedTuple):
    """A token outside strings and comments: ``kind``, ``text`` as written, where it is."""

    kind: str
    text: str
    start: int
    end: int

    @property
    def word(self) -> str:
        """The upper-cased text of a keyword, "" for any other token."""
        return self.text.upper() if self.kind == "word" else ""


def tokens(sparql: str) -> Iterator[Token]:
    """The tokens of ``sparql`` outside strings and comments; words of prefixed names
    (``ex:from``) are of kind ``name``.

    >>> [t.text for t in tokens("SELECT ?x # ?y\\n{ ?x ex:from 'a b' }")]
    ['SELECT', '?x', '{', '?x', 'ex', ':', 'from', '}']
    """
    for m in _TOKEN.finditer(sparql):
        kind = m.lastgroup or "other"
        if kind in ("space", "comment", "string"):
            continue
        if kind == "word":
            before = sparql[m.start() - 1] if m.start() else ""
            after = sparql[m.end()] if m.end() < len(sparql) else ""
            if before == ":" or after == ":":
                kind = "name"
        yield Token(kind, m.group(), m.start(), m.end())


def query_shape(sparql: str) -> tuple[str, bool, bool]:
    """``(form, states its dataset, uses named graphs)``: ``SELECT``, ``ASK`` or ``GRAPH``
    (``CONSTRUCT``, ``DESCRIBE``); a ``FROM`` clause; a ``GRAPH`` pattern.

    >>> query_shape("CONSTRUCT WHERE { ?s ?p '# GRAPH' }")
    ('GRAPH', False, False)
    """
    words = [t.word for t in tokens(sparql) if t.kind == "word"]
    form = next((w for w in words if w in _FORMS), "")
    form = "GRAPH" if form in ("CONSTRUCT", "DESCRIBE") else form or "SELECT"
    return form, "FROM" in words, "GRAPH" in words


# -- the query's outline, as far as bindings need it ---------------------------------------


@dataclass
class _Clause:
    """A select clause being read: its paren depth, projected names, whether ``*``."""

    parens: int
    names: list[str] = field(default_factory=list)
    star: bool = False


@dataclass
class Outline:
    form: str = ""
    form_at: int = -1  # where the outermost query form keyword starts
    projection: list[str] = field(default_factory=list)
    star: bool = False
    from_at: int = -1  # the first FROM of the outermost query
    where: tuple[int, int] = (-1, -1)  # the outermost WHERE group: '{' end, '}' start
    where_at: int = -1  # where the WHERE keyword (or its '{') starts
    groups: list[tuple[int, frozenset[str]]] = field(default_factory=list)  # '{' end, names
    assigned_top: set[str] = field(default_factory=set)  # AS ?v in SELECT / GROUP BY
    assigned_inside: set[str] = field(default_factory=set)  # AS ?v inside the WHERE group
    slices: list[tuple[int, int, str, int]] = field(default_factory=list)  # LIMIT / OFFSET
    short_construct: tuple[int, int, int] | None = None  # CONSTRUCT WHERE { T }


def outline(sparql: str, names: frozenset[str]) -> Outline:
    """Where the groups are, which bound names each may see, where they are assigned."""
    out = Outline()
    toks = list(tokens(sparql))
    frames: list[frozenset[str]] = []  # visible names per open '{'
    parens = 0
    clauses: list[_Clause] = []
    next_brace = ""  # what the next '{' opens: "data", "template", "service" or ""
    after_as = False
    after_where = False
    for i, tok in enumerate(toks):
        kind, word = tok.kind, tok.word
        depth = len(frames)
        if kind == "lparen":
            parens += 1
        elif kind == "rparen":
            parens = max(parens - 1, 0)
        elif word in _FORMS and (not out.form or (depth and word == "SELECT")):
            if not out.form:
                out.form, out.form_at = word, tok.start
                next_brace = "template" if word == "CONSTRUCT" else ""
            clauses.append(_Clause(parens))
        elif word == "VALUES":
            next_brace = "data"
        elif word == "SERVICE":
            next_brace = "service"
        elif word == "FROM" and depth == 0 and out.from_at < 0 and out.where_at < 0:
            out.from_at = tok.start
        elif word == "WHERE" and depth == 0:
            if next_brace == "template" and out.form == "CONSTRUCT":
                out.short_construct = (tok.start, -1, -1)
            out.where_at, after_where = tok.start, True
            if next_brace == "template":
                next_brace = ""
        elif word in ("LIMIT", "OFFSET") and depth == 0 and out.where[1] >= 0:
            following = toks[i + 1] if i + 1 < len(toks) else None
            if following is not None and following.kind == "number":
                out.slices.append((tok.start, following.end, word, int(following.text)))
        elif kind == "var":
            name = tok.text[1:]
            if clauses and clauses[-1].parens == parens:
                clauses[-1].names.append(name)
            if after_as and name in names:
                (out.assigned_inside if depth else out.assigned_top).add(name)
            if after_as and clauses and clauses[-1].parens == parens - 1:
                clauses[-1].names.append(name)
        elif kind == "other" and tok.text == "*" and clauses and clauses[-1].parens == parens:
            clauses[-1].star = True
        elif kind == "open":
            following = toks[i + 1] if i + 1 < len(toks) else None
            parent = frames[-1] if frames else names
            opens, next_brace = next_brace, ""
            visible = parent
            inject = not opens
            if opens == "service":
                visible = frozenset()  # another server's query: left as written
            elif opens:
                pass  # VALUES data, CONSTRUCT template
            elif following is not None and (following.word == "SELECT" or following.text == "|"):
                inject = False  # '{ SELECT': the sub-select's own group binds; '{|': annotation
            elif clauses and clauses[-1].parens == parens:
                clause = clauses.pop()
                if depth:  # a sub-select has its own variables, but those it projects
                    visible = parent if clause.star else parent & frozenset(clause.names)
                else:
                    out.projection, out.star = clause.names, clause.star
            if depth == 0 and parens == 0 and out.where[0] < 0 and not opens:
                out.where = (tok.end, -1)
                if not after_where:
                    out.where_at = tok.start
                if out.short_construct is not None:
                    out.short_construct = (out.short_construct[0], tok.end, -1)
            frames.append(visible)
            if inject and visible:
                out.groups.append((tok.end, visible))
        elif kind == "close":
            if frames:
                frames.pop()
            if not frames and out.where[0] >= 0 and out.where[1] < 0:
                out.where = (out.where[0], tok.start)
                if out.short_construct is not None:
                    where, open_, _ = out.short_construct
                    out.short_construct = (where, open_, tok.start)
        after_as = word == "AS"
    return out


def check_bindings(sparql: str, names: Iterable[str]) -> None:
    """Refuse binding a variable that a ``SELECT`` does not project (the module's rule).

    >>> check_bindings("SELECT * WHERE { ?s ?p ?o }", ["s"])
    >>> check_bindings("ASK { ?s ?p ?o }", ["s"])
    >>> check_bindings("SELECT ?o WHERE { ?s ?p ?o }", ["s"])
    Traceback (most recent call last):
    ...
    rdfmem.core.errors.QueryError: the SELECT does not project ?s: bind only variables of ...

    Raises:
        QueryError: the query is a SELECT that does not project one of ``names``.
    """
    bound = list(names)
    if not bound:
        return
    shape = outline(sparql, frozenset(bound))
    if shape.form == "SELECT" and not shape.star:
        hidden = [n for n in bound if n not in shape.projection]
        if hidden:
            raise QueryError(
                f"the SELECT does not project ?{hidden[0]}: bind only variables of its "
                "projection (or write SELECT *)"
            )
