"""rdfmem's errors: one root, translated at the backend boundary.

The tree::

    RdfMemError
    ├── StoreError                   .reason is one of the Dagonizer classifications
    │   ├── IncompatibleSnapshot     INCOMPATIBLE_SNAPSHOT  (expected/actual type, version)
    │   ├── KeyNotFound              KEY_NOT_FOUND          (key)
    │   ├── BackingError             BACKING_ERROR          (cause)
    │   │   └── StoreAlreadyOpen     the on-disk store is locked by another open store
    │   ├── LeaseDenied              LEASE_DENIED           (subject, holder)
    │   ├── LeaseExpired             LEASE_EXPIRED          (subject, token)
    │   └── Unreachable              UNREACHABLE            (endpoint, cause)
    ├── InvalidKey                   (also ValueError) a key that is empty or not text
    ├── InvalidValue                 (also ValueError) a value that is not JSON
    ├── InvalidTerm                  (also ValueError) a term, variable or pattern that is not RDF
    ├── QueryError                   (also ValueError) SPARQL that does not parse or fails
    │   └── NetworkAccessRefused     SERVICE / LOAD, which would reach the network, not allowed
    ├── FormatError                  (also ValueError) RDF input that does not parse, unknown format
    ├── SchemaError                  (also ValueError) a TypedStore key or value outside the schema
    ├── NodeNotFound                 (also KeyError) decision graph: no such node
    ├── DecisionGraphError           (also ValueError) duplicate id, dangling edge, bad parameters
    ├── NotAGeneralisation           (also ValueError) text without the GEN|v1| header
    ├── GeneralisationParseError     (also ValueError) a malformed GEN|v1| header (.field)
    ├── GeneralisationNotFound       (also KeyError)
    ├── InvalidTitle                 (also ValueError) a title breaking the rules (.reasons)
    ├── MemoryNotFound               (also KeyError)
    ├── MemoryScopeError             (also ValueError) a scope that is not available (no project…)
    ├── CheckpointError              (also ValueError) malformed, or stores missing (.missing)
    ├── HistoryUnavailable           history asked of a store that keeps none (history=False)
    │   raised by the surfaces:
    ├── ServerConfigError            (also ValueError) rdfmem serve options that do not fit
    ├── HttpError                    a request the endpoint refuses (.status, .message)
    ├── Busy                         every query worker taken, the waiting line full
    ├── TimedOut                     a query past its time limit
    ├── ChildFailed                  (also RuntimeError) an isolated query's process died
    ├── QueryTimedOut                MCP sparql_query past its time limit
    ├── KnowledgeGraphError          (also ValueError) MCP knowledge graph: a missing entity
    └── ToolInputError               (also ValueError) MCP tool arguments outside the schema

Backends translate their libraries' exceptions (pyoxigraph ``SyntaxError``/``OSError``,
rdflib parse errors, httpx errors) into these with ``raise … from exc``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "Busy",
    "ChildFailed",
    "HttpError",
    "KnowledgeGraphError",
    "QueryTimedOut",
    "ServerConfigError",
    "TimedOut",
    "ToolInputError",
    "BackingError",
    "CheckpointError",
    "HistoryUnavailable",
    "DecisionGraphError",
    "FormatError",
    "GeneralisationNotFound",
    "GeneralisationParseError",
    "IncompatibleSnapshot",
    "InvalidKey",
    "InvalidTerm",
    "InvalidTitle",
    "InvalidValue",
    "KeyNotFound",
    "LeaseDenied",
    "LeaseExpired",
    "MemoryScopeError",
    "MemoryNotFound",
    "NetworkAccessRefused",
    "NodeNotFound",
    "NotAGeneralisation",
    "QueryError",
    "RdfMemError",
    "SchemaError",
    "StoreAlreadyOpen",
    "StoreError",
    "Unreachable",
]


class RdfMemError(Exception):
    """The root of every error rdfmem raises on purpose."""


class StoreError(RdfMemError):
    """A classified store failure; ``reason`` says which, the fields say what.

    >>> err = KeyNotFound("todo")
    >>> (err.reason, err.key)
    ('KEY_NOT_FOUND', 'todo')
    """

    reason: str = "BACKING_ERROR"

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.fields = fields
        for name, value in fields.items():
            setattr(self, name, value)


class IncompatibleSnapshot(StoreError):
    """A snapshot whose type or version (or shape) this store cannot restore."""

    reason = "INCOMPATIBLE_SNAPSHOT"
    expected_type: str
    expected_version: int
    actual_type: object
    actual_version: object

    def __init__(
        self,
        message: str,
        *,
        expected_type: str,
        expected_version: int,
        actual_type: object,
        actual_version: object,
    ) -> None:
        super().__init__(
            message,
            expected_type=expected_type,
            expected_version=expected_version,
            actual_type=actual_type,
            actual_version=actual_version,
        )


class KeyNotFound(StoreError, KeyError):
    """A key that a caller required is absent."""

    reason = "KEY_NOT_FOUND"
    key: str

    def __init__(self, key: str) -> None:
        super().__init__(f"no entry for key {key!r}", key=key)

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class BackingError(StoreError):
    """The backing store failed (I/O, lock, corrupt data); ``cause`` says how."""

    reason = "BACKING_ERROR"
    cause: object

    def __init__(self, message: str, *, cause: object = None) -> None:
        super().__init__(message, cause=cause)


class StoreAlreadyOpen(BackingError):
    """The on-disk store at this path is already open (in this or another process)."""


class LeaseDenied(StoreError):
    """Another holder kept the lease for longer than the caller would wait."""

    reason = "LEASE_DENIED"
    subject: str
    holder: str

    def __init__(self, message: str, *, subject: str, holder: str) -> None:
        super().__init__(message, subject=subject, holder=holder)


class LeaseExpired(StoreError):
    """A write or release was attempted with a lease token that has expired."""

    reason = "LEASE_EXPIRED"
    subject: str
    token: str

    def __init__(self, message: str, *, subject: str, token: str) -> None:
        super().__init__(message, subject=subject, token=token)


class Unreachable(StoreError):
    """The remote endpoint did not answer (refused, timed out, dropped)."""

    reason = "UNREACHABLE"
    endpoint: str
    cause: object

    def __init__(self, message: str, *, endpoint: str, cause: object = None) -> None:
        super().__init__(message, endpoint=endpoint, cause=cause)


class InvalidKey(RdfMemError, ValueError):
    """A key/value key that rdfmem cannot store (empty, not a str, not valid Unicode)."""


class InvalidValue(RdfMemError, ValueError):
    """A value that is not JSON (NaN, a set, a dict with non-str keys, an object …)."""


class InvalidTerm(RdfMemError, ValueError):
    """Something that is not an RDF term, variable or pattern where one is needed."""


class QueryError(RdfMemError, ValueError):
    """SPARQL that does not parse, or fails while running; the message says where."""


class NetworkAccessRefused(QueryError):
    """SPARQL that would make the engine reach the network (``SERVICE``, ``LOAD``), sent
    without ``allow_network=True`` (or to a backend that never fetches); nothing ran.

    >>> from rdfmem import RdfStore
    >>> RdfStore().query("SELECT * { SERVICE <http://example.org/sparql> { ?s ?p ?o } }")
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    rdfmem.core.errors.NetworkAccessRefused: SERVICE at line 1, column 12 would reach the ...
    """


class FormatError(RdfMemError, ValueError):
    """RDF or results input that does not parse, or a format rdfmem does not know."""


class SchemaError(RdfMemError, ValueError):
    """A TypedStore key outside its schema, or a value that fails validation."""


class NodeNotFound(RdfMemError, KeyError):
    """No decision-graph node has this id."""

    def __init__(self, node_id: str) -> None:
        super().__init__(f"no node with id {node_id!r}")
        self.node_id = node_id

    def __str__(self) -> str:
        return str(self.args[0])


class DecisionGraphError(RdfMemError, ValueError):
    """A decision-graph operation that would break the graph (duplicate id, dangling edge)."""


class NotAGeneralisation(RdfMemError, ValueError):
    """Text that is not in the ``GEN|v1|`` wire format at all."""


class GeneralisationParseError(RdfMemError, ValueError):
    """A ``GEN|v1|`` header that is malformed; ``field`` names the culprit when one is."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class GeneralisationNotFound(RdfMemError, KeyError):
    """No generalisation with this id in the group."""

    def __str__(self) -> str:
        return str(self.args[0])


class InvalidTitle(RdfMemError, ValueError):
    """A memory title that breaks the title rules; ``reasons`` lists every rule broken."""

    def __init__(self, title: str, reasons: list[str]) -> None:
        super().__init__(f"invalid memory title {title!r}: " + "; ".join(reasons))
        self.title = title
        self.reasons = reasons


class MemoryNotFound(RdfMemError, KeyError):
    """No memory with this title in the scope."""

    def __str__(self) -> str:
        return str(self.args[0])


class MemoryScopeError(RdfMemError, ValueError):
    """A memory scope that is unknown or not available (project scope with no project …)."""


class HistoryUnavailable(RdfMemError):
    """A read of the past (``history``, ``as_of``) on a store that keeps no history: open
    it with ``history=True`` (``RdfStore(history=True)``, ``RdfStore.open(path,
    history=True)``, ``RdfStore.connect(..., history=True)``)."""


class CheckpointError(RdfMemError, ValueError):
    """A malformed checkpoint, or a restore map missing stores (``missing`` lists them)."""

    def __init__(self, message: str, *, missing: list[str] | None = None) -> None:
        super().__init__(message)
        self.missing = missing or []


# -- raised by the surfaces ------------------------------------------------------------------


class ServerConfigError(RdfMemError, ValueError):
    """``rdfmem serve`` options that do not fit together (updates allowed without a token …)."""


class HttpError(RdfMemError):
    """A request the SPARQL endpoint refuses: ``status`` and a message for the client."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


class Busy(RdfMemError):
    """Every query worker is taken and the waiting line is full, or none came free in time."""


class TimedOut(RdfMemError):
    """A query did not finish within its time limit (it may still be running)."""


class ChildFailed(RdfMemError, RuntimeError):
    """An isolated query's child process died without an answer (killed, out of memory …)."""


class QueryTimedOut(RdfMemError):
    """An MCP ``sparql_query`` ran longer than the server's time limit."""


class KnowledgeGraphError(RdfMemError, ValueError):
    """A knowledge graph call that cannot be done (a missing entity); nothing was written."""


class ToolInputError(RdfMemError, ValueError):
    """MCP tool arguments that do not fit the tool's input schema or the server's limits."""
