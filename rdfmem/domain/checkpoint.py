"""Checkpoints (from the Dagonizer Checkpoint): an agent's state and several stores, together.

``Checkpoint.capture`` snapshots every named store (concurrently) next to a JSON ``state``;
``to_json``/``Checkpoint.load`` and ``save``/``Checkpoint.open`` move it around;
``restore_stores`` puts the snapshots back into fresh stores.

>>> from rdfmem import RdfStore
>>> memory, audit = RdfStore(), RdfStore()
>>> memory.set("facts", ["sky is blue"])
>>> ckpt = Checkpoint.capture("triage", {"step": 3}, stores={"memory": memory, "audit": audit})
>>> again = Checkpoint.load(ckpt.to_json())
>>> fresh = RdfStore()
>>> again.restore_stores({"memory": fresh, "audit": RdfStore(), "extra": RdfStore()})
>>> fresh.get("facts"), again.state
(['sky is blue'], {'step': 3})

The JSON form::

    {"type": "rdfmem-checkpoint-v1", "version": 1, "name": "triage",
     "created_at": "2025-01-01T12:00:00Z", "state": {...},
     "stores": {"memory": {"version": 1, "type": "rdfmem-store-v1", "entries": [...]}}}

A store is anything with ``snapshot()`` and ``restore(snapshot)`` (``RdfStore``,
``TypedStore`` or your own); the store, not the checkpoint, judges whether it can restore a
snapshot, so ``IncompatibleSnapshot`` comes from ``restore_stores``, not from ``load``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import stat
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Protocol

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from rdfmem.core.errors import BackingError, CheckpointError, InvalidValue
from rdfmem.core.keys import check_json

__all__ = [
    "CHECKPOINT_TYPE",
    "CHECKPOINT_VERSION",
    "Checkpoint",
    "CheckpointData",
    "Snapshottable",
]

CHECKPOINT_TYPE: Final = "rdfmem-checkpoint-v1"
CHECKPOINT_VERSION: Final = 1
_MAX_THREADS = 8


class Snapshottable(Protocol):
    """What a checkpoint needs of a store: ``RdfStore`` and ``TypedStore`` both qualify."""

    def snapshot(self) -> dict[str, Any]: ...

    def restore(self, snapshot: dict[str, Any]) -> None: ...


class CheckpointData(BaseModel):
    """The validated JSON form of a checkpoint (``CheckpointData.model_json_schema()``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["rdfmem-checkpoint-v1"]
    version: Literal[1]
    name: str = Field(min_length=1)
    created_at: AwareDatetime
    state: Any
    stores: dict[Annotated[str, Field(min_length=1)], dict[str, Any]]


class Checkpoint:
    """An immutable checkpoint: ``name``, ``created_at``, ``state`` and store snapshots.

    Build one with ``capture`` (or ``acapture``), ``load`` or ``open``.
    """

    __slots__ = ("_data",)

    def __init__(self, data: CheckpointData) -> None:
        self._data = data

    # -- making one ------------------------------------------------------------------------

    @classmethod
    def capture(
        cls, name: str, state: Any = None, *, stores: Mapping[str, Snapshottable] | None = None
    ) -> Checkpoint:
        """Snapshot every store in ``stores`` (concurrently, in a small thread pool) with
        ``state``. Each snapshot is consistent on its own; the stores are read at about the
        same moment, not in one transaction.

        Raises:
            CheckpointError: an empty name, a store name that is not a non-empty str, a
                store without ``snapshot()``, or a ``state`` (or snapshot) that is not JSON.
            StoreError: a store failed to take its snapshot.
        """
        named = _check_capture(name, state, stores)
        if len(named) <= 1:
            snapshots = [store.snapshot() for store in named.values()]
        else:
            with ThreadPoolExecutor(min(len(named), _MAX_THREADS)) as pool:
                snapshots = list(pool.map(lambda store: store.snapshot(), named.values()))
        return cls._build(name, state, dict(zip(named, snapshots, strict=True)))

    @classmethod
    async def acapture(
        cls, name: str, state: Any = None, *, stores: Mapping[str, Snapshottable] | None = None
    ) -> Checkpoint:
        """Async ``capture``: every store's ``asnapshot()`` (or ``snapshot()`` in a thread)
        runs concurrently.

        Raises:
            CheckpointError, StoreError: as ``capture``.
        """
        named = _check_capture(name, state, stores)
        snapshots = await asyncio.gather(*(_async_call(s, "snapshot") for s in named.values()))
        return cls._build(name, state, dict(zip(named, snapshots, strict=True)))

    @classmethod
    def _build(cls, name: str, state: Any, snapshots: dict[str, Any]) -> Checkpoint:
        for store_name, snapshot in snapshots.items():
            if not isinstance(snapshot, dict):
                raise CheckpointError(
                    f"store {store_name!r} returned a snapshot that is not a dict: {snapshot!r}"
                )
            _check_json(snapshot, f"the snapshot of store {store_name!r}")
        return cls(
            CheckpointData(
                type=CHECKPOINT_TYPE,
                version=CHECKPOINT_VERSION,
                name=name,
                created_at=datetime.now(timezone.utc),
                state=copy.deepcopy(state),
                stores=snapshots,
            )
        )

    @classmethod
    def load(cls, data: str | bytes | Mapping[str, Any]) -> Checkpoint:
        """A checkpoint from its JSON text or the parsed JSON (a mapping), validated.

        >>> Checkpoint.load('{"type": "rdfmem-checkpoint-v1", "version": 1, "name": ""}')
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        rdfmem.core.errors.CheckpointError: malformed checkpoint: name: String should have at ...

        Raises:
            CheckpointError: the text is not JSON, or the data is not a checkpoint this
                rdfmem reads (wrong type or version, missing or mistyped fields, a value
                that is not JSON); the message lists every problem.
        """
        if isinstance(data, (str, bytes, bytearray)):
            try:
                parsed = json.loads(data, parse_constant=_reject_constant)
            except (ValueError, TypeError) as exc:  # JSONDecodeError, UnicodeDecodeError
                raise CheckpointError(f"a checkpoint must be JSON: {exc}") from exc
            return cls._validate(parsed, checked=True)
        return cls._validate(data, checked=False)

    @classmethod
    def _validate(cls, raw: object, *, checked: bool) -> Checkpoint:
        if not isinstance(raw, Mapping):
            raise CheckpointError(f"a checkpoint is a JSON object, not {type(raw).__name__}")
        kind, version = raw.get("type"), raw.get("version")
        if kind != CHECKPOINT_TYPE:
            raise CheckpointError(
                f"not an rdfmem checkpoint: type is {kind!r}, expected {CHECKPOINT_TYPE!r}"
            )
        if type(version) is not int or version != CHECKPOINT_VERSION:
            raise CheckpointError(
                f"checkpoint version {version!r} cannot be read: this rdfmem reads version "
                f"{CHECKPOINT_VERSION}"
            )
        try:
            data = CheckpointData.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                ".".join(str(part) for part in error["loc"]) + ": " + error["msg"]
                for error in exc.errors()
            )
            raise CheckpointError(f"malformed checkpoint: {problems}") from None
        if not checked:  # parsed JSON text is JSON already; a Python mapping may not be
            _check_json(data.state, "state")
            for store_name, snapshot in data.stores.items():
                _check_json(snapshot, f"the snapshot of store {store_name!r}")
            # The caller keeps its mapping: later changes to it must not reach the checkpoint.
            data = data.model_copy(
                update={"state": copy.deepcopy(data.state), "stores": copy.deepcopy(data.stores)}
            )
        return cls(data)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Checkpoint:
        """Read a checkpoint written by ``save``.

        Raises:
            CheckpointError: the file is missing or unreadable, or holds no valid checkpoint.
        """
        try:
            text = Path(path).read_bytes()
        except OSError as exc:
            raise CheckpointError(f"cannot read a checkpoint from {path}: {exc}") from exc
        try:
            return cls.load(text)
        except CheckpointError as exc:
            raise CheckpointError(f"{path}: {exc}") from exc

    @classmethod
    async def aopen(cls, path: str | os.PathLike[str]) -> Checkpoint:
        """Async ``open``, off the event loop."""
        return await asyncio.to_thread(cls.open, path)

    # -- reading it ------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The name given at capture (Dagonizer's DAG name)."""
        return self._data.name

    @property
    def created_at(self) -> datetime:
        """When it was captured (UTC)."""
        return self._data.created_at

    @property
    def state(self) -> Any:
        """The captured state (a fresh copy on every read)."""
        return copy.deepcopy(self._data.state)

    @property
    def store_names(self) -> list[str]:
        """The names of the captured stores, in capture order."""
        return list(self._data.stores)

    @property
    def snapshots(self) -> dict[str, dict[str, Any]]:
        """Store name to snapshot (a fresh copy)."""
        return copy.deepcopy(self._data.stores)

    @property
    def data(self) -> CheckpointData:
        """The validated model behind this checkpoint."""
        return self._data

    def to_dict(self) -> dict[str, Any]:
        """The JSON form as Python data (what ``load`` accepts)."""
        d = self._data
        return {
            "type": d.type,
            "version": d.version,
            "name": d.name,
            "created_at": _iso(d.created_at),
            "state": copy.deepcopy(d.state),
            "stores": copy.deepcopy(d.stores),
        }

    def to_json(self, *, indent: int | None = None) -> str:
        """The JSON text (what ``load`` and ``open`` read)."""
        d = self._data
        form = {
            "type": d.type,
            "version": d.version,
            "name": d.name,
            "created_at": _iso(d.created_at),
            "state": d.state,
            "stores": d.stores,
        }
        text = json.dumps(form, ensure_ascii=False, allow_nan=False, indent=indent)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: only \u escapes can carry them
            text = json.dumps(form, allow_nan=False, indent=indent)
        return text

    # -- putting it back -------------------------------------------------------------------

    def restore_stores(self, stores: Mapping[str, Snapshottable]) -> None:
        """Restore every captured store into the store of the same name in ``stores``.

        All or nothing: when one store refuses its snapshot, the stores already restored
        are put back as they were (each is snapshotted just before its restore). Stores
        in ``stores`` that the checkpoint does not name are left alone.

        Raises:
            CheckpointError: stores named in the checkpoint are missing from ``stores``
                (``.missing`` lists every one) or have no ``restore``; nothing is touched.
            IncompatibleSnapshot: a store cannot read its snapshot (type or version).
        """
        targets = self._targets(stores)
        done: list[tuple[Snapshottable, dict[str, Any]]] = []
        try:
            for name, store in targets.items():
                before = store.snapshot()
                store.restore(copy.deepcopy(self._data.stores[name]))
                done.append((store, before))
        except BaseException:
            for store, before in reversed(done):
                store.restore(before)
            raise

    async def arestore_stores(self, stores: Mapping[str, Snapshottable]) -> None:
        """Async ``restore_stores`` (``asnapshot``/``arestore`` when the stores have them).

        Raises:
            CheckpointError, IncompatibleSnapshot: as ``restore_stores``.
        """
        targets = self._targets(stores)
        done: list[tuple[Snapshottable, dict[str, Any]]] = []
        try:
            for name, store in targets.items():
                before = await _async_call(store, "snapshot")
                await _async_call(store, "restore", copy.deepcopy(self._data.stores[name]))
                done.append((store, before))
        except BaseException:
            for store, before in reversed(done):
                await _async_call(store, "restore", before)
            raise

    def _targets(self, stores: Mapping[str, Snapshottable]) -> dict[str, Snapshottable]:
        if not isinstance(stores, Mapping):
            raise CheckpointError(f"stores must be a mapping of name to store, not {stores!r}")
        missing = [name for name in self._data.stores if name not in stores]
        if missing:
            raise CheckpointError(
                f"checkpoint {self.name!r} needs stores that were not given: "
                + ", ".join(repr(name) for name in missing),
                missing=missing,
            )
        targets = {name: stores[name] for name in self._data.stores}
        for name, store in targets.items():
            if not callable(getattr(store, "restore", None)) or not callable(
                getattr(store, "snapshot", None)
            ):
                raise CheckpointError(
                    f"store {name!r} has no snapshot()/restore(): {type(store).__name__}"
                )
        return targets

    # -- files -----------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the JSON text to ``path`` atomically: a reader sees the old file or the new
        one, never a half-written one (temp file in the same folder, fsync, rename).
        Returns the path.

        Raises:
            BackingError: the file cannot be written (``cause`` says why); any file already
                at ``path`` is left as it was.
        """
        target = Path(path)
        _atomic_write(target, self.to_json().encode("utf-8"))
        return target

    async def asave(self, path: str | os.PathLike[str]) -> Path:
        """Async ``save``, off the event loop."""
        return await asyncio.to_thread(self.save, path)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Checkpoint):
            return NotImplemented
        return self._data == other._data

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Checkpoint(name={self.name!r}, created_at={_iso(self.created_at)!r}, "
            f"stores={self.store_names!r})"
        )


def _check_capture(
    name: object, state: object, stores: Mapping[str, Snapshottable] | None
) -> dict[str, Snapshottable]:
    if not isinstance(name, str) or not name:
        raise CheckpointError(f"a checkpoint name must be a non-empty str, not {name!r}")
    _check_json(state, "state")
    if stores is None:
        return {}
    if not isinstance(stores, Mapping):
        raise CheckpointError(f"stores must be a mapping of name to store, not {stores!r}")
    for store_name, store in stores.items():
        if not isinstance(store_name, str) or not store_name:
            raise CheckpointError(f"a store name must be a non-empty str, not {store_name!r}")
        if not callable(getattr(store, "snapshot", None)):
            raise CheckpointError(f"store {store_name!r} has no snapshot(): {type(store).__name__}")
    return dict(stores)


def _check_json(value: object, what: str) -> None:
    try:
        check_json(value, what)
    except InvalidValue as exc:
        raise CheckpointError(f"a checkpoint holds only JSON: {exc}") from exc


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


async def _async_call(store: Any, method: str, *args: Any) -> Any:
    """``store.a<method>(*args)`` when the store has it, else ``<method>`` in a thread."""
    twin: Callable[..., Awaitable[Any]] | None = getattr(store, "a" + method, None)
    if twin is not None:
        return await twin(*args)
    return await asyncio.to_thread(getattr(store, method), *args)


def _atomic_write(path: Path, data: bytes) -> None:
    folder = path.parent
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise BackingError(f"cannot write a checkpoint in {folder}: {exc}", cause=exc) from exc
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        # Keep the permissions of the file being replaced (mkstemp makes it 0600).
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise BackingError(f"cannot write a checkpoint to {path}: {exc}", cause=exc) from exc
        raise
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable (POSIX)
        try:
            dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return
        try:
            with contextlib.suppress(OSError):
                os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
