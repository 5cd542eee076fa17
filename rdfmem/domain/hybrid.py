"""Hybrid search: keyword (BM25) and vector evidence, fused.

``TextIndex`` searches the texts of some named graphs by BM25 (``rdfmem.store.indexes.
keywords``): a text is the literal values of a few predicates of a subject (a memory's title,
topics and content). On an embedded store the texts live in a ``KeywordSet`` of the store's
index hub, changed document by document by the writes made inside ``writing`` (in their
critical section, as ``VectorIndex`` does for vectors); any other write to the graphs makes
it load every text again with one query before the next search. On a remote store every
search reads the texts of the graphs afresh with one query (as vectors are read without the
change log) and ranks them in a throw-away set.

``fuse`` merges the two rankings linearly: each keyword score divided by the best keyword
score of the query, times ``KEYWORD_WEIGHT``, plus the cosine times ``1 - KEYWORD_WEIGHT``.
The weight, and linear fusion over reciprocal-rank fusion, were chosen by measurement on the
LoCoMo development split (``benchmarks/bench_search_quality.py``, ``docs/search.md``).

>>> fuse([("g", "a", 8.0), ("g", "b", 4.0)], [("g", "b", 0.5), ("g", "c", 0.9)], 3)
[('g', 'a', 0.8), ('g', 'b', 0.5), ('g', 'c', 0.18)]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Literal

from pyoxigraph import Literal as RdfLiteral
from pyoxigraph import NamedNode

from rdfmem.core.errors import InvalidValue
from rdfmem.core.terms import sparql_term
from rdfmem.domain.embeddings import PATCH_LIMIT, Embedder, VectorIndex, keep_loaded, patch
from rdfmem.store.indexes.follow import one_look, text_follower
from rdfmem.store.indexes.keywords import KeywordSet
from rdfmem.store.indexes.loading import Loaded
from rdfmem.store.known_rows import subject_rows
from rdfmem.store.own_rows import on_server, own_table

if TYPE_CHECKING:
    from rdfmem.store.indexes import IndexHub
    from rdfmem.store.rdfstore import RdfStore

__all__ = [
    "KEYWORD_WEIGHT",
    "RANKINGS",
    "Ranking",
    "TextIndex",
    "TextWrite",
    "candidates",
    "check_ranking",
    "fuse",
    "search",
]

#: How a search ranks: both kinds of evidence fused (the default), or one alone.
Ranking = Literal["hybrid", "keyword", "vector"]
RANKINGS: tuple[Ranking, ...] = ("hybrid", "keyword", "vector")
#: The share of the keyword score in the fused score (measured: docs/search.md).
KEYWORD_WEIGHT = 0.8

Hit = tuple[str, str, float]


def check_ranking(ranking: str) -> Ranking:
    """``ranking`` when it is one of ``RANKINGS``.

    Raises:
        InvalidValue: another value.
    """
    if ranking not in RANKINGS:
        raise InvalidValue(f"ranking is one of {', '.join(RANKINGS)}, not {ranking!r}")
    return ranking


def candidates(limit: int) -> int:
    """How many hits of each ranking ``fuse`` looks at to give ``limit``."""
    return max(30, 3 * limit)


def fuse(keyword: Sequence[Hit], vector: Sequence[Hit], limit: int) -> list[Hit]:
    """The ``limit`` best ``(graph, subject, score)`` of both rankings by fused score, highest
    first (equal scores by subject then graph); scores rounded to 6 places."""
    best = max((h[2] for h in keyword), default=0.0)
    fused: dict[tuple[str, str], float] = {}
    if best > 0.0:
        for graph, subject, score in keyword:
            fused[(graph, subject)] = KEYWORD_WEIGHT * score / best
    for graph, subject, score in vector:
        key = (graph, subject)
        fused[key] = fused.get(key, 0.0) + (1.0 - KEYWORD_WEIGHT) * score
    ranked = sorted(
        ((g, s, round(v, 6)) for (g, s), v in fused.items() if v > 0.0),
        key=lambda h: (-h[2], h[1], h[0]),
    )
    return ranked[:limit]


def search(
    ranking: Ranking,
    texts: TextIndex,
    vectors: VectorIndex,
    embedder: Embedder,
    graphs: Sequence[NamedNode],
    query: str,
    limit: int,
) -> list[tuple[NamedNode, NamedNode, float]]:
    """``(graph, subject, score)`` of the ``limit`` best texts of ``graphs`` for ``query``,
    by ``ranking``: ``hybrid`` fuses the ``candidates(limit)`` best of each kind (``fuse``),
    ``keyword`` is BM25 alone, ``vector`` the cosine of ``embedder``'s vectors alone."""
    if limit <= 0:
        return []
    if ranking == "vector":
        return vectors.search(graphs, embedder.embed([query])[0], limit)
    if ranking == "keyword":
        hits = texts.search(graphs, query, limit)
    else:
        depth = candidates(limit)
        with one_look(texts.store):  # both followers: one change-log look
            texts.start(graphs)  # a remote store's whole read of texts, beside the vectors'
            by_vector = vectors.search(graphs, embedder.embed([query])[0], depth)
            plain = [(g.value, s.value, score) for g, s, score in by_vector]
            hits = fuse(texts.search(graphs, query, depth), plain, limit)
    return [(NamedNode(g), NamedNode(s), score) for g, s, score in hits]


class TextWrite:
    """The text changes of one domain write (see ``TextIndex.writing``)."""

    def __init__(self) -> None:
        self.changes: list[tuple[NamedNode, str | None]] = []

    def put(self, subject: NamedNode, text: str) -> None:
        """``subject`` now has this text."""
        self.changes.append((subject, text))

    def remove(self, subject: NamedNode) -> None:
        """``subject`` has no text any more."""
        self.changes.append((subject, None))


class TextIndex:
    """The texts of ``predicates`` (their literal values joined, per subject) in some named
    graphs, searched by BM25. See the module docstring for how they are kept."""

    def __init__(self, store: RdfStore, predicates: Sequence[NamedNode]) -> None:
        self.store = store
        self.predicates = tuple(predicates)
        self.name = " ".join(p.value for p in self.predicates)
        hub = store.indexes
        if hub is not None:
            hub.watch(f"keywords {self.name}", [p.value for p in self.predicates], self._loaded)

    def _loaded(self, loaded: Loaded, before: set[int]) -> None:
        # A bulk load added texts: kept in the sets now (``IndexHub.load``); a new subject's
        # text is its loaded literals in the order ``_texts`` joins them.
        hub = self.store.indexes
        if hub is None:
            return
        order = {p.value: i for i, p in enumerate(self.predicates)}
        for graph, subjects in loaded.pairs(*order).items():
            entries: dict[str, Any] = {}
            for subject, pairs in subjects.items():
                values = sorted((order[p], o.value) for p, o in pairs if isinstance(o, RdfLiteral))
                if values:
                    entries[subject] = "\n".join(v for _, v in values)
            own = hub.keywords((graph,), self.name)  # made first: one of the sets below
            keep_loaded(
                hub.keyword_sets(graph, self.name),
                own,
                before,
                graph,
                entries,
                partial(self._fresh, hub, (graph,)),
                self._subject_entries,
                hub.generation,
            )

    def search(self, graphs: Sequence[NamedNode], query: str, limit: int) -> list[Hit]:
        """``(graph, subject, score)`` of the best ``limit`` texts with a BM25 score above 0,
        highest first (equal scores by subject IRI). On an embedded store each graph has its
        own set (its own BM25 statistics); their best are merged."""
        if limit <= 0 or not graphs:
            return []
        names = tuple(dict.fromkeys(g.value for g in graphs))
        hub = self.store.indexes
        follower = text_follower(self.store, self.name) if hub is None else None
        if follower is not None:  # the store tells what changed: fetch just that
            hits = follower.search(names, query, limit, self._entries, self._subject_entries)
        elif hub is None:  # read afresh, one set per graph as below
            sets = {g: KeywordSet((g,), self.name) for g in names}
            for graph, subject, text in self._entries(names):
                sets[graph].put(graph, subject, text)
            hits = [h for texts in sets.values() for h in texts.search(query, limit)]
        else:
            with hub.reading():  # one set per graph, as VectorIndex: the best of each, merged
                hits = [h for g in names for h in self._fresh(hub, (g,)).search(query, limit)]
        return sorted(hits, key=lambda h: (-h[2], h[1], h[0]))[:limit]

    def start(self, graphs: Sequence[NamedNode]) -> None:
        """On a SPARQL server whose texts are followed, start reading now, on a thread, the
        texts of ``graphs`` that the next ``search`` would read whole (its first one)."""
        if self.store.indexes is None and graphs and on_server(self.store):
            follower = text_follower(self.store, self.name)
            if follower is not None:
                names = tuple(dict.fromkeys(g.value for g in graphs))
                follower.start_whole(names, self._entries)

    def _fresh(self, hub: IndexHub, names: tuple[str, ...]) -> KeywordSet:
        texts = hub.keywords(names, self.name)
        if hub.fresh(texts.seen, names):
            return texts
        changed = hub.changed(texts.seen, names)
        if changed is None or len(changed) > PATCH_LIMIT:  # written around it: load again
            texts.rebuild(self._entries(names))
        else:  # another process's writes, subject by subject (an owned store's journal)
            patch(texts, changed, self._subject_entries)
        texts.seen = hub.generation
        return texts

    @contextmanager
    def writing(self, graph: NamedNode) -> Iterator[TextWrite]:
        """Make a write to ``graph`` and say what it did to texts (``put``/``remove`` on the
        object yielded): the keyword sets covering ``graph`` that were fresh before it are
        changed accordingly when the block ends without an error, under the write lock (the
        same lock as ``VectorIndex.writing``, which it may be nested in)."""
        change = TextWrite()
        hub = self.store.indexes
        if hub is None:
            yield change
            return
        with hub.writing([graph.value]):
            self._fresh(hub, (graph.value,))  # kept from the first write on
            sets = [
                k for k in hub.keyword_sets(graph.value, self.name) if hub.fresh(k.seen, k.graphs)
            ]
            yield change
            for texts in sets:
                for subject, text in change.changes:
                    if text is None:
                        texts.remove(graph.value, subject.value)
                    else:
                        texts.put(graph.value, subject.value, text)
                texts.seen = hub.generation

    def _entries(self, names: Sequence[str]) -> Iterator[tuple[str, str, str]]:
        # One UNION branch a predicate, each binding its ``?p``: Oxigraph server joins a
        # ``VALUES ?p`` with ``?s ?p ?o`` after reading the graph whole (10,000 memories:
        # 298 ms against 155 ms). The rows are read as tuples (``own_table``: no dict a row).
        if not self.predicates:
            return
        graphs = " ".join(sparql_term(NamedNode(g)) for g in names)
        branches = " UNION ".join(
            f"{{ ?s {sparql_term(p)} ?o BIND({sparql_term(p)} AS ?p) }}" for p in self.predicates
        )
        variables, rows = own_table(
            self.store,
            f"SELECT ?g ?s ?p ?o WHERE {{ VALUES ?g {{ {graphs} }} GRAPH ?g {{ {branches} }} "
            "FILTER(isIRI(?s) && isLiteral(?o)) }",
        )
        columns = itemgetter(*(variables.index(v) for v in ("g", "s", "p", "o")))
        yield from self._texts(map(columns, rows))

    def _subject_entries(
        self, graph: str, subjects: Sequence[str]
    ) -> Iterator[tuple[str, str, str]]:
        # As ``VectorIndex._subject_entries``: the subjects inside the GRAPH block; the
        # predicates a FILTER over each subject's triples, not a second VALUES (Oxigraph
        # server joins two VALUES after a scan: 50 subjects took 52 ms, now 1.4 ms).
        values = " ".join(sparql_term(NamedNode(s)) for s in subjects)
        predicates = ", ".join(sparql_term(p) for p in self.predicates)
        g = sparql_term(NamedNode(graph))
        sparql = (
            f"SELECT ?g ?s ?p ?o WHERE {{ GRAPH ?g {{ VALUES ?s {{ {values} }} ?s ?p ?o "
            f"FILTER(?p IN ({predicates})) }} FILTER(?g = {g} && isLiteral(?o)) }}"
        )
        # Answered from the subjects' triples when the backend knows them (an attached
        # process's own writes: ``rdfmem.store.known_rows``).
        named = [NamedNode(s) for s in subjects]
        rows = subject_rows(self.store, NamedNode(graph), named, sparql)
        return self._texts((r["g"], r["s"], r["p"], r["o"]) for r in rows)

    def _texts(self, rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[str, str, str]]:
        # ``(graph, subject, text)`` of ``(?g, ?s, ?p, ?o)`` rows: each subject's literals
        # joined in the order of the predicates (then of the texts).
        order = {p.value: i for i, p in enumerate(self.predicates)}
        parts: dict[tuple[str, str], list[tuple[int, str]]] = {}
        for g, s, p, o in rows:
            if isinstance(o, RdfLiteral):
                parts.setdefault((g.value, s.value), []).append((order[p.value], o.value))
        for (graph, subject), values in parts.items():
            yield graph, subject, "\n".join(v for _, v in sorted(values))
