"""Search quality on LoCoMo conversations, and search and save latency, in one run.

Each conversation of DATA.json (LoCoMo's shape: a list of conversations with
``conversation`` and ``qa``) goes into a fresh in-memory store: every turn one ``global``
memory (title: the turn's ``dia_id``; content: the session's date, the speaker, the text and,
for a shared image, its caption), saved with ``Memories.save``. Each question of categories
1-4 with evidence is asked with ``search(question, limit=10)``. Category 5 (adversarial:
unanswerable, no evidence turns) has nothing to retrieve and is left out (counted).

Reported per category and over 1-4: recall@5 and recall@10 (the share of a question's
evidence turns in the first 5 or 10 results, averaged over questions) and MRR (1 / rank of
the first evidence turn, 0 when none is in the first 10), for

* rdfmem's default (``Memories.search``: hybrid), keyword alone, vector alone
  (``Memories(..., ranking=...)``);
* plain BM25 (Okapi, k1 1.5, b 0.75, lowercase ``\\w+`` words, no stop words, no stemming),
  a reference implementation below, over the same turn texts;
* the fusions tried before choosing the default (reciprocal-rank, other linear weights),
  from the same keyword and vector candidates.

Then latency: ``Memories.search`` p50/p99/slowest on the conversations, and at ``--size``
memories (the turns repeated, each copy its own title); save cost with and without the
keyword index (``ranking="vector"`` keeps none), interleaved in the same run; and the turns
(save + search) right after saving ``--stall-before`` memories, slowest against median.

Run: ``python benchmarks/bench_search_quality.py DATA.json [--quick]`` (DATA.json: for
example ``../shared/data/locomo-dev/locomo-dev.json``; never copied into the repository);
writes ``benchmarks/results/search_quality.md`` (a ``--quick`` run writes to a temp file).
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import collections
import json
import math
import platform
import re
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from results_io import write_results

from rdfmem import RdfStore
from rdfmem.domain.hybrid import candidates, fuse
from rdfmem.memories import Memories, Memory
from rdfmem.store.indexes import ANN_THRESHOLD

LIMIT = 10
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_PLAIN_WORD = re.compile(r"\w+")


# -- the data -------------------------------------------------------------------------------


def turns(conversation: dict) -> list[tuple[str, str]]:
    """``(dia_id, text)`` of every turn, in order."""
    c = conversation["conversation"]
    out = []
    for key in c:
        if not re.fullmatch(r"session_\d+", key):
            continue
        date = c.get(key + "_date_time", "")
        for turn in c[key]:
            text = turn["text"]
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            out.append((turn["dia_id"], f"{date}\n{turn['speaker']}: {text}"))
    return out


def evidence(qa: dict) -> set[str]:
    """The evidence turns of a question, read leniently ("D8:6; D9:17" in one string)."""
    found: set[str] = set()
    for item in qa.get("evidence") or []:
        found.update(p.strip() for p in re.split(r"[;,]", str(item)) if p.strip())
    return found


# -- plain BM25, the baseline -----------------------------------------------------------------


class PlainBM25:
    """Okapi BM25 (k1 1.5, b 0.75), lowercase ``\\w+`` tokens, IDF ln(1 + (N-df+.5)/(df+.5))."""

    def __init__(self, docs: Sequence[str], k1: float = 1.5, b: float = 0.75) -> None:
        self.tokens = [_PLAIN_WORD.findall(d.lower()) for d in docs]
        self.k1, self.b = k1, b
        self.n = len(docs)
        self.average = sum(map(len, self.tokens)) / max(self.n, 1)
        self.tf = [collections.Counter(t) for t in self.tokens]
        self.df = collections.Counter(w for t in self.tokens for w in set(t))

    def search(self, query: str, limit: int) -> list[int]:
        scores = np.zeros(self.n)
        for word in set(_PLAIN_WORD.findall(query.lower())):
            df = self.df.get(word)
            if not df:
                continue
            idf = math.log(1 + (self.n - df + 0.5) / (df + 0.5))
            for i, tf in enumerate(self.tf):
                f = tf.get(word, 0)
                if f:
                    norm = self.k1 * (1 - self.b + self.b * len(self.tokens[i]) / self.average)
                    scores[i] += idf * f * (self.k1 + 1) / (f + norm)
        order = sorted((i for i in range(self.n) if scores[i] > 0), key=lambda i: (-scores[i], i))
        return order[:limit]


# -- quality ----------------------------------------------------------------------------------


def _rrf(keyword: list, vector: list, limit: int, k: int = 60) -> list:
    fused: dict[tuple[str, str], float] = collections.Counter()
    for hits in (keyword, vector):
        for rank, (g, s, _) in enumerate(hits):
            fused[(g, s)] += 1.0 / (k + rank + 1)
    ranked = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0][1]))
    return [(g, s, v) for (g, s), v in ranked[:limit]]


def _linear(weight: float) -> Callable[[list, list, int], list]:
    def run(keyword: list, vector: list, limit: int) -> list:
        best = max((h[2] for h in keyword), default=0.0) or 1.0
        fused: dict[tuple[str, str], float] = collections.Counter()
        for g, s, v in keyword:
            fused[(g, s)] += weight * v / best
        for g, s, v in vector:
            fused[(g, s)] += (1 - weight) * v
        ranked = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0][1]))
        return [(g, s, v) for (g, s), v in ranked[:limit]]

    return run


FUSIONS: dict[str, Callable[[list, list, int], list]] = {
    "RRF k=60": _rrf,
    "RRF k=10": lambda k, v, n: _rrf(k, v, n, 10),
    "linear 0.5 keyword": _linear(0.5),
    "linear 0.7 keyword": _linear(0.7),
    "linear 0.9 keyword": _linear(0.9),
}


def _titles(pairs: Sequence[tuple[Memory, float]]) -> list[str]:
    return [m.title for m, _ in pairs]


def quality(data: list, latencies: list[float]) -> tuple[dict, int]:
    """Per method and category, lists of (recall@5, recall@10, reciprocal rank)."""
    results: dict[str, dict[int, list[tuple[float, float, float]]]] = collections.defaultdict(
        lambda: collections.defaultdict(list)
    )
    skipped = 0
    for conversation in data:
        store = RdfStore()
        rows = turns(conversation)
        default = Memories(store)
        for dia_id, text in rows:
            default.save(Memory("global", dia_id, text))
        by = {name: Memories(store, ranking=name) for name in ("keyword", "vector")}
        plain = PlainBM25([text for _, text in rows])
        ids = [dia_id for dia_id, _ in rows]
        depth = candidates(LIMIT)
        for qa in conversation["qa"]:
            wanted = evidence(qa) & set(ids)
            if qa.get("category") not in CATEGORIES or not wanted:
                skipped += 1
                continue
            question = str(qa["question"])
            start = time.perf_counter()
            found = _titles(default.search(question, LIMIT))
            latencies.append(time.perf_counter() - start)
            ranked = {"rdfmem default (hybrid)": found}
            kw = [(m.scope, m.title, s) for m, s in by["keyword"].search(question, depth)]
            vec = [(m.scope, m.title, s) for m, s in by["vector"].search(question, depth)]
            ranked["keyword alone"] = [s for _, s, _ in kw[:LIMIT]]
            ranked["vector alone"] = [s for _, s, _ in vec[:LIMIT]]
            ranked["plain BM25"] = [ids[i] for i in plain.search(question, LIMIT)]
            ranked["check: fuse() on the candidates"] = [s for _, s, _ in fuse(kw, vec, LIMIT)]
            for name, fusion in FUSIONS.items():
                ranked[f"alt: {name}"] = [s for _, s, _ in fusion(kw, vec, LIMIT)]
            for name, titles in ranked.items():
                results[name][qa["category"]].append(_score(titles, wanted))
        store.close()
    return results, skipped


def _score(titles: list[str], wanted: set[str]) -> tuple[float, float, float]:
    r5 = len(wanted.intersection(titles[:5])) / len(wanted)
    r10 = len(wanted.intersection(titles[:10])) / len(wanted)
    rr = next((1.0 / (i + 1) for i, t in enumerate(titles[:10]) if t in wanted), 0.0)
    return r5, r10, rr


def _mean(values: list[tuple[float, float, float]], i: int) -> float:
    return statistics.fmean(v[i] for v in values) if values else float("nan")


def quality_table(results: dict, skipped: int, data: list) -> list[str]:
    n5 = sum(1 for c in data for qa in c["qa"] if qa.get("category") == 5)
    base = results["plain BM25"]
    base_all = [v for c in CATEGORIES for v in base[c]]
    lines = [
        f"Questions of categories 1-4 with evidence: {len(base_all)}; left out: {skipped} "
        f"({n5} of category 5, adversarial: no evidence to retrieve).",
        "",
        "| ranking | category | questions | recall@5 | recall@10 | MRR | recall@10 / plain BM25 |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for name, by_cat in results.items():
        cats = [(f"{c} {CATEGORIES[c]}", by_cat[c], base[c]) for c in CATEGORIES]
        every = [v for c in CATEGORIES for v in by_cat[c]]
        for label, values, floor in [*cats, ("1-4", every, base_all)]:
            ratio = _mean(values, 1) / _mean(floor, 1) if _mean(floor, 1) else float("nan")
            lines.append(
                f"| {name} | {label} | {len(values)} | {_mean(values, 0):.3f} | "
                f"{_mean(values, 1):.3f} | {_mean(values, 2):.3f} | {ratio:.2f}x |"
            )
    return lines


# -- latency ----------------------------------------------------------------------------------


def _stats(seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p99 = ms[min(len(ms) - 1, math.ceil(0.99 * len(ms)) - 1)]
    return f"{statistics.median(ms):.3f} | {p99:.3f} | {ms[-1]:.3f}"


def _corpus(data: list, size: int) -> list[tuple[str, str]]:
    rows = [(f"{c['sample_id']} {dia_id}", text) for c in data for dia_id, text in turns(c)]
    return [
        (f"{rows[i % len(rows)][0]} copy {i // len(rows)}", rows[i % len(rows)][1])
        for i in range(size)
    ]


def latency_at(data: list, size: int, questions: list[str]) -> list[str]:
    """Searches right after ``size`` saves (the approximate graph, if any, building in the
    background meanwhile), then each ranking, interleaved query by query."""
    store = RdfStore()
    memories = Memories(store)
    for title, text in _corpus(data, size):
        memories.save(Memory("global", title, text))
    first = []
    for q in questions:
        start = time.perf_counter()
        memories.search(q, LIMIT)
        first.append(time.perf_counter() - start)
    lines = [
        f"| search, default, the first {len(first)} right after the saves | {size:,} | "
        f"{len(first)} | {_stats(first)} |"
    ]
    views = {name: Memories(store, ranking=name) for name in ("hybrid", "keyword", "vector")}
    lines += _interleaved(views, questions, size, "the next {n} (interleaved)")
    # Once the approximate (HNSW) graph is built off the request path: a search a second
    # until it is (each counted too), then the same 400 again.
    waited, waiting = time.perf_counter(), []
    while not _approximate_ready(store) and time.perf_counter() - waited < 1800:
        start = time.perf_counter()
        memories.search(questions[len(waiting) % len(questions)], LIMIT)
        waiting.append(time.perf_counter() - start)
        time.sleep(1.0)
    built_s = time.perf_counter() - waited
    lines.append(
        f"| search, default, while the approximate graph was built ({built_s:.0f} s after "
        f"the interleaved searches) | {size:,} | {len(waiting)} | "
        f"{_stats(waiting) if waiting else '- | - | -'} |"
    )
    lines += _interleaved(views, questions, size, "once the approximate graph is built")
    store.close()
    return lines


def _interleaved(
    views: dict[str, Memories], questions: list[str], size: int, when: str
) -> list[str]:
    """One table row per ranking: each question asked of every view in turn, timed."""
    seconds: dict[str, list[float]] = {name: [] for name in views}
    for q in questions:
        for name, view in views.items():
            start = time.perf_counter()
            view.search(q, LIMIT)
            seconds[name].append(time.perf_counter() - start)
    return [
        f"| search, {name}, {when.format(n=len(values))} | {size:,} | "
        f"{len(values)} | {_stats(values)} |"
        for name, values in seconds.items()
    ]


def _approximate_ready(store: RdfStore) -> bool:
    """True when every vector block past the threshold has its HNSW graph and no build is
    under way (the index's own fields: a benchmark may look inside)."""
    hub = store.indexes
    if hub is None:
        return True
    for vectors in list(hub._vectors.values()):
        for block in vectors._blocks.values():
            if block.count >= ANN_THRESHOLD and (block.ann is None or block.background):
                return False
    return True


def save_cost(data: list, size: int) -> list[str]:
    """Saves with the keyword index and without (``ranking="vector"``), interleaved."""
    stores = {name: RdfStore() for name in ("hybrid", "vector")}
    views = {name: Memories(store, ranking=name) for name, store in stores.items()}
    for view in views.values():
        view.search("warm the indexes", 1)
    seconds: dict[str, list[float]] = {name: [] for name in views}
    for title, text in _corpus(data, size):
        for name, view in views.items():
            start = time.perf_counter()
            view.save(Memory("global", title, text))
            seconds[name].append(time.perf_counter() - start)
    for store in stores.values():
        store.close()
    ratio = statistics.median(seconds["hybrid"]) / statistics.median(seconds["vector"])
    return [
        f"| save, keyword index kept (default) | {size:,} | {size} | {_stats(seconds['hybrid'])} |",
        f'| save, no keyword index (`ranking="vector"`, today\'s save) | {size:,} | {size} | '
        f"{_stats(seconds['vector'])} |",
        "",
        f"Save cost with the keyword index: {ratio:.2f}x the save without it (median).",
    ]


def stall(data: list, before: int, count: int, questions: list[str]) -> list[str]:
    """``count`` turns (one save, one search) right after ``before`` saves."""
    store = RdfStore()
    memories = Memories(store)
    corpus = _corpus(data, before + count)
    for title, text in corpus[:before]:
        memories.save(Memory("global", title, text))
    seconds = []
    for i, (title, text) in enumerate(corpus[before:]):
        start = time.perf_counter()
        memories.save(Memory("global", title, text))
        memories.search(questions[i % len(questions)], LIMIT)
        seconds.append(time.perf_counter() - start)
    store.close()
    ratio = max(seconds) / statistics.median(seconds)
    return [
        f"| turn (save + search) after {before:,} saves | {before + count:,} | {count} | "
        f"{_stats(seconds)} |",
        "",
        f"Slowest turn: {ratio:.1f}x the median turn.",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="LoCoMo-shaped JSON (e.g. locomo-dev.json)")
    parser.add_argument("--quick", action="store_true", help="small sizes, one conversation")
    parser.add_argument("--size", type=int, default=100_000, help="memories for the latency")
    parser.add_argument("--saves", type=int, default=5_000, help="saves for the save cost")
    parser.add_argument("--stall-before", type=int, default=9_800)
    parser.add_argument("--turns", type=int, default=400)
    args = parser.parse_args()
    data = json.loads(args.data.read_text(encoding="utf-8"))
    if args.quick:
        data = data[:1]
        args.size, args.saves, args.stall_before, args.turns = 2_000, 300, 500, 40
    questions = [str(qa["question"]) for c in data for qa in c["qa"]][:400]
    latencies: list[float] = []
    results, skipped = quality(data, latencies)
    text = [
        "# Search quality (LoCoMo) and search latency",
        "",
        f"Data: `{args.data.name}` ({len(data)} conversations). Command: "
        f"`python benchmarks/bench_search_quality.py {args.data.name}"
        f"{' --quick' if args.quick else ''}`. Python {platform.python_version()}, "
        f"{platform.machine()}.",
        "",
        *quality_table(results, skipped, data),
        "",
        "## Latency (ms; every call counted, no warm-up left out)",
        "",
        "| what | memories | calls | p50 | p99 | slowest |",
        "|---|---:|---:|---:|---:|---:|",
        f"| search, default, on the conversations above | per conversation | {len(latencies)} | "
        f"{_stats(latencies)} |",
        *latency_at(data, args.size, questions),
        *save_cost(data, args.saves),
        "",
        "| what | memories | turns | p50 | p99 | slowest |",
        "|---|---:|---:|---:|---:|---:|",
        *stall(data, args.stall_before, args.turns, questions),
        "",
    ]
    path = Path(__file__).parent / "results" / "search_quality.md"
    print(write_results(path, "\n".join(text), quick=args.quick))


if __name__ == "__main__":
    main()
