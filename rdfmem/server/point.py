"""Which queries are truly bounded: the one-triple-pattern reads the endpoint may answer on a
worker thread, without the cost of a child process (``isolate.py``).

A point query is a SELECT or ASK of one triple pattern, optionally inside one ``GRAPH``, with
no variable repeated (``?x ?x ?x`` filters a whole scan to few rows), no ``DISTINCT`` or
``REDUCED`` (which hold every row seen), no ``FROM`` (a merged default graph), nothing else
(FILTER, OPTIONAL, paths, expressions, ORDER BY, OFFSET), no escapes, and at most
``MAX_TEXT`` characters. Each row it yields then costs one index step and writes some bytes,
so a result written under a small byte cap is a bounded amount of work whatever the store
holds: the endpoint answers it on a thread with that small cap, and hands bigger results to
a child process.

The check is one forward pass over at most ``MAX_TEXT`` characters (no regular expression
that can backtrack), then a walk over at most a few dozen tokens.
"""

from __future__ import annotations

import re

__all__ = ["MAX_TEXT", "PATTERNS", "POINT", "is_point_query", "plain_query"]

#: Longer texts are never point queries (every check below is then on a bounded input too).
MAX_TEXT = 4096

# One alternative per token kind; each is a character class run or a delimited run with no
# nested ambiguity, matched at a position and consumed.
_TOKEN = re.compile(
    r"""
    (?P<space>\s+|\#[^\n\r]*)
  | (?P<iri><[^<>"{}|^`\\\x00-\x20]*>)
  | (?P<string>"[^"\\\n\r]*"|'[^'\\\n\r]*')
  | (?P<var>[?$]\w+)
  | (?P<lang>@[A-Za-z]+(?:-[A-Za-z0-9]+)*)
  | (?P<word>[\w:\-]+(?:\.[\w:\-]+)*)
  | (?P<punct>\^\^|[{}.*])
    """,
    re.VERBOSE,
)
#: A SELECT of variables over triple patterns of IRIs and variables only, spelt plainly
#: (no prefixes, comments or literals). Each part starts with a character the part before
#: it cannot end with, and no two runs of spaces meet, so a failing match gives back each
#: character at most once: linear time, whatever the text.
_IRI_OR_VAR = r"""(?:<[^<>"{}|^`\\\x00-\x20]*>|\?\w+)"""
_SIMPLE = re.compile(
    r"\s*(?i:SELECT)(?:\s+\?\w+)+\s+(?:(?i:WHERE)\s*)?\{"
    rf"(\s*{_IRI_OR_VAR}\s+{_IRI_OR_VAR}\s+{_IRI_OR_VAR}"
    rf"(?:\s*\.\s*{_IRI_OR_VAR}\s+{_IRI_OR_VAR}\s+{_IRI_OR_VAR})*)"
    r"\s*(?:\.\s*)?\}(?:\s*(?i:LIMIT)\s+[0-9]+)?\s*"
)
_TERM = re.compile(_IRI_OR_VAR)
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_PNAME = re.compile(r"(?:[^\W\d][\w\-]*)?:[\w\-]*")


def _tokens(text: str) -> list[tuple[str, str]] | None:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.lastgroup is None:
            return None
        if match.lastgroup != "space":
            out.append((match.lastgroup, match.group()))
        pos = match.end()
    return out


class _Walk:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.at = 0

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.at] if self.at < len(self.tokens) else ("end", "")

    def keyword(self, *words: str) -> str | None:
        kind, text = self.peek()
        if kind == "word" and text.upper() in words:
            self.at += 1
            return text.upper()
        return None

    def take(self, kind: str, text: str | None = None) -> str | None:
        got_kind, got = self.peek()
        if got_kind == kind and (text is None or got == text):
            self.at += 1
            return got
        return None

    def name(self) -> bool:
        if self.take("iri") is not None:
            return True
        kind, text = self.peek()
        if kind == "word" and _PNAME.fullmatch(text):
            self.at += 1
            return True
        return False

    def term(self, variables: list[str], *, predicate: bool = False) -> bool:
        var = self.take("var")
        if var is not None:
            variables.append(var[1:])
            return True
        if self.name():
            return True
        kind, text = self.peek()
        if kind == "word" and (
            _NUMBER.fullmatch(text)
            or text.lower() in ("true", "false")
            or (predicate and text == "a")
        ):
            self.at += 1
            return True
        if self.take("string") is not None:
            if self.take("lang") is None and self.take("punct", "^^") is not None:
                return self.name()
            return True
        return False


def is_point_query(sparql: str) -> bool:
    """True for a query whose every row is one index step (see the module docstring).

    >>> is_point_query("PREFIX ex: <urn:ex:> SELECT ?o WHERE { ex:s ex:p ?o } LIMIT 5")
    True
    >>> is_point_query("ASK { ?x ?x ?x }")
    False
    >>> is_point_query("SELECT DISTINCT ?s { ?s ?p ?o }")
    False
    """
    return plain_query(sparql) == POINT


#: ``plain_query``'s answers.
POINT, PATTERNS = "point", "patterns"


def plain_query(sparql: str) -> str | None:
    """``POINT`` for a point query (see the module docstring); ``PATTERNS`` for a SELECT or
    ASK of nothing but triple patterns, in the same spelling otherwise (one ``GRAPH`` at
    most, no escapes, at most ``MAX_TEXT`` characters), variables repeated or not; None for
    anything else. Either is a query that names no remote URL (no update, ``SERVICE`` or
    ``LOAD``): the guard has nothing to refuse in it.

    >>> plain_query("SELECT ?o { <urn:s> <urn:next> ?n . ?n <urn:p> ?o }")
    'patterns'
    >>> plain_query("SELECT * { SERVICE <http://x> { ?s ?p ?o } }") is None
    True
    """
    if len(sparql) > MAX_TEXT or "\\" in sparql:
        return None
    simple = _SIMPLE.fullmatch(sparql)
    if simple is not None:  # the common spelling, judged by one linear match
        terms = _TERM.findall(simple.group(1))
        variables = [t for t in terms if t[0] == "?"]
        return POINT if len(terms) == 3 and len(set(variables)) == len(variables) else PATTERNS
    return _walked(sparql)


def _walked(sparql: str) -> str | None:
    """``plain_query`` token by token (every spelling it accepts)."""
    tokens = _tokens(sparql)
    if tokens is None:
        return None
    walk = _Walk(tokens)
    while True:
        word = walk.keyword("PREFIX", "BASE")
        if word is None:
            break
        if word == "PREFIX":
            kind, text = walk.peek()
            if kind != "word" or not text.endswith(":"):
                return None
            walk.at += 1
        if walk.take("iri") is None:
            return None
    variables: list[str] = []
    form = walk.keyword("SELECT", "ASK")
    if form is None:
        return None
    if form == "SELECT" and walk.take("punct", "*") is None:
        if walk.take("var") is None:
            return None
        while walk.take("var") is not None:
            pass
    walk.keyword("WHERE")
    if walk.take("punct", "{") is None:
        return None
    graph = walk.keyword("GRAPH") is not None
    if graph and not (walk.term(variables) and walk.take("punct", "{") is not None):
        return None
    patterns = 0
    while True:
        if not (
            walk.term(variables) and walk.term(variables, predicate=True) and walk.term(variables)
        ):
            return None
        patterns += 1
        dot = walk.take("punct", ".") is not None
        if walk.peek() == ("punct", "}"):
            break
        if not dot:
            return None
    if graph:
        walk.at += 1  # the GRAPH's closing brace
        walk.take("punct", ".")
    if walk.take("punct", "}") is None:
        return None
    if walk.keyword("LIMIT") is not None:
        kind, text = walk.peek()
        if kind != "word" or not text.isdigit():
            return None
        walk.at += 1
    if walk.peek()[0] != "end":
        return None
    if patterns == 1 and len(set(variables)) == len(variables):
        return POINT
    return PATTERNS
