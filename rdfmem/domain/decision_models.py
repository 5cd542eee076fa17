"""The words of a decision graph: ``Node`` and ``Edge`` (pydantic models), their types and
statuses, and how a stored row becomes one.

Times are timezone-aware UTC from one clock that never hands out the same instant twice, so
creation order is never a tie. A node or edge read back from the store is rebuilt without
validating it again (it was validated when written); ``copy_node`` gives a caller a node it
may change without touching the one an index keeps.

>>> node = Node(id="g", type="goal", label="Ship v1")
>>> (node.status, node_age(node)[1])
('active', 'g')
>>> copy_node(node) == node
True
"""

from __future__ import annotations

import datetime as _dt
import json
import threading
import uuid
from collections.abc import Mapping
from copy import deepcopy
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rdfmem.core.errors import DecisionGraphError
from rdfmem.core.results import Row
from rdfmem.domain import decision_queries as q

__all__ = [
    "DEFAULT_GRAPH",
    "Direction",
    "Edge",
    "EdgeType",
    "Node",
    "NodeStatus",
    "NodeType",
    "as_model",
    "copy_node",
    "edge_from_row",
    "node_age",
    "node_from_row",
    "utc_now",
]

NodeType = Literal["goal", "decision", "option", "action", "outcome", "observation", "revisit"]
NodeStatus = Literal["active", "completed", "superseded", "rejected"]
EdgeType = Literal["leads_to", "chosen", "rejected", "requires", "blocks", "enables", "supersedes"]
Direction = Literal["outgoing", "incoming"]

#: The named graph a ``DecisionGraph`` uses when given none.
DEFAULT_GRAPH = "urn:rdfmem:graph:decisions"

_UTC = _dt.timezone.utc
_TYPE_OF_CLASS = {iri: name for name, iri in q.CLASS_OF_TYPE.items()}
_STATUS_OF_IRI = {iri: name for name, iri in q.STATUS_IRI.items()}
_EDGE_TYPE_OF = {iri: name for name, iri in q.EDGE_PROPERTY.items()}
_new = object.__new__
_set = object.__setattr__
M = TypeVar("M", bound=BaseModel)


class _Clock:
    """UTC now, strictly later than the last time it gave (so creation order is never a tie)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = _dt.datetime.min.replace(tzinfo=_UTC)

    def now(self) -> _dt.datetime:
        with self._lock:
            now = _dt.datetime.now(_UTC)
            if now <= self._last:
                now = self._last + _dt.timedelta(microseconds=1)
            self._last = now
            return now


_clock = _Clock()


def utc_now() -> _dt.datetime:
    """The current time in UTC, later than any this process handed out before."""
    return _clock.now()


def _new_id() -> str:
    return uuid.uuid4().hex


def _utc(value: _dt.datetime) -> _dt.datetime:
    # A naive datetime is taken to be UTC already.
    if value.tzinfo is None:
        return value.replace(tzinfo=_UTC)
    return value.astimezone(_UTC)


def _text(value: str | None) -> str | None:
    if value is not None:
        value.encode("utf-8")  # lone surrogates cannot be stored
    return value


def _json_object(value: dict[str, Any]) -> dict[str, Any]:
    try:
        json.dumps(value, allow_nan=False)
    except TypeError as exc:  # a set, an object … (NaN and infinities raise ValueError)
        raise ValueError(f"metadata must be JSON: {exc}") from exc
    return value


class Node(BaseModel):
    """A node of the decision graph.

    ``id`` defaults to 32 hex characters; ``created_at`` to now and ``updated_at`` to
    ``created_at``. Times are timezone-aware UTC (a naive time is read as UTC).

    >>> node = Node(type="goal", label="Ship v1", confidence=0.9)
    >>> (len(node.id), node.status, node.updated_at == node.created_at)
    (32, 'active', True)

    Raises:
        pydantic.ValidationError: a field of the wrong type, an unknown type or status, a
            confidence outside 0..1, metadata that is not a JSON object.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    id: str = Field(default_factory=_new_id, min_length=1)
    type: NodeType
    label: str
    status: NodeStatus = "active"
    confidence: float | None = Field(default=None, ge=0.0, le=1.0, allow_inf_nan=False)
    rationale: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: _dt.datetime = Field(default_factory=utc_now)
    updated_at: _dt.datetime = Field(default_factory=utc_now)

    @model_validator(mode="before")
    @classmethod
    def _stamp(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("updated_at") is None:
            data = dict(data)
            if data.get("created_at") is None:
                data["created_at"] = utc_now()
            data["updated_at"] = data["created_at"]
        return data

    _check_text = field_validator("id", "label", "rationale")(_text)
    _check_metadata = field_validator("metadata")(_json_object)
    _check_time = field_validator("created_at", "updated_at")(_utc)


class Edge(BaseModel):
    """A typed, directed edge between two nodes.

    >>> Edge(from_id="g", to_id="d", type="leads_to").metadata
    {}

    Raises:
        pydantic.ValidationError: a field of the wrong type or an unknown edge type.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    id: str = Field(default_factory=_new_id, min_length=1)
    from_id: str = Field(min_length=1)
    to_id: str = Field(min_length=1)
    type: EdgeType
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: _dt.datetime = Field(default_factory=utc_now)

    _check_text = field_validator("id", "from_id", "to_id")(_text)
    _check_metadata = field_validator("metadata")(_json_object)
    _check_time = field_validator("created_at")(_utc)


def as_model(model: type[M], value: Any) -> M:
    """``value`` as a ``model`` (``Node`` or ``Edge``): itself, or its fields validated.

    Raises:
        DecisionGraphError: not a ``model`` nor a mapping, or invalid fields.
    """
    if isinstance(value, model):
        return value
    if not isinstance(value, Mapping):
        raise DecisionGraphError(f"expected a {model.__name__} or a mapping, not {value!r}")
    try:
        return model.model_validate(dict(value))
    except ValidationError as exc:
        raise DecisionGraphError(f"invalid {model.__name__}: {exc}") from exc


def _stored(model: type[M], values: dict[str, Any]) -> M:
    # What BaseModel.model_construct does, minus its per-call bookkeeping: rows come from the
    # store, written from validated models, so they are not validated again (see
    # node_from_row for the checks that remain). Every field is given.
    obj = _new(model)
    _set(obj, "__dict__", values)
    _set(obj, "__pydantic_fields_set__", set(values))
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj


_NODE_FIELDS = frozenset(Node.model_fields)


def node_from_row(row: Row) -> Node:
    """The node of a row of the shipped node queries (``?id ?type ?label ?status`` …).

    Raises:
        DecisionGraphError: the row does not make a node.
    """
    confidence = row.get("confidence")
    rationale = row.get("rationale")
    metadata = row.get("metadata")
    try:
        return _stored(
            Node,
            {
                "id": row["id"].value,
                "type": _TYPE_OF_CLASS[row["type"].value],
                "label": row["label"].value,
                "status": _STATUS_OF_IRI[row["status"].value],
                "confidence": None if confidence is None else float(confidence.value),
                "rationale": None if rationale is None else rationale.value,
                "metadata": {} if metadata is None else json.loads(metadata.value),
                "created_at": q.parse_datetime(row["created"].value),
                "updated_at": q.parse_datetime(row["updated"].value),
            },
        )
    except (KeyError, ValueError) as exc:
        raise DecisionGraphError(f"stored node {row['id'].value!r} is malformed: {exc}") from exc


def edge_from_row(row: Row) -> Edge:
    """The edge of a row of the ``decision_edges`` query.

    Raises:
        DecisionGraphError: the row does not make an edge.
    """
    metadata = row.get("metadata")
    try:
        return _stored(
            Edge,
            {
                "id": row["id"].value,
                "from_id": row["from_id"].value,
                "to_id": row["to_id"].value,
                "type": _EDGE_TYPE_OF[row["type"].value],
                "metadata": {} if metadata is None else json.loads(metadata.value),
                "created_at": q.parse_datetime(row["created"].value),
            },
        )
    except (KeyError, ValueError) as exc:
        raise DecisionGraphError(f"stored edge {row['id'].value!r} is malformed: {exc}") from exc


def node_age(node: Node) -> tuple[_dt.datetime, str]:
    """The order of creation: oldest first, ties (none from one process) broken by id."""
    return (node.created_at, node.id)


def copy_node(node: Node) -> Node:
    """A copy of ``node`` whose fields and metadata may be changed freely (an index keeps
    the original): its own ``__dict__``, metadata and set of fields. Built in line (a query
    of the index hands out thousands: ``active_goals``), with the fewest objects the
    collector tracks: an empty metadata is a new ``{}``, not a deep copy."""
    obj = _new(Node)
    fields = node.__dict__.copy()
    metadata = fields["metadata"]
    fields["metadata"] = deepcopy(metadata) if metadata else {}
    _set(obj, "__dict__", fields)
    _set(obj, "__pydantic_fields_set__", set(_NODE_FIELDS))
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj
