"""A vector set kept in memory and changed row by row: exact (numpy) search, and an
approximate one (usearch HNSW, the ``ann`` extra) for large sets.

Rows are L2-normalised float32 in a buffer that doubles when full; a replaced or removed row
is marked dead and the buffer is compacted when half of it is dead (the HNSW graph, keyed by
row, is then built again), so ``put`` and ``remove`` cost O(dimension) amortised, not
O(rows), and re-saving the same memories never grows the set. Exact search ranks by cosine, ties by
subject then graph, so its answer is the same whatever order rows were written in.

The approximate search's beam (usearch ``expansion_search``) is chosen for the data and the
queries: the last 64 queries (before 16 were made, 64 of the set's own rows) are searched
both ways and the narrowest beam of 128 … 2,048 whose recall@10 reaches ``RECALL_TARGET``
is kept; chosen when the HNSW graph is built, then again after 16 and 64 queries, every
``max(1024, rows / 64)`` queries and whenever the set has doubled. Text embeddings, whose
neighbours stand out, get a narrow and fast beam; queries far from every row (many
near-equidistant neighbours) a wide one. The rows written since the graph was built (the
latest 4,096 of them) are scored exactly beside the graph's candidates, so a search always
finds what was just written, even among near-duplicates the int8 graph cannot tell apart.

>>> import numpy as np
>>> vs = VectorSet(("urn:g",), "urn:p")
>>> vs.put("urn:g", "urn:a", np.array([1, 0], dtype=np.float32))
>>> vs.put("urn:g", "urn:b", np.array([0.6, 0.8], dtype=np.float32))
>>> vs.put("urn:g", "urn:a", np.array([0, 1], dtype=np.float32))   # replaces urn:a
>>> [(s, round(score, 2)) for _, s, score in vs.search(np.array([1, 0], np.float32), 5)]
[('urn:b', 0.6)]
>>> len(vs), vs.remove("urn:g", "urn:b"), len(vs)
(2, True, 1)
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterable
from functools import cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rdfmem.store.indexes.rowkeys import Key, RowKeys

__all__ = ["ANN_THRESHOLD", "RECALL_TARGET", "VectorSet"]

#: Rows of one dimension from which ``VectorSet(approximate=None)`` searches with usearch:
#: where exact search of 512-dimension vectors costs several times an HNSW search (measured
#: by ``benchmarks/bench_agent_loop.py``).
ANN_THRESHOLD = 10_000
#: The recall@10 against exact search that the approximate search's beam is chosen for, on
#: the last 64 queries (above the 0.95 that issue 11 asks of fresh queries: 64 queries are
#: a small sample).
RECALL_TARGET = 0.98
_MIN_CAPACITY = 64
_SEARCHES_BEFORE_BUILD = 8
_BEAMS = (128, 256, 512, 1024, 2048)
_SAMPLE = 64  # calibration queries
_MIN_HEARD = 16  # queries searched before they, not the set's own rows, calibrate the beam
_CHUNK = 65_536  # rows per exact matrix product while calibrating (64 MiB of scores at most)
#: The latest rows added since the HNSW graph was built are also scored exactly, so a vector
#: just written is always found (an agent searches for what it has just saved).
_FRESH_ROWS = 4_096
_BUILD_BATCH = 2_048  # rows per usearch call of a background build
#: Rows written during a background build that each search adds to the graph once in place.
_CATCH_UP = 32


@cache
def _has_usearch() -> bool:
    return importlib.util.find_spec("usearch") is not None


def _normalised(vector: NDArray[Any]) -> NDArray[np.float32]:
    row = np.asarray(vector, dtype=np.float32).reshape(-1)
    if not np.isfinite(row).all():
        row = np.nan_to_num(row, nan=0.0, posinf=0.0, neginf=0.0)
    norm = float(np.linalg.norm(row))
    return row / norm if norm > 0.0 else row


def _scores(rows: NDArray[np.float32], query: NDArray[np.float32]) -> NDArray[np.float32]:
    """``rows @ query`` on this thread. Not through BLAS: OpenBLAS spreads a matrix-vector
    product over threads, and on a busy machine waiting for them costs milliseconds (2,000
    rows of 512: 8 ms at load 5 on 2 cores, against 0.2 ms here; measured)."""
    scores: NDArray[np.float32] = np.einsum("ij,j->i", rows, query)
    return scores


def _candidates(limit: int) -> int:
    # HNSW candidates re-ranked with the exact float32 rows (the graph compares int8 rows).
    return max(10 * limit, 100)


def _new_graph(dimension: int) -> Any:
    from usearch.index import Index

    # int8 cosine graph (4x less to compare while building); candidates are re-ranked
    # with the exact float32 rows, so scores are exact and recall is the graph's.
    return Index(
        ndim=dimension,
        metric="cos",
        dtype="i8",
        connectivity=16,
        expansion_add=128,
        expansion_search=_BEAMS[-1],
    )


def _choose_beam(
    ann: Any,
    matrix: NDArray[np.float32],
    rows: NDArray[np.int64],
    queries: NDArray[np.float32] | None,
) -> int:
    """Set ``ann``'s beam to the narrowest whose recall@10 reaches ``RECALL_TARGET`` (the
    widest when none does) on ``queries``, or when None on ``_SAMPLE`` of the rows (each
    searched without itself), and return it. ``rows`` are the live rows of ``matrix`` (the
    keys of ``ann``). A hit counts when its exact score is at least the 10th best exact
    score, so equal scores are not misses. Reads only its arguments (and rows of ``matrix``
    that no write changes): safe on a background thread."""
    live = len(rows)
    pick: NDArray[np.int64] | None = None
    if queries is None:
        chosen = np.random.default_rng(live).choice(rows, size=min(_SAMPLE, live), replace=False)
        pick = np.searchsorted(rows, chosen)  # positions in ``rows``
        queries = matrix[chosen]
    k = min(10, live - (0 if pick is None else 1))
    if k < 1:
        ann.expansion_search = _BEAMS[0]
        return _BEAMS[0]
    best = np.full((len(queries), k), -np.inf, dtype=np.float32)
    for start in range(0, live, _CHUNK):
        stop = min(live, start + _CHUNK)
        scores = queries @ matrix[rows[start:stop]].T  # (queries, rows)
        if pick is not None:
            mine = (pick >= start) & (pick < stop)
            scores[np.nonzero(mine)[0], pick[mine] - start] = -np.inf
        merged = np.concatenate([best, scores], axis=1)
        best = -np.partition(-merged, k - 1, axis=1)[:, :k]
    tenth = best.min(axis=1) - 1e-5
    for beam in _BEAMS:
        ann.expansion_search = beam
        found = ann.search(queries, _candidates(10) + 1)
        hits = 0
        for j in range(len(queries)):
            keys = np.asarray(found.keys[j][: found.counts[j]], dtype=np.int64)
            if pick is not None:
                keys = keys[keys != rows[pick[j]]]
            top = np.sort(_scores(matrix[keys], queries[j]))[::-1][:k]
            hits += int(np.count_nonzero(top >= tenth[j]))
        if hits >= RECALL_TARGET * k * len(queries):
            return beam
    return _BEAMS[-1]


class _Rows:
    """The vectors of one dimension."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self.matrix = np.zeros((_MIN_CAPACITY, dimension), dtype=np.float32)
        self.alive = np.zeros(_MIN_CAPACITY, dtype=bool)
        self.keys = RowKeys()  # row -> (graph, subject)
        self._row_of: dict[Key, int] | None = {}  # None: made from the keys when first used
        self.dead = 0
        self.ann: Any = None
        self.built_upto = 0  # rows at the last HNSW build: later ones are also scored exactly
        self.catch_up_to = 0  # rows up to which ``catch_up`` adds to a graph built elsewhere
        self.recent = np.zeros((_SAMPLE, dimension), dtype=np.float32)  # a ring
        self.heard = 0  # queries searched
        self.calibrated_at = self.calibrated_heard = 0  # rows and queries at the last
        self.epoch = 0  # moves when rows are renumbered (a graph built before is void)
        self.background: threading.Thread | None = None  # a graph being built off the path
        self.built: tuple[Any, int, int, NDArray[np.int64], int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Saved beside an on-disk store (``IndexHub.export``): the rows, not the HNSW graph
        # or a build under way (built again off the request path after loading). The
        # matrix goes whole, with room to grow (its zero rows cost no disk: holes in the
        # index file), so rows added after loading fill the mapped matrix in place.
        state = dict(self.__dict__)
        state.update(ann=None, background=None, built=None, built_upto=0, catch_up_to=0)
        count = len(self.keys)
        if self.matrix.shape[0] < count + count // 4 + _MIN_CAPACITY:
            capacity = 2 * count + _MIN_CAPACITY
            state["matrix"] = np.zeros((capacity, self.dimension), dtype=np.float32)
            state["alive"] = np.zeros(capacity, dtype=bool)
            state["matrix"][:count], state["alive"][:count] = (
                self.matrix[:count],
                self.alive[:count],
            )
        state["_row_of"] = None  # it follows from the keys
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # The arrays are views of the mapped index file (copy-on-write: a row written here
        # changes this process's page, never the file).
        self.__dict__.update(state)
        for name in ("matrix", "alive", "recent"):
            if not getattr(self, name).flags.writeable:
                setattr(self, name, getattr(self, name).copy())

    @property
    def row_of(self) -> dict[Key, int]:
        """Key -> its live row (made from the keys at the first write after loading)."""
        if self._row_of is None:
            self._row_of = self.keys.live(self.alive)
        return self._row_of

    @property
    def count(self) -> int:
        return len(self.keys) - self.dead

    def add(self, key: tuple[str, str], row: NDArray[np.float32]) -> None:
        n = len(self.keys)
        if n == self.matrix.shape[0]:
            grown = np.zeros((2 * n, self.dimension), dtype=np.float32)
            grown[:n] = self.matrix
            alive = np.zeros(2 * n, dtype=bool)
            alive[:n] = self.alive
            self.matrix, self.alive = grown, alive
        self.matrix[n] = row
        self.alive[n] = True
        self.keys.append(key)
        self.row_of[key] = n
        if self.ann is not None:
            self.ann.add(n, row)

    def drop(self, key: tuple[str, str]) -> bool:
        row = self.row_of.pop(key, None)
        if row is None:
            return False
        self.alive[row] = False
        self.dead += 1
        if self.ann is not None:
            self.ann.remove(row)
        if self.dead > 1024 and self.dead * 2 > len(self.keys):
            self.compact()
        return True

    def compact(self) -> None:
        n = len(self.keys)
        keep = np.nonzero(self.alive[:n])[0]
        capacity = max(_MIN_CAPACITY, 2 * len(keep))
        matrix = np.zeros((capacity, self.dimension), dtype=np.float32)
        matrix[: len(keep)] = self.matrix[keep]
        alive = np.zeros(capacity, dtype=bool)
        alive[: len(keep)] = True
        kept = [k for i in keep.tolist() if (k := self.keys[i]) is not None]  # all alive
        self.keys = RowKeys(kept)
        self._row_of = {k: i for i, k in enumerate(kept)}
        self.matrix, self.alive, self.dead = matrix, alive, 0
        self.epoch += 1
        if self.ann is not None and self.background_builds:
            self.ann = None  # built again off the request path; exact search meanwhile
            self.start_build()
        elif self.ann is not None:
            # The graph's keys are row numbers, renumbered here: build it again (half the
            # rows were dead, so this is paid once per as many writes as there are rows).
            self.build_ann()

    background_builds = False  # VectorSet(approximate=None) sets it on its blocks

    def start_build(self, graph: Any = None) -> None:
        """On a background thread, choose the beam of ``graph`` (a copy of the graph in
        place) or, when None, build a new HNSW graph of the live rows and choose its beam;
        ``install`` puts the result in place at a later search. Exact search (or the graph
        in place) answers meanwhile. The thread reads rows of the matrix as it is now,
        which writes never change (they append rows or make a new matrix)."""
        if self.background is not None:
            return
        n = len(self.keys)
        rows = np.nonzero(self.alive[:n])[0]
        matrix, heard = self.matrix, self.heard
        queries = self.recent[: min(heard, _SAMPLE)].copy() if heard >= _MIN_HEARD else None
        epoch, dimension = self.epoch, self.dimension
        self.calibrated_at, self.calibrated_heard = len(rows), heard  # asked for once

        def build() -> None:
            try:
                ann = graph
                if ann is None:
                    ann = _new_graph(dimension)
                    for start in range(0, len(rows), _BUILD_BATCH):
                        if not threading.main_thread().is_alive():
                            return  # the interpreter is exiting: stop, do not hold it up
                        part = rows[start : start + _BUILD_BATCH]
                        ann.add(part.astype(np.uint64), matrix[part], threads=1)
                beam = _choose_beam(ann, matrix, rows, queries)
                self.built = (None if graph is not None else ann, n, epoch, rows, beam)
            finally:
                self.background = None

        # Not a daemon (stopping usearch mid-call at exit aborts the process): at exit the
        # interpreter waits for the batch under way, then the build stops.
        thread = threading.Thread(target=build, name="rdfmem-hnsw-build")
        self.background = thread
        thread.start()

    def install(self) -> None:
        """Put what a background thread made in place: a new graph, with the rows written
        since its copy added and those removed since taken out, or a new beam."""
        built, self.built = self.built, None
        if built is None:
            return
        ann, upto, epoch, rows, beam = built
        if ann is None:  # a beam chosen on a copy of the graph in place
            if self.ann is not None:
                self.ann.expansion_search = beam
            return
        if epoch != self.epoch:  # rows renumbered since the copy: build again
            self.start_build()
            return
        gone = rows[~self.alive[rows]]
        for row in gone.tolist():
            ann.remove(row)
        ann.expansion_search = beam
        # The rows written since the copy are added a few per search (``catch_up``), not
        # all here: until then they are scored exactly, as every row since ``built_upto``.
        self.ann, self.built_upto, self.catch_up_to = ann, upto, len(self.keys)

    def catch_up(self) -> None:
        """Add the next ``_CATCH_UP`` rows written while the graph was built elsewhere."""
        start = self.built_upto
        stop = min(self.catch_up_to, start + _CATCH_UP)
        new = np.arange(start, stop, dtype=np.int64)[self.alive[start:stop]]
        if len(new):
            self.ann.add(new.astype(np.uint64), self.matrix[new], threads=1)
        self.built_upto = stop

    def build_ann(self) -> None:
        """Build the HNSW graph here and now (``approximate=True``) and choose its beam."""
        ann = _new_graph(self.dimension)
        n = len(self.keys)
        rows = np.nonzero(self.alive[:n])[0]
        if len(rows):
            ann.add(rows.astype(np.uint64), self.matrix[rows])
        self.ann = ann
        self.built_upto = n
        self.calibrate()

    def remember(self, query: NDArray[np.float32]) -> None:
        """Keep ``query`` among the last ``_SAMPLE`` searched (what ``calibrate`` tunes for)."""
        self.recent[self.heard % _SAMPLE] = query
        self.heard += 1

    def calibrate(self) -> None:
        """Choose the beam of the graph in place (``_choose_beam``) on the last queries, or
        before ``_MIN_HEARD`` were searched, on the set's own rows."""
        n = len(self.keys)
        live = np.nonzero(self.alive[:n])[0]
        self.calibrated_at, self.calibrated_heard = len(live), self.heard
        queries = None
        if self.heard >= _MIN_HEARD:
            queries = self.recent[: min(self.heard, _SAMPLE)].copy()
        _choose_beam(self.ann, self.matrix, live, queries)

    def stale_beam(self) -> bool:
        """True when the beam should be chosen again: the set has doubled since, or the
        queries it was chosen on were fewer than ``_MIN_HEARD`` or ``_SAMPLE`` and now are
        not, or ``max(1024, rows / 64)`` searches were made since."""
        heard, before = self.heard, self.calibrated_heard
        return (
            self.count >= 2 * self.calibrated_at
            or before < _MIN_HEARD <= heard
            or before < _SAMPLE <= heard
            or heard - before >= max(1024, self.count // 64)
        )

    def search_exact(self, query: NDArray[np.float32], limit: int) -> list[tuple[int, float]]:
        n = len(self.keys)
        scores = _scores(self.matrix[:n], query)
        if self.dead:
            scores[~self.alive[:n]] = -1.0
        if limit < n:
            threshold = float(np.partition(scores, n - limit)[n - limit])
            chosen = np.nonzero((scores >= threshold) & (scores > 0.0))[0]
        else:
            chosen = np.nonzero(scores > 0.0)[0]
        return [(int(i), float(scores[i])) for i in chosen]

    def search_ann(self, query: NDArray[np.float32], limit: int) -> list[tuple[int, float]]:
        if self.built is not None:
            self.install()
        if self.built_upto < self.catch_up_to:
            self.catch_up()
        if self.stale_beam():
            if not self.background_builds:
                self.calibrate()
            elif self.background is None and self.built is None:
                # Choose the beam again off the request path, on a copy of the graph (a
                # memory copy, far cheaper than a build); the graph serves meanwhile.
                self.start_build(self.ann.copy())
        found = self.ann.search(query, _candidates(limit))
        rows = np.asarray(found.keys, dtype=np.int64).reshape(-1)
        n = len(self.keys)
        start = max(self.built_upto, n - _FRESH_ROWS)
        if start < n:  # the rows written since the build, whatever the graph found
            fresh = np.arange(start, n, dtype=np.int64)[self.alive[start:n]]
            rows = np.union1d(rows, fresh)
        if not len(rows):
            return []
        scores = _scores(self.matrix[rows], query)  # exact scores of the candidates
        return [(int(r), float(s)) for r, s in zip(rows, scores, strict=True) if s > 0.0]

    def nbytes(self) -> int:
        # The matrix and flags, plus about 150 bytes of Python objects per key.
        total = self.matrix.nbytes + self.alive.nbytes + self.recent.nbytes
        total += 150 * len(self.keys)
        if self.ann is not None:
            total += int(self.ann.memory_usage)
        return total


class VectorSet:
    """The vectors of ``predicate`` in ``graphs``, by ``(graph, subject)``, searched by
    cosine. Vectors of different dimensions are kept apart; a query meets its own dimension.

    Args:
        graphs: the graph IRIs this set covers (what writes to it are matched against).
        predicate: the IRI of the vector predicate.
        approximate: True: always usearch HNSW (the ``ann`` extra; ImportError without it);
            False: always exact; None (default): exact below ``ann_threshold`` rows,
            approximate from there on when usearch is installed (its graph built at the
            ninth search after a rebuild), exact otherwise.
        ann_threshold: see ``approximate``.

    Not thread-safe by itself: ``IndexHub`` users hold ``backend.lock`` around every call.
    """

    def __init__(
        self,
        graphs: tuple[str, ...],
        predicate: str,
        *,
        approximate: bool | None = None,
        ann_threshold: int = ANN_THRESHOLD,
    ) -> None:
        self.graphs = graphs
        self.predicate = predicate
        self.approximate = approximate
        self.ann_threshold = ann_threshold
        #: The store generation this set was last consistent with (-1: never built).
        self.seen = -1
        self._blocks: dict[int, _Rows] = {}
        self._searches = 0  # since the last rebuild

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Loaded beside an on-disk store: the HNSW graph is built again only once this
        # process has searched a few times (a process that asks once and exits builds none).
        self.__dict__.update(state, _searches=0)

    def __len__(self) -> int:
        return sum(b.count for b in self._blocks.values())

    def clear(self) -> None:
        self._blocks = {}

    def rebuild(self, entries: Iterable[tuple[str, str, NDArray[Any]]]) -> None:
        """Replace every vector with ``(graph, subject, vector)`` entries (a later entry for
        the same graph and subject wins)."""
        by_size: dict[int, dict[tuple[str, str], NDArray[Any]]] = {}
        for graph, subject, vector in entries:
            by_size.setdefault(len(vector), {})[(graph, subject)] = vector
        blocks: dict[int, _Rows] = {}
        for dimension, rows in by_size.items():
            block = _Rows(dimension)
            count = len(rows)
            matrix = np.zeros((max(_MIN_CAPACITY, 2 * count), dimension), dtype=np.float32)
            if count:
                matrix[:count] = np.stack(list(rows.values()))
            head = matrix[:count]
            if not np.isfinite(head).all():
                head[:] = np.nan_to_num(head, nan=0.0, posinf=0.0, neginf=0.0)
            norms = np.linalg.norm(head, axis=1, keepdims=True)
            np.divide(head, norms, out=head, where=norms > 0)
            block.matrix = matrix
            block.alive = np.zeros(matrix.shape[0], dtype=bool)
            block.alive[:count] = True
            block.keys = RowKeys(rows)
            block._row_of = {k: i for i, k in enumerate(rows)}
            blocks[dimension] = block
        self._blocks = blocks
        self._searches = 0

    def put(self, graph: str, subject: str, vector: NDArray[Any]) -> None:
        """Add or replace the vector of ``subject`` in ``graph``."""
        row = _normalised(vector)
        key = (graph, subject)
        for rows in self._blocks.values():
            rows.drop(key)
        block = self._blocks.get(row.shape[0])
        if block is None:
            block = self._blocks[row.shape[0]] = _Rows(row.shape[0])
        block.add(key, row)

    def __contains__(self, key: object) -> bool:
        """Whether ``(graph, subject)`` has a vector here."""
        return any(key in block.row_of for block in self._blocks.values())

    def remove(self, graph: str, subject: str) -> bool:
        """Forget the vector of ``subject`` in ``graph``; True when there was one."""
        key = (graph, subject)
        return any([block.drop(key) for block in self._blocks.values()])

    def search(self, query: NDArray[Any], limit: int) -> list[tuple[str, str, float]]:
        """``(graph, subject, score)`` of the ``limit`` best vectors with a cosine above 0,
        highest first, equal scores by subject then graph."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        block = self._blocks.get(q.shape[0])
        norm = float(np.linalg.norm(q))
        if limit <= 0 or block is None or block.count == 0 or norm == 0.0:
            return []
        q = q / norm
        block.remember(q)
        use_ann = self.approximate
        self._searches += 1
        if use_ann is None:  # large sets, when the ``ann`` extra (usearch) is installed
            # After a rebuild, the graph is built only once the set has served a few exact
            # searches: a write that bypassed the index, then one search, costs no build.
            use_ann = (
                block.count >= self.ann_threshold
                and (block.ann is not None or self._searches > _SEARCHES_BEFORE_BUILD)
                and _has_usearch()
            )
        if use_ann and self.approximate is None:  # build off the request path
            block.background_builds = True
            if block.ann is None and block.built is not None:
                block.install()
            if block.ann is None:
                block.start_build()
                use_ann = False  # exact until the graph is in place
        if use_ann:
            if block.ann is None:
                block.build_ann()
            hits = block.search_ann(q, limit)
        else:
            hits = block.search_exact(q, limit)
        keys = block.keys
        found = [(keys[r], s) for r, s in hits]
        ranked = sorted(
            ((k[0], k[1], s) for k, s in found if k is not None), key=lambda h: (-h[2], h[1], h[0])
        )
        return ranked[:limit]

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for graphs being built in the background; True when none is left. The next
        search puts them in place."""
        for block in list(self._blocks.values()):
            thread = block.background
            if thread is not None:
                thread.join(timeout)
        return all(b.background is None for b in self._blocks.values())

    def held(self) -> int:
        """Rows held in memory: the live ones and those replaced or removed but not yet
        reclaimed (at most about as many again, and 1,024)."""
        return sum(len(b.keys) for b in self._blocks.values())

    def nbytes(self) -> int:
        """About how many bytes the set holds (matrix, keys, approximate index)."""
        return sum(b.nbytes() for b in self._blocks.values())

    def __repr__(self) -> str:
        return f"VectorSet({self.graphs!r}, {self.predicate!r}, rows={len(self)})"
