"""An HNSW graph saved in an on-disk store's folder by the process that built it, taken by
the other processes of the store (and by the next one to open it) instead of building their
own.

Building the graph of 10,000-20,000 vectors of 512 dimensions takes seconds of a core; every
process of a store holds the same vectors, so one build is enough. A process that builds a
graph writes it to ``rdfmem.hnsw-<digest>`` in the store's folder (one file per vector set
and dimension), with, for each of its nodes, the ``(graph, subject)`` it stands for and a
digest of the exact float32 vector it was made from (``rdfmem.store.indexes.hnsw.digests``).
Another process *adopts* it: it keeps a node only when that subject is among its own live
rows with a vector of the same digest, renames it to its own row, removes the others, and
adds its rows the graph does not hold; all of this off the request path, as a build is.

**Never a stale answer.** The graph only proposes candidates: every hit is scored again
with the process's own exact rows, the rows written since the graph was taken are scored
exactly, and a node whose vector changed since the file was written is removed (its digest
differs). So a file of any age, from a process killed at any point, can only cost recall
on rows it has not got, which are added; no generation has to match. The file is written
to a temporary name and renamed; its header holds a digest of the graph's bytes, checked
before usearch reads them (a torn or foreign file is ignored, and a build runs instead).
Like the index file (``rdfmem.backends.indexfile``) it has mode 0600 and is read only when
it is this user's and writable by no one else.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import threading
from collections.abc import Callable
from hashlib import blake2b
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rdfmem.backends.indexfile import map_own_file
from rdfmem.store.indexes.hnsw import digests

__all__ = ["GRAPH_FILE_PREFIX", "adopt", "graph_path", "store_folder", "write"]

GRAPH_FILE_PREFIX = "rdfmem.hnsw-"
_MAGIC = b"rdfmem-hnsw\n"
_FORMAT = 1
_OFFSET = np.uint64(1 << 62)  # labels are moved out of the way of rows while renamed
_ADD_BATCH = 2_048

Key = tuple[str, str]


def store_folder(store: Any) -> Path | None:
    """The folder of an on-disk ``RdfStore`` (owned or attached), where its processes
    share their HNSW graphs; None for any other store."""
    backend = store.backend
    path = getattr(backend, "path", None)
    if not getattr(backend, "persistent", False) or not isinstance(path, Path):
        return None
    return path


def graph_path(
    folder: str | os.PathLike[str], graphs: tuple[str, ...], predicate: str, dimension: int
) -> Path:
    """Where the graph of the vectors of ``predicate`` in ``graphs`` of ``dimension`` is
    kept in ``folder``."""
    name = json.dumps([list(graphs), predicate, dimension]).encode("utf-8")
    return Path(folder) / f"{GRAPH_FILE_PREFIX}{blake2b(name, digest_size=12).hexdigest()}"


def _label(key: Key | None) -> str:
    # IRIs hold no space nor line break: "graph subject" is one line.
    return "" if key is None else f"{key[0]} {key[1]}"


def write(
    path: Path,
    ann: Any,
    rows: NDArray[np.int64],
    key_of: Callable[[int], Key | None],
    matrix: NDArray[np.float32],
) -> bool:
    """Save ``ann`` (whose labels are ``rows`` of ``matrix``, the row of key ``key_of(row)``)
    at ``path``; False when the folder cannot take it."""
    graph = bytes(ann.save())
    names = "\n".join(_label(key_of(r)) for r in rows.tolist()).encode("utf-8")
    labels = rows.astype("<u8").tobytes()
    sums = digests(matrix, rows).astype("<u8").tobytes()
    header = {
        "format": _FORMAT,
        "ndim": int(matrix.shape[1]),
        "count": len(rows),
        "names": len(names),
        "graph": len(graph),
        "checksum": blake2b(graph, digest_size=16).hexdigest(),
    }
    head = _MAGIC + json.dumps(header).encode("utf-8") + b"\n"
    staging = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            for part in (head, labels, sums, names, graph):
                out.write(part)
        os.replace(staging, path)
    except OSError:
        with contextlib.suppress(OSError):
            staging.unlink()
        return False
    return True


def _parts(
    data: mmap.mmap, dimension: int
) -> tuple[NDArray[np.uint64], NDArray[np.uint64], list[str], memoryview] | None:
    if data[: len(_MAGIC)] != _MAGIC:
        return None
    end = data.find(b"\n", len(_MAGIC))
    try:
        header = json.loads(data[len(_MAGIC) : end])
        count, names, size = int(header["count"]), int(header["names"]), int(header["graph"])
        if header["format"] != _FORMAT or int(header["ndim"]) != dimension:
            return None
        checksum = str(header["checksum"])
    except (ValueError, TypeError, KeyError):
        return None
    start = end + 1
    if start + 16 * count + names + size != len(data):
        return None  # torn, or written by another format
    view = memoryview(data)
    labels = np.frombuffer(view[start : start + 8 * count], dtype="<u8").astype(np.uint64)
    sums = np.frombuffer(view[start + 8 * count : start + 16 * count], dtype="<u8")
    at = start + 16 * count
    keys = bytes(view[at : at + names]).decode("utf-8").split("\n") if count else []
    graph = view[at + names :]
    if len(keys) != count or blake2b(graph, digest_size=16).hexdigest() != checksum:
        return None
    return labels, sums.astype(np.uint64), keys, graph


def adopt(
    path: Path,
    matrix: NDArray[np.float32],
    rows: NDArray[np.int64],
    key_of: Callable[[int], Key | None],
    stop: Callable[[], bool] = lambda: False,
) -> Any | None:
    """The graph saved at ``path`` made into a graph of ``rows`` of ``matrix`` (labels are
    those rows): the nodes whose subject and vector digest match a row kept and renamed to
    it, the others removed, the rows it lacks added. None when there is no usable file (or
    ``stop()`` turned true)."""
    data = map_own_file(path, least=len(_MAGIC))
    if data is None:
        return None
    try:
        parts = _parts(data, matrix.shape[1])
        if parts is None:
            return None
        labels, sums, names, graph = parts
        from usearch.index import Index

        ann = Index.restore(graph)  # a copy in memory: the rows this process adds go in it
    except Exception:  # not a graph this usearch reads: build instead
        return None
    finally:
        with contextlib.suppress(BufferError):
            data.close()
    if ann is None or ann.ndim != matrix.shape[1] or len(ann) != len(labels):
        return None
    mine = {_label(key_of(r)): j for j, r in enumerate(rows.tolist())}
    own = digests(matrix, rows)
    keep = np.zeros(len(labels), dtype=bool)
    target = np.zeros(len(labels), dtype=np.int64)
    for i, name in enumerate(names):
        j = mine.get(name)
        if j is not None and own[j] == sums[i]:
            keep[i], target[i] = True, j
    covered = np.zeros(len(rows), dtype=bool)
    covered[target[keep]] = True
    if not keep.any():
        return None
    if not keep.all():
        ann.remove(labels[~keep])
    kept = labels[keep]
    ann.rename(kept, kept + _OFFSET)
    ann.rename(kept + _OFFSET, rows[target[keep]].astype(np.uint64))
    missing = rows[~covered]
    for start in range(0, len(missing), _ADD_BATCH):
        if stop():
            return None
        part = missing[start : start + _ADD_BATCH]
        ann.add(part.astype(np.uint64), matrix[part], threads=1)
    return ann
