"""The version index is kept from a store's first versioned write and saved beside an
on-disk store (issue 24: a first ``get(key, as_of=t)`` after opening asks the backend
nothing), and it never answers other than the history does."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from rdfmem import RdfStore
from rdfmem.backends.indexfile import INDEX_FILE


def fill(store: RdfStore) -> dt.datetime:
    """50 keys written 6 times, one deleted; the moment between the 5th and 6th writes."""
    for round_ in range(5):
        for k in range(50):
            store.set(f"k{k}", round_)
    middle = dt.datetime.now(dt.timezone.utc)
    for k in range(50):
        store.set(f"k{k}", 100 + k)
    store.delete("k9")
    return middle


def counting(store: RdfStore) -> list[str]:
    """The SPARQL texts the store's backend is asked from now on."""
    asked: list[str] = []
    query = store.backend.query

    def counted(sparql: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(sparql)
        return query(sparql, *args, **kwargs)

    store.backend.query = counted  # type: ignore[method-assign]
    return asked


def answers(store: RdfStore, moment: dt.datetime) -> list[Any]:
    return [
        (store.get(f"k{k}", as_of=moment), store.get(f"k{k}"), len(store.history(f"k{k}")))
        for k in range(50)
    ]


def test_reads_of_the_past_ask_nothing_after_reopening(tmp_path: Path) -> None:
    store = RdfStore.open(tmp_path / "db", history=True)
    middle = fill(store)
    expected = answers(store, middle)
    store.close()
    assert (tmp_path / "db" / INDEX_FILE).is_file()

    store = RdfStore.open(tmp_path / "db", history=True)
    asked = counting(store)
    past = [store.get(f"k{k}", as_of=middle) for k in range(50)]
    assert asked == []  # no version chain read again: the saved index answers
    assert past == [e[0] for e in expected]
    assert answers(store, middle) == expected
    store.set("k1", "later")  # a write after opening keeps the index going
    assert store.get("k1", as_of=middle) == 4 and store.history("k1")[-1].value == "later"
    store.close()


def test_a_store_without_its_index_file_answers_the_same(tmp_path: Path) -> None:
    store = RdfStore.open(tmp_path / "db", history=True)
    middle = fill(store)
    store.close()
    saved = RdfStore.open(tmp_path / "db", history=True)
    expected = answers(saved, middle)
    saved.close()
    (tmp_path / "db" / INDEX_FILE).unlink()
    store = RdfStore.open(tmp_path / "db", history=True)
    assert answers(store, middle) == expected
    store.close()


@pytest.mark.parametrize("on_disk", [False, True])
def test_a_new_history_is_indexed_from_its_first_write(tmp_path: Path, on_disk: bool) -> None:
    store = RdfStore.open(tmp_path / "db", history=True) if on_disk else RdfStore(history=True)
    middle = fill(store)
    asked = counting(store)
    assert store.get("k3", as_of=middle) == 4
    assert store.get("k9", as_of=middle) == 4 and store.get("k9") is None
    assert [q for q in asked if "specializationOf" in q] == []
    store.close()


def test_changes_since_after_reopening_reads_the_saved_log(tmp_path: Path) -> None:
    store = RdfStore.open(tmp_path / "db", history=True)
    start = dt.datetime.now(dt.timezone.utc)
    fill(store)
    before = [(c.version, c.key, c.deleted) for c in store.changes_since(start)]
    store.close()
    assert len(before) == 50 * 6 + 1  # six writes of each key, one deletion

    # Taken back from the index file (read in place): no bucket is read, the same answer.
    store = RdfStore.open(tmp_path / "db", history=True)
    asked = counting(store)
    assert [(c.version, c.key, c.deleted) for c in store.changes_since(start)] == before
    assert [q for q in asked if "generatedAtTime" in q or "Bucket" in q] == []
    # A write after opening is added to the log taken back, and saved with it at close.
    store.set("k1", "later")
    after = [(c.version, c.key, c.deleted) for c in store.changes_since(start)]
    assert after[:-1] == before and after[-1][1:] == ("k1", False)
    store.close()
    store = RdfStore.open(tmp_path / "db", history=True)
    assert [(c.version, c.key, c.deleted) for c in store.changes_since(start)] == after
    store.close()
