"""The owner hands its read-side indexes to a process that attaches, in one request.

A process attached to an on-disk store keeps memory vectors, memory keywords and the
decision graph as a follower of the owner's journal (``rdfmem.backends.attached``). It
used to build them by reading everything through the socket at its first look: at 10,000
memories and 10,000 nodes, 28 MB of vectors as text, every text and every node, about
1.9 s of its first turn. The owner holds the same indexes (loaded from the index file at
open, kept from every write: ``rdfmem.store.indexes.hub``), so it hands them over instead:

* ``GET /indexes?keys=1`` (once, when the process opens the store) names the indexes of
  one graph the owner's hub holds or was saved with (their kind and predicate or name);
  the attaching process makes its followers for them, nothing read yet.
* ``GET /indexes`` (at the process's first look: ``changes_since(None)``) answers the
  indexes pickled as the index file holds them (``rdfmem.backends.indexfile``: each
  index's small pickle, its large arrays out of band, written after it as they are, the
  trailing zeros of an array's room to grow left out), under the owner's write lock, with
  the journal's epoch, the generation ``G`` they are consistent with, and the journal's
  notes since ``G``.

**Never a stale answer.** An index is handed over when it is fresh (no write since it was
last brought up to date changed its graphs), or when the writes since are named subject by
subject in the journal (another process's writes the owner has not read yet); ``G`` is the
oldest such generation. The attaching process starts its follower's cursor at ``G``, and
the notes since ``G`` name every subject to read again, as any later look does. When the
notes cannot say (a write of unknown scope since ``G``, a journal that no longer reaches
back), only the fresh indexes go, at the generation of the answer. An answer that does not
arrive whole or does not unpickle is dropped, and the process reads everything as before.

**Who is believed.** A pickle can run code: the answer is read only from a process of this
user (the socket's peer, ``SO_PEERCRED`` where the system has it; else the socket file's
owner), as the index file is read only when it is this user's alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import socket
import stat
import struct
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from rdfmem.backends.base import Backend
from rdfmem.backends.unixhttp import read_answer

__all__ = [
    "KINDS",
    "Seed",
    "Sharer",
    "answer",
    "fetch_keys",
    "fetch_shared",
    "offer",
]

#: The kinds of index a follower keeps (``rdfmem.store.indexes.saved``'s names).
KINDS = ("vectors", "keywords", "graphs")
#: The most subjects the notes handed with the indexes may name (past it, only the fresh
#: indexes are handed over, at the answer's generation).
MAX_NOTED = 2_000
#: The magic first bytes of an answer's body.
_MAGIC = b"rdfmem-shared-indexes 1\n"
#: Trailing zeros of an array are looked for, and left out of the answer, this many at a time.
_ZEROS = 1 << 16
_ZERO_BYTES = bytes(_ZEROS)


class Sharer(Protocol):
    """What the owner's index hub offers (``IndexHub``); both called under the backend's
    write lock."""

    def shared_keys(self) -> list[tuple[str, str]]: ...

    def share(self, behind: int) -> tuple[int, dict[str, Any] | None]: ...


_offers: weakref.WeakKeyDictionary[Backend, Sharer] = weakref.WeakKeyDictionary()
_offers_lock = threading.Lock()


def offer(backend: Backend, sharer: Sharer) -> None:
    """Hand ``sharer``'s indexes to the processes that attach to ``backend``'s store."""
    with _offers_lock:
        _offers[backend] = sharer


def _sharer(backend: Backend) -> Sharer | None:
    with _offers_lock:
        return _offers.get(backend)


# -- the owner's side -----------------------------------------------------------------------


def answer(handler: Any, params: dict[str, list[str]]) -> None:
    """``GET /indexes`` on the owner's socket (``handler``: its request handler)."""
    backend: Backend = handler.store
    sharer, journal = _sharer(backend), getattr(backend, "journal", None)
    if params.get("keys"):
        keys: list[tuple[str, str]] = []
        if sharer is not None and journal is not None:
            with backend.lock:
                keys = sharer.shared_keys()
        body = json.dumps({"keys": [list(k) for k in keys]}).encode("utf-8")
        handler._answer(200, "application/json", body)
        return
    if sharer is None or journal is None:
        handler._answer(404, "text/plain", b"no indexes to hand over")
        return
    if not handler.serving.enter():  # a long answer: the closing owner waits for it
        handler._answer(503, "text/plain", b"rdfmem owner closing")
        handler.close_connection = True
        return
    try:
        head, parts = _shared(backend, sharer, journal)
    except Exception as exc:  # never the owner's end: the process reads everything instead
        handler._answer(500, "text/plain; charset=utf-8", str(exc).encode("utf-8"))
        return
    finally:
        handler.serving.leave()
    size = sum(len(p) for p in parts)
    reason = handler.responses.get(200, ("",))[0]
    handler.wfile.write(
        (
            f"{handler.protocol_version} 200 {reason}\r\nServer: rdfmem-owner\r\n"
            f"Content-Type: application/octet-stream\r\nContent-Length: {len(head) + size}"
            "\r\n\r\n"
        ).encode("latin-1")
        + head
    )
    for part in parts:
        handler.wfile.write(part)


def _shared(backend: Backend, sharer: Sharer, journal: Any) -> tuple[bytes, list[memoryview]]:
    """The answer's head (magic and JSON line) and the parts that follow it."""
    with backend.lock:
        generation, indexes = sharer.share(MAX_NOTED)
        notes = journal.since(journal.epoch, generation)
        if notes.get("everything", True) or len(notes.get("subjects", ())) > MAX_NOTED:
            # The notes since the oldest index cannot say what changed: the fresh ones only.
            generation, indexes = sharer.share(-1)
            notes = journal.since(journal.epoch, generation)
    buffers: list[pickle.PickleBuffer] = []
    body = pickle.dumps(indexes, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    sent = [_without_trailing_zeros(r) for r in raws]
    header = {
        "epoch": journal.epoch,
        "generation": generation,
        "notes": notes,
        "pickle": len(body),
        "buffers": [[r.nbytes, s.nbytes] for r, s in zip(raws, sent, strict=True)],
    }
    head = _MAGIC + json.dumps(header).encode("utf-8") + b"\n"
    return head, [memoryview(body), *sent]


def _without_trailing_zeros(data: memoryview) -> memoryview:
    stop = data.nbytes
    while stop >= _ZEROS and data[stop - _ZEROS : stop].tobytes() == _ZERO_BYTES:
        stop -= _ZEROS
    return data[:stop]


# -- the attached process's side ------------------------------------------------------------


def fetch_keys(path: Path, timeout: float) -> list[tuple[str, str]]:
    """The kinds and names of the indexes the owner at ``path`` can hand over (none when
    it cannot, or is not this user's)."""
    found = _get(path, "/indexes?keys=1", timeout)
    if found is None:
        return []
    try:
        keys = json.loads(bytes(found))["keys"]
        return [(str(kind), str(name)) for kind, name in keys if kind in KINDS]
    except (ValueError, KeyError, TypeError):
        return []


def fetch_shared(path: Path, timeout: float) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The owner's answer to ``GET /indexes``: its header (``epoch``, ``generation``,
    ``notes``) and the indexes (``{"code": ..., "sections": [...]}``), or None when it
    did not come whole from a process of this user."""
    conn = _connected(path, "/indexes", timeout)
    if conn is None:
        return None
    try:
        found = _read_shared(conn)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    finally:
        conn.close()
    if found is None:
        return None
    header, body, buffers = found
    try:
        # the owner's own indexes, from a process of this user (``_connected``)
        indexes = pickle.loads(body, buffers=buffers)
    except Exception:  # read everything instead
        return None
    return (header, indexes) if isinstance(indexes, dict) else None


def _read_shared(conn: socket.socket) -> tuple[dict[str, Any], memoryview, list[memoryview]] | None:
    """An answer to ``GET /indexes`` read straight into one buffer laid out as the
    indexes use it: each array at its place, whole (the trailing zeros left out on the
    wire are the buffer's own), writable, so no array is copied again once here.

    Raises:
        ConnectionError: the answer ended early.
        ValueError, KeyError, TypeError: it is not one.
    """
    data = bytearray()
    while (end := data.find(b"\r\n\r\n")) < 0:
        data += _received(conn)
    lines = bytes(data[:end]).split(b"\r\n")
    if lines[0].split(b" ")[1:2] != [b"200"]:
        return None
    length = next(
        int(value)
        for name, _, value in (line.partition(b":") for line in lines[1:])
        if name.strip().lower() == b"content-length"
    )
    rest = data[end + 4 :]
    while (stop := rest.find(b"\n", len(_MAGIC))) < 0:
        rest += _received(conn)
    if rest[: len(_MAGIC)] != _MAGIC:
        return None
    header = json.loads(bytes(rest[len(_MAGIC) : stop]))
    size = int(header["pickle"])
    spans = [(int(whole), int(sent)) for whole, sent in header["buffers"]]
    if not isinstance(header.get("notes"), dict):
        return None
    if length != stop + 1 + size + sum(sent for _, sent in spans):
        return None
    layout = memoryview(bytearray(size + sum(whole for whole, _ in spans)))
    regions, buffers, offset = [layout[:size]], [], size
    for whole, sent in spans:
        regions.append(layout[offset : offset + sent])
        buffers.append(layout[offset : offset + whole])
        offset += whole
    early = memoryview(rest)[stop + 1 :]
    for region in regions:
        got = min(len(early), len(region))
        region[:got] = early[:got]
        early = early[got:]
        while got < len(region):
            count = conn.recv_into(region[got:])
            if not count:
                raise ConnectionError("the owner's answer ended early")
            got += count
    return header, layout[:size], buffers


def _received(conn: socket.socket) -> bytes:
    chunk = conn.recv(65536)
    if not chunk:
        raise ConnectionError("the owner's answer ended early")
    return chunk


def _get(path: Path, target: str, timeout: float) -> bytearray | None:
    """The body of a 200 answer to ``GET target`` on the socket ``path``, on a connection
    of its own, when the peer is a process of this user; else None."""
    conn = _connected(path, target, timeout)
    if conn is None:
        return None
    try:
        status, _, content, _ = read_answer(conn, False)
    except (OSError, ValueError):
        return None
    finally:
        conn.close()
    return content if status == 200 else None


def _connected(path: Path, target: str, timeout: float) -> socket.socket | None:
    """A connection of its own to the socket ``path``, ``GET target`` sent on it, when
    the peer is a process of this user; else None."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout)
    try:
        conn.connect(str(path))
        if not _same_user(conn, path):
            conn.close()
            return None
        request = f"GET {target} HTTP/1.1\r\nHost: rdfmem-owner\r\nConnection: close\r\n\r\n"
        conn.sendall(request.encode("ascii"))
    except OSError:
        conn.close()
        return None
    return conn


def _same_user(conn: socket.socket, path: Path) -> bool:
    """True when the process at the other end of ``conn`` runs as this user (its
    credentials where the system gives them, else the socket file's owner and mode)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is not None:
        with contextlib.suppress(OSError):
            creds = conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
            _, uid, _ = struct.unpack("3i", creds)
            return bool(uid == os.getuid())
    try:
        info = os.stat(path)
    except OSError:
        return False
    return info.st_uid == os.getuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


#: Puts handed-over indexes (``{"code": ..., "sections": [...]}``) into this process's
#: followers; answers how many it put (``rdfmem.store.attached_indexes``).
Seed = Callable[[dict[str, Any]], int]
