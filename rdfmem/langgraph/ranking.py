"""Search results as LangGraph's ``InMemoryStore`` gives them, from records in order.

Without a query (or without an index): the items passing the filter, oldest first, sliced
``[offset:offset + limit]``. With a query: every vector of every candidate scored by cosine,
highest first (ties keep item order), each item once at its best score, ``offset`` and
``limit`` counted in items; when fewer than ``limit`` scored items are left, items without
any vector follow, unscored.

A store without an index (no ``IndexConfig``) ranks a query by keywords instead: BM25 over
each candidate's JSON text (``rank_keywords``), scores divided by the best one; the
candidates sharing no word with the query follow, unscored, in item order.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from rdfmem.langgraph.records import Record, matches_filter
from rdfmem.langgraph.vectors import VectorRows
from rdfmem.store.indexes.keywords import KeywordSet

__all__ = ["rank", "rank_keywords", "rank_rows"]


def rank(
    records: Iterable[Record],
    *,
    filter: Mapping[str, Any] | None,
    limit: int,
    offset: int,
    query: Sequence[float] | None,
    rows: VectorRows | None,
) -> list[tuple[Record, float | None]]:
    """``(record, score)`` pairs of one search."""
    candidates: Iterable[Record] = records
    if filter:
        wanted = filter
        candidates = (r for r in records if matches_filter(r.value, wanted))
    if query is None or rows is None:
        if offset >= 0 and limit >= 0:
            return [(r, None) for r in itertools.islice(candidates, offset, offset + limit)]
        return [(r, None) for r in list(candidates)[offset : offset + limit]]
    found = list(candidates)
    owners: list[int] = []
    row_ids: list[int] = []
    scoreless: list[Record] = []
    for i, record in enumerate(found):
        if record.fields:
            for row in record.fields.values():
                owners.append(i)
                row_ids.append(row)
        else:
            scoreless.append(record)
    scores = rows.scores(np.asarray(row_ids, dtype=np.intp), query)
    order = np.argsort(-scores, kind="stable")
    seen: set[int] = set()
    kept: list[tuple[Record, float | None]] = []
    for j in order.tolist():
        i = owners[j]
        if i in seen:
            continue
        place = len(seen)
        seen.add(i)
        if place >= offset + limit:
            break
        if place >= offset:
            kept.append((found[i], float(scores[j])))
    if scoreless and len(kept) < limit:
        kept.extend((r, None) for r in scoreless[: limit - len(kept)])
    return kept


def rank_keywords(
    records: Iterable[Record],
    *,
    filter: Mapping[str, Any] | None,
    limit: int,
    offset: int,
    query: str,
) -> list[tuple[Record, float | None]]:
    """``(record, score)`` pairs of one search by keywords (see the module docstring)."""
    found = [r for r in records if not filter or matches_filter(r.value, filter)]
    texts = KeywordSet(("",), "items")
    for i, record in enumerate(found):
        texts.put("", str(i), record.text)
    hits = texts.search(query, len(found))
    best = hits[0][2] if hits else 1.0
    scored = [(found[int(i)], score / best) for _, i, score in hits]
    matched = {int(i) for _, i, _ in hits}
    rest: list[tuple[Record, float | None]] = [
        (r, None) for i, r in enumerate(found) if i not in matched
    ]
    ranked: list[tuple[Record, float | None]] = [*scored, *rest]
    return ranked[max(offset, 0) : max(offset, 0) + max(limit, 0)]


def rank_rows(
    rows: VectorRows,
    query: Sequence[float],
    *,
    accept: Callable[[Record], bool],
    limit: int,
    offset: int,
    unscored: Callable[[], Iterable[Record]],
) -> list[tuple[Record, float | None]]:
    """``rank`` without a filter, from every row of ``rows`` at once: one matrix-vector
    product, then rows best first (only the best few sorted, unless more are needed) until
    ``offset + limit`` accepted items are found. Ties go by row rather than by item age.
    ``unscored`` gives the candidates without vectors, read only when too few are scored."""
    want = offset + limit
    kept: list[tuple[Record, float | None]] = []
    if want > 0 and limit > 0:
        scores = rows.all_scores(query)
        size = scores.shape[0]
        k = min(size, max(64, 8 * want))
        while True:
            best = np.argpartition(-scores, k - 1)[:k] if k < size else np.arange(size)
            best = best[np.lexsort((best, -scores[best]))]
            kept = []
            seen: set[int] = set()
            owners = rows.owners
            for row in best.tolist():
                record = owners[row]
                if record is None or id(record) in seen or not accept(record):
                    continue
                place = len(seen)
                seen.add(id(record))
                if place >= want:
                    break
                if place >= offset:
                    kept.append((record, float(scores[row])))
            if len(seen) >= want or k >= size:
                break
            k = size
    if len(kept) < limit:
        missing = limit - len(kept)
        kept.extend((r, None) for r in itertools.islice(_without_vectors(unscored()), missing))
    return kept


def _without_vectors(records: Iterable[Record]) -> Iterable[Record]:
    return (r for r in records if not r.fields)
