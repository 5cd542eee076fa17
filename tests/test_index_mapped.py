"""Indexes saved beside an on-disk store and memory-mapped back: the mapped indexes answer
as the ones never saved, through any number of writes and save/load cycles, and the file's
room to grow costs no disk."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest

from rdfmem import Memories, Memory, RdfStore
from rdfmem.backends import indexfile
from rdfmem.store.indexes.keywords import KeywordSet
from rdfmem.store.indexes.saved import Section
from rdfmem.store.indexes.vectors import VectorSet

WORDS = [
    "deploy",
    "api",
    "tea",
    "coffee",
    "garden",
    "rust",
    "python",
    "café",
    "naïve",
    "3pm",
    "release",
    "budget",
]


T = TypeVar("T", KeywordSet, VectorSet)


def _cycle(folder: Path, index: T, kind: str) -> T:
    """``index`` written to an index file and mapped back, as a close and an open do."""
    (folder / "data").write_text("x")  # the store's own files, fingerprinted
    indexfile.keep(folder, {"sections": [Section.of(kind, "k", ("urn:g",), index)]})
    mapped = indexfile.take(folder)
    assert not (folder / indexfile.INDEX_FILE).exists()  # consumed at open
    saved = indexfile.unpack(mapped, indexfile.fingerprint(folder))
    assert saved is not None
    (section,) = saved["sections"]
    loaded = section.load(7)
    assert isinstance(loaded, type(index)) and loaded.seen == 7
    return loaded


@pytest.mark.parametrize("seed", range(4))
def test_a_mapped_keyword_index_answers_as_one_never_saved(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    kept, mapped = KeywordSet(("urn:g",), "text"), KeywordSet(("urn:g",), "text")
    for step in range(600):
        subject = f"urn:s{rng.randrange(80)}"
        if rng.random() < 0.25:
            assert kept.remove("urn:g", subject) == mapped.remove("urn:g", subject)
        else:
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 8)))
            text += f" n{rng.randrange(200)}"  # a word of its own, as a title's number
            kept.put("urn:g", subject, text)
            mapped.put("urn:g", subject, text)
        if step % 97 == 0:
            mapped = _cycle(tmp_path, mapped, "keywords")
        if step % 13 == 0:
            query = " ".join(rng.sample(WORDS, 3)) + f" n{rng.randrange(200)}"
            assert _rounded(mapped.search(query, 10)) == _rounded(kept.search(query, 10))
            assert len(mapped) == len(kept)


@pytest.mark.parametrize("seed", range(3))
def test_a_mapped_vector_index_answers_as_one_never_saved(tmp_path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    kept = VectorSet(("urn:g",), "urn:p", approximate=False)
    mapped = VectorSet(("urn:g",), "urn:p", approximate=False)
    for step in range(700):
        subject = f"urn:s{int(rng.integers(300))}"
        if rng.random() < 0.2:
            assert kept.remove("urn:g", subject) == mapped.remove("urn:g", subject)
        else:
            vector = rng.normal(size=16).astype(np.float32)
            kept.put("urn:g", subject, vector)
            mapped.put("urn:g", subject, vector)
        if step % 101 == 0:
            mapped = _cycle(tmp_path, mapped, "vectors")
        if step % 11 == 0:
            query = rng.normal(size=16).astype(np.float32)
            assert _rounded(mapped.search(query, 10)) == _rounded(kept.search(query, 10))
            assert len(mapped) == len(kept)


def _rounded(hits: list[tuple[str, str, float]]) -> list[tuple[str, str, float]]:
    return [(g, s, round(score, 5)) for g, s, score in hits]


def test_a_write_to_a_mapped_index_never_reaches_the_file(tmp_path: Path) -> None:
    vectors = VectorSet(("urn:g",), "urn:p", approximate=False)
    for i in range(100):
        vectors.put("urn:g", f"urn:s{i}", np.eye(100, dtype=np.float32)[i])
    folder = tmp_path / "store"
    folder.mkdir()
    (folder / "data").write_text("x")
    indexfile.keep(folder, {"sections": [Section.of("vectors", "k", ("urn:g",), vectors)]})
    os.link(folder / indexfile.INDEX_FILE, tmp_path / "copy")  # the same file, kept
    before = (tmp_path / "copy").read_bytes()
    saved = indexfile.unpack(indexfile.take(folder), indexfile.fingerprint(folder))
    assert saved is not None
    loaded = saved["sections"][0].load(0)
    for i in range(100, 140):  # rows added into the mapped matrix's room, rows replaced
        loaded.put("urn:g", f"urn:s{i % 120}", np.ones(100, dtype=np.float32))
    assert loaded.search(np.ones(100, dtype=np.float32), 1)[0][2] == pytest.approx(1.0)
    assert (tmp_path / "copy").read_bytes() == before


def test_room_to_grow_is_left_as_holes_in_the_index_file(tmp_path: Path) -> None:
    vectors = VectorSet(("urn:g",), "urn:p", approximate=False)
    rng = np.random.default_rng(0)
    vectors.rebuild(("urn:g", f"urn:s{i}", rng.normal(size=512)) for i in range(2_000))
    (tmp_path / "data").write_text("x")
    indexfile.keep(tmp_path, {"sections": [Section.of("vectors", "k", ("urn:g",), vectors)]})
    info = os.stat(tmp_path / indexfile.INDEX_FILE)
    # 2,000 rows of 512 float32 (4 MB) with room for as many again: the room is not on disk.
    assert info.st_size > 7_000_000
    assert info.st_blocks * 512 < 5_500_000


def test_a_store_opened_on_mapped_indexes_keeps_its_writes_across_restarts(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store"
    with RdfStore.open(path) as store:
        for i in range(30):
            Memories(store).save(Memory(title=f"n{i}", content=f"kettle {i}", scope="global"))
        Memories(store).search("kettle")
    for round_ in range(3):
        with RdfStore.open(path) as store:
            memories = Memories(store)
            memories.save(Memory(title=f"later {round_}", content="teapot", scope="global"))
            if round_ == 1:
                memories.forget("global", "n7")
            found = {m.title for m, _ in memories.search("teapot", limit=50)}
            assert found == {f"later {r}" for r in range(round_ + 1)}
            titles = {m.title for m, _ in memories.search("kettle 7", limit=5)}
            assert ("n7" in titles) == (round_ == 0)


def test_row_keys_changed_after_loading_are_found_by_key() -> None:
    import pickle

    from rdfmem.store.indexes.rowkeys import RowKeys

    keys = RowKeys([("urn:g", f"urn:s{i}") for i in range(6)] + [("urn:g", "urn:é")])
    loaded: RowKeys = pickle.loads(pickle.dumps(keys, protocol=5))
    loaded[1] = None  # a slot freed
    loaded[2] = ("urn:h", "urn:new")  # a slot reused
    loaded.append(("urn:g", "urn:tail"))
    alive = np.array([True, False, True, True, False, True, True, True])
    assert loaded.live(alive) == {
        ("urn:g", "urn:s0"): 0,
        ("urn:h", "urn:new"): 2,
        ("urn:g", "urn:s3"): 3,
        ("urn:g", "urn:s5"): 5,
        ("urn:g", "urn:é"): 6,
        ("urn:g", "urn:tail"): 7,
    }
    again: RowKeys = pickle.loads(pickle.dumps(loaded, protocol=5))
    assert list(again) == list(loaded)
