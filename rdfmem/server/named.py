"""The named queries of ``ontologies/queries/*.rq``, with the parameters their headers declare.

A query documents its parameters in its leading comment, either one per line
(``# param: limit xsd:integer, default 10``) or in a list
(``# Parameters: ?level (an integer); ?graph (optional: a graph IRI)``). From each
description a type is read (integer, decimal, double, boolean, IRI — a graph or an ``<…>``
example means an IRI — else a string), a default (``default 10``) and whether it is optional
(``optional``, ``when unbound``). Values from a URL or the command line are turned into terms
of that type and bound as SPARQL substitutions, never pasted into the text.

>>> q = NamedQuery.parse("demo", "# param: limit xsd:integer, default 10\\nSELECT * {}")
>>> [(p.name, p.datatype, p.default) for p in q.params]
[('limit', 'integer', '10')]
>>> q.bindings({})["limit"].value
'10'
>>> q = NamedQuery.parse("x", "# Parameters: ?level (an integer); ?graph (optional:\\n"
...                           "# a graph, <urn:g>; all when unbound).\\nSELECT * {}")
>>> [(p.name, p.datatype, p.required) for p in q.params]
[('level', 'integer', True), ('graph', 'iri', False)]
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyoxigraph import Literal, NamedNode

from rdfmem.core.errors import QueryError
from rdfmem.core.ontology import named_query, ontology_path

__all__ = ["NamedQuery", "Param", "list_named_queries", "load_named_query"]

_PARAM = re.compile(r"^\s*param\s*:\s*[?$]?(?P<name>[A-Za-z_]\w*)\s*(?P<rest>.*)$", re.I)
_LIST = re.compile(r"\bparam(?:eter)?s\s*:(?P<rest>.*)", re.I | re.S)
_ITEM = re.compile(r"^\s*[?$](?P<name>[A-Za-z_]\w*)\s*(?:\((?P<rest>.*)\))?\s*\.?\s*$", re.S)
_OPTIONAL = re.compile(r"\boptional\b|\bunbound\b", re.I)
_DEFAULT = re.compile(r"\bdefault(?:s)?\s*(?:[:=]|is|to)?\s*(?P<value>\"[^\"]*\"|[^\s,;)]+)", re.I)
_TYPES = (
    ("integer", re.compile(r"\b(?:xsd:)?(?:integer|int)\b", re.I)),
    ("decimal", re.compile(r"\bxsd:decimal\b|\bdecimal\b", re.I)),
    ("double", re.compile(r"\bxsd:(?:double|float)\b|\bfloat\b|\bnumber\b", re.I)),
    ("boolean", re.compile(r"\b(?:xsd:)?(?:boolean|bool)\b", re.I)),
    ("iri", re.compile(r"\b(?:IRI|URI)\b|\bgraph\b|<[^>\s]*>", re.I)),
)
_TYPE_WORDS = {
    "string": "string",
    "str": "string",
    "literal": "string",
    "iri": "iri",
    "uri": "iri",
    "integer": "integer",
    "int": "integer",
    "decimal": "decimal",
    "double": "double",
    "float": "double",
    "boolean": "boolean",
    "bool": "boolean",
}
_LIMIT = re.compile(r"\bLIMIT\s+(?P<count>\d+)(?P<tail>\s*(?:OFFSET\s+\d+\s*)?)\Z", re.I)
_XSD = "http://www.w3.org/2001/XMLSchema#"


@dataclass(frozen=True)
class Param:
    """One declared parameter: its name, type (``string``, ``integer``, ``decimal``,
    ``double``, ``boolean`` or ``iri``), default (text, or None) and description."""

    name: str
    datatype: str = "string"
    default: str | None = None
    optional: bool = False
    description: str = ""

    @property
    def required(self) -> bool:
        return self.default is None and not self.optional

    def term(self, value: str) -> NamedNode | Literal:
        """``value`` as a term of this parameter's type.

        Raises:
            QueryError: the value is not of that type.
        """
        kind = self.datatype
        try:
            if kind == "iri":
                return NamedNode(value)
            if kind == "integer":
                return Literal(str(int(value)), datatype=NamedNode(_XSD + "integer"))
            if kind in ("decimal", "double"):
                float(value)
                return Literal(value.strip(), datatype=NamedNode(_XSD + kind))
            if kind == "boolean":
                if value.lower() not in ("true", "false", "1", "0"):
                    raise ValueError("not true or false")
                flag = "true" if value.lower() in ("true", "1") else "false"
                return Literal(flag, datatype=NamedNode(_XSD + "boolean"))
        except ValueError as exc:
            raise QueryError(f"parameter {self.name!r} must be {kind}, not {value!r}") from exc
        return Literal(value)

    def describe(self) -> dict[str, Any]:
        """The parameter as JSON (for ``GET /queries``)."""
        return {
            "name": self.name,
            "type": self.datatype,
            "default": self.default,
            "required": self.required,
            "description": self.description,
        }


@dataclass(frozen=True)
class NamedQuery:
    """A named query's text and declared parameters."""

    name: str
    text: str
    params: tuple[Param, ...]

    @classmethod
    def parse(cls, name: str, text: str) -> NamedQuery:
        """Read the parameters from the leading comment of ``text``."""
        header: list[str] = []
        for line in text.splitlines():
            stripped = line.strip()
            if stripped and not stripped.startswith("#"):
                break
            header.append(stripped.lstrip("#").strip())
        found: list[tuple[str, str]] = []
        for line in header:
            one = _PARAM.match(line)
            if one is not None:
                found.append((one.group("name"), one.group("rest")))
        listed = _LIST.search("\n".join(line for line in header if not _PARAM.match(line)))
        if listed is not None:
            for item in _split_top_level(listed.group("rest")):
                match = _ITEM.match(item)
                if match is not None:
                    found.append((match.group("name"), match.group("rest") or ""))
        params = []
        for pname, rest in found:
            rest = " ".join(rest.split()).strip(" -—:")
            first = rest.split(" ", 1)[0].strip(",;:()").lower() if rest else ""
            datatype = _TYPE_WORDS.get(first.removeprefix("xsd:")) or next(
                (kind for kind, rx in _TYPES if rx.search(rest)), "string"
            )
            default = _DEFAULT.search(rest)
            value = None if default is None else default.group("value").strip('"')
            params.append(Param(pname, datatype, value, bool(_OPTIONAL.search(rest)), rest))
        return cls(name, text, tuple(params))

    @property
    def limit(self) -> int | None:
        """The count of the query's final ``LIMIT`` clause, which ``prepare`` lets a
        ``limit`` value replace; None when the query ends without one (or declares its own
        ``limit`` parameter).

        >>> NamedQuery.parse("recent", "SELECT * { ?s ?p ?o }\\nLIMIT 10\\n").limit
        10
        """
        if any(p.name == "limit" for p in self.params):
            return None
        found = _LIMIT.search(self.text.rstrip())
        return None if found is None else int(found.group("count"))

    def prepare(self, given: Mapping[str, str]) -> tuple[str, dict[str, NamedNode | Literal]]:
        """The text to run and its bindings. Besides the declared parameters, ``limit`` (a
        non-negative integer) sets or replaces the query's final ``LIMIT`` clause: SPARQL
        cannot bind a LIMIT, so the validated number is written into the text.

        >>> q = NamedQuery.parse("recent", "SELECT * { ?s ?p ?o }\\nLIMIT 10\\n")
        >>> q.prepare({"limit": "3"})[0].splitlines()[-1]
        'LIMIT 3'

        Raises:
            QueryError: an unknown or missing parameter, or a value of the wrong type.
        """
        text = self.text
        rest = dict(given)
        if rest.get("limit") == "" and self.limit is not None:
            del rest["limit"]  # an empty form field: the query's own LIMIT
        if "limit" in rest and all(p.name != "limit" for p in self.params):
            raw = rest.pop("limit")
            if not raw.isdigit():
                raise QueryError(f"limit must be a non-negative integer, not {raw!r}")
            clause = f"LIMIT {int(raw)}"
            body = text.rstrip()
            found = _LIMIT.search(body)
            if found is not None:
                text = body[: found.start()] + clause + found.group("tail") + "\n"
            else:
                text = body + "\n" + clause + "\n"
        return text, self.bindings(rest)

    def bindings(self, given: Mapping[str, str]) -> dict[str, NamedNode | Literal]:
        """Terms for ``given`` parameter values, with defaults filled in. An empty value of
        an optional parameter (what an HTML form sends for a field left empty) is not given.

        >>> q = NamedQuery.parse("x", "# param: graph IRI, optional\\nSELECT * {}")
        >>> q.bindings({"graph": ""})
        {}

        Raises:
            QueryError: an unknown or missing parameter, or a value of the wrong type.
        """
        known = {p.name: p for p in self.params}
        unknown = sorted(set(given) - set(known))
        if unknown:
            listed = ", ".join(known) or "none"
            raise QueryError(
                f"named query {self.name!r} has no parameter {', '.join(unknown)}; "
                f"its parameters: {listed}"
            )
        out: dict[str, NamedNode | Literal] = {}
        for param in self.params:
            value = given.get(param.name)
            if value == "" and not param.required:
                value = None  # an empty field of an HTML form: not given
            if value is not None:
                out[param.name] = param.term(value)
            elif param.default is not None:
                out[param.name] = param.term(param.default)
            elif param.required:
                raise QueryError(f"named query {self.name!r} needs the parameter {param.name!r}")
        return out


def _split_top_level(text: str) -> list[str]:
    """Split on ``;`` outside parentheses and ``<…>``."""
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char in "(<":
            depth += 1
        elif char in ")>" and depth:
            depth -= 1
        if char == ";" and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    items.append("".join(current))
    return items


def load_named_query(name: str) -> NamedQuery:
    """The named query ``name`` from ``ontologies/queries``.

    Raises:
        KeyError: no such named query (the message lists the known ones).
    """
    return NamedQuery.parse(name, named_query(name))


def list_named_queries() -> list[NamedQuery]:
    """Every shipped named query, by name."""
    folder = ontology_path() / "queries"
    return [load_named_query(p.stem) for p in sorted(folder.glob("*.rq"))]
