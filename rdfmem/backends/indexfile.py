"""Read-side indexes that survive a restart, in a file in the on-disk store's folder:
written when the store's owner closes, taken back when the store is opened next, never
trusted otherwise (the indexes themselves: ``rdfmem.store.indexes.hub``).

The rule that keeps them right: **the index file is consumed when the store is opened.**
``OxigraphBackend`` maps ``rdfmem.indexes`` from the store's folder and removes it before
anything can write (``take``); the hub of the ``RdfStore`` made on that backend loads the
indexes from that mapping. A clean ``close`` writes the file again (``keep``), holding only
the indexes that were fresh at the last write, after the last write. So the file exists
only while the store is closed and unchanged since it was written by rdfmem: a process
killed at any point leaves no file (the next open rebuilds, as on a first open), and a
write after the file was taken can never meet it.

A program other than rdfmem opening the store's files while it is closed (raw pyoxigraph,
an older rdfmem) changes them: RocksDB writes a new manifest, options and log on every open.
The file records a fingerprint of the folder (each file's name, size and modification
time) taken after the store was closed, and an open compares it with the fingerprint taken
before it opens the files: any other drops the saved indexes.

The file holds rdfmem's own index objects: a small pickle (protocol 5) whose large arrays
are out of band, each written after it at an offset aligned to a page, whole, with its
trailing zero pages left as holes (an index keeps room to grow, which costs no disk). At
open the file is memory-mapped copy-on-write (``take``) and the arrays are made over the
mapping without a copy (``unpack``): opening reads the header and the small pickle, and a
search reads the pages of the rows it scores. A write to such an array changes this
process's copy of the page, never the file; the mapping outlives the file's removal.

It is written with mode 0600 by the store's owner, and loaded only when it is owned by this
user and writable by no one else (a pickle can run code: a file others could write is not
read). Its header names the format version, the rdfmem version and where the pickle and
the arrays are: any other format or version is dropped.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import pickle
import stat
from pathlib import Path
from typing import Any

__all__ = ["INDEX_FILE", "fingerprint", "keep", "map_own_file", "take", "unpack"]

INDEX_FILE = "rdfmem.indexes"
_MAGIC = b"rdfmem-indexes\n"
_FORMAT = 3
_PAGE = mmap.PAGESIZE
_ZEROS = 1 << 20  # trailing zeros are looked for, and left as holes, this many at a time
_ZERO_BYTES = bytes(_ZEROS)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("rdfmem")
    except Exception:  # a checkout that is not installed
        return "0"


def _aligned(offset: int) -> int:
    return -(-offset // _PAGE) * _PAGE


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


def map_own_file(
    path: Path, *, least: int = 0, copy: bool = False, remove: bool = False
) -> mmap.mmap | None:
    """``path`` memory-mapped (read-only, or copy-on-write with ``copy``) when it is a
    regular file of this user that nobody else may write and longer than ``least`` bytes;
    None otherwise, or when it cannot be opened (a symlink is not followed). ``remove``:
    once opened, the file leaves the folder (the mapping stays)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        usable = (
            stat.S_ISREG(info.st_mode)
            and info.st_uid == os.getuid()
            and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            and info.st_size > least
        )
        access = mmap.ACCESS_COPY if copy else mmap.ACCESS_READ
        return mmap.mmap(fd, 0, access=access) if usable else None
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
        if remove:
            with contextlib.suppress(OSError):
                path.unlink()


def take(folder: str | os.PathLike[str]) -> mmap.mmap | None:
    """The index file in ``folder``, memory-mapped copy-on-write and removed from the
    folder (None when there is none, or it is not this user's alone)."""
    return map_own_file(Path(folder) / INDEX_FILE, copy=True, remove=True)


def unpack(data: mmap.mmap | bytes | None, seen: str) -> dict[str, Any] | None:
    """The saved indexes in ``data`` (as ``keep`` wrote them; their arrays are views of
    ``data``), or None when absent, of another format or rdfmem version, or written over
    files whose fingerprint is not ``seen`` (judged on the header, before anything is
    unpickled)."""
    if not data or data[: len(_MAGIC)] != _MAGIC or not seen:
        return None
    end = data.find(b"\n", len(_MAGIC))
    try:
        header = json.loads(data[len(_MAGIC) : end])
        base, size = _aligned(end + 1), int(header.pop("pickle"))
        spans = [(base + int(start), int(length)) for start, length in header.pop("buffers")]
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    if header != {"format": _FORMAT, "rdfmem": _version(), "files": seen}:
        return None
    if any(start + length > len(data) for start, length in [(base, size), *spans]):
        return None  # a torn file: rebuild
    view = memoryview(data)
    try:
        # this user's own file alone (take)
        saved = pickle.loads(view[base : base + size], buffers=[view[s : s + n] for s, n in spans])
    except Exception:  # a torn file: rebuild
        return None
    return saved if isinstance(saved, dict) else None


def _write_buffer(out: Any, data: memoryview) -> None:
    # The buffer whole, but its trailing zeros (an index's room to grow) as a hole.
    stop = len(data)
    while stop >= _ZEROS and data[stop - _ZEROS : stop].tobytes() == _ZERO_BYTES:
        stop -= _ZEROS
    out.write(data[:stop])
    out.seek(len(data) - stop, os.SEEK_CUR)


def keep(folder: str | os.PathLike[str], indexes: dict[str, Any]) -> int:
    """Write ``indexes`` to the index file in ``folder`` (atomically, mode 0600), with the
    fingerprint of the closed store's files; returns the bytes written."""
    path = Path(folder) / INDEX_FILE
    buffers: list[pickle.PickleBuffer] = []
    body = pickle.dumps(indexes, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    spans, offset = [], _aligned(len(body))
    for raw in raws:
        spans.append((offset, raw.nbytes))
        offset = _aligned(offset + raw.nbytes)
    header = {
        "format": _FORMAT,
        "rdfmem": _version(),
        "files": fingerprint(folder),
        "pickle": len(body),
        "buffers": spans,
    }
    head = _MAGIC + json.dumps(header).encode("utf-8") + b"\n"
    base = _aligned(len(head))
    staging = path.with_name(f".{INDEX_FILE}.{os.getpid()}")
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(head)
            out.seek(base)
            out.write(body)
            for (start, _), raw in zip(spans, raws, strict=True):
                out.seek(base + start)
                _write_buffer(out, raw)
            out.truncate(base + (spans[-1][0] + spans[-1][1] if spans else len(body)))
            out.flush()
            os.fsync(out.fileno())
        os.replace(staging, path)
    except BaseException:
        with contextlib.suppress(OSError):
            staging.unlink()
        raise
    return base + offset
