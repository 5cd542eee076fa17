"""Pre-bound variables on a remote store, written as standard SPARQL; the query's shape.

A server takes no bindings over the SPARQL Protocol, so ``SparqlBackend.query`` writes them
into the query text, to give the answers embedded Oxigraph gives for the same
``substitutions`` (SEP-0007: the variable is bound to the value everywhere in the query,
and a ``SELECT`` keeps it in its projection). Two standard constructs do it:

* A variable the query only **reads** gets ``VALUES (?v) { (value) }`` at the start of
  every group graph pattern: the ``WHERE`` group, ``OPTIONAL``, ``MINUS``, ``UNION``,
  ``GRAPH``, ``EXISTS`` groups and sub-selects that project it (a sub-select that does not
  project ``?v`` has its own ``?v``, so its groups get none; nor do ``SERVICE`` groups,
  which belong to another server). Every pattern then sees ``?v`` bound, as Oxigraph's
  evaluation does.
* A variable the query **assigns** (``BIND(… AS ?v)``, ``SELECT (… AS ?v)``,
  ``GROUP BY (… AS ?v)``) cannot be in scope before the assignment, so the solutions are
  joined with ``VALUES`` after it: the ``WHERE`` group becomes ``{ { group } VALUES … }``,
  and when the assignment is in the ``SELECT`` or ``GROUP BY`` clause, the query becomes
  ``SELECT <its projection> WHERE { { <the query> } VALUES … }`` with ``FROM`` clauses and
  ``LIMIT``/``OFFSET`` lifted to the outer query (so they apply after the join, as in
  Oxigraph). A join keeps the solutions where ``?v`` equals the value or is unbound
  (then bound to it): what Oxigraph's projection of a pre-bound variable keeps.

Values are written with ``sparql_term`` only (N-Triples escaping), never caller text. The
lexer tells strings, IRIs, comments, variables, numbers, words and brackets apart and
parses nothing further; what it adds never puts a line break before caller text, so a
value can neither break out of a string nor end a comment, even where this lexer reads the
text otherwise than the server's parser does (a prefixed name such as ``ex:a\\'b`` holds an
escaped quote that this lexer takes for a string). Updates are never rewritten.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from rdfmem.core.errors import InvalidTerm, QueryError
from rdfmem.core.terms import sparql_term

__all__ = ["Token", "bind_values", "query_shape", "tokens"]

_VARNAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

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
class _Outline:
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


def _outline(sparql: str, names: frozenset[str]) -> _Outline:
    """Where the groups are, which bound names each may see, where they are assigned."""
    out = _Outline()
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


# -- writing the bindings in --------------------------------------------------------------


def _block(names: list[str], bindings: Mapping[str, Any]) -> str:
    variables = " ".join("?" + n for n in names)
    values = " ".join(sparql_term(bindings[n]) for n in names)
    return f" VALUES ({variables}) {{ ({values}) }}"


def _apply(sparql: str, edits: list[tuple[int, int, str]]) -> str:
    out, last = [], 0
    for start, end, text in sorted(edits, key=lambda e: (e[0], e[1])):
        out.append(sparql[last:start])
        out.append(text)
        last = max(last, end)
    out.append(sparql[last:])
    return "".join(out)


def bind_values(sparql: str, bindings: Mapping[str, Any]) -> str:
    """``sparql`` with ``bindings`` (name to term) written in as ``VALUES`` (see the module
    docstring for where).

    >>> from pyoxigraph import Literal, NamedNode
    >>> bind_values("SELECT ?s ?n WHERE { ?s <urn:name> ?n }", {"s": NamedNode("urn:a")})
    'SELECT ?s ?n WHERE { VALUES (?s) { (<urn:a>) } ?s <urn:name> ?n }'
    >>> bind_values("SELECT ?n WHERE { ?s <urn:name> ?n }", {"s": NamedNode("urn:a")})
    Traceback (most recent call last):
    ...
    rdfmem.core.errors.QueryError: the SELECT does not project ?s: bind only variables of ...
    >>> bind_values("ASK { FILTER(?x = 1) }", {"x": Literal("'}")})
    'ASK { VALUES (?x) { ("\\'}") } FILTER(?x = 1) }'
    >>> print(bind_values("SELECT ?z { BIND(1 AS ?z) }", {"z": Literal("1")}))
    SELECT ?z { { BIND(1 AS ?z) } VALUES (?z) { ("1") } }
    >>> print(bind_values("SELECT (1 AS ?z) {}", {"z": Literal("1")}))
    SELECT ?z WHERE { { SELECT (1 AS ?z) {}
    }  VALUES (?z) { ("1") }}

    Raises:
        InvalidTerm: a name that is not a SPARQL variable name.
        QueryError: the query has no group to bind in, or is a SELECT that does not
            project a bound variable (refused as embedded Oxigraph refuses it).
    """
    for name in bindings:
        if not _VARNAME.match(name):
            raise InvalidTerm(f"invalid variable name {name!r}: use letters, digits and '_'")
    names = frozenset(bindings)
    outline = _outline(sparql, names)
    if outline.form == "SELECT" and not outline.star:
        # SEP-0007, as embedded Oxigraph answers: a bound variable is one the SELECT shows.
        hidden = [n for n in bindings if n not in outline.projection]
        if hidden:
            raise QueryError(
                f"the SELECT does not project ?{hidden[0]}: bind only variables of its "
                "projection (or write SELECT *)"
            )
    if outline.short_construct is not None and -1 not in outline.short_construct:
        # CONSTRUCT WHERE { T }: its pattern may hold triples only: spell it out in full.
        where, open_, close = outline.short_construct
        pattern = sparql[open_:close]
        sparql = f"{sparql[:where]}{{{pattern} }} WHERE {{{pattern} }}{sparql[close + 1 :]}"
        outline = _outline(sparql, names)
    # Read-only variables bind in every group that sees them; a variable assigned, or
    # seen by no group (only by a sub-select that does not project it), joins after.
    placed = frozenset().union(*(visible for _, visible in outline.groups))
    assigned = outline.assigned_top | outline.assigned_inside
    read = [n for n in bindings if n not in assigned and n in placed]
    later = [n for n in bindings if n not in read]
    open_, close = outline.where
    if open_ < 0 or close < 0:
        if outline.form == "DESCRIBE":  # no WHERE: at the very end, no caller text follows
            return f"{sparql}\nWHERE {{{_block(list(bindings), bindings)}}}"
        raise QueryError("cannot bind variables: the query has no WHERE group")
    edits: list[tuple[int, int, str]] = []
    for place, visible in outline.groups:
        shown = [n for n in read if n in visible]
        if shown:
            edits.append((place, place, _block(shown, bindings)))
    if not later:
        return _apply(sparql, edits)
    if outline.form == "SELECT" and outline.assigned_top & set(later):
        # Assigned by the SELECT or GROUP BY clause: join after the whole query.
        start = outline.form_at
        dataset = ""
        if outline.from_at >= 0 and outline.where_at > outline.from_at:
            dataset = sparql[outline.from_at : outline.where_at]
            edits.append((outline.from_at, outline.where_at, ""))
        projection = "*" if outline.star else " ".join("?" + n for n in outline.projection)
        edits.append((start, start, f"SELECT {projection} {dataset}WHERE {{ {{ "))
        lifted = ""
        for begin, end, word, number in outline.slices:
            edits.append((begin, end, ""))
            lifted += f" {word} {number}"
        tail = f"\n}} {_block(later, bindings)}}}{lifted}"
        edits.append((len(sparql), len(sparql), tail))
        return _apply(sparql, edits)
    # Assigned inside the WHERE group: join after that group.
    edits.append((open_, open_, " {"))
    edits.append((close, close, f"}}{_block(later, bindings)} "))
    return _apply(sparql, edits)
