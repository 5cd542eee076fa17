"""A keyword index kept in memory and changed document by document: Okapi BM25 over words.

``tokenize`` folds text to search words: NFKC, casefold, Unicode word runs (any script;
letters and digits apart, so "v2" is "v" and "2" and "3pm" is "3" and "pm"), accents
dropped, common English words left out, a light English suffix stemmer ("deploys",
"deployed", "deploying" -> "deploy"; "parties" -> "party").

``KeywordSet`` holds, for every word, the documents that contain it and how often (growing
arrays per word), the length of every document and how many documents hold each word.
``put`` and ``remove`` cost O(words of the document) amortised; a removed or replaced
document's slot is reused, and the stale postings it leaves are dropped word by word (at
each doubling of a word's postings, or when a search finds half of them stale), so no step
rewrites the whole index.
``search`` scores only the postings of the query's words (numpy, on this thread): BM25 with
``k1`` 1.2 and ``b`` 0.75 by default, IDF ``ln(1 + (N - df + 0.5) / (df + 0.5))``.

Keys are ``(graph, subject)`` pairs as in ``VectorSet``; the set is not thread-safe by
itself (``IndexHub`` users hold ``backend.lock`` around every call).

>>> ks = KeywordSet(("urn:g",), "text")
>>> ks.put("urn:g", "urn:a", "Deploying the API to production")
>>> ks.put("urn:g", "urn:b", "Grandma's apple pie recipe")
>>> [s for _, s, _ in ks.search("how do we deploy the api?", 5)]
['urn:a']
>>> tokenize("Café SOCIAL-media v2.0, 3pm!")
['cafe', 'social', 'media', 'v', '2', '0', '3', 'pm']
"""

from __future__ import annotations

import math
import re
import unicodedata
from array import array
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, TypeAlias

import numpy as np
from numpy.typing import NDArray

from rdfmem.store.indexes.rowkeys import Key, RowKeys, splice

__all__ = ["STOP_WORDS", "KeywordSet", "tokenize"]

_WORD = re.compile(r"[^\W\d_]+|\d+")
#: Words too common to say what a text is about (English; other languages keep every word).
_STOP_TEXT = """a about above after again all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers him his how i if in into is it its itself
    just me more most my no nor not of off on once only or other our ours out over own same
    she should so some such than that the their theirs them then there these they this those
    through to too under until up very was we were what when where which while who whom why
    will with would you your yours s t d ll m re ve"""
STOP_WORDS = frozenset(_STOP_TEXT.split())


def tokenize(text: str) -> list[str]:
    """The search words of ``text``, in order (see the module docstring)."""
    words = _WORD.findall(unicodedata.normalize("NFKC", text).casefold())
    return [_stem(w) for w in words if w not in STOP_WORDS]


@lru_cache(maxsize=65_536)
def _stem(word: str) -> str:
    if not word.isascii():
        decomposed = unicodedata.normalize("NFKD", word)
        word = "".join(c for c in decomposed if unicodedata.category(c) != "Mn") or word
        if not word.isascii():
            return word
    if word.isdigit() or len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stem = word[: -len(suffix)]
            if not any(v in stem for v in "aeiouy"):
                return word
            if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "lsz":
                stem = stem[:-1]  # "planned" -> "plan", but "called" -> "call"
            return stem
    return word


class _Postings:
    """The documents holding one word: document slot, the slot's stamp when written, and
    how often, in three growing arrays. An entry whose stamp is not its slot's current
    stamp belongs to a document since removed: it is skipped, and purged when the word's
    postings reach a power of two in length or a search finds half of them stale."""

    __slots__ = ("counts", "docs", "stamps")

    def __init__(self) -> None:
        self.docs = array("q")
        self.stamps = array("q")
        self.counts = array("f")

    def purge(self, keep: NDArray[np.bool_]) -> None:
        docs = np.frombuffer(self.docs, dtype=np.int64)[keep].tobytes()
        stamps = np.frombuffer(self.stamps, dtype=np.int64)[keep].tobytes()
        counts = np.frombuffer(self.counts, dtype=np.float32)[keep].tobytes()
        self.docs, self.stamps, self.counts = array("q"), array("q"), array("f")
        self.docs.frombytes(docs)
        self.stamps.frombytes(stamps)
        self.counts.frombytes(counts)


#: A saved index's postings: its words (one text, a newline after each), each word's
#: (start, end) rows in three flat arrays (documents, stamps, counts), and its document
#: frequency; arrays, so that a loaded index's are views of the mapped index file.
_Packed: TypeAlias = tuple[Any, Any, Any, Any, Any, Any, Any]


_NO_WORDS: _Packed = (
    np.zeros(0, np.uint8),
    *(np.zeros(0, np.int64),) * 4,
    np.zeros(0, np.float32),
    np.zeros(0, np.int64),
)


def _split(words: NDArray[np.uint8]) -> list[str]:
    return words.tobytes().decode("utf-8").split("\n")[:-1]


class _PostingsMap:
    """Postings by word; those of an index loaded from disk are unpacked on first use (a
    saved index holds every word's postings in three flat arrays, which loads at once)."""

    __slots__ = ("_found", "_gone", "_packed", "_rows", "_text")

    def __init__(self, packed: _Packed | None = None) -> None:
        self._found: dict[str, _Postings] = {}
        self._packed = packed
        self._rows: dict[str, int] | None = None  # word -> its row in ``_packed``
        self._gone: set[str] = set()  # packed words since forgotten
        self._text: bytes | None = None  # the packed words, a newline before each

    def row(self, word: str) -> int | None:
        """The row of ``word`` in ``_packed``: found in the words' text while no write made
        the map of every word (a search after loading looks up its few words only)."""
        if self._rows is not None or self._packed is None:
            return None if self._packed is None else self.rows().get(word)
        if self._text is None:
            self._text = b"\n" + self._packed[0].tobytes()
        at = self._text.find(b"\n" + word.encode("utf-8") + b"\n")
        return None if at < 0 else self._text.count(b"\n", 0, at)

    def rows(self) -> dict[str, int]:
        """The packed words by row (made at the first look-up)."""
        if self._rows is None:
            words = [] if self._packed is None else _split(self._packed[0])
            self._rows = dict(zip(words, range(len(words)), strict=True))
        return self._rows

    def saved_frequency(self, word: str) -> int:
        """The document frequency of ``word`` as saved (0 when it was not)."""
        row = self.row(word)
        return 0 if row is None or self._packed is None else int(self._packed[6][row])

    def frequencies(self) -> Counter[str]:
        """The document frequency of every packed word (as saved; those left with none
        are not counted)."""
        if self._packed is None:
            return Counter()
        words = _split(self._packed[0])
        return Counter(
            {w: n for w, n in zip(words, self._packed[6].tolist(), strict=True) if n > 0}
        )

    def get(self, word: str) -> _Postings | None:
        found = self._found.get(word)
        return found if found is not None else self._unpack(word)

    def __getitem__(self, word: str) -> _Postings:
        found = self.get(word)
        if found is None:
            raise KeyError(word)
        return found

    def __setitem__(self, word: str, postings: _Postings) -> None:
        self._found[word] = postings

    def pop(self, word: str) -> None:
        self._found.pop(word, None)
        if self._packed is not None:
            self._gone.add(word)

    def values(self) -> list[_Postings]:
        """Every word's postings (unpacking what was still packed)."""
        if self._packed is not None:
            for word in self.rows():
                if word not in self._found:
                    self._unpack(word)
            self._packed, self._rows, self._gone = None, None, set()
        return list(self._found.values())

    def pack(self, df: Counter[str]) -> _Packed:
        """Every word's postings in three flat arrays (what a saved index holds): those
        still packed as they are, the others spliced in (``rowkeys.splice``)."""
        packed = self._packed
        if packed is None or 2 * len(self._gone) > len(packed[1]):
            self.values()  # unpack everything: many words left since loading
            packed = _NO_WORDS
        words = _split(packed[0])
        rows = self.rows() if self._packed is not None else {}
        empty = _Postings()
        replaced = {r: empty for w in self._gone if (r := rows.get(w)) is not None}
        added: list[str] = []
        for word, postings in self._found.items():
            row = rows.get(word)
            if row is None:
                added.append(word)
            else:
                replaced[row] = postings
        old_ends = packed[2]
        columns = []
        for column, (name, dtype) in enumerate(
            (("docs", np.int64), ("stamps", np.int64), ("counts", np.float32))
        ):

            def part(p: _Postings, name: str = name, dtype: Any = dtype) -> NDArray[Any]:
                return np.frombuffer(getattr(p, name), dtype=dtype)

            values, ends = splice(
                packed[3 + column],
                old_ends,
                {r: part(p) for r, p in replaced.items()},
                [part(self._found[w]) for w in added],
            )
            columns.append(values)
        words += added
        text = "".join(w + "\n" for w in words).encode("utf-8")
        starts = np.concatenate([np.zeros(1, np.int64), ends[:-1]]) if len(ends) else ends
        frequency = np.array([df.get(w, 0) for w in words], dtype=np.int64)
        docs, stamps, counts = columns
        return np.frombuffer(text, dtype=np.uint8), starts, ends, docs, stamps, counts, frequency

    def _unpack(self, word: str) -> _Postings | None:
        if self._packed is None or word in self._gone:
            return None
        row = self.row(word)
        if row is None:
            return None
        _, starts, ends, docs, stamps, counts, _ = self._packed
        start, end = int(starts[row]), int(ends[row])
        found = _Postings()
        found.docs.frombytes(docs[start:end].tobytes())
        found.stamps.frombytes(stamps[start:end].tobytes())
        found.counts.frombytes(counts[start:end].tobytes())
        self._found[word] = found
        return found


class _DocWords:
    """Slot -> its distinct words; a saved index's packed (word numbers), read when a
    document is removed or replaced."""

    __slots__ = ("_changed", "_ends", "_ids", "_tail", "_words")

    def __init__(self) -> None:
        self._words: list[str] | NDArray[np.uint8] = []  # the packed words (or their text)
        self._ids: NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self._ends: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._changed: dict[int, tuple[str, ...]] = {}
        self._tail: list[tuple[str, ...]] = []

    def __len__(self) -> int:
        return len(self._ends) + len(self._tail)

    def __getitem__(self, doc: int) -> tuple[str, ...]:
        base = len(self._ends)
        if doc >= base:
            return self._tail[doc - base]
        if doc in self._changed:
            return self._changed[doc]
        if not isinstance(self._words, list):
            self._words = _split(self._words)
        start = int(self._ends[doc - 1]) if doc else 0
        words = self._words
        return tuple(words[i] for i in self._ids[start : int(self._ends[doc])].tolist())

    def __setitem__(self, doc: int, words: tuple[str, ...]) -> None:
        base = len(self._ends)
        if doc >= base:
            self._tail[doc - base] = words
        else:
            self._changed[doc] = words

    def append(self, words: tuple[str, ...]) -> None:
        self._tail.append(words)

    def __getstate__(self) -> tuple[Any, Any, Any]:
        words = self._words if isinstance(self._words, list) else _split(self._words)
        number = dict(zip(words, range(len(words)), strict=True))

        def ids(doc_words: tuple[str, ...]) -> NDArray[np.int32]:
            return np.array([number.setdefault(w, len(number)) for w in doc_words], np.int32)

        flat, ends = splice(
            self._ids,
            self._ends,
            {doc: ids(w) for doc, w in self._changed.items()},
            [ids(w) for w in self._tail],
        )
        text = "".join(w + "\n" for w in number).encode("utf-8")
        return np.frombuffer(text, dtype=np.uint8), flat, ends

    def __setstate__(self, state: tuple[Any, Any, Any]) -> None:
        self._words, self._ids, self._ends = state
        self._changed, self._tail = {}, []


class KeywordSet:
    """The texts of ``(graph, subject)`` keys, searched by BM25.

    A removed document's slot is reused by a later one; its postings are recognised as
    stale by their stamp and purged word by word, each at a cost already paid by the writes
    that made them: no step ever rewrites the whole index.

    Args:
        graphs: the graph IRIs this set covers (what writes to it are matched against).
        name: what the texts are (for ``IndexHub``: the sets of one name share a kind).
        k1, b: the BM25 parameters.
    """

    def __init__(
        self, graphs: tuple[str, ...], name: str, *, k1: float = 1.2, b: float = 0.75
    ) -> None:
        self.graphs = graphs
        self.name = name
        self.k1 = k1
        self.b = b
        #: The store generation this set was last consistent with (-1: never built).
        self.seen = -1
        self.clear()

    def clear(self) -> None:
        self._postings: _PostingsMap = _PostingsMap()
        self._df_found: Counter[str] | None = Counter()  # None: as saved in the postings
        self._keys = RowKeys()  # slot -> key (None: free)
        self._doc_found: dict[Key, int] | None = {}  # None: made from the keys when used
        self._live = 0  # documents held
        self._words = _DocWords()  # slot -> its distinct words
        self._free: list[int] = []
        self._length = np.zeros(64, dtype=np.float32)
        self._alive = np.zeros(64, dtype=bool)
        self._stamp = np.zeros(64, dtype=np.int64)
        self._total = 0.0  # words in live documents

    def __getstate__(self) -> dict[str, Any]:
        # Saved beside an on-disk store (``IndexHub.export``): postings and frequencies in
        # flat arrays, and no slot map (it follows from the keys).
        state = dict(self.__dict__)
        state["_postings"] = self._postings.pack(self._df)
        state["_df_found"] = state["_doc_found"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        postings = _PostingsMap(state.pop("_postings"))
        self.__dict__.update(state, _postings=postings)

    @property
    def _df(self) -> Counter[str]:
        # Live documents holding each word (made from the saved ones at the first write).
        if self._df_found is None:
            self._df_found = self._postings.frequencies()
        return self._df_found

    def _frequency(self, word: str) -> int:
        found = self._df_found
        return self._postings.saved_frequency(word) if found is None else found.get(word, 0)

    @property
    def _doc_of(self) -> dict[Key, int]:
        # Key -> its slot.
        if self._doc_found is None:
            self._doc_found = self._keys.live(self._alive)
        return self._doc_found

    def __len__(self) -> int:
        return self._live

    def rebuild(self, entries: Iterable[tuple[str, str, str]]) -> None:
        """Replace every text with ``(graph, subject, text)`` entries (a later one wins).

        The state ``put`` would leave, one entry after another (a key given twice keeps
        the slot of its first text, as ``put`` reuses the slot it frees), made in one pass:
        no slot is freed, no posting is stale, so nothing is removed or purged, and each
        word's postings are made once from lists (a first read of 10,000 texts: about
        half the time of as many ``put``s)."""
        self.clear()
        latest: dict[Key, str] = {}
        for graph, subject, text in entries:
            latest[(graph, subject)] = text
        count = len(latest)
        capacity = 64
        while capacity < count:
            capacity *= 2
        length = np.zeros(capacity, dtype=np.float32)
        words: dict[str, tuple[list[int], list[float]]] = {}
        df: Counter[str] = Counter()
        for doc, (key, text) in enumerate(latest.items()):
            counts = Counter(tokenize(text))
            self._keys.append(key)
            self._words.append(tuple(counts))
            length[doc] = sum(counts.values())
            df.update(counts.keys())
            for word, n in counts.items():
                found = words.get(word)
                if found is None:
                    found = words[word] = ([], [])
                found[0].append(doc)
                found[1].append(n)
        for word, (docs, ns) in words.items():
            postings = self._postings[word] = _Postings()
            postings.docs = array("q", docs)
            postings.stamps = array("q", bytes(8 * len(docs)))
            postings.counts = array("f", ns)
        self._length = length
        self._alive = np.zeros(capacity, dtype=bool)
        self._alive[:count] = True
        self._stamp = np.zeros(capacity, dtype=np.int64)
        self._doc_found = {key: doc for doc, key in enumerate(latest)}
        self._df_found = df
        self._live = count
        self._total = float(length[:count].sum(dtype=np.float64))

    def put(self, graph: str, subject: str, text: str) -> None:
        """Add or replace the text of ``subject`` in ``graph``."""
        key = (graph, subject)
        self.remove(graph, subject)
        counts = Counter(tokenize(text))
        if self._free:
            doc = self._free.pop()
            self._keys[doc] = key
            self._words[doc] = tuple(counts)
        else:
            doc = len(self._keys)
            if doc == self._length.shape[0]:
                self._length = np.concatenate([self._length, np.zeros_like(self._length)])
                self._alive = np.concatenate([self._alive, np.zeros_like(self._alive)])
                self._stamp = np.concatenate([self._stamp, np.zeros_like(self._stamp)])
            self._keys.append(key)
            self._words.append(tuple(counts))
        size = sum(counts.values())
        self._doc_of[key] = doc
        self._live += 1
        self._length[doc] = size
        self._alive[doc] = True
        self._total += size
        self._df.update(counts.keys())
        stamp = int(self._stamp[doc])
        postings = self._postings
        for word, n in counts.items():
            p = postings.get(word)
            if p is None:
                p = postings[word] = _Postings()
            p.docs.append(doc)
            p.stamps.append(stamp)
            p.counts.append(n)
            size = len(p.docs)
            if size >= 64 and size & (size - 1) == 0:  # at each doubling: drop stale ones
                p.purge(self._current(p))

    def __contains__(self, key: object) -> bool:
        """Whether ``(graph, subject)`` has a text here."""
        return key in self._doc_of

    def remove(self, graph: str, subject: str) -> bool:
        """Forget the text of ``subject`` in ``graph``; True when there was one."""
        doc = self._doc_of.pop((graph, subject), None)
        if doc is None:
            return False
        self._live -= 1
        self._alive[doc] = False
        self._stamp[doc] += 1  # its postings are stale from now on
        self._total -= float(self._length[doc])
        self._df.subtract(self._words[doc])
        for word in self._words[doc]:
            if self._df[word] <= 0:
                del self._df[word]
                self._postings.pop(word)  # every posting of it is stale
        self._keys[doc] = None
        self._words[doc] = ()
        self._free.append(doc)
        return True

    def _current(self, p: _Postings) -> NDArray[np.bool_]:
        docs = np.frombuffer(p.docs, dtype=np.int64)
        current: NDArray[np.bool_] = self._stamp[docs] == np.frombuffer(p.stamps, dtype=np.int64)
        return current

    def scores(self, query: str) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
        """The documents sharing a word with ``query`` and their BM25 scores (unsorted)."""
        live = self._live
        words = [w for w in dict.fromkeys(tokenize(query)) if self._frequency(w) > 0]
        if not live or not words:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        n = len(self._keys)
        average = max(self._total / live, 1.0)
        k1, b = self.k1, self.b
        total = np.zeros(n, dtype=np.float32)
        for word in words:
            p = self._postings[word]
            df = self._frequency(word)
            if len(p.docs) > df:  # some postings are stale
                current = self._current(p)
                if 2 * df < len(p.docs):
                    p.purge(current)
                    current = np.ones(len(p.docs), dtype=bool)
            else:
                current = None
            idf = math.log(1.0 + (live - df + 0.5) / (df + 0.5))
            docs = np.frombuffer(p.docs, dtype=np.int64)
            tf = np.frombuffer(p.counts, dtype=np.float32)
            if current is not None:
                docs, tf = docs[current], tf[current]
            norm = k1 * (1.0 - b + b * self._length[docs] / average)
            total[docs] += np.float32(idf * (k1 + 1.0)) * tf / (tf + norm)
            del docs, tf  # release the arrays' buffers: they grow on the next put
        found = np.nonzero(total > 0.0)[0]
        return found.astype(np.int64), total[found]

    def search(self, query: str, limit: int) -> list[tuple[str, str, float]]:
        """``(graph, subject, score)`` of the ``limit`` best texts with a score above 0,
        highest first, equal scores by subject then graph."""
        if limit <= 0:
            return []
        docs, scores = self.scores(query)
        if limit < len(docs):
            cut = float(np.partition(scores, len(docs) - limit)[len(docs) - limit])
            keep = scores >= cut
            docs, scores = docs[keep], scores[keep]
        hits = []
        for d, score in zip(docs.tolist(), scores.tolist(), strict=True):
            key = self._keys[d]
            if key is not None:
                hits.append((key[0], key[1], float(score)))
        hits.sort(key=lambda h: (-h[2], h[1], h[0]))
        return hits[:limit]

    def nbytes(self) -> int:
        """About how many bytes the set holds (postings, lengths, keys)."""
        postings = sum(
            p.docs.itemsize * len(p.docs) + 4 * len(p.counts) + 120 for p in self._postings.values()
        )
        return postings + self._length.nbytes + self._alive.nbytes + 200 * len(self._keys)

    def __repr__(self) -> str:
        return f"KeywordSet({self.graphs!r}, {self.name!r}, texts={len(self)})"
