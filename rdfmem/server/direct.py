"""Answers read straight from the store's indexes: the plainest SELECTs, written as SPARQL
JSON on the event loop without the query engine or a child process.

``SELECT ?a ?b WHERE { P1 . P2 } LIMIT n``, one or two triple patterns of absolute IRIs and
variables (no variable twice in one pattern), spelt plainly (``point.py``'s common spelling),
asked for as SPARQL JSON against the store's default graph: the shape most SPARQL clients
send, and the one whose work can be bounded before it runs. Each pattern is one index range
of the store (``quads_for_pattern``); with two, the pattern with fewer variables is read
first, at most ``OUTER`` rows of it, and each of its rows binds the other pattern's shared
variables before its own range is read. So every step either writes a row or is one of at
most ``OUTER`` lookups, and the rows written stop at a small byte cap: a bounded amount of
work whatever the store holds. Anything past those bounds, any other spelling, format or
term kind (RDF-star triples, directional literals) is not answered here (``None``) and goes
the usual way: the point-query path, or the sandbox.

Parsing and planning a query costs pyoxigraph ~18 µs even for one pattern, more than the
lookup itself (~4 µs); handing a join to a sandbox child costs two process hops. The rows
are those the engine gives (row order aside: a SELECT without ORDER BY has none), written
as pyoxigraph's writer writes them (``tests/test_server_direct.py`` compares the two).

Two reads of the store are two snapshots: a join is answered here only when no update of
this endpoint is running (``Runner.writing``) and the store's write generation did not move
while it was read, else it goes the usual way (one snapshot).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from json.encoder import encode_basestring
from typing import Any

from pyoxigraph import BlankNode, DefaultGraph, Literal, NamedNode, Store

__all__ = ["OUTER", "direct_rows", "parse_direct"]

#: Rows of the first pattern of a join read at most (each is one lookup of the second).
OUTER = 256
_XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
_VAR = r"\?[A-Za-z0-9_]+"
_IRI = r"""<[^<>"{}|^`\\\x00-\x20]*>"""
_TERM = rf"(?:{_IRI}|{_VAR})"
_PATTERN = rf"({_TERM})\s+({_TERM})\s+({_TERM})"
# Linear like point.py's: each part starts with a character the part before cannot end with.
_QUERY = re.compile(
    rf"\s*(?i:SELECT)((?:\s+{_VAR})+)\s+(?:(?i:WHERE)\s*)?\{{"
    rf"\s*{_PATTERN}(?:\s*\.\s*{_PATTERN})?"
    r"\s*(?:\.\s*)?\}(?:\s*(?i:LIMIT)\s+([0-9]{1,9}))?\s*"
)
_DEFAULT = DefaultGraph()

#: A pattern: (subject, predicate, object), each a ``NamedNode`` or a variable name.
Pattern = tuple[Any, Any, Any]


class Plan:
    """A query ``parse_direct`` accepted: what to select, the patterns, the limit."""

    __slots__ = ("head", "limit", "patterns", "selected")

    def __init__(self, selected: list[str], patterns: list[Pattern], limit: int | None) -> None:
        self.selected = selected
        self.patterns = patterns
        self.limit = limit
        key = tuple(selected)
        head = _HEADS.get(key)
        if head is None:
            names = ",".join(encode_basestring(v) for v in selected)
            head = f'{{"head":{{"vars":[{names}]}},"results":{{"bindings":['.encode()
            if len(_HEADS) >= 256:
                _HEADS.clear()
            _HEADS[key] = head
        self.head = head


#: The start of the answer, per list of variables selected (the same few, over and over).
_HEADS: dict[tuple[str, ...], bytes] = {}


def parse_direct(sparql: str) -> Plan | None:
    """The plan of a query answered here, or None (see the module docstring).

    >>> parse_direct("SELECT ?o WHERE { <urn:s> <urn:p> ?o }").selected
    ['o']
    >>> parse_direct("SELECT ?o WHERE { <urn:s> <urn:p> ?o FILTER(?o) }") is None
    True
    """
    match = _QUERY.fullmatch(sparql) if len(sparql) <= 4096 else None
    if match is None:
        return None
    groups = match.groups()
    selected = [v[1:] for v in groups[0].split()]
    if len(set(selected)) != len(selected):
        return None  # the engine judges that
    patterns: list[Pattern] = []
    try:
        patterns.append(_pattern(groups[1], groups[2], groups[3]))
        if groups[4] is not None:
            patterns.append(_pattern(groups[4], groups[5], groups[6]))
    except ValueError:
        return None  # a relative or broken IRI (the engine resolves or refuses it), ?x ?x
    limit = None if groups[7] is None else int(groups[7])
    return Plan(selected, patterns, limit)


def _pattern(s: str, p: str, o: str) -> Pattern:
    """Raises ValueError: an IRI that is not absolute, or a variable used twice (``?x ?x
    ?o`` filters rows: not one index step per row written)."""
    terms = [t[1:] if t[0] == "?" else NamedNode(t[1:-1]) for t in (s, p, o)]
    names = [t for t in terms if isinstance(t, str)]
    if len(set(names)) != len(names):
        raise ValueError("a variable twice in one pattern")
    return terms[0], terms[1], terms[2]


class _Unsure(Exception):
    """A term or size this module does not write: the usual way answers."""


def _term(term: Any) -> str:
    if type(term) is NamedNode:
        return '{"type":"uri","value":' + encode_basestring(term.value) + "}"
    if type(term) is Literal:
        if term.direction is not None:
            raise _Unsure
        value = encode_basestring(term.value)
        if term.language is not None:
            return (
                '{"type":"literal","value":'
                + value
                + ',"xml:lang":'
                + (encode_basestring(term.language) + "}")
            )
        datatype = term.datatype.value
        if datatype == _XSD_STRING:
            return '{"type":"literal","value":' + value + "}"
        return (
            '{"type":"literal","value":' + value + ',"datatype":' + encode_basestring(datatype)
        ) + "}"
    if type(term) is BlankNode:
        return '{"type":"bnode","value":' + encode_basestring(term.value) + "}"
    raise _Unsure  # an RDF-star triple


def _lookup(store: Store, pattern: Pattern, bound: dict[str, Any]) -> Iterator[Any] | None:
    """The quads matching ``pattern`` with ``bound`` variables set; None when a bound value
    cannot stand where it is (a literal as a subject: nothing matches)."""
    s, p, o = (bound.get(t) if isinstance(t, str) else t for t in pattern)
    if s is not None and type(s) is Literal:
        return None
    if p is not None and type(p) is not NamedNode:
        return None
    return iter(store.quads_for_pattern(s, p, o, _DEFAULT))


def _bind(pattern: Pattern, quad: Any, into: dict[str, Any]) -> None:
    s, p, o = pattern
    if isinstance(s, str):
        into[s] = quad.subject
    if isinstance(p, str):
        into[p] = quad.predicate
    if isinstance(o, str):
        into[o] = quad.object


def direct_rows(
    store: Store, plan: Plan, max_bytes: int, unchanged: Callable[[], bool]
) -> bytes | None:
    """The SPARQL JSON answer to ``plan`` on ``store``; None when it is not answered here:
    more than ``max_bytes``, more than ``OUTER`` rows of a join's first pattern, a term this
    module does not write, or (a join) ``unchanged()`` False once read."""
    patterns = plan.patterns
    if len(patterns) == 1:
        return _one_pattern(store, plan, max_bytes)
    first, second = patterns
    if sum(isinstance(t, str) for t in second) < sum(isinstance(t, str) for t in first):
        first, second = second, first
    selected = plan.selected
    limit = plan.limit
    parts = [plan.head]
    size = len(plan.head)
    rows = 0
    try:
        outer = _lookup(store, first, {})
        if outer is None or limit == 0:
            outer = iter(())
        done = False
        for read, quad in enumerate(outer, 1):
            if read > OUTER:
                return None
            bound: dict[str, Any] = {}
            _bind(first, quad, bound)
            inner = _lookup(store, second, bound)
            for quad2 in inner if inner is not None else ():
                row = dict(bound)
                _bind(second, quad2, row)
                cells = [
                    encode_basestring(name) + ":" + _term(row[name])
                    for name in selected
                    if name in row
                ]
                text = ("{" if rows == 0 else ",{") + ",".join(cells) + "}"
                data = text.encode()
                size += len(data)
                if size > max_bytes:
                    return None
                parts.append(data)
                rows += 1
                if limit is not None and rows >= limit:
                    done = True
                    break
            if done:
                break
    except (_Unsure, OSError, ValueError, TypeError):
        return None
    if not unchanged():
        return None
    parts.append(b"]}}")
    return b"".join(parts)


_FIELDS = ("subject", "predicate", "object")


def _one_pattern(store: Store, plan: Plan, max_bytes: int) -> bytes | None:
    """``direct_rows`` for one pattern: each quad is a row (one snapshot: one read)."""
    pattern = plan.patterns[0]
    cells = [
        (encode_basestring(name) + ":", _FIELDS[pattern.index(name)])
        for name in plan.selected
        if name in pattern
    ]
    parts = [plan.head]
    size = len(plan.head)
    left = -1 if plan.limit is None else plan.limit
    try:
        quads = _lookup(store, pattern, {}) if left else None
        for quad in quads if quads is not None else ():
            text = ",".join([key + _term(getattr(quad, field)) for key, field in cells])
            data = (("{" if len(parts) == 1 else ",{") + text + "}").encode()
            size += len(data)
            if size > max_bytes:
                return None
            parts.append(data)
            left -= 1
            if not left:
                break
    except (_Unsure, OSError, ValueError, TypeError):
        return None
    parts.append(b"]}}")
    return b"".join(parts)
