"""Find ``SERVICE`` and ``LOAD`` in SPARQL text before anything evaluates it.

Both make the engine fetch a URL (pyoxigraph and rdflib do the request themselves), so an
endpoint open to other tools must refuse them however they are written: any case, glued to
other tokens (``falseSERVICE<…>`` and ``SERVICESILENT`` parse in pyoxigraph), behind comments,
or as the prefix of a prefixed name (``SERVICE:x`` parses as ``SERVICE :x``).

The text is split into SPARQL tokens by the grammar's own lexical rules (SPARQL 1.1 §19.8):
comments, strings (short and long), IRIs, variables, blank node labels and prefixed names
are recognised exactly, so ``"LOAD"``, ``<http://x/service>``, ``?service`` and
``ex:payload`` are not mistaken for the keywords. Everything else (keywords, function names,
language tags, prefixes) is searched for ``SERVICE`` and ``LOAD`` as a substring, case
ignored. Whatever the tokenizer cannot place is kept as text and searched too, so a doubt
refuses rather than lets through.

>>> find_forbidden("SELECT * WHERE { ?s <http://x/service> 'LOAD' } # SERVICE")
>>> find_forbidden("select * { sErViCe <http://evil/> { ?s ?p ?o } }")
Forbidden(keyword='SERVICE', line=1, column=12)
>>> find_forbidden("PREFIX : <http://evil/>\\nSELECT * { SERVICE:x { } }")
Forbidden(keyword='SERVICE', line=2, column=12)
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["FORBIDDEN_KEYWORDS", "Forbidden", "find_forbidden", "is_point_query"]

#: Keywords that make a SPARQL engine reach out to the network.
FORBIDDEN_KEYWORDS = ("SERVICE", "LOAD")

# PN_CHARS_BASE, approximated by "a letter of any script" (every char the grammar allows is
# a letter; the few extra it would let in only make a token longer, never a keyword vanish
# into it, because a prefix is searched like any other word).
_BASE = r"[^\W\d_]"
_PN_CHARS_U = r"[^\W\d]"  # letters and "_"
_PN_CHARS = r"[\w\-\u00B7\u0300-\u036F\u203F\u2040]"
_PLX = r"(?:%[0-9A-Fa-f]{2}|\\[_~.\-!$&'()*+,;=/?#@%])"
_PN_PREFIX = rf"{_BASE}(?:(?:{_PN_CHARS}|\.)*{_PN_CHARS})?"
_PN_LOCAL = (
    rf"(?:{_PN_CHARS_U}|[:0-9]|{_PLX})(?:(?:{_PN_CHARS}|[.:]|{_PLX})*(?:{_PN_CHARS}|:|{_PLX}))?"
)
_UCHAR = r"\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}"

_TOKEN = re.compile(
    rf"""
    (?P<space>\s+)
  | (?P<comment>\#[^\n\r]*)
  | (?P<string>'''(?:(?:''|')?(?:[^'\\]|\\.))*'''
              |\"\"\"(?:(?:\"\"|\")?(?:[^\"\\]|\\.))*\"\"\"
              |'(?:[^'\\\n\r]|\\.)*'
              |\"(?:[^\"\\\n\r]|\\.)*\")
  | (?P<iri><(?:[^<>\"{{}}|^`\\\x00-\x20]|{_UCHAR})*>)
  | (?P<var>[?$](?:{_PN_CHARS_U}|[0-9])[\w\u00B7\u0300-\u036F\u203F\u2040]*)
  | (?P<bnode>_:(?:{_PN_CHARS_U}|[0-9])(?:(?:{_PN_CHARS}|\.)*{_PN_CHARS})?)
  | (?P<pname>(?P<prefix>{_PN_PREFIX})?:(?:{_PN_LOCAL})?)
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<word>(?:[^\W\d]|{_UCHAR})(?:\w|{_UCHAR})*|@[A-Za-z0-9\-]+)
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_UCHARS = re.compile(_UCHAR)
_PLAIN_RUN = re.compile(r"[\w\-\u00B7\u0300-\u036F\u203F\u2040]*")
_KEYWORDS = re.compile("|".join(FORBIDDEN_KEYWORDS), re.IGNORECASE)


class Forbidden(NamedTuple):
    """Where a forbidden keyword was found: ``keyword`` (upper case), 1-based line and column."""

    keyword: str
    line: int
    column: int


def find_forbidden(sparql: str) -> Forbidden | None:
    """The first ``SERVICE`` or ``LOAD`` that SPARQL ``sparql`` could execute, or None.

    Only text that is a keyword, a function name, a language tag or a prefix counts; strings,
    IRIs, comments, variables, blank node labels and local names do not.

    >>> find_forbidden('INSERT DATA { <urn:a> <urn:says> "LOAD <http://x/>" }') is None
    True
    >>> find_forbidden("LOAD <http://example.org/data.ttl>")
    Forbidden(keyword='LOAD', line=1, column=1)
    """
    lowered = sparql.lower()
    if "service" not in lowered and "load" not in lowered and "\\u" not in lowered:
        return None  # no spelling of either keyword can be made from this text
    for match in _TOKEN.finditer(sparql):
        kind = match.lastgroup
        if kind in ("space", "comment", "string", "iri", "var", "number"):
            continue
        start, text = match.start(), match.group()
        if kind in ("pname", "bnode"):
            # pyoxigraph ends a local name earlier than the grammar does (``ex:x.y.SERVICE``
            # is ``ex:x.y`` then ``.SERVICE``), so only its first plain run is exempt.
            colon = text.index(":") + 1
            run = _PLAIN_RUN.match(text, colon)
            exempt = run.end() if run is not None else colon
            text = text[:colon] + " " * (exempt - colon) + text[exempt:]
        if "\\" in text:  # a keyword spelt with \\u escapes
            text = _UCHARS.sub(lambda m: chr(int(m.group()[2:], 16)), text)
            start = -1
        found = _KEYWORDS.search(text)
        if found is not None:
            offset = start + found.start() if start >= 0 else match.start()
            line = sparql.count("\n", 0, offset) + 1
            column = offset - (sparql.rfind("\n", 0, offset) + 1) + 1
            return Forbidden(found.group().upper(), line, column)
    return None


# The shape of a point query as one regular expression over the text (matched in C: a few
# microseconds, where walking the tokens in Python costs tens). Its pieces are the token
# patterns above; anything they do not describe fails the match.
_WS = r"(?:\s|\#[^\n\r]*)*"
_STRING = r"""(?:'(?:[^'\\\n\r]|\\.)*'|"(?:[^"\\\n\r]|\\.)*")"""
_IRI = rf"<(?:[^<>\"{{}}|^`\\\x00-\x20]|{_UCHAR})*>"
_PNAME = rf"(?:{_PN_PREFIX})?:(?:{_PN_LOCAL})?"
_VAR = r"[?$]\w+"
_NAME = rf"(?:{_IRI}|{_PNAME})"
_KW = r"(?![\w:])"  # a keyword ends where a name could not go on
_TERM = (
    rf"(?:{_IRI}|{_PNAME}|{_VAR}|\d+(?:\.\d+)?{_KW}|(?i:a|true|false){_KW}"
    rf"|{_STRING}(?:@[A-Za-z]+(?:-[A-Za-z0-9]+)*|\^\^{_NAME})?)"
)
_TRIPLE = rf"{_TERM}{_WS}{_TERM}{_WS}{_TERM}{_WS}(?:\.{_WS})?"
_POINT = re.compile(
    rf"{_WS}(?:(?i:PREFIX){_WS}(?:{_PN_PREFIX})?:{_WS}{_IRI}{_WS}|(?i:BASE){_WS}{_IRI}{_WS})*"
    rf"(?:(?i:SELECT){_KW}{_WS}(?:(?i:DISTINCT|REDUCED){_KW}{_WS})?"
    rf"(?:\*{_WS}|(?:{_VAR}{_WS})+)|(?i:ASK){_KW}{_WS})"
    rf"(?:(?i:FROM){_KW}{_WS}(?:(?i:NAMED){_KW}{_WS})?{_NAME}{_WS})*"
    rf"(?:(?i:WHERE){_KW}{_WS})?"
    rf"\{{{_WS}(?:(?i:GRAPH){_KW}{_WS}(?:{_NAME}|{_VAR}){_WS}\{{{_WS}{_TRIPLE}\}}{_WS}"
    rf"(?:\.{_WS})?|{_TRIPLE})\}}{_WS}"
    rf"(?:(?i:LIMIT){_KW}{_WS}\d+{_WS})?",
    re.DOTALL,
)


def is_point_query(sparql: str) -> bool:
    """True for a SELECT or ASK of one triple pattern (optionally inside one GRAPH) and
    nothing else: no FILTER, OPTIONAL, UNION, path, subquery, expression, ORDER BY or
    OFFSET. Each of its rows costs one index step, so the server may answer it on the spot,
    a few rows at a time, without a worker thread.

    >>> is_point_query("PREFIX ex: <urn:ex:> SELECT ?o WHERE { ex:s ex:p ?o } LIMIT 5")
    True
    >>> is_point_query("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
    False
    """
    return _POINT.fullmatch(sparql) is not None
