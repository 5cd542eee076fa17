"""Read-side indexes that survive a restart, in a file in the on-disk store's folder:
written when the store's owner closes, taken back when the store is opened next, never
trusted otherwise (the indexes themselves: ``rdfmem.store.indexes.hub``).

The rule that keeps them right: **the index file is consumed when the store is opened.**
``OxigraphBackend`` reads ``rdfmem.indexes`` from the store's folder and removes it before
anything can write (``take``); the hub of the ``RdfStore`` made on that backend loads the
indexes from those bytes. A clean ``close`` writes the file again (``keep``), holding only
the indexes that were fresh at the last write, after the last write. So the file exists
only while the store is closed and unchanged since it was written by rdfmem: a process
killed at any point leaves no file (the next open rebuilds, as on a first open), and a
write after the file was taken can never meet it.

A program other than rdfmem opening the store's files while it is closed (raw pyoxigraph,
an older rdfmem) changes them: RocksDB writes a new manifest, options and log on every open.
The file records a fingerprint of the folder (each file's name, size and modification
time) taken after the store was closed, and an open compares it with the fingerprint taken
before it opens the files: any other drops the saved indexes.

The file is a pickle of rdfmem's own index objects (numpy arrays inside), written with mode
0600 by the store's owner. It is loaded only when it is owned by this user and writable by
no one else (a pickle can run code: a file others could write is not read). Its header
names the format version and the rdfmem version: any other is dropped.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import stat
from pathlib import Path
from typing import Any

__all__ = ["INDEX_FILE", "fingerprint", "keep", "take", "unpack"]

INDEX_FILE = "rdfmem.indexes"
_MAGIC = b"rdfmem-indexes\n"
_FORMAT = 2


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("rdfmem")
    except Exception:  # a checkout that is not installed
        return "0"


def fingerprint(folder: str | os.PathLike[str]) -> str:
    """The names, sizes and modification times of the store's own files in ``folder``
    (rdfmem's files left out), as one text; empty when the folder cannot be read."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
        parts = []
        for entry in entries:
            if entry.name.startswith(("rdfmem.", ".rdfmem.")):
                continue
            info = entry.stat(follow_symlinks=False)
            parts.append(f"{entry.name}:{info.st_size}:{info.st_mtime_ns}")
        return "|".join(parts)
    except OSError:
        return ""


def take(folder: str | os.PathLike[str]) -> bytes | None:
    """The bytes of the index file in ``folder``, removed from the folder (None when there
    is none, or it is not this user's alone)."""
    path = Path(folder) / INDEX_FILE
    try:
        info = os.lstat(path)
    except OSError:
        return None
    try:
        usable = (
            stat.S_ISREG(info.st_mode)
            and info.st_uid == os.getuid()
            and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        )
        return path.read_bytes() if usable else None
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            path.unlink()


def unpack(data: bytes | None, seen: str) -> dict[str, Any] | None:
    """The saved indexes in ``data`` (as ``keep`` wrote them), or None when absent, of
    another format or rdfmem version, or written over files whose fingerprint is not
    ``seen`` (judged on the header, before anything is unpickled)."""
    if not data or not data.startswith(_MAGIC) or not seen:
        return None
    end = data.find(b"\n", len(_MAGIC))
    try:
        header = json.loads(data[len(_MAGIC) : end])
    except ValueError:
        return None
    if header != {"format": _FORMAT, "rdfmem": _version(), "files": seen}:
        return None
    try:
        saved = pickle.loads(data[end + 1 :])  # this user's own file alone (take)
    except Exception:  # a torn file: rebuild
        return None
    return saved if isinstance(saved, dict) else None


def keep(folder: str | os.PathLike[str], indexes: dict[str, Any]) -> int:
    """Write ``indexes`` to the index file in ``folder`` (atomically, mode 0600), with the
    fingerprint of the closed store's files; returns the bytes written."""
    path = Path(folder) / INDEX_FILE
    header = {"format": _FORMAT, "rdfmem": _version(), "files": fingerprint(folder)}
    head = _MAGIC + json.dumps(header).encode("utf-8") + b"\n"
    body = pickle.dumps(indexes, protocol=pickle.HIGHEST_PROTOCOL)
    staging = path.with_name(f".{INDEX_FILE}.{os.getpid()}")
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(head)
            out.write(body)
            out.flush()
            os.fsync(out.fileno())
        os.replace(staging, path)
    except BaseException:
        with contextlib.suppress(OSError):
            staging.unlink()
        raise
    return len(head) + len(body)
