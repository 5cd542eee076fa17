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

From 4,096 rows a transposed copy is kept too, so a sparse query (the default embedder's)
reads only its own dimensions (``rdfmem.store.indexes.columns``). On an on-disk store the
HNSW graph is built once and shared by the store's processes (``graphfile``).

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

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rdfmem.store.indexes import graphfile
from rdfmem.store.indexes.columns import Columns
from rdfmem.store.indexes.hnsw import (
    RECALL_TARGET,
    SAMPLE,
    candidates,
    choose_beam,
    has_usearch,
    new_graph,
    normalised,
)
from rdfmem.store.indexes.hnsw import scores as exact_scores
from rdfmem.store.indexes.rowkeys import Key, RowKeys

__all__ = ["ANN_THRESHOLD", "RECALL_TARGET", "SPARSE_EXACT_UPTO", "VectorSet"]

#: Rows of one dimension from which ``VectorSet(approximate=None)`` searches with usearch:
#: where exact search of 512-dimension vectors costs several times an HNSW search (measured
#: by ``benchmarks/bench_agent_loop.py``).
ANN_THRESHOLD = 10_000
#: Below this many rows a sparse query (the default embedder's: about 28 of 512 dimensions)
#: is searched exactly by its dimensions (``columns``: 0.11-0.17 ms at 20,000 rows), with
#: no HNSW graph to build for it: a build's seconds of a core slowed the turns around it.
SPARSE_EXACT_UPTO = 100_000
_MIN_CAPACITY = 64
_SEARCHES_BEFORE_BUILD = 8
_MIN_HEARD = 16  # queries searched before they, not the set's own rows, calibrate the beam
#: The latest rows added since the HNSW graph was built are also scored exactly, so a vector
#: just written is always found (an agent searches for what it has just saved).
_FRESH_ROWS = 4_096
_BUILD_BATCH = 2_048  # rows per usearch call of a background build
#: Rows written during a background build that each search adds to the graph once in place.
_CATCH_UP = 32


class _Rows:
    """The vectors of one dimension."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self.matrix = np.zeros((_MIN_CAPACITY, dimension), dtype=np.float32)
        self.alive = np.zeros(_MIN_CAPACITY, dtype=bool)
        self.columns = Columns(dimension)  # the rows by dimension, for sparse queries
        self.keys = RowKeys()  # row -> (graph, subject)
        self._row_of: dict[Key, int] | None = {}  # None: made from the keys when first used
        self.dead = 0
        self.ann: Any = None
        self.built_upto = 0  # rows at the last HNSW build: later ones are also scored exactly
        self.catch_up_to = 0  # rows up to which ``catch_up`` adds to a graph built elsewhere
        self.recent = np.zeros((SAMPLE, dimension), dtype=np.float32)  # a ring
        self.heard = 0  # queries searched
        self.calibrated_at = self.calibrated_heard = 0  # rows and queries at the last
        self.epoch = 0  # moves when rows are renumbered (a graph built before is void)
        self.background: threading.Thread | None = None  # a graph being built off the path
        self.built: tuple[Any, int, int, NDArray[np.int64], int] | None = None

    #: Inside a bulk load: the first row added since, added to the graph in one call at
    #: its end (``settle``), not one by one.
    defer_from: int | None = None
    adopted = 0  # graphs taken from a file another process saved (``graphfile``)
    adopt_failed = False  # the saved graph could not be taken: built at the usual search

    def __getstate__(self) -> dict[str, Any]:
        # Saved beside an on-disk store (``IndexHub.export``): the rows, not the HNSW graph
        # or a build under way (built again off the request path after loading). The
        # matrix goes whole, with room to grow (its zero rows cost no disk: holes in the
        # index file), so rows added after loading fill the mapped matrix in place.
        state = dict(self.__dict__)
        state.update(ann=None, background=None, built=None, built_upto=0, catch_up_to=0)
        state.pop("adopted", None)
        state.pop("adopt_failed", None)
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
        if not isinstance(state.get("columns"), Columns):  # saved without: made again
            self.columns = Columns(self.dimension)
            self.columns.fill(self.matrix, len(self.keys))
        self.columns.writable()

    @property
    def row_of(self) -> dict[Key, int]:
        """Key -> its live row (made from the keys at the first write after loading)."""
        if self._row_of is None:
            self._row_of = self.keys.live(self.alive)
        return self._row_of

    @property
    def count(self) -> int:
        return len(self.keys) - self.dead

    def grow(self, capacity: int) -> None:
        """Make room for ``capacity`` rows (a copy of the matrix: O(rows))."""
        n = len(self.keys)
        if capacity <= self.matrix.shape[0]:
            return
        grown = np.zeros((capacity, self.dimension), dtype=np.float32)
        grown[:n] = self.matrix[:n]
        alive = np.zeros(capacity, dtype=bool)
        alive[:n] = self.alive[:n]
        self.matrix, self.alive = grown, alive

    def add(self, key: tuple[str, str], row: NDArray[np.float32]) -> None:
        n = len(self.keys)
        if n == self.matrix.shape[0]:
            self.grow(2 * n)
        self.matrix[n] = row
        self.columns.put(n, self.matrix)
        self.alive[n] = True
        self.keys.append(key)
        self.row_of[key] = n
        if self.ann is not None and self.defer_from is None:
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
        self.columns.fill(matrix, len(keep))
        self.epoch += 1
        if self.ann is not None and self.background_builds:
            self.ann = None  # built again off the request path; exact search meanwhile
            self.start_build()
        elif self.ann is not None:
            # The graph's keys are row numbers, renumbered here: build it again (half the
            # rows were dead, so this is paid once per as many writes as there are rows).
            self.build_ann()

    background_builds = False  # VectorSet(approximate=None) sets it on its blocks

    def start_build(
        self, graph: Any = None, path: Path | None = None, adopt_only: bool = False
    ) -> None:
        """On a background thread, choose the beam of ``graph`` (a copy of the graph in
        place) or, when None, take the graph saved at ``path`` by another process
        (``rdfmem.store.indexes.graphfile``; with ``adopt_only``, nothing else) or build a
        new HNSW graph of the live rows (saved at ``path`` for the others), and choose its
        beam; ``install`` puts the result in place at a later search. Exact search (or the
        graph in place) answers meanwhile. The thread reads rows of the matrix as it is
        now, which writes never change (they append rows or make a new matrix)."""
        if self.background is not None:
            return
        n = len(self.keys)
        rows = np.nonzero(self.alive[:n])[0]
        matrix, heard, keys = self.matrix, self.heard, self.keys
        queries = self.recent[: min(heard, SAMPLE)].copy() if heard >= _MIN_HEARD else None
        epoch, dimension = self.epoch, self.dimension
        if not adopt_only:
            self.calibrated_at, self.calibrated_heard = len(rows), heard  # asked for once

        def exiting() -> bool:  # the interpreter is exiting: stop, do not hold it up
            return not threading.main_thread().is_alive()

        def build() -> None:
            try:
                ann = graph
                if ann is None and path is not None:
                    ann = graphfile.adopt(path, matrix, rows, keys.__getitem__, exiting)
                    self.adopted += ann is not None
                    if ann is None and adopt_only:
                        self.adopt_failed = True
                        return
                if ann is None:
                    ann = new_graph(dimension)
                    for start in range(0, len(rows), _BUILD_BATCH):
                        if exiting():
                            return
                        part = rows[start : start + _BUILD_BATCH]
                        ann.add(part.astype(np.uint64), matrix[part], threads=1)
                    if path is not None:  # for the other processes of the store
                        graphfile.write(path, ann, rows, keys.__getitem__, matrix)
                beam = choose_beam(ann, matrix, rows, queries)
                if adopt_only:
                    self.calibrated_at, self.calibrated_heard = len(rows), heard
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
        ann = new_graph(self.dimension)
        n = len(self.keys)
        rows = np.nonzero(self.alive[:n])[0]
        if len(rows):
            ann.add(rows.astype(np.uint64), self.matrix[rows])
        self.ann = ann
        self.built_upto = n
        self.calibrate()

    def settle(self) -> None:
        """Add to the graph in place, in one call, the rows added since ``defer_from`` (a
        bulk load's) and those still to catch up: every row is then in the graph."""
        n = len(self.keys)
        start, self.defer_from = self.defer_from, None
        while self.built_upto < self.catch_up_to:
            self.catch_up()
        if start is not None and start < n:
            new = np.arange(start, n, dtype=np.int64)[self.alive[start:n]]
            self.ann.add(new.astype(np.uint64), self.matrix[new])
        self.built_upto = n  # none left to score exactly

    def remember(self, query: NDArray[np.float32]) -> None:
        """Keep ``query`` among the last ``SAMPLE`` searched (what ``calibrate`` tunes for)."""
        self.recent[self.heard % SAMPLE] = query
        self.heard += 1

    def calibrate(self) -> None:
        """Choose the beam of the graph in place (``hnsw.choose_beam``) on the last queries, or
        before ``_MIN_HEARD`` were searched, on the set's own rows."""
        n = len(self.keys)
        live = np.nonzero(self.alive[:n])[0]
        self.calibrated_at, self.calibrated_heard = len(live), self.heard
        queries = None
        if self.heard >= _MIN_HEARD:
            queries = self.recent[: min(self.heard, SAMPLE)].copy()
        choose_beam(self.ann, self.matrix, live, queries)

    def stale_beam(self) -> bool:
        """True when the beam should be chosen again: the set has doubled since, or the
        queries it was chosen on were fewer than ``_MIN_HEARD`` or ``SAMPLE`` and now are
        not, or ``max(1024, rows / 64)`` searches were made since."""
        heard, before = self.heard, self.calibrated_heard
        return (
            self.count >= 2 * self.calibrated_at
            or before < _MIN_HEARD <= heard
            or before < SAMPLE <= heard
            or heard - before >= max(1024, self.count // 64)
        )

    def search_exact(self, query: NDArray[np.float32], limit: int) -> list[tuple[int, float]]:
        n = len(self.keys)
        used = self.columns.sparse(query)  # few dimensions: read only those (``columns``)
        if used is None:
            scores = exact_scores(self.matrix[:n], query)
        else:
            scores = self.columns.scores(query, used, n)
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
        found = self.ann.search(query, candidates(limit))
        rows = np.asarray(found.keys, dtype=np.int64).reshape(-1)
        n = len(self.keys)
        start = max(self.built_upto, n - _FRESH_ROWS)
        if start < n:  # the rows written since the build, whatever the graph found
            fresh = np.arange(start, n, dtype=np.int64)[self.alive[start:n]]
            rows = np.union1d(rows, fresh)
        if not len(rows):
            return []
        scores = exact_scores(self.matrix[rows], query)  # exact scores of the candidates
        keep = scores > 0.0
        if np.count_nonzero(keep) > limit:  # the best ``limit`` (and rows tied with them)
            keep &= scores >= np.partition(scores, len(scores) - limit)[len(scores) - limit]
        return [(int(r), float(s)) for r, s in zip(rows[keep], scores[keep], strict=True)]

    def nbytes(self) -> int:
        # The matrix and flags, plus about 150 bytes of Python objects per key.
        total = self.matrix.nbytes + self.alive.nbytes + self.recent.nbytes
        total += self.columns.nbytes()
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
        #: The on-disk store's folder, where HNSW graphs are shared between its processes
        #: (``rdfmem.store.indexes.graphfile``); None: built here, kept here.
        self.folder: Path | None = None

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Loaded beside an on-disk store: the HNSW graph is built again only once this
        # process has searched a few times (a process that asks once and exits builds none).
        self.__dict__.update(state, _searches=0, folder=None)

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
            block.columns.fill(matrix, count)
            block.alive = np.zeros(matrix.shape[0], dtype=bool)
            block.alive[:count] = True
            block.keys = RowKeys(rows)
            block._row_of = {k: i for i, k in enumerate(rows)}
            blocks[dimension] = block
        self._blocks = blocks
        self._searches = 0

    def put(self, graph: str, subject: str, vector: NDArray[Any]) -> None:
        """Add or replace the vector of ``subject`` in ``graph``."""
        row = normalised(vector)
        key = (graph, subject)
        for rows in self._blocks.values():
            rows.drop(key)
        block = self._blocks.get(row.shape[0])
        if block is None:
            block = self._blocks[row.shape[0]] = _Rows(row.shape[0])
        block.add(key, row)

    def reserve(self) -> None:
        """Leave room for half as many rows again as are held (a full matrix doubles in a
        write: at 20,000 rows of 512 dimensions, 50-95 ms of the turn after a load)."""
        for block in self._blocks.values():
            held = len(block.keys)
            block.grow(held + max(_MIN_CAPACITY, held // 2))

    def after_load(self) -> None:
        """After a bulk load: leave room for the writes that follow (``reserve``) and add
        the loaded rows to the HNSW graphs in place in one call each (``settle``); the load
        pays, not the next turns. No graph is built here (measured: no faster turns after
        loading 20,000 memories, whose queries need the widest beam, and a longer load)."""
        self.reserve()
        for block in self._blocks.values():
            if block.ann is not None:
                block.settle()

    def before_load(self) -> None:
        """Before a bulk load's vectors are put: the graphs in place take them in one call
        at ``after_load``, not one by one (until then they are not in the graph)."""
        for block in self._blocks.values():
            if block.ann is not None and block.defer_from is None:
                block.defer_from = len(block.keys)

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
            use_ann = self._approximate_now(block, q)
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

    def _approximate_now(self, block: _Rows, query: NDArray[np.float32]) -> bool:
        """For ``approximate=None``: whether ``block`` is searched with its HNSW graph now.
        The graph is made off the request path (exact search answers meanwhile): taken
        from the file another process of the store saved as soon as there is one, else
        built once the set has served a few exact searches (after a rebuild, a write that
        bypassed the index and then one search cost no build)."""
        if block.count < self.ann_threshold or not has_usearch():
            return False
        if block.count < SPARSE_EXACT_UPTO and block.columns.sparse(query) is not None:
            return False  # exact, reading its few dimensions: cheaper than any graph
        block.background_builds = True
        if block.ann is None and block.built is not None:
            block.install()
        if block.ann is not None:
            return True
        path = self.graph_path(block.dimension)
        if self._searches > _SEARCHES_BEFORE_BUILD:
            block.start_build(path=path)
        elif path is not None and not block.adopt_failed and path.exists():
            block.start_build(path=path, adopt_only=True)
        return False

    def graph_path(self, dimension: int) -> Path | None:
        """Where the other processes of the store share this set's graph (None: not)."""
        folder = self.folder
        return folder and graphfile.graph_path(folder, self.graphs, self.predicate, dimension)

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
