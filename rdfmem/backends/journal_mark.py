"""The journal's last generation, shared through a memory-mapped file beside the store.

An attached process's indexes ask what changed before each read (``changes_since``). Most
of the time nothing did, or only what the process wrote itself (and its write's answer
brought the journal's notes back: ``rdfmem.backends.attached``). The owner therefore
publishes its journal's epoch and last generation in ``rdfmem.changes`` in the store's
folder, in place, with every note (before the write is answered); a reader compares them
with what it already holds, a memory read instead of a request, and asks the owner only
when they differ.

The owner's process id is written beside them: a mark whose writer is dead is not read
(another program may hold the files then, writing nothing here). The 40 bytes are a
sequence lock: the sequence number is made odd before the epoch and
generation are written and even after, and a reader takes a value only when it read the
same even number before and after. Anything else (the file missing or short, a writer
killed halfway, a torn read) reads as unknown, and the reader asks the owner: this file can
only save requests, never answer wrongly. The file is never replaced (a new owner writes
over it, its new epoch telling readers that everything may have changed), because a reader
keeps its mapping open.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from pathlib import Path

__all__ = ["MARK_NAME", "MarkReader", "MarkWriter"]

MARK_NAME = "rdfmem.changes"
_LAYOUT = struct.Struct("<Qq16sQ")  # sequence, generation, epoch (16 bytes), owner's pid
_SEQUENCE = struct.Struct("<Q")


class MarkWriter:
    """The owner's side: ``write`` publishes an epoch and a generation (call it under the
    journal's lock: one writer at a time)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.path = Path(folder) / MARK_NAME
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size < _LAYOUT.size:
                os.ftruncate(fd, _LAYOUT.size)
            self._map: mmap.mmap | None = mmap.mmap(fd, _LAYOUT.size)
        finally:
            os.close(fd)
        self._pid = os.getpid()
        sequence = _SEQUENCE.unpack_from(self._map, 0)[0]
        self._sequence = sequence + (sequence & 1)  # even: a killed writer left it odd

    def write(self, epoch: str, generation: int) -> None:
        found = self._map
        if found is None:
            return
        self._sequence += 1  # odd: being written
        _SEQUENCE.pack_into(found, 0, self._sequence)
        _LAYOUT.pack_into(found, 0, self._sequence, generation, bytes.fromhex(epoch), self._pid)
        self._sequence += 1
        _SEQUENCE.pack_into(found, 0, self._sequence)

    def close(self) -> None:
        found, self._map = self._map, None
        if found is not None:
            with contextlib.suppress(BufferError, ValueError):
                found.close()


class MarkReader:
    """An attached process's side: ``read`` is the owner's ``(epoch, generation)``, or
    None when it cannot be told (ask the owner)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.path = Path(folder) / MARK_NAME
        self._map: mmap.mmap | None = None
        self._inode = -1

    def _mapped(self) -> mmap.mmap | None:
        # The file's identity is checked on every read (one ``stat``): a file removed and
        # made again by a new owner is mapped anew, never read through an old mapping.
        try:
            inode = os.stat(self.path).st_ino
        except OSError:
            self.close()
            return None
        if self._map is not None and inode == self._inode:
            return self._map
        self.close()
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return None
        try:
            stat = os.fstat(fd)
            if stat.st_size >= _LAYOUT.size:
                self._map = mmap.mmap(fd, _LAYOUT.size, access=mmap.ACCESS_READ)
                self._inode = stat.st_ino
        except OSError:
            return None
        finally:
            os.close(fd)
        return self._map

    def read(self) -> tuple[str, int] | None:
        found = self._mapped()
        if found is None:
            return None
        before = _SEQUENCE.unpack_from(found, 0)[0]
        _, generation, epoch, pid = _LAYOUT.unpack_from(found, 0)
        after = _SEQUENCE.unpack_from(found, 0)[0]
        if before != after or before & 1 or before == 0 or not _alive(pid):
            return None
        return epoch.hex(), generation

    def close(self) -> None:
        found, self._map = self._map, None
        if found is not None:
            with contextlib.suppress(BufferError, ValueError):
                found.close()


def _alive(pid: int) -> bool:
    """Whether the process that wrote the mark still runs: a dead owner's mark says
    nothing of what the files hold now (another program may have opened them)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return pid > 0
    return pid > 0
