"""The owner's write generation, published in a small file beside the store for the server's
reader processes (``readers.py``): eight bytes, mapped into memory by every process, so a
reader checks it per request for the price of a memory read.

The owner writes the new value right after each write reaches the store and before the
write is acknowledged (``rdfmem.store.readonly.on_writes``); a reader that finds
the value moved opens the store again before it answers. So a read sent after a write was
acknowledged sees that write, whichever process answers it.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

__all__ = ["FILE_NAME", "Published"]

#: The file's name in the store's folder.
FILE_NAME = "rdfmem.generation"
_FORMAT = "<Q"


class Published:
    """The generation file at ``path``: ``value`` reads it; ``set`` (the owner) writes it.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / FILE_NAME
    >>> owner, reader = Published(path, create=True), None
    >>> reader = Published(path)
    >>> owner.set(7); reader.value
    7
    >>> owner.close(); reader.close()
    """

    def __init__(self, path: Path, *, create: bool = False) -> None:
        self.path = path
        flags = os.O_RDWR | os.O_CREAT if create else os.O_RDONLY
        fd = os.open(path, flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, 8)
            access = mmap.ACCESS_WRITE if create else mmap.ACCESS_READ
            self._map = mmap.mmap(fd, 8, access=access)
        finally:
            os.close(fd)

    @property
    def value(self) -> int:
        """The generation last published."""
        return int(struct.unpack_from(_FORMAT, self._map)[0])

    def set(self, value: int) -> None:
        """Publish ``value`` (an aligned 8-byte store: readers never see half of it)."""
        struct.pack_into(_FORMAT, self._map, 0, value)

    def close(self) -> None:
        """Unmap the file (idempotent)."""
        if not self._map.closed:
            self._map.close()
