"""The lines a caller gives as a resource's state after a write (``StateLines``), checked
before a version copies them as data (``RdfStore.versioning_update(states=...)``).

Each line must be one N-Triples triple about the resource, ending with " .": a version
copies the text after the subject, so a line holding more (a second triple, a closing
brace) must never reach the request. ``checked_lines`` checks each term (``sparql_term``'s
shapes, else by parsing); ``sent_lines`` trusts the terms of lines that the request
already sends as data (``StateLines.sent``) and checks what the copy itself needs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pyoxigraph import BlankNode, NamedNode, Quad, RdfFormat, parse

from rdfmem.core.errors import InvalidTerm
from rdfmem.store.history import RDF_TYPE

__all__ = ["TYPE_TEXT", "checked_lines", "sent_lines"]


#: One N-Triples triple's predicate and object as ``sparql_term`` writes them, and its end:
#: an IRI, or a string (escapes ``\\t``, ``\\"`` ... only: no ``\\u``, which SPARQL expands
#: before it reads the text) with a language or a datatype. Such a text is one term that
#: nothing can leave. A line of another shape is parsed instead (``_parsed_lines``).
_IRI_TEXT = r'<[^<>"{}|^`\\\x00-\x20]*>'
_STRING_TEXT = r'"[^"\\\n\r]*(?:\\[tbnrf"\'\\\\][^"\\\n\r]*)*"'
_SUFFIX = re.compile(rf"(?:@[a-zA-Z]+(?:-[a-zA-Z0-9]+)*|\^\^{_IRI_TEXT})?")
_PREDICATE = re.compile(rf"({_IRI_TEXT}) ")
_IRI = re.compile(_IRI_TEXT)
TYPE_TEXT = f"<{RDF_TYPE.value}>"
_STRING = re.compile(_STRING_TEXT)


def _one_term(text: str) -> bool:
    # ``text`` is one IRI, or one string with its language or datatype (see above). A
    # long string with no quote nor backslash inside (an embedding) is checked by ``in``
    # alone: a regular expression takes ~5 ns a character.
    if text.startswith("<"):
        return _IRI.fullmatch(text) is not None
    end = text.rfind('"')
    if not text.startswith('"') or end < 1 or _SUFFIX.fullmatch(text, end + 1) is None:
        return False
    inside = text[1:end]
    if '"' not in inside and "\\" not in inside and "\n" not in inside and "\r" not in inside:
        return True
    return _STRING.fullmatch(text, 0, end + 1) is not None


def checked_lines(subject: NamedNode, lines: Sequence[str]) -> list[tuple[bool, str]] | None:
    # ``lines`` as (is rdf:type, text after the subject), each checked to be one N-Triples
    # triple about ``subject`` (``_plain_line``, else ``_one_term``: ~1 µs a line), else by
    # parsing them. None (the pattern copy) when one has a blank node or a \u escape. Each
    # is later written on a line of its own, as in N-Triples.
    s = f"<{subject.value}> "
    start = len(s)
    pairs = []
    for line in lines:
        if not _one_line(line, s, start):
            return _parsed_lines(subject, lines)
        pairs.append((line.startswith(TYPE_TEXT, start), line[start:]))
    return pairs


def _one_line(line: str, s: str, start: int) -> bool:
    # ``line`` is one N-Triples triple about the subject written ``s`` (``start``: its
    # length), its object one IRI or one string (``_plain_line``, else ``_one_term``).
    if _plain_line(line, s, start):
        return True
    match = _PREDICATE.match(line, start) if line.startswith(s) else None
    return match is not None and line.endswith(" .") and _one_term(line[match.end() : -2])


def sent_lines(subject: NamedNode, lines: Sequence[str]) -> list[tuple[bool, str]] | None:
    # ``checked_lines`` for lines the request already sends as data of the subject's
    # graph (``StateLines.sent``): whatever a line holds, the same text is in that
    # request's own ``INSERT DATA``, so its terms are not checked again (~1 µs a line).
    # What the version's copy needs is: a line about the subject, ending with " .", with
    # no backslash (no \u escape to expand, no escaped quote), no line break and no
    # blank node (a new one as data). A line that fails is checked as ``checked_lines``
    # checks it (a list of topics, JSON with quotes, has a backslash).
    s = f"<{subject.value}> "
    start = len(s)
    pairs = []
    for line in lines:
        if (
            not _bare(line, s) or line.startswith("_:", line.find("> ", start) + 2)
        ) and not _one_line(line, s, start):
            return _parsed_lines(subject, lines)
        pairs.append((line.startswith(TYPE_TEXT, start), line[start:]))
    return pairs


def _bare(line: str, s: str) -> bool:
    # A line about ``s`` (its subject's text and a space) ending with " ." and holding no
    # backslash (no escape to expand, no escaped quote) and no line break.
    return (
        line.startswith(s)
        and line.endswith(" .")
        and "\\" not in line
        and "\n" not in line
        and "\r" not in line
    )


def _plain_line(line: str, s: str, start: int) -> bool:
    # ``line`` is ``<subject> <predicate> object .`` with no backslash, newline or carriage
    # return anywhere: its object an IRI, or a quote, the next quote, then nothing, a
    # language or a datatype (``_SUFFIX``: no quote in either). Between two quotes with no
    # backslash and no line end there is one plain string, so the line is one triple, as
    # ``_one_term`` would find, with the literal scanned in C and never copied (an
    # embedding: ~1 µs less). Any other line is checked by ``_one_term``; this accepts
    # only what that check accepts.
    if not _bare(line, s):
        return False
    match = _PREDICATE.match(line, start)
    if match is None:
        return False
    o, end = match.end(), len(line) - 2
    if not line.startswith('"', o):
        return _IRI.fullmatch(line, o, end) is not None
    close = line.find('"', o + 1, end)
    return close > 0 and _SUFFIX.fullmatch(line, close + 1, end) is not None


def _parsed_lines(subject: NamedNode, lines: Sequence[str]) -> list[tuple[bool, str]] | None:
    # ``checked_lines`` by parsing. pyoxigraph's N-Triples parser takes one triple a line,
    # never two nor one across lines: one parse of the lines joined, giving as many
    # triples as lines that each start with the subject, checks each line.
    s = f"<{subject.value}> "
    bad = next(
        (
            line
            for line in lines
            if not line.startswith(s) or not line.endswith(" .") or "\n" in line or "\r" in line
        ),
        None,
    )
    quads: list[Quad] = []
    if bad is None:
        try:
            quads = list(parse("\n".join(lines).encode("utf-8"), RdfFormat.N_TRIPLES))
        except SyntaxError as exc:
            bad = f"{exc}"
    if bad is None and len(quads) != len(lines):
        bad = "(a line holding no triple)"
    if bad is not None:
        raise InvalidTerm(
            f"states: each line must be one N-Triples triple about {subject.value!r} "
            f"ending with ' .', not {bad!r}"
        )
    pairs = []
    for quad, line in zip(quads, lines, strict=True):
        if isinstance(quad.object, BlankNode) or "\\u" in line or "\\U" in line:
            return None
        pairs.append((quad.predicate == RDF_TYPE, line[len(s) :]))
    return pairs
