"""``rdfmem mcp --keep-warm SECONDS``: a stdio session served by a warm holder process.

An MCP host starts a fresh ``rdfmem mcp`` for every session, and a fresh Python process
spends most of its first answer importing (the MCP SDK's wire types alone take longer than
the official server's whole first answer). With ``--keep-warm``, the process the host
starts only hands its stdin and stdout to a **holder**: a process of the same user that
has everything loaded and the memory open, and that serves each handed-over session over
those descriptors (``rdfmem.mcp.holder``). The first such start spawns the holder (that
session waits for it, as it would for a fresh server); later ones connect and are answered
at once. The holder exits once no session has been open for SECONDS.

The wire is a Unix socket in ``$XDG_RUNTIME_DIR/rdfmem-UID/`` (else the temporary folder),
mode 0600 in a 0700 folder, named by a hash of everything that shapes the server (the
store, every option, ``MEMORY_FILE_PATH``, rdfmem's version, the interpreter): a start with
other options gets a holder of its own. The hand-over: this process sends ``HELLO`` with
its descriptors 0 and 1 (``SCM_RIGHTS``), the holder answers ``TAKEN`` and, when the session
ends, ``DONE``. Failures:

* no holder, or a stale socket file: one is spawned (under a lock file, so two starts
  spawn one), and this start waits for it;
* the holder closes without ``TAKEN`` (it was exiting): start again, then serve here;
* the holder dies during the session: this process exits with status 1 (the host sees its
  server end, as it would if a server crashed);
* this process is killed: the holder ends the session when the host closes the pipes.

Only the standard library is imported here: this module is the whole of a warm start.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = [
    "DONE",
    "HELLO",
    "TAKEN",
    "hand_off",
    "holder_path",
    "listen_at",
    "runtime_folder",
]

HELLO = b"rdfmem-mcp-session 1"
TAKEN = b"\x01"
DONE = b"\x00"
#: A socket's path must fit in ``sockaddr_un.sun_path`` (108 bytes on Linux, 104 on macOS).
_MAX_SOCKET_PATH = 100
#: How long a start waits for a holder it spawned to listen.
SPAWN_WAIT_S = 60.0


def runtime_folder() -> Path:
    """This user's folder for holder sockets (made 0700; refused when it is not ours)."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    folder = Path(base) / f"rdfmem-{os.getuid()}"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise PermissionError(f"{folder} must belong to this user with mode 0700")
    return folder


def holder_path(shape: Sequence[object]) -> Path:
    """The socket of the holder serving sessions shaped by ``shape`` (JSON-able parts); in
    the temporary folder when the runtime folder's path is too long for a socket's name."""
    folder = runtime_folder()
    digest = hashlib.blake2b(json.dumps([*shape, str(folder)]).encode(), digest_size=12)
    path = folder / f"mcp-{digest.hexdigest()}.sock"
    if len(str(path)) > _MAX_SOCKET_PATH:
        short = Path(tempfile.gettempdir()) / f"rdfmem-{os.getuid()}"
        short.mkdir(mode=0o700, exist_ok=True)
        path = short / path.name
    return path


def _connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
        return sock
    except OSError:
        sock.close()
        return None


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _spawn(args: Sequence[str], path: Path) -> subprocess.Popen[bytes]:
    """Start the holder for ``path``: ``rdfmem`` with ``args`` and ``--hold-at path``, in a
    session of its own (the host's signals to this process do not reach it)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a stale file: nobody answered on it
    log = open(path.with_suffix(".log"), "ab")  # noqa: SIM115 - handed to the child
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "rdfmem", *args, "--hold-at", str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        log.close()


def _holder(args: Sequence[str], path: Path) -> socket.socket | None:
    """A connection to the holder for ``path``, spawned when there is none; None when a
    spawned holder did not come up."""
    sock = _connect(path)
    if sock is not None:
        return sock
    with _locked(path.with_suffix(".lock")):
        sock = _connect(path)
        if sock is not None:
            return sock
        child = _spawn(args, path)
        deadline = time.monotonic() + SPAWN_WAIT_S
        while time.monotonic() < deadline and child.poll() is None:
            if path.exists():
                sock = _connect(path)
                if sock is not None:
                    return sock
            time.sleep(0.005)
    return None


def hand_off(args: Sequence[str], path: Path) -> int | None:
    """Have the holder at ``path`` (spawned with ``args`` when needed) serve this process's
    stdio session; the exit status once it ended, or None when no holder would take it
    (serve it here then)."""
    for _ in range(2):
        sock = _holder(args, path)
        if sock is None:
            return None
        with sock:
            try:
                socket.send_fds(sock, [HELLO], [0, 1])
                if sock.recv(1) != TAKEN:
                    continue  # the holder was exiting: start again
            except OSError:
                continue
            # The session is the holder's now: nothing here touches the descriptors.
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(null, 1)
            os.close(null)
            try:
                return 0 if sock.recv(1) == DONE else 1
            except OSError:
                return 1
    return None


def listen_at(path: Path) -> socket.socket:
    """A listening socket at ``path``, mode 0600 before it takes its name."""
    staging = path.with_name(f".{path.name}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        staging.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(staging))
    os.chmod(staging, 0o600)
    listener.listen(64)
    os.replace(staging, path)
    return listener
