"""Read-modify-write sections shared by every process of one on-disk store.

Several processes use one on-disk store (``rdfmem.backends.owner``): one owns the files,
the others reach them through it. Their ``exclusive`` sections must exclude each other, and
a process killed inside one must block nobody. POSIX record locks (``fcntl.lockf``) do both:
the kernel drops a process's locks the moment it dies, whatever killed it.

Each subject IRI locks one byte of ``rdfmem.locks`` in the store's folder, at an offset
given by a hash of the IRI (BLAKE2b, the same in every process): two subjects that share a
byte only wait for each other, they are never held twice. ``exclusive([])`` (every subject:
``restore``, ``clear``) locks the whole file. Bytes are taken in ascending order, so two
sections over the same subjects never wait for each other in a circle.

Record locks belong to a process, not to a thread: a thread taking a byte that another
thread of its process holds would get it at once. So the sections of one process also take
turns on a process-wide reentrant lock, taken first (as on an embedded store, where a
section is the process-wide write lock); nested sections of one thread lock only the bytes
their outer sections do not hold, and release them when they end.

Closing any descriptor of a file drops every record lock the process holds on it, so one
process keeps one ``SubjectFileLocks`` per lock file (``SubjectFileLocks.of``), shared by
every backend of that process on the store (the owner's and an attached one alike).

A section that cannot get its bytes within ``wait_s`` (another process kept them: it is
stopped, or stuck) raises ``LeaseDenied`` rather than waiting forever.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from pyoxigraph import NamedNode

from rdfmem.core.errors import BackingError, LeaseDenied

__all__ = ["LOCK_FILE", "SubjectFileLocks", "offset_of"]

#: The lock file's name, in the store's folder.
LOCK_FILE = "rdfmem.locks"
#: Subjects hash onto this many bytes (past byte 0, which nothing takes alone).
_SPAN = 1 << 30
_EVERY: tuple[int, int] = (0, 0)  # lockf length 0: to the end of the file and beyond


def offset_of(subject: str) -> int:
    """The byte of the lock file that stands for ``subject`` (1 … 2**30).

    >>> offset_of("urn:a") == offset_of("urn:a") != offset_of("urn:b")
    True
    """
    digest = hashlib.blake2b(subject.encode("utf-8"), digest_size=8).digest()
    return 1 + int.from_bytes(digest, "big") % _SPAN


_OPEN: dict[Path, SubjectFileLocks] = {}
_OPEN_LOCK = threading.Lock()


class SubjectFileLocks:
    """The lock file of one store folder, shared by the backends of this process on it.

    >>> import tempfile
    >>> locks = SubjectFileLocks.of(tempfile.mkdtemp())
    >>> with locks.exclusive([NamedNode("urn:doc:1")]):
    ...     pass
    >>> locks.close()
    """

    @classmethod
    def of(cls, folder: str | os.PathLike[str], wait_s: float = 30.0) -> SubjectFileLocks:
        """This process's locks of the store in ``folder`` (one more user of them: each
        ``of`` is matched by one ``close``)."""
        path = (Path(folder) / LOCK_FILE).resolve()
        with _OPEN_LOCK:
            locks = _OPEN.get(path)
            if locks is None:
                locks = _OPEN[path] = cls(path, wait_s)
            locks._users += 1
            return locks

    def __init__(self, path: Path, wait_s: float) -> None:
        self.path = path
        self.wait_s = wait_s
        self._users = 0
        try:
            self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise BackingError(f"cannot open the lock file {self.path}: {exc}", cause=exc) from exc
        self._turn = threading.RLock()
        self._held: dict[tuple[int, int], int] = {}  # (offset, length) -> nesting depth

    @contextmanager
    def exclusive(self, subjects: Sequence[NamedNode]) -> Iterator[None]:
        """Hold ``subjects`` (all of them when empty) against every thread of every process.

        Raises:
            LeaseDenied: another process held one of them for longer than ``wait_s``.
            BackingError: the lock file is closed.
        """
        ranges = [_EVERY] if not subjects else sorted({(offset_of(s.value), 1) for s in subjects})
        with self._turn:
            taken: list[tuple[int, int]] = []
            try:
                for span in ranges:
                    if self._held.get(span, 0) == 0 and not self._covered(span):
                        self._lock(span, subjects)
                        taken.append(span)
                    self._held[span] = self._held.get(span, 0) + 1
                yield
            finally:
                for span in ranges:
                    depth = self._held.get(span, 0) - 1
                    if depth > 0:
                        self._held[span] = depth
                    else:
                        self._held.pop(span, None)
                for span in reversed(taken):
                    self._unlock(span)

    def _covered(self, span: tuple[int, int]) -> bool:
        # The whole file, held by an outer section, covers every byte.
        return span != _EVERY and self._held.get(_EVERY, 0) > 0

    def _lock(self, span: tuple[int, int], subjects: Sequence[NamedNode]) -> None:
        fd = self._open_fd()
        offset, length = span
        deadline = time.monotonic() + self.wait_s
        pause = 0.0002
        while True:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, length, offset, os.SEEK_SET)
                return
            except OSError as exc:
                if exc.errno not in (11, 13):  # EAGAIN / EACCES: held by another process
                    raise BackingError(f"cannot lock {self.path}: {exc}", cause=exc) from exc
            if time.monotonic() >= deadline:
                what = "every subject" if not subjects else ", ".join(s.value for s in subjects)
                raise LeaseDenied(
                    f"another process of this store held {what} for over {self.wait_s:g} s "
                    "(a process stopped or stuck inside a write); try again, or stop it",
                    subject=what,
                    holder="another process",
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.02)

    def _unlock(self, span: tuple[int, int]) -> None:
        if self._fd is not None:
            fcntl.lockf(self._fd, fcntl.LOCK_UN, span[1], span[0], os.SEEK_SET)

    def _open_fd(self) -> int:
        if self._fd is None:
            raise BackingError("this store is closed", cause=None)
        return self._fd

    def close(self) -> None:
        """One user fewer; the last one closes the file (which releases every lock this
        process holds on it)."""
        with _OPEN_LOCK:
            self._users -= 1
            if self._users > 0:
                return
            _OPEN.pop(self.path, None)
        with self._turn:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
