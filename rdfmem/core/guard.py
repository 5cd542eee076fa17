"""Find ``SERVICE`` and ``LOAD`` in SPARQL text before anything evaluates it.

Both make the engine fetch a URL (pyoxigraph and rdflib do the request themselves), so an
endpoint open to other tools must refuse them however they are written: any case, glued to
other tokens (``falseSERVICE<…>`` and ``SERVICESILENT`` parse in pyoxigraph), behind comments,
as the prefix of a prefixed name (``SERVICE:x`` parses as ``SERVICE :x``), or spelt with
``\\uXXXX`` / ``\\UXXXXXXXX`` escapes anywhere in the text.

SPARQL engines expand those escapes over the whole query before they parse it (SPARQL 1.1
§19.2, "codepoint escape sequences"), so an escaped quote can close a string and an escaped
newline can end a comment. The guard therefore judges two texts: the one it was given and the
one with escapes expanded, the text the engine parses, and refuses if either holds a keyword.

Each text is split into SPARQL tokens in one forward pass (SPARQL 1.1 §19.8): comments,
strings (short and long), IRIs and variables are skipped; every other run of name characters
(keywords, function names, language tags, prefixes, numbers) is searched for ``SERVICE`` and
``LOAD``, case ignored (including the long s U+017F and the dotless i U+0131, which some
parsers upper-case to ``S`` and ``I``). In a prefixed name or a blank node label only the
first plain run after the colon is a name. Text the tokenizer cannot place (an unterminated
string) is searched too, so a doubt refuses rather than lets through. Every character is
looked at a bounded number of times: the time taken grows linearly with the text.

``query_form`` judges, by pyoxigraph's parser, that a text sent as a query is one (not an
update) before a read path hands it to an engine: Virtuoso runs updates sent as ``query=``.

>>> find_forbidden("SELECT * WHERE { ?s <http://x/service> 'LOAD' } # SERVICE")
>>> find_forbidden("select * { sErViCe <http://evil/> { ?s ?p ?o } }")
Forbidden(keyword='SERVICE', line=1, column=12)
>>> find_forbidden("PREFIX : <http://evil/>\\nSELECT * { SERVICE:x { } }")
Forbidden(keyword='SERVICE', line=2, column=12)
>>> find_forbidden("SELECT * { ?s ?p '\\\\u0027 SERVICE <http://evil/> {} }")
Forbidden(keyword='SERVICE', line=1, column=26)
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from typing import NamedTuple

from pyoxigraph import QueryBoolean, QuerySolutions, Store

from rdfmem.core.errors import QueryError

__all__ = [
    "FORBIDDEN_KEYWORDS",
    "UPDATE_KEYWORDS",
    "Forbidden",
    "Token",
    "code_tokens",
    "expand_escapes",
    "find_forbidden",
    "query_form",
]

#: Keywords that make a SPARQL engine reach out to the network.
FORBIDDEN_KEYWORDS = ("SERVICE", "LOAD")
#: The words that start a SPARQL 1.1 update operation (and Virtuoso's older ``MODIFY``).
UPDATE_KEYWORDS = (
    "INSERT", "DELETE", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY", "LOAD", "WITH", "MODIFY"
)  # fmt: skip

# Every pattern below is one character class repeated, or a fixed-length escape: matched at a
# given position it consumes what it matches and never backtracks into it.
_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})")
_SPACE = re.compile(r"\s+")
_NAME_CHARS = r"\w\-.:%\u00B7\u0300-\u036F\u203F\u2040"
#: A run of name characters, with ``\x`` pairs (local-name escapes, or unexpanded ``\u``).
_NAME = re.compile(rf"(?:[{_NAME_CHARS}]|\\.)++", re.DOTALL)
_PLAIN = re.compile(r"[\w\-\u00B7\u0300-\u036F\u203F\u2040]*")
_VARNAME = re.compile(r"[\w\u00B7\u0300-\u036F\u203F\u2040]+")
_IRI_BODY = re.compile(r"""(?:[^<>"{}|^`\\\x00-\x20]|\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8})*+""")
_SHORT_BODY = {q: re.compile(rf"[^{q}\\\n\r]*") for q in "'\""}
_LONG_BODY = {q: re.compile(rf"[^{q}\\]*") for q in "'\""}
#: The keywords searched for in upper-cased text before any tokenizing (the fast path of
#: ``find_forbidden``). Literal patterns: ``re`` finds them in ~0.3 ns a character where
#: ``str.__contains__`` took up to 1.4 ns on an embedding's base64 (12 µs for "LOAD" in a
#: versioned ``Memories.save``'s 9 KB request, 2.6 µs this way).
_SERVICE_TEXT = re.compile("SERVICE")
_LOAD_TEXT = re.compile("LOAD")


class Forbidden(NamedTuple):
    """Where a forbidden keyword was found: ``keyword`` (upper case), 1-based line and column."""

    keyword: str
    line: int
    column: int


def expand_escapes(sparql: str) -> tuple[str, list[tuple[int, int]]]:
    """``sparql`` with ``\\uXXXX`` and ``\\UXXXXXXXX`` expanded once, as a SPARQL engine does
    before parsing, and the ``(position in the result, position in sparql)`` of each expansion.
    Escapes naming no character (surrogates, beyond U+10FFFF) are kept as written.

    >>> expand_escapes("SERVI\\\\u0043E")[0]
    'SERVICE'
    """
    parts: list[str] = []
    spots: list[tuple[int, int]] = []
    last = 0
    out = 0
    for match in _ESCAPE.finditer(sparql):
        code = int(match.group(1) or match.group(2), 16)
        if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            continue
        parts.append(sparql[last : match.start()])
        out += match.start() - last
        spots.append((out, match.start()))
        parts.append(chr(code))
        out += 1
        last = match.end()
    parts.append(sparql[last:])
    return "".join(parts), spots


def _keyword(text: str, keywords: tuple[str, ...] = FORBIDDEN_KEYWORDS) -> tuple[str, int] | None:
    """The first of ``keywords`` in a run of code text, and where in it."""
    upper = text.upper()  # U+017F upper-cases to "S": parsers that compare upper-cased text
    for keyword in keywords:
        if keyword in upper:
            found = re.search(keyword, text, re.IGNORECASE)
            return keyword, found.start() if found is not None else 0
    return None


class Token(NamedTuple):
    """A piece of SPARQL code: ``kind`` is ``"word"`` (a run of name characters: keyword,
    prefixed name, number …), ``"punct"`` (one other character) or ``"broken"`` (an
    unterminated string, kept as text); ``text[start:end]`` is the token."""

    kind: str
    start: int
    end: int


def code_tokens(text: str) -> Iterator[Token]:
    """The code of SPARQL ``text`` in one forward pass: comments, whitespace, strings, IRIs and
    variables are skipped, everything else is yielded. Linear in the length of ``text``.

    >>> text = "ASK { ?s <urn:a> 'x' } # c"
    >>> [text[t.start : t.end] for t in code_tokens(text)]
    ['ASK', '{', '}']
    """
    pos, end = 0, len(text)
    while pos < end:
        char = text[pos]
        if char.isspace():
            space = _SPACE.match(text, pos)
            pos = space.end() if space is not None else pos + 1
        elif char == "#":
            stops = [i for i in (text.find("\n", pos), text.find("\r", pos)) if i >= 0]
            pos = min(stops) if stops else end
        elif char in "'\"":
            stop, closed = _string(text, pos, char)
            if not closed:  # the engine will not parse it; judged as code
                yield Token("broken", pos, stop)
            pos = stop
        elif char == "<":
            body = _IRI_BODY.match(text, pos + 1)
            stop = body.end() if body is not None else pos + 1
            if stop < end and text[stop] == ">":
                pos = stop + 1
            else:
                # Not an IRI: "<" is an operator, and the text after it is read as code. The
                # body scanned stops at the next "<", so no character is scanned twice here.
                yield Token("punct", pos, pos + 1)
                pos += 1
        elif char in "?$" and pos + 1 < end and _VARNAME.match(text, pos + 1):
            var = _VARNAME.match(text, pos + 1)
            pos = var.end() if var is not None else pos + 1
        else:
            name = _NAME.match(text, pos)
            if name is None:
                yield Token("punct", pos, pos + 1)
                pos += 1
            else:
                yield Token("word", pos, name.end())
                pos = name.end()


def _scan(text: str, keywords: tuple[str, ...] = FORBIDDEN_KEYWORDS) -> tuple[str, int] | None:
    """The first of ``keywords`` in code positions of ``text`` and its offset: one pass."""
    for token in code_tokens(text):
        if token.kind == "punct":
            continue
        word = text[token.start : token.end]
        colon = word.find(":") if token.kind == "word" else -1
        if colon >= 0:
            # pyoxigraph ends a local name earlier than the grammar does (``ex:x.y.SERVICE``
            # is ``ex:x.y`` then ``.SERVICE``), so only its first plain run is a name.
            run = _PLAIN.match(word, colon + 1)
            exempt = run.end() if run is not None else colon + 1
            word = word[: colon + 1] + " " * (exempt - colon - 1) + word[exempt:]
        hit = _keyword(word, keywords)
        if hit is not None:
            return hit[0], token.start + hit[1]
    return None


def _string(text: str, pos: int, quote: str) -> tuple[int, bool]:
    """Where the string starting at ``pos`` ends, and whether it was closed."""
    end = len(text)
    if text.startswith(quote * 3, pos):
        body, i = _LONG_BODY[quote], pos + 3
        while True:
            i = _end(body.match(text, i), i)
            if i >= end:
                return end, False
            if text[i] == "\\":
                i += 2
            elif text.startswith(quote * 3, i):
                return i + 3, True
            else:
                i += 1
    body, i = _SHORT_BODY[quote], pos + 1
    while True:
        i = _end(body.match(text, i), i)
        if i >= end or text[i] in "\n\r":
            return min(i, end), False
        if text[i] == "\\":
            i += 2
        else:
            return i + 1, True


def _end(match: re.Match[str] | None, default: int) -> int:
    return match.end() if match is not None else default


def _where(sparql: str, keyword: str, offset: int) -> Forbidden:
    line = sparql.count("\n", 0, offset) + 1
    column = offset - (sparql.rfind("\n", 0, offset) + 1) + 1
    return Forbidden(keyword, line, column)


def find_forbidden(sparql: str) -> Forbidden | None:
    """The first ``SERVICE`` or ``LOAD`` that SPARQL ``sparql`` could execute, or None.

    Only text that is a keyword, a function name, a language tag or a prefix counts; strings,
    IRIs, comments, variables, blank node labels and local names do not, both as written and
    once ``\\u`` escapes are expanded. Linear time in the length of ``sparql``.

    >>> find_forbidden('INSERT DATA { <urn:a> <urn:says> "LOAD <http://x/>" }') is None
    True
    >>> find_forbidden("LOAD <http://example.org/data.ttl>")
    Forbidden(keyword='LOAD', line=1, column=1)
    >>> find_forbidden("ASK {} # note \\\\u000A LOAD <http://evil/>")
    Forbidden(keyword='LOAD', line=1, column=22)
    """
    upper = sparql.upper()
    escaped = "\\" in sparql and "\\U" in upper
    if not escaped and _SERVICE_TEXT.search(upper) is None and _LOAD_TEXT.search(upper) is None:
        return None  # no spelling of either keyword can be made from this text
    hit = _scan(sparql)
    if hit is not None:
        return _where(sparql, *hit)
    if not escaped:
        return None
    expanded, spots = expand_escapes(sparql)
    hit = _scan(expanded)
    if hit is None:
        return None
    keyword, offset = hit
    # Back to a position in the text as written: the last expansion at or before it.
    index = bisect.bisect_right(spots, (offset, len(sparql))) - 1
    if index >= 0:
        out, raw = spots[index]
        offset = raw if offset == out else raw + (offset - out) + _escape_len(sparql, raw) - 1
    return _where(sparql, keyword, offset)


def _escape_len(sparql: str, raw: int) -> int:
    return 6 if sparql[raw + 1] == "u" else 10


# -- queries only: what a read path lets through --------------------------------------------

_PROLOGUE = ("BASE", "PREFIX")
#: The base a query's relative IRIs are read against while it is judged (the engine that
#: runs it resolves them against its own: the service URL, or the query's ``BASE``).
_BASE = "http://rdfmem.invalid/"
#: Query forms, as ``query_form`` names them.
_FORMS = {QuerySolutions: "SELECT", QueryBoolean: "ASK"}


def _parsed_form(text: str) -> str:
    """The form of the query pyoxigraph parses from ``text``, without evaluating it.

    pyoxigraph's results are lazy but for ASK, which it answers at once: an ASK is parsed as
    the SELECT it would be (``ASK`` replaced), so no text makes this check do work.

    Raises:
        SyntaxError: ``text`` is not a SPARQL query (an update, or nothing that parses).
    """
    ask = _ask_at(text)
    if ask is not None:
        for projection in ("SELECT *", "SELECT (1 AS ?_rdfmem_ask)"):
            try:
                Store().query(text[:ask] + projection + text[ask + 3 :], base_iri=_BASE)
            except SyntaxError:
                continue
            return "ASK"
        # It does not parse: the parser's own words say where (parsing fails before any
        # evaluation could start).
        try:
            Store().query(text, base_iri=_BASE)
        except SyntaxError as exc:
            raise SyntaxError(f"an ASK query that does not parse: {exc}") from None
        raise SyntaxError("an ASK query that does not parse")
    result = Store().query(text, base_iri=_BASE)
    return _FORMS.get(type(result), "CONSTRUCT")


def _ask_at(text: str) -> int | None:
    """Where the query form keyword starts when it is ``ASK`` (past the prologue)."""
    words = [t for t in code_tokens(text) if t.kind != "punct"]
    for token in words:
        word = text[token.start : token.end]
        if word.upper() in _PROLOGUE or word.endswith(":"):
            continue  # BASE, PREFIX and a prefix's name; their IRIs are skipped by the tokens
        return token.start if word.upper() == "ASK" else None
    return None


def query_form(sparql: str) -> str:
    """``"SELECT"``, ``"ASK"`` or ``"CONSTRUCT"`` (CONSTRUCT and DESCRIBE): the form of the
    SPARQL query ``sparql``, judged by pyoxigraph's parser before anything is sent or run, so
    a read path never hands an update to an engine that would run it (Virtuoso runs updates
    sent as ``query=``). Nothing is evaluated: the check costs a parse.

    The text must parse as a query as written; when it holds ``\\u`` escapes, the text with
    them expanded (what an engine that expands them first parses) must parse as a query too,
    or hold no update keyword (``UPDATE_KEYWORDS``, any spelling ``find_forbidden`` knows) in
    its code. A doubt refuses: text pyoxigraph cannot read as a query is never sent.

    >>> query_form("ASK { ?s ?p ?o }"), query_form("DESCRIBE <urn:a>")
    ('ASK', 'CONSTRUCT')
    >>> query_form("CLEAR GRAPH <urn:a>")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    rdfmem.core.errors.QueryError: only a query (SELECT, ASK, CONSTRUCT, DESCRIBE) is read ...

    Raises:
        QueryError: an update, or text that does not parse as a query; the message says
            which and where.
    """
    try:
        form = _parsed_form(sparql)
    except SyntaxError as exc:
        raise _refused(sparql, str(exc)) from None
    if "\\U" not in sparql.upper():
        return form
    expanded, _ = expand_escapes(sparql)
    try:
        _parsed_form(expanded)
    except SyntaxError as exc:
        hit = _scan(expanded, UPDATE_KEYWORDS)
        if hit is not None:
            raise QueryError(
                f"{hit[0]} is an update once the \\u escapes are expanded; only a query "
                f"(SELECT, ASK, CONSTRUCT, DESCRIBE) is read here ({exc})"
            ) from None
    return form


def _refused(sparql: str, reason: str) -> QueryError:
    hit = _scan(sparql, UPDATE_KEYWORDS) or _scan(expand_escapes(sparql)[0], UPDATE_KEYWORDS)
    if hit is None:
        return QueryError(f"this is not a SPARQL query: syntax {reason}")
    return QueryError(
        f"only a query (SELECT, ASK, CONSTRUCT, DESCRIBE) is read here, and this is an update "
        f"({hit[0]}): send it as an update (rdfmem serve: POST update=, with the token)"
    )
