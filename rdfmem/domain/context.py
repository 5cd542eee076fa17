"""Context updates (from Nous.Tool.ContextUpdate): set / merge / append / delete as data.

A tool returns a ``ContextUpdate`` next to its result; the runner applies it to the agent's
context, which is either a plain dict (a new dict comes back, the input untouched) or a
store, where every operation of one update lands together in one atomic step.

>>> update = ContextUpdate().set("todos", ["write"]).append("todos", "test")
>>> update.apply({"budget": 10})
{'budget': 10, 'todos': ['write', 'test']}

Operations are applied in insertion order by one pure function (``apply_operations``),
shared by the dict and the store paths so the two can never disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeAlias

from rdfmem.core.errors import InvalidValue, SchemaError
from rdfmem.core.keys import check_json, check_key

if TYPE_CHECKING:
    from rdfmem.store.rdfstore import RdfStore
    from rdfmem.store.typed import TypedStore

__all__ = [
    "AppendOp",
    "ContextUpdate",
    "DeleteOp",
    "MergeOp",
    "Operation",
    "SetOp",
    "apply_operations",
    "deep_merge",
]


class SetOp(NamedTuple):
    """``("set", key, value)``: replace the key's value."""

    op: Literal["set"]
    key: str
    value: Any


class MergeOp(NamedTuple):
    """``("merge", key, mapping)``: deep-merge a mapping into the key's value."""

    op: Literal["merge"]
    key: str
    value: Mapping[str, Any]


class AppendOp(NamedTuple):
    """``("append", key, item)``: append an item to the key's list."""

    op: Literal["append"]
    key: str
    value: Any


class DeleteOp(NamedTuple):
    """``("delete", key)``: remove the key."""

    op: Literal["delete"]
    key: str


Operation: TypeAlias = SetOp | MergeOp | AppendOp | DeleteOp


class ContextUpdate:
    """An immutable, ordered list of context operations; each builder returns a new update.

    >>> base = ContextUpdate().set("user", "ada")
    >>> more = base.merge("settings", {"theme": "dark"}).delete("scratch")
    >>> base.operations
    (SetOp(op='set', key='user', value='ada'),)
    >>> [op[:2] for op in more.operations]
    [('set', 'user'), ('merge', 'settings'), ('delete', 'scratch')]
    >>> ContextUpdate().empty, more.empty
    (True, False)

    Keys are non-empty ``str`` (Nous uses atoms); any other key raises ``InvalidKey`` when
    the operation is added. Values are held by reference, not copied. ``ContextUpdate(ops)``
    rebuilds an update from operations, plain tuples or lists included (for example
    ``operations`` sent through JSON).

    >>> ContextUpdate([["append", "log", "x"], ["delete", "tmp"]]) == ContextUpdate(
    ...     ).append("log", "x").delete("tmp")
    True

    Raises:
        InvalidKey, InvalidValue: ``ContextUpdate(ops)`` with a malformed operation.
    """

    __slots__ = ("_ops",)
    _ops: tuple[Operation, ...]

    def __init__(self, operations: Iterable[Sequence[Any]] = ()) -> None:
        self._ops = tuple(_operation(op) for op in operations)

    def _with(self, op: Operation) -> ContextUpdate:
        new = ContextUpdate.__new__(ContextUpdate)
        new._ops = (*self._ops, op)
        return new

    def set(self, key: str, value: Any) -> ContextUpdate:
        """Replace ``key``'s value.

        Raises:
            InvalidKey: ``key`` is not a non-empty str.
        """
        check_key(key)
        return self._with(SetOp("set", key, value))

    def merge(self, key: str, mapping: Mapping[str, Any]) -> ContextUpdate:
        """Deep-merge ``mapping`` into ``key``'s value (see ``deep_merge``); a missing or
        non-mapping value is replaced by the mapping.

        Raises:
            InvalidKey: ``key`` is not a non-empty str.
            InvalidValue: ``mapping`` is not a mapping.
        """
        check_key(key)
        if not isinstance(mapping, Mapping):
            raise InvalidValue(
                f"merge into {key!r} needs a mapping, not {type(mapping).__name__}: {mapping!r}"
            )
        return self._with(MergeOp("merge", key, mapping))

    def append(self, key: str, item: Any) -> ContextUpdate:
        """Append ``item`` to ``key``'s list; a missing or None value starts a new list.

        Raises:
            InvalidKey: ``key`` is not a non-empty str.
        """
        check_key(key)
        return self._with(AppendOp("append", key, item))

    def delete(self, key: str) -> ContextUpdate:
        """Remove ``key`` (nothing happens when it is absent).

        Raises:
            InvalidKey: ``key`` is not a non-empty str.
        """
        check_key(key)
        return self._with(DeleteOp("delete", key))

    @property
    def operations(self) -> tuple[Operation, ...]:
        """The operations, in the order they will be applied."""
        return self._ops

    @property
    def empty(self) -> bool:
        """True when the update has no operations."""
        return not self._ops

    def _keys(self) -> list[str]:
        """The keys the update touches, each once, in order of first use."""
        return list(dict.fromkeys(op.key for op in self._ops))

    def apply(self, target: Mapping[str, Any] | RdfStore | TypedStore[Any]) -> dict[str, Any]:
        """Apply every operation in order.

        On a mapping: returns a new dict; the input (and every list or dict inside it) is
        left untouched. On an ``RdfStore`` or a ``TypedStore``: one atomic read-modify-write
        of the touched keys (every operation lands, or none does; concurrent applies never
        lose each other's writes); returns ``{key: new value}`` for the touched keys that
        still exist.

        >>> from rdfmem import RdfStore
        >>> store = RdfStore()
        >>> store.set("notes", ["a"])
        >>> ContextUpdate().append("notes", "b").set("n", 1).apply(store)
        {'notes': ['a', 'b'], 'n': 1}
        >>> ContextUpdate().set("n", 2).set("bad", {1, 2}).apply(store)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        rdfmem.core.errors.InvalidValue: operation 2 (set 'bad'): value is a set, which is not ...
        >>> store.get("n")
        1

        Raises:
            InvalidValue: on a store, a value that is not JSON; on any target, an ``append``
                onto a value that is not a list. Nothing is written.
            SchemaError: on a ``TypedStore``, a key outside the schema or a result that
                fails validation. Nothing is written.
            TypeError: ``target`` is neither a mapping nor a store.
        """
        if isinstance(target, Mapping):
            return apply_operations(self._ops, target)
        from rdfmem.store.typed import TypedStore

        if isinstance(target, TypedStore):
            return self._apply_typed(target)
        update_many = getattr(target, "update_many", None)
        if update_many is None:
            raise TypeError(
                f"ContextUpdate.apply needs a mapping or a store, not {type(target).__name__}"
            )
        if not self._ops:
            return {}
        self._check_json()
        ops = self._ops
        result: dict[str, Any] = update_many(
            self._keys(), lambda current: apply_operations(ops, current)
        )
        return result

    async def aapply(
        self, target: Mapping[str, Any] | RdfStore | TypedStore[Any]
    ) -> dict[str, Any]:
        """Async ``apply``: on a store it runs off the event loop, and is still atomic."""

        if isinstance(target, Mapping):
            return apply_operations(self._ops, target)
        return await target.run_async(self.apply, target)

    def _check_json(self) -> None:
        for i, op in enumerate(self._ops, 1):
            if not isinstance(op, DeleteOp):
                try:
                    check_json(deep_merge({}, op.value) if isinstance(op, MergeOp) else op.value)
                except InvalidValue as exc:
                    raise InvalidValue(f"operation {i} ({op.op} {op.key!r}): {exc}") from None

    def _apply_typed(self, typed: TypedStore[Any]) -> dict[str, Any]:
        keys = self._keys()
        unknown = [k for k in keys if k not in typed.schema.model_fields]
        if unknown:
            raise SchemaError(
                f"keys {unknown!r} are not in {typed.schema.__name__} "
                f"(keys: {', '.join(typed.schema.model_fields)})"
            )
        if not self._ops:
            return {}
        self._check_json()
        ops = self._ops

        def step(current: dict[str, Any]) -> dict[str, Any]:
            new = apply_operations(ops, current)
            return {k: typed._dump(k, v) for k, v in new.items()}

        return {k: typed._load(k, v) for k, v in typed.inner.update_many(keys, step).items()}

    def __len__(self) -> int:
        return len(self._ops)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ContextUpdate):
            return NotImplemented
        return self._ops == other._ops

    __hash__ = None  # type: ignore[assignment]  # values may be unhashable

    def __repr__(self) -> str:
        return f"ContextUpdate({list(self._ops)!r})"


_KINDS: dict[str, type[Operation]] = {
    "set": SetOp,
    "merge": MergeOp,
    "append": AppendOp,
    "delete": DeleteOp,
}


def _operation(raw: Sequence[Any]) -> Operation:
    """An operation from its tuple (or list) form, checked like the builder methods do."""
    kind = _KINDS.get(raw[0]) if isinstance(raw, (tuple, list)) and raw else None
    if kind is None or len(raw) != len(kind._fields):
        raise InvalidValue(
            f"not a context operation: {raw!r} (expected ('set', key, value), "
            "('merge', key, mapping), ('append', key, item) or ('delete', key))"
        )
    check_key(raw[1])
    if kind is MergeOp and not isinstance(raw[2], Mapping):
        raise InvalidValue(f"merge into {raw[1]!r} needs a mapping, not {raw[2]!r}")
    return raw if type(raw) is kind else kind(*raw)


def apply_operations(ops: tuple[Operation, ...], context: Mapping[str, Any]) -> dict[str, Any]:
    """The new context after ``ops``, in order; ``context`` itself is never modified.

    Containers along changed paths are copied; values are shared, not deep-copied.

    >>> ops = ContextUpdate().set("xs", [9, 8]).append("xs", 1).operations
    >>> apply_operations(ops, {})
    {'xs': [9, 8, 1]}

    Raises:
        InvalidValue: an ``append`` onto a value that is neither a list nor None.
    """
    result = dict(context)
    owned: set[str] = set()  # keys whose list this call created, so appends may extend it
    for op in ops:
        key = op.key
        if isinstance(op, SetOp):
            result[key] = op.value
            owned.discard(key)
        elif isinstance(op, MergeOp):
            result[key] = deep_merge(result.get(key), op.value)
            owned.discard(key)
        elif isinstance(op, AppendOp):
            if key not in owned:
                existing = result.get(key)
                if existing is None:
                    existing = []
                elif not isinstance(existing, (list, tuple)):
                    raise InvalidValue(
                        f"cannot append to {key!r}: it holds a {type(existing).__name__}, "
                        f"not a list: {existing!r}"
                    )
                result[key] = list(existing)
                owned.add(key)
            result[key].append(op.value)
        else:
            result.pop(key, None)
            owned.discard(key)
    return result


def deep_merge(left: Any, right: Mapping[str, Any]) -> dict[str, Any]:
    """``right`` merged into ``left``: where both hold a mapping under one key, merge them
    again, otherwise ``right``'s value wins. A ``left`` that is not a mapping is replaced.
    Neither argument is modified.

    >>> deep_merge({"ui": {"theme": "light", "font": 12}, "x": 1}, {"ui": {"theme": "dark"}})
    {'ui': {'theme': 'dark', 'font': 12}, 'x': 1}
    >>> deep_merge([1, 2], {"a": 1})
    {'a': 1}
    """
    merged = dict(left) if isinstance(left, Mapping) else {}
    for key, value in right.items():
        # A mapping from ``right`` is copied into a dict even where nothing was there, so
        # the result never shares (or later mutates) the caller's mappings.
        merged[key] = deep_merge(merged.get(key), value) if isinstance(value, Mapping) else value
    return merged
