"""Atomic update under real contention: threads, tasks and on-disk stores."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from rdfmem import RdflibBackend, RdfStore, StoreAlreadyOpen


def _hammer(store: RdfStore, threads: int, increments: int, key: str = "counter") -> None:
    start = threading.Barrier(threads)

    def work() -> None:
        start.wait()
        for _ in range(increments):
            store.update(key, lambda n: (n or 0) + 1)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def test_8_threads_x_500_updates_in_memory_leave_4000() -> None:
    store = RdfStore()
    _hammer(store, 8, 500)
    assert store.get("counter") == 4000
    assert store.count(predicate=store.value_predicate) == 1


def test_8_threads_x_500_updates_on_disk_leave_4000(tmp_path: Path) -> None:
    with RdfStore.open(tmp_path / "db") as store:
        _hammer(store, 8, 500)
        assert store.get("counter") == 4000
        assert store.count(predicate=store.value_predicate) == 1
    with RdfStore.open(tmp_path / "db") as reopened:
        assert reopened.get("counter") == 4000


def test_threads_on_the_rdflib_backend_leave_exactly_n() -> None:
    store = RdfStore(RdflibBackend())
    _hammer(store, 4, 100)
    assert store.get("counter") == 400


def test_namespaced_stores_on_one_disk_backend_share_its_write_lock(tmp_path: Path) -> None:
    base = RdfStore.open(tmp_path / "db")
    a, b = base.with_namespace("a"), base.with_namespace("b")
    threads = [threading.Thread(target=_hammer, args=(s, 2, 200, "shared")) for s in (a, b, a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (a.get("shared"), b.get("shared")) == (800, 800)
    base.close()


def test_concurrent_sparql_updates_on_disk_lose_nothing(tmp_path: Path) -> None:
    store = RdfStore.open(tmp_path / "db")
    start = threading.Barrier(4)

    def work(worker: int) -> None:
        start.wait()
        for i in range(100):
            store.sparql_update(f"INSERT DATA {{ <urn:w{worker}> <urn:n> {i} }}")

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.count(predicate="urn:n") == 400
    store.close()


def test_async_tasks_updating_leave_exactly_n() -> None:
    store = RdfStore()

    async def main() -> None:
        await asyncio.gather(*(store.aupdate("n", lambda v: (v or 0) + 1) for _ in range(200)))

    asyncio.run(main())
    assert store.get("n") == 200


def test_opening_an_open_disk_store_again_attaches_to_it(tmp_path: Path) -> None:
    first = RdfStore.open(tmp_path / "db")
    first.set("k", 1)
    second = RdfStore.open(tmp_path / "db")  # StoreAlreadyOpen before: now attached
    assert second.get("k") == 1
    second.set("k", 2)
    assert first.get("k") == 2  # the owner sees the attached store's write at once
    first.close()
    assert second.get("k") == 2  # ... and the attached one takes the store over
    second.close()
    with RdfStore.open(tmp_path / "db") as again:
        assert again.get("k") == 2


def test_files_held_by_a_process_that_does_not_serve_them_are_a_clear_error(
    tmp_path: Path,
) -> None:
    from rdfmem.backends.oxigraph import OxigraphBackend

    holder = OxigraphBackend(tmp_path / "db", serve=False)
    with pytest.raises(StoreAlreadyOpen, match="does not serve it") as info:
        RdfStore.open(tmp_path / "db", attach_wait_s=0.3)
    assert info.value.reason == "BACKING_ERROR"
    holder.close()
