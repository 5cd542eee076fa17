"""The official MCP memory server's file format (``memory.jsonl``), read and written.

One JSON object a line: ``{"type": "entity", "name", "entityType", "observations"}`` or
``{"type": "relation", "from", "to", "relationType"}``; blank lines are skipped. Reading
checks every line before anything is written, and names the first broken one.

>>> model = read_jsonl('{"type":"entity","name":"A","entityType":"t","observations":["o"]}\\n')
>>> print(write_jsonl(model), end="")
{"type":"entity","name":"A","entityType":"t","observations":["o"]}
>>> read_jsonl('{"type":"entity","name":"A"}')
Traceback (most recent call last):
rdfmem.core.errors.FormatError: line 1: an entity needs "entityType" (a string)
"""

from __future__ import annotations

import json
from typing import Any

from rdfmem.core.errors import FormatError
from rdfmem.mcp.model import Entity, Model, Relation

__all__ = ["read_jsonl", "write_jsonl"]

_ENTITY_FIELDS = ("name", "entityType")
_RELATION_FIELDS = ("from", "to", "relationType")


def _string(item: dict[str, Any], key: str, what: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise FormatError(f"{where}: {what} needs {json.dumps(key)} (a string)")
    return value


def read_jsonl(text: str, *, source: str = "") -> Model:
    """The knowledge graph in ``text`` (JSONL). Entities keep their file order; an entity
    or relation repeated later in the file is merged into the first (observations added).

    Raises:
        FormatError: a line is not JSON, not an object, of an unknown ``type`` or missing a
            field; the message names the line (and ``source``, when given).
    """
    model = Model()
    prefix = f"{source} " if source else ""
    # Observations that later lines add to an entity, merged once at the end: linear in
    # the file, however often one entity repeats.
    members: dict[str, set[str]] = {}
    extra: dict[str, list[str]] = {}
    # Lines end at "\n" only (a "\r" before it is dropped): U+2028, U+2029 and U+0085 are
    # legal inside JSON strings, and str.splitlines would cut a line at each of them.
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw[:-1] if raw.endswith("\r") else raw
        if not line.strip():
            continue
        where = f"{prefix}line {number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FormatError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from exc
        if not isinstance(item, dict):
            raise FormatError(f"{where}: expected a JSON object, not {type(item).__name__}")
        try:
            line.encode("utf-8")
            json.dumps(item, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise FormatError(f"{where}: not valid Unicode (a lone surrogate)") from exc
        kind = item.get("type")
        if kind == "entity":
            name, entity_type = (_string(item, k, "an entity", where) for k in _ENTITY_FIELDS)
            observations = item.get("observations", [])
            if not isinstance(observations, list) or not all(
                isinstance(o, str) for o in observations
            ):
                raise FormatError(f'{where}: an entity\'s "observations" is a list of strings')
            old = model.entities.get(name)
            if old is None:
                model.add_entity(Entity(name, entity_type, list(dict.fromkeys(observations))))
            else:
                have = members.get(name)
                if have is None:
                    have = members[name] = set(old.observations)
                more = [o for o in dict.fromkeys(observations) if o not in have]
                have.update(more)
                extra.setdefault(name, []).extend(more)
        elif kind == "relation":
            source_, target, relation_type = (
                _string(item, k, "a relation", where) for k in _RELATION_FIELDS
            )
            model.add_relation(Relation(source_, target, relation_type))
        else:
            raise FormatError(
                f'{where}: "type" must be "entity" or "relation", not {json.dumps(kind)}'
            )
    for name, more in extra.items():
        entity = model.entities[name]
        entity.set_observations(entity.observations + more)
    return model


def _line(item: dict[str, Any]) -> str:
    return json.dumps(item, ensure_ascii=False, separators=(",", ":"))


def write_jsonl(model: Model) -> str:
    """``model`` as the official server writes its file (entities, then relations), one
    line each, ending with a newline."""
    lines = [_line({"type": "entity", **e.to_json()}) for e in model.entities.values()]
    lines += [_line({"type": "relation", **r.to_json()}) for r in model.relations.values()]
    return "".join(line + "\n" for line in lines)
