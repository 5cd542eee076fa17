"""``TypedStore``: a store narrowed to the keys and value types of a pydantic model."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from rdfmem.core.errors import SchemaError
from rdfmem.store.rdfstore import RdfStore
from rdfmem.store.twins import AsyncKeyValue

__all__ = ["TypedStore"]

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


class TypedStore(AsyncKeyValue, Generic[M]):
    """Keys are the fields of ``schema``; values are validated against their types.

    A key outside the schema, or a value that fails validation, raises ``SchemaError``
    before anything is written. ``inner`` is the wrapped store, for the wider contract.

    >>> from pydantic import BaseModel
    >>> class Pipeline(BaseModel):
    ...     tokenBudget: int
    ...     messages: list[str] = []
    >>> typed = TypedStore(RdfStore(), Pipeline)
    >>> typed.set("tokenBudget", 4096)
    >>> typed.update("messages", lambda m: [*(m or []), "hello"])
    ['hello']
    >>> typed.set("tokenBudget", "lots")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rdfmem.core.errors.SchemaError: tokenBudget: Input should be a valid integer...
    """

    def __init__(self, inner: RdfStore, schema: type[M]) -> None:
        self.inner = inner
        self.schema = schema
        self._adapters: dict[str, TypeAdapter[Any]] = {
            # A field without an annotation accepts any JSON value.
            name: TypeAdapter(Any if field.annotation is None else field.annotation)
            for name, field in schema.model_fields.items()
        }

    def _adapter(self, key: str) -> TypeAdapter[Any]:
        try:
            return self._adapters[key]
        except (KeyError, TypeError):
            known = ", ".join(self._adapters)
            raise SchemaError(
                f"key {key!r} is not in {self.schema.__name__} (keys: {known})"
            ) from None

    def _dump(self, key: str, value: Any) -> Any:
        adapter = self._adapter(key)
        try:
            checked = adapter.validate_python(value, strict=False)
        except ValidationError as exc:
            detail = "; ".join(e["msg"] for e in exc.errors())
            raise SchemaError(f"{key}: {detail}") from exc
        return adapter.dump_python(checked, mode="json")

    def _load(self, key: str, raw: Any) -> Any:
        if raw is None:
            return None
        try:
            return self._adapter(key).validate_python(raw)
        except ValidationError as exc:
            raise SchemaError(f"stored value of {key} no longer fits the schema: {exc}") from exc

    def get(self, key: str, default: Any = None, *, as_of: datetime | None = None) -> Any:
        """The validated value of ``key``, or ``default`` (with ``as_of``: at that moment,
        on a store that keeps history)."""
        self._adapter(key)
        if as_of is not None:
            missing = object()
            raw = self.inner.get(key, missing, as_of=as_of)
            return default if raw is missing else self._load(key, raw)
        if not self.inner.has(key):
            return default
        return self._load(key, self.inner.get(key))

    def set(self, key: str, value: Any) -> None:
        """Validate, then store.

        Raises:
            SchemaError: unknown key or invalid value; nothing is written.
        """
        self.inner.set(key, self._dump(key, value))

    def has(self, key: str) -> bool:
        self._adapter(key)
        return self.inner.has(key)

    def delete(self, key: str) -> bool:
        self._adapter(key)
        return self.inner.delete(key)

    def update(self, key: str, fn: Callable[[Any], Any]) -> Any:
        """Atomic read-modify-write; the new value is validated before it is written."""
        self._adapter(key)
        result: list[Any] = []

        def step(raw: Any) -> Any:
            new = fn(self._load(key, raw))
            dumped = self._dump(key, new)
            result.append(self._load(key, dumped))
            return dumped

        self.inner.update(key, step)
        return result[-1]

    def update_many(
        self, keys: Iterable[str], fn: Callable[[dict[str, Any]], Mapping[str, Any]]
    ) -> dict[str, Any]:
        """Atomic read-modify-write of several schema keys; every new value is validated
        before anything is written (``RdfStore.update_many``).

        Raises:
            SchemaError: a key outside the schema, or a value that fails it; nothing is
                written.
        """
        if isinstance(keys, str):
            raise SchemaError("update_many takes an iterable of keys, not one str")
        names = list(dict.fromkeys(keys))
        for key in names:
            self._adapter(key)
        result: dict[str, Any] = {}

        def step(raw: dict[str, Any]) -> dict[str, Any]:
            current = {k: self._load(k, v) for k, v in raw.items()}
            new = dict(fn(current))
            dumped = {k: self._dump(k, v) for k, v in new.items()}
            result.clear()
            result.update({k: self._load(k, v) for k, v in dumped.items()})
            return dumped

        self.inner.update_many(names, step)
        return dict(result)

    def keys(self, prefix: str = "", *, as_of: datetime | None = None) -> list[str]:
        return [k for k in self.inner.keys(prefix, as_of=as_of) if k in self._adapters]

    def snapshot(self) -> dict[str, Any]:
        return self.inner.snapshot()

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Replace the entries with the snapshot's, after checking each against the schema.

        Raises:
            SchemaError: an entry whose key is outside the schema or whose value fails it;
                nothing is changed.
            IncompatibleSnapshot: as ``RdfStore.restore``.
        """
        entries = snapshot.get("entries") if isinstance(snapshot, Mapping) else None
        if isinstance(entries, list):
            for entry in entries:
                if isinstance(entry, Mapping) and "key" in entry and "value" in entry:
                    if entry["value"] is not None:
                        self._dump(entry["key"], entry["value"])
                    else:
                        self._adapter(entry["key"])
        self.inner.restore(snapshot)

    def close(self) -> None:
        self.inner.close()

    def run_async(self, fn: Callable[..., T], *args: Any) -> Awaitable[T]:
        """Run a blocking call without blocking the event loop (``RdfStore.run_async``)."""
        return self.inner.run_async(fn, *args)
