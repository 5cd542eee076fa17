"""The ``(graph, subject)`` key of each row of an index, saved as flat arrays.

A vector or keyword index numbers its rows and keeps, for each, the key it belongs to (or
None for a free row). ``RowKeys`` is that list. Saved beside an on-disk store
(``rdfmem.backends.indexfile``), it is three arrays and a short list of graphs, not one
Python tuple per row. Loaded, it stays packed: a row's key is decoded when it is read (a
search reads the keys of its hits only). Rows set or added after loading are kept beside
the packed ones, so no write unpacks the whole list, and saving again splices them into
the packed arrays (``splice``) instead of walking every row.

>>> import pickle
>>> keys = RowKeys([("urn:g", "urn:a"), ("urn:g", "urn:b")])
>>> keys.append(("urn:h", "urn:c")); keys[1] = None
>>> back = pickle.loads(pickle.dumps(keys, protocol=5))
>>> list(back), len(back)
([('urn:g', 'urn:a'), None, ('urn:h', 'urn:c')], 3)
>>> back.append(("urn:g", "urn:d")); back[0] = ("urn:g", "urn:é")
>>> again = pickle.loads(pickle.dumps(back, protocol=5))
>>> list(again)
[('urn:g', 'urn:é'), None, ('urn:h', 'urn:c'), ('urn:g', 'urn:d')]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["Key", "RowKeys", "splice"]

Key = tuple[str, str]


def splice(
    values: NDArray[Any],
    ends: NDArray[np.int64],
    replaced: Mapping[int, NDArray[Any]],
    appended: Sequence[NDArray[Any]],
) -> tuple[NDArray[Any], NDArray[np.int64]]:
    """A ragged array (row ``i`` is ``values[ends[i-1]:ends[i]]``) with the rows in
    ``replaced`` replaced and the rows of ``appended`` added at the end: the unchanged runs
    are copied whole, so the cost is one pass of numpy plus one step per changed row."""
    pieces: list[NDArray[Any]] = []
    lengths = np.diff(ends, prepend=0) if len(ends) else np.zeros(0, dtype=np.int64)
    lengths = lengths.astype(np.int64)
    done = 0  # the first old row not yet copied
    for row in sorted(replaced):
        start = int(ends[done - 1]) if done else 0
        pieces.append(values[start : int(ends[row - 1]) if row else 0])
        pieces.append(replaced[row])
        lengths[row] = len(replaced[row])
        done = row + 1
    pieces.append(values[(int(ends[done - 1]) if done else 0) : int(ends[-1]) if len(ends) else 0])
    pieces.extend(appended)
    lengths = np.concatenate([lengths, np.array([len(a) for a in appended], dtype=np.int64)])
    joined = np.concatenate(pieces) if pieces else values[:0]
    return joined.astype(values.dtype, copy=False), np.cumsum(lengths, dtype=np.int64)


def _utf8(text: str) -> NDArray[np.uint8]:
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8)


class _Packed:
    """Keys as saved: graph number per row (-1: None), subjects' UTF-8 one after another
    with each row's end."""

    __slots__ = ("_ascii", "_blob", "ends", "gids", "graphs", "subjects")

    def __init__(
        self, graphs: list[str], gids: NDArray[np.int32], subjects: Any, ends: Any
    ) -> None:
        self.graphs = graphs
        self.gids = gids
        self.subjects = subjects  # uint8
        self.ends = ends  # int64, in bytes
        self._blob: bytes | None = None
        self._ascii: str | None = None  # the subjects as text, when all ASCII

    def __len__(self) -> int:
        return len(self.gids)

    def blob(self) -> bytes:
        if self._blob is None:  # one copy of the whole text, at the first read
            self._blob = self.subjects.tobytes()
            if self._blob.isascii():
                self._ascii = self._blob.decode("ascii")
        return self._blob

    def ascii(self) -> str | None:
        """The subjects as one text, when they are all ASCII (offsets are then the same)."""
        self.blob()
        return self._ascii

    def subject(self, start: int, end: int) -> str:
        blob = self.blob()
        text = self._ascii
        return text[start:end] if text is not None else blob[start:end].decode("utf-8")

    def get(self, row: int) -> Key | None:
        gid = int(self.gids[row])
        if gid < 0:
            return None
        start, end = int(self.ends[row - 1]) if row else 0, int(self.ends[row])
        if self._blob is None:  # one key read: its bytes only (a search reads its hits')
            return self.graphs[gid], self.subjects[start:end].tobytes().decode("utf-8")
        return self.graphs[gid], self.subject(start, end)


class RowKeys:
    """Row number -> key or None: a list, saved packed (see the module docstring)."""

    __slots__ = ("_changed", "_packed", "_tail")

    def __init__(self, keys: Iterable[Key | None] = ()) -> None:
        self._packed: _Packed | None = None
        self._changed: dict[int, Key | None] = {}  # rows of ``_packed`` set since loading
        self._tail: list[Key | None] = list(keys)  # rows after ``_packed``

    def __len__(self) -> int:
        return (0 if self._packed is None else len(self._packed)) + len(self._tail)

    def __getitem__(self, row: int) -> Key | None:
        packed = self._packed
        base = 0 if packed is None else len(packed)
        if row < 0:
            row += len(self)
        if row >= base:
            return self._tail[row - base]
        if row in self._changed:
            return self._changed[row]
        assert packed is not None
        return packed.get(row)

    def __setitem__(self, row: int, key: Key | None) -> None:
        base = 0 if self._packed is None else len(self._packed)
        if row >= base:
            self._tail[row - base] = key
        else:
            self._changed[row] = key

    def append(self, key: Key | None) -> None:
        self._tail.append(key)

    def __iter__(self) -> Iterator[Key | None]:
        for row in range(len(self)):
            yield self[row]

    def live(self, alive: NDArray[np.bool_]) -> dict[Key, int]:
        """Key -> row, for the rows marked in ``alive`` that hold a key (the whole list
        decoded at once: what a first write builds its key map from)."""
        packed, changed, tail = self._packed, self._changed, self._tail
        base = 0 if packed is None else len(packed)
        rows = np.nonzero(np.asarray(alive[: len(self)]))[0]
        found: dict[Key, int] = {}
        if packed is not None:
            mine = rows[rows < base]
            if changed:
                mine = mine[~np.isin(mine, np.fromiter(changed, dtype=np.int64))]
            gids = packed.gids[mine]
            mine, gids = mine[gids >= 0], gids[gids >= 0]
            stops = packed.ends[mine]
            starts = np.where(mine > 0, packed.ends[np.maximum(mine - 1, 0)], 0)
            blob, text, graphs = packed.blob(), packed.ascii(), packed.graphs
            pairs = zip(starts.tolist(), stops.tolist(), strict=True)
            if text is not None:
                subjects = [text[a:b] for a, b in pairs]
            else:
                subjects = [blob[a:b].decode("utf-8") for a, b in pairs]
            names = [graphs[g] for g in gids.tolist()]
            found.update(zip(zip(names, subjects, strict=True), mine.tolist(), strict=True))
            for row, key in changed.items():
                if key is not None and alive[row]:
                    found[key] = row
        for row in rows[rows >= base].tolist():
            key = tail[row - base]
            if key is not None:
                found[key] = row
        return found

    def __getstate__(self) -> tuple[list[str], Any, Any, Any]:
        packed = self._packed
        if packed is None:
            graphs: list[str] = []
            gids = np.zeros(0, dtype=np.int32)
            subjects = np.zeros(0, dtype=np.uint8)
            ends = np.zeros(0, dtype=np.int64)
        else:
            graphs, gids = list(packed.graphs), packed.gids.copy()
            subjects, ends = packed.subjects, packed.ends
        number = {g: i for i, g in enumerate(graphs)}

        def gid(key: Key | None) -> int:
            return -1 if key is None else number.setdefault(key[0], len(number))

        for row, key in self._changed.items():
            gids[row] = gid(key)
        empty = np.zeros(0, dtype=np.uint8)
        subjects, ends = splice(
            subjects,
            ends,
            {r: empty if k is None else _utf8(k[1]) for r, k in self._changed.items()},
            [empty if k is None else _utf8(k[1]) for k in self._tail],
        )
        tail = np.array([gid(k) for k in self._tail], dtype=np.int32)
        return list(number), np.concatenate([gids, tail]), subjects, ends

    def __setstate__(self, state: tuple[list[str], Any, Any, Any]) -> None:
        graphs, gids, subjects, ends = state
        self._packed = _Packed(graphs, gids, subjects, ends)
        self._changed = {}
        self._tail = []
