"""RDF terms as rdfmem takes them: pyoxigraph's, with rdflib terms and Python values converted.

A plain ``str`` is an IRI in subject, predicate and graph position and a plain literal in
object position. ``int``, ``float``, ``bool``, ``Decimal``, ``datetime`` and ``date`` become
typed literals.

Variables: a pyoxigraph ``Variable`` (or rdflib's) is a variable wherever a pattern is taken.
A ``str`` starting with ``?`` is a variable only in a pattern (``select``, ``ask``, ``count``
call these functions with ``variables=True``), the short form the pattern API documents.
Everywhere data is given (``assert_``, ``retract``, ``assert_many``, query ``bindings``, graph
names of ``triples``/``clear_graph``/``export``, and by default here), ``"?x"`` is a plain
literal in object position and not an IRI elsewhere, never a variable. To match text that may start
with ``?`` in a pattern, pass ``Literal(text)``.

>>> to_object(3)
<Literal value=3 datatype=<NamedNode value=http://www.w3.org/2001/XMLSchema#integer>>
>>> to_subject("?who", variables=True)
<Variable value=who>
>>> to_object("?who")
<Literal value=?who datatype=<NamedNode value=http://www.w3.org/2001/XMLSchema#string>>
>>> sparql_term(to_object('say "hi"'))
'"say \\\\"hi\\\\""'
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import sys
from decimal import Decimal
from typing import Any, TypeAlias

from pyoxigraph import BlankNode, DefaultGraph, Literal, NamedNode, Quad, Triple, Variable

from rdfmem.core.errors import InvalidTerm

__all__ = [
    "RDF_JSON",
    "XSD",
    "GraphName",
    "Term",
    "from_literal",
    "from_rdflib",
    "is_variable",
    "sparql_term",
    "to_graph",
    "to_object",
    "to_predicate",
    "to_subject",
]

Term: TypeAlias = NamedNode | BlankNode | Literal
GraphName: TypeAlias = NamedNode | BlankNode | DefaultGraph
PatternTerm: TypeAlias = NamedNode | BlankNode | Literal | Variable

XSD = "http://www.w3.org/2001/XMLSchema#"
RDF_JSON = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#JSON")
_XSD_INTEGER = NamedNode(XSD + "integer")
_XSD_DOUBLE = NamedNode(XSD + "double")
_XSD_DECIMAL = NamedNode(XSD + "decimal")
_XSD_BOOLEAN = NamedNode(XSD + "boolean")
_XSD_DATETIME = NamedNode(XSD + "dateTime")
_XSD_DATE = NamedNode(XSD + "date")
# rdflib names the default graph of a Dataset with this IRI.
_RDFLIB_DEFAULT = "urn:x-rdflib:default"
_VARNAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_]*$")


def is_variable(value: object, *, strings: bool = True) -> bool:
    """True for a pyoxigraph ``Variable``, an rdflib ``Variable`` or (when ``strings``) a
    ``'?name'`` string."""
    if type(value).__name__ == "Variable" and type(value).__module__.startswith("rdflib"):
        return True
    return isinstance(value, Variable) or (strings and type(value) is str and value.startswith("?"))


def _variable(value: str | Variable) -> Variable:
    if isinstance(value, Variable):
        name = value.value
    elif type(value) is str:
        name = value[1:]
    else:  # rdflib Variable: the name without '?'
        name = str(value)
    if not _VARNAME.match(name):
        raise InvalidTerm(f"invalid variable name {value!r}: use letters, digits and '_'")
    return Variable(name)


def _iri(value: str) -> NamedNode:
    try:
        return NamedNode(value)
    except ValueError as exc:
        raise InvalidTerm(f"not an IRI: {value!r} ({exc})") from exc


def _from_rdflib(value: Any) -> Term | DefaultGraph | None:
    """Convert an rdflib term, or return None when ``value`` is not one."""
    if "rdflib" not in sys.modules:  # no rdflib term exists yet: not one (and no import)
        return None
    from rdflib import BNode as RBNode
    from rdflib import Literal as RLiteral
    from rdflib import URIRef
    from rdflib import Variable as RVariable

    if isinstance(value, RVariable):
        return None
    if isinstance(value, URIRef):
        return DefaultGraph() if str(value) == _RDFLIB_DEFAULT else _iri(str(value))
    if isinstance(value, RBNode):
        return BlankNode(str(value))
    if isinstance(value, RLiteral):
        if value.language:
            return Literal(str(value), language=value.language)
        if value.datatype is not None:
            return Literal(str(value), datatype=NamedNode(str(value.datatype)))
        return Literal(str(value))
    return None


def from_rdflib(value: Any) -> Term | DefaultGraph:
    """An rdflib term as pyoxigraph's, as read (no checks beyond RDF's own).

    Raises:
        InvalidTerm: ``value`` is not an rdflib term.
    """
    converted = _from_rdflib(value)
    if converted is None:
        raise InvalidTerm(f"not an rdflib term: {value!r}")
    return converted


def _literal(value: object) -> Literal:
    if isinstance(value, bool):
        return Literal("true" if value else "false", datatype=_XSD_BOOLEAN)
    if isinstance(value, int):
        return Literal(str(value), datatype=_XSD_INTEGER)
    if isinstance(value, float):
        return Literal(repr(value) if value == value else "NaN", datatype=_XSD_DOUBLE)
    if isinstance(value, Decimal):
        return Literal(str(value), datatype=_XSD_DECIMAL)
    if isinstance(value, _dt.datetime):
        return Literal(value.isoformat(), datatype=_XSD_DATETIME)
    if isinstance(value, _dt.date):
        return Literal(value.isoformat(), datatype=_XSD_DATE)
    if isinstance(value, str):
        return Literal(value)
    raise InvalidTerm(f"cannot turn {type(value).__name__} {value!r} into an RDF literal")


def _check_json_literal(term: Literal) -> Literal:
    if term.datatype == RDF_JSON:
        try:
            json.loads(term.value)
        except ValueError as exc:
            raise InvalidTerm(f"rdf:JSON literal does not hold JSON: {exc}") from exc
    return term


def to_subject(value: object, *, variables: bool = False) -> NamedNode | BlankNode | Variable:
    """A subject: an IRI, a blank node or a variable (``?name`` strings: when ``variables``).

    Raises:
        InvalidTerm: not a subject.
    """
    if isinstance(value, (NamedNode, BlankNode)):
        return value
    if is_variable(value, strings=variables):
        return _variable(value)  # type: ignore[arg-type]
    if type(value) is str:
        return _iri(value)
    converted = _from_rdflib(value)
    if isinstance(converted, (NamedNode, BlankNode)):
        return converted
    raise InvalidTerm(f"not a subject (IRI or blank node): {value!r}")


def to_predicate(value: object, *, variables: bool = False) -> NamedNode | Variable:
    """A predicate: an IRI or a variable (``?name`` strings: when ``variables``).

    Raises:
        InvalidTerm: not a predicate.
    """
    if isinstance(value, NamedNode):
        return value
    if is_variable(value, strings=variables):
        return _variable(value)  # type: ignore[arg-type]
    if type(value) is str:
        return _iri(value)
    converted = _from_rdflib(value)
    if isinstance(converted, NamedNode):
        return converted
    raise InvalidTerm(f"not a predicate (IRI): {value!r}")


def to_object(value: object, *, variables: bool = False) -> Term | Variable:
    """An object: any term, a variable, or a Python value made a literal (a ``?name``
    string is a variable when ``variables``, else a literal).

    Raises:
        InvalidTerm: a value that no literal can hold.
    """
    if isinstance(value, Literal):
        return _check_json_literal(value)
    if isinstance(value, (NamedNode, BlankNode)):
        return value
    if is_variable(value, strings=variables):
        return _variable(value)  # type: ignore[arg-type]
    converted = _from_rdflib(value)
    if isinstance(converted, Literal):
        return _check_json_literal(converted)
    if isinstance(converted, (NamedNode, BlankNode)):
        return converted
    return _literal(value)


def to_graph(value: object, *, variables: bool = False) -> GraphName | Variable:
    """A graph name: an IRI, a blank node, ``DefaultGraph()`` or a variable (``?name``
    strings: when ``variables``).

    Raises:
        InvalidTerm: not a graph name.
    """
    if isinstance(value, (NamedNode, BlankNode, DefaultGraph)):
        return value
    if is_variable(value, strings=variables):
        return _variable(value)  # type: ignore[arg-type]
    if type(value) is str:
        return _iri(value)
    converted = _from_rdflib(value)
    if converted is not None and not isinstance(converted, Literal):
        return converted
    raise InvalidTerm(f"not a graph name: {value!r}")


def sparql_term(term: Term | Variable | Triple) -> str:
    """The term in SPARQL syntax, escaped by the N-Triples rules that SPARQL shares.

    pyoxigraph validates IRIs on construction (no ``>``, spaces or quotes) and escapes
    literals, so the result can never break out of its position in a query.
    """
    if isinstance(term, Variable):
        return "?" + term.value
    return str(term)


def from_literal(term: Literal) -> Any:
    """The Python value of a literal: numbers, booleans, dates, JSON; the text otherwise.

    >>> from_literal(to_object(2.5))
    2.5
    """
    datatype = term.datatype.value
    text = term.value
    try:
        if datatype == RDF_JSON.value:
            return json.loads(text)
        if not datatype.startswith(XSD):
            return text
        kind = datatype[len(XSD) :]
        if kind in {
            "integer",
            "int",
            "long",
            "short",
            "byte",
            "nonNegativeInteger",
            "positiveInteger",
            "unsignedInt",
            "unsignedLong",
            "negativeInteger",
            "nonPositiveInteger",
            "unsignedShort",
            "unsignedByte",
        }:
            return int(text)
        if kind in {"double", "float"}:
            return float(text)
        if kind == "decimal":
            return Decimal(text)
        if kind == "boolean":
            return text in {"true", "1"}
        if kind == "dateTime":
            return _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        if kind == "date":
            return _dt.date.fromisoformat(text)
    except ValueError:
        return text
    return text


def quad_key(quad: Quad) -> tuple[str, str, str, str]:
    """A hashable, order-stable identity of a quad (for dedup and sorting)."""
    return (str(quad.subject), str(quad.predicate), str(quad.object), str(quad.graph_name))
