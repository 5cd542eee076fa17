"""Async on the network: the remote store's a* twins run on httpx.AsyncClient, so one
event loop drives hundreds of concurrent calls, exactly, without a thread per call."""

from __future__ import annotations

import asyncio
import threading

import pytest
from servers import Server

from rdfmem import LeaseDenied


def test_two_hundred_tasks_on_one_loop_count_exactly_without_threads(server: Server) -> None:
    store = server.connect(lease_wait_ms=120_000)
    threads: list[int] = []

    async def bump(i: int) -> None:
        await store.aupdate("shared", lambda n: (n or 0) + 1)
        await store.aset(f"own{i % 20}", i)
        threads.append(threading.active_count())

    async def main() -> None:
        before = threading.active_count()
        await asyncio.gather(*(bump(i) for i in range(200)))
        # No thread was started for any call (asyncio.to_thread would have made some).
        assert max(threads) == before
        assert await store.aget("shared") == 200
        assert await store.ahas("own0")
        assert await store.adelete("own0")
        assert not await store.adelete("own0")
        assert await store.aget("own0", "gone") == "gone"

    asyncio.run(main())
    assert store.get("shared") == 200
    assert len(store.keys("own")) == 19
    store.close()


def test_async_and_sync_clients_share_the_lease_queue(server: Server) -> None:
    store, other = server.connect(), server.connect()
    done = threading.Event()

    def sync_bumps() -> None:
        for _ in range(30):
            other.update("n", lambda n: (n or 0) + 1)
        done.set()

    thread = threading.Thread(target=sync_bumps)
    thread.start()

    async def main() -> None:
        await asyncio.gather(*(store.aupdate("n", lambda n: (n or 0) + 1) for _ in range(30)))

    asyncio.run(main())
    thread.join()
    assert store.get("n") == 60
    store.close()
    other.close()


def test_an_async_write_waits_for_another_clients_lease(server: Server) -> None:
    holder, waiter = server.connect(), server.connect(lease_wait_ms=200)
    lease = holder.acquire_lease("k", ttl_ms=10_000, max_wait_ms=1_000)

    async def main() -> None:
        with pytest.raises(LeaseDenied):
            await waiter.aset("k", 1)
        assert await waiter.aget("k") is None
        holder.release_lease(lease)
        await waiter.aset("k", 2)

    asyncio.run(main())
    assert holder.get("k") == 2
    holder.close()
    waiter.close()


def test_an_async_update_that_raises_writes_nothing_and_frees_the_key(server: Server) -> None:
    store = server.connect(lease_wait_ms=1_000)

    def fail(_: object) -> object:
        raise ValueError("no")

    async def main() -> None:
        await store.aset("k", 1)
        with pytest.raises(ValueError):
            await store.aupdate("k", fail)
        assert await store.aupdate("k", lambda n: n + 1) == 2  # not held by the failed one

    asyncio.run(main())
    store.close()
