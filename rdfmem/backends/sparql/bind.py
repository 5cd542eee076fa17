"""Pre-bound variables on a remote store, written as standard SPARQL; the query's shape.

The query's outline and the rule for binding a variable a ``SELECT`` does not project
(refused, on every backend) are in ``rdfmem.core.outline``.

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
from collections.abc import Mapping
from typing import Any

from rdfmem.core.errors import InvalidTerm, QueryError
from rdfmem.core.outline import Token, check_bindings, query_shape, tokens
from rdfmem.core.outline import outline as _outline
from rdfmem.core.terms import sparql_term

__all__ = ["Token", "bind_values", "query_shape", "tokens"]

_VARNAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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
    # SEP-0007, the rule of every backend: a bound variable is one the SELECT shows.
    check_bindings(sparql, names)
    outline = _outline(sparql, names)
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
