"""``rdfmem serve --workers N``: N reader processes (``readers.py``) on the listening socket,
the owner process keeping the store, its writes and a private loopback port for the updates
the readers send on.

Why processes: one Python process spends ~370 µs of CPU per point query on HTTP and the
app, so it tops out at a fraction of Oxigraph's server whatever the store does; N processes
each parse, answer and serialise on their own core. Why read-only opens: RocksDB lets one
process write, any number read; a reader opens the store again only when the owner's
published write generation moved (``generation.py``), so reads after an acknowledged write
see it. The owner accepts no public connection itself: its loop stays free for writes.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rdfmem.core.errors import ServerConfigError
from rdfmem.server.generation import FILE_NAME, Published
from rdfmem.store.rdfstore import RdfStore
from rdfmem.store.readonly import on_writes, owned_folder

__all__ = ["Fleet", "readable_folder"]

_log = logging.getLogger("rdfmem.server")
#: A reader that exits is started again at most this often.
_RESTART_EVERY = 1.0


def readable_folder(store: RdfStore) -> Path:
    """The folder of ``store`` when reader processes can open it read-only.

    Raises:
        ServerConfigError: not an on-disk Oxigraph store this process owns.
    """
    folder = owned_folder(store)
    if folder is None:
        raise ServerConfigError(
            "--workers needs an on-disk store opened by this process (an Oxigraph folder); "
            "serve other stores without --workers"
        )
    return folder


class Fleet:
    """The reader processes of one server (see the module docstring); ``start``, ``stop``."""

    def __init__(
        self,
        store: RdfStore,
        count: int,
        *,
        listen_fd: int,
        owner_url: str,
        app_options: dict[str, Any],
        server_options: dict[str, Any],
    ) -> None:
        if count < 1:
            raise ServerConfigError(f"workers must be at least 1, not {count}")
        self.folder = readable_folder(store)
        self.count = count
        self.published = Published(self.folder / FILE_NAME, create=True)
        self._undo = on_writes(store, self.published.set)
        self._settings = json.dumps(
            {
                "path": str(self.folder),
                "generation_file": str(self.folder / FILE_NAME),
                "fd": listen_fd,
                "owner_url": owner_url,
                "options": app_options,
                "server": server_options,
            }
        )
        self._fd = listen_fd
        self.processes: list[subprocess.Popen[bytes]] = []
        self._stopping = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="rdfmem-readers", daemon=True)

    def start(self) -> Fleet:
        """Start the readers (they answer once their store is open)."""
        self.processes = [self._spawn() for _ in range(self.count)]
        self._watcher.start()
        return self

    def _spawn(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rdfmem.server.readers"],
            stdin=subprocess.PIPE,
            pass_fds=(self._fd,),
        )
        assert proc.stdin is not None
        proc.stdin.write(self._settings.encode("utf-8") + b"\n")
        proc.stdin.close()
        return proc

    def _watch(self) -> None:
        while not self._stopping.wait(_RESTART_EVERY):
            for i, proc in enumerate(self.processes):
                if proc.poll() is not None and not self._stopping.is_set():
                    _log.warning(
                        "reader process %d exited (%s); starting it again", i, proc.returncode
                    )
                    self.processes[i] = self._spawn()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the readers (they finish the requests under way) and stop publishing."""
        self._stopping.set()
        if self._watcher.is_alive():
            self._watcher.join()  # no reader is started again from here on
        for proc in self.processes:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + timeout
        for proc in self.processes:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._undo()
        self.published.close()
