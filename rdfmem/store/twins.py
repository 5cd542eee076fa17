"""The asyncio twins of the key/value methods, written once over the sync ones.

A twin runs its sync method through the store's async runner (``run_async``: on a thread
for an embedded backend), so the logic exists once. A store whose backend can do better
(``RemoteStore``: the network, without a thread) overrides a twin; nothing here raises
``NotImplementedError``: a class that lacks a sync method cannot be made at all.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

__all__ = ["AsyncKeyValue"]

T = TypeVar("T")


class AsyncKeyValue(ABC):
    """``aget`` … ``aclose`` for any class with the sync key/value methods."""

    @abstractmethod
    def run_async(self, fn: Callable[..., T], *args: Any) -> Awaitable[T]:
        """Run a blocking call without blocking the event loop."""

    @abstractmethod
    def get(self, key: str, default: Any = None, *, as_of: datetime | None = None) -> Any: ...

    @abstractmethod
    def set(self, key: str, value: Any) -> None: ...

    @abstractmethod
    def has(self, key: str) -> bool: ...

    @abstractmethod
    def delete(self, key: str) -> bool: ...

    @abstractmethod
    def update(self, key: str, fn: Callable[[Any], Any]) -> Any: ...

    @abstractmethod
    def update_many(
        self, keys: Iterable[str], fn: Callable[[dict[str, Any]], Mapping[str, Any]]
    ) -> dict[str, Any]: ...

    @abstractmethod
    def keys(self, prefix: str = "", *, as_of: datetime | None = None) -> list[str]: ...

    @abstractmethod
    def snapshot(self) -> dict[str, Any]: ...

    @abstractmethod
    def restore(self, snapshot: Mapping[str, Any]) -> None: ...

    @abstractmethod
    def close(self) -> None: ...

    async def aget(self, key: str, default: Any = None, *, as_of: datetime | None = None) -> Any:
        """Async ``get``."""
        if as_of is not None:
            return await self.run_async(partial(self.get, key, default, as_of=as_of))
        return await self.run_async(self.get, key, default)

    async def aset(self, key: str, value: Any) -> None:
        """Async ``set``."""
        await self.run_async(self.set, key, value)

    async def ahas(self, key: str) -> bool:
        """Async ``has``."""
        return await self.run_async(self.has, key)

    async def adelete(self, key: str) -> bool:
        """Async ``delete``."""
        return await self.run_async(self.delete, key)

    async def aupdate(self, key: str, fn: Callable[[Any], Any]) -> Any:
        """Async ``update``: still atomic against every other writer."""
        return await self.run_async(self.update, key, fn)

    async def aupdate_many(
        self, keys: Iterable[str], fn: Callable[[dict[str, Any]], Mapping[str, Any]]
    ) -> dict[str, Any]:
        """Async ``update_many``: still all or nothing."""
        return await self.run_async(self.update_many, keys, fn)

    async def akeys(self, prefix: str = "", *, as_of: datetime | None = None) -> list[str]:
        """Async ``keys``."""
        if as_of is not None:
            return await self.run_async(partial(self.keys, prefix, as_of=as_of))
        return await self.run_async(self.keys, prefix)

    async def asnapshot(self) -> dict[str, Any]:
        """Async ``snapshot``."""
        return await self.run_async(self.snapshot)

    async def arestore(self, snapshot: Mapping[str, Any]) -> None:
        """Async ``restore``."""
        await self.run_async(self.restore, snapshot)

    async def aclose(self) -> None:
        """Async ``close``."""
        await self.run_async(self.close)
