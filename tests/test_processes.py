"""Many processes, one on-disk store: the first owns it and serves the others over a Unix
socket in its folder; they attach, with the same API and guarantees; when the owner exits
or is killed, another process takes over. Real processes throughout."""

from __future__ import annotations

import os
import random
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession
from test_mcp_support import call, ok, rdfmem_params, stdio_session

from rdfmem import Memories, Memory, RdfStore
from rdfmem.backends.owner import socket_path

ROOT = Path(__file__).resolve().parents[1]

COUNTER = textwrap.dedent(
    """
    import sys, time
    from rdfmem import RdfStore
    path, n = sys.argv[1], int(sys.argv[2])
    store = RdfStore.open(path)
    print(type(store.backend).__name__, flush=True)
    if len(sys.argv) > 3:  # all open before any writes: they share the store
        time.sleep(max(0.0, float(sys.argv[3]) - time.time()))
    done = 0
    while n < 0 or done < n:
        store.update("counter", lambda v: (v or 0) + 1)
        done += 1
        print(done, flush=True)  # printed after update returned: acknowledged
    store.close()
    """
)


def _python(*args: str) -> list[str]:
    return [sys.executable, "-c", COUNTER, *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _last_number(text: str) -> int:
    numbers = [int(line) for line in text.split() if line.isdigit()]
    return numbers[-1] if numbers else 0


def test_three_processes_updating_one_counter_leave_exactly_three_hundred(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    start = str(time.time() + 8.0)
    procs = [
        subprocess.Popen(_python(path, "100", start), stdout=subprocess.PIPE, text=True, env=_env())
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=180)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outputs
    kinds = sorted(out.split()[0] for out in outputs)
    assert kinds == ["AttachedBackend", "AttachedBackend", "OxigraphBackend"]  # shared
    with RdfStore.open(path) as store:
        assert store.get("counter") == 300


@pytest.mark.parametrize("seed", [1, 2])
def test_the_owner_killed_mid_write_loses_nothing_acknowledged_and_blocks_nobody(
    tmp_path: Path, seed: int
) -> None:
    path = str(tmp_path / "store")
    owner = subprocess.Popen(_python(path, "-1"), stdout=subprocess.PIPE, text=True, env=_env())
    assert owner.stdout is not None
    assert owner.stdout.readline().strip() == "OxigraphBackend"
    other = subprocess.Popen(_python(path, "150"), stdout=subprocess.PIPE, text=True, env=_env())
    time.sleep(random.Random(seed).uniform(0.3, 1.2))  # kill at a random point of its writes
    owner.send_signal(signal.SIGKILL)
    rest = owner.communicate(timeout=30)[0]
    acknowledged = _last_number(rest)
    started = time.monotonic()
    out = other.communicate(timeout=120)[0]
    assert other.returncode == 0, out
    assert time.monotonic() - started < 60  # nobody waits for the dead owner's locks
    with RdfStore.open(path) as store:
        # Each acknowledged increment is kept; the one in flight when killed may be too.
        assert store.get("counter") in (acknowledged + 150, acknowledged + 151)


def test_writes_of_an_attached_process_reach_the_owners_search_and_reads(tmp_path: Path) -> None:
    path = tmp_path / "store"
    owner = RdfStore.open(path)
    memories = Memories(owner)
    memories.save(Memory(title="Tea", content="green tea in the morning", scope="global"))
    assert [m.title for m, _ in memories.search("tea")] == ["Tea"]  # the index is built
    script = textwrap.dedent(
        """
        import sys
        from rdfmem import Memories, Memory, RdfStore
        store = RdfStore.open(sys.argv[1])
        m = Memories(store)
        m.save(Memory(title="Coffee", content="black coffee after lunch", scope="global"))
        print(sorted(x.title for x, _ in m.search("tea coffee")))
        store.set("from-attached", {"ok": True})
        store.close()
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "['Coffee', 'Tea']"  # the attached process sees the owner's
    assert "Coffee" in [m.title for m, _ in memories.search("coffee after lunch")]
    assert owner.get("from-attached") == {"ok": True}
    owner.close()


def test_the_socket_is_the_owners_users_alone_and_goes_with_it(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = RdfStore.open(path)
    sock = socket_path(path)
    assert sock == path / "rdfmem.sock"
    assert stat.S_ISSOCK(os.stat(sock).st_mode)
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    store.close()
    assert not sock.exists()


def test_a_stale_socket_left_by_a_dead_owner_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "store"
    path.mkdir()
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path / "rdfmem.sock"))  # bound, never listening: what a SIGKILL leaves
    dead.close()
    owner = RdfStore.open(path)
    owner.set("k", 1)
    attached = RdfStore.open(path)
    assert attached.get("k") == 1
    attached.close()
    owner.close()


def test_a_folder_too_deep_for_a_socket_name_still_shares(tmp_path: Path) -> None:
    path = tmp_path / ("d" * 60) / ("e" * 60) / "store"
    owner = RdfStore.open(path)
    assert socket_path(path).parent.name == f"rdfmem-{os.getuid()}"
    owner.set("k", "v")
    attached = RdfStore.open(path)
    assert attached.get("k") == "v"
    attached.close()
    owner.close()


def test_the_cli_reads_a_store_that_rdfmem_serve_holds(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with RdfStore.open(path) as store:
        store.assert_("urn:a", "urn:p", "v")
    sys.path.insert(0, str(Path(__file__).parent))
    from servers import free_port

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "rdfmem", "serve", str(path), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_env(),
    )
    try:
        deadline = time.monotonic() + 60
        while not socket_path(path).exists():
            assert time.monotonic() < deadline and server.poll() is None, "serve did not start"
            time.sleep(0.05)
        for args in (
            ["query", str(path), "SELECT ?o WHERE { <urn:a> <urn:p> ?o }"],
            ["stats", str(path)],
            ["export", str(path), "--format", "nquads"],
        ):
            run = subprocess.run(
                [sys.executable, "-m", "rdfmem", *args],
                capture_output=True,
                text=True,
                env=_env(),
                timeout=60,
            )
            assert run.returncode == 0, (args, run.stderr[-2000:])
            assert "v" in run.stdout or "1" in run.stdout, run.stdout
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_two_mcp_stdio_servers_share_one_memory(tmp_path: Path) -> None:
    folder = str(tmp_path / "memory")

    async def main() -> None:
        async with (
            stdio_session(rdfmem_params(folder)) as one,
            stdio_session(rdfmem_params(folder)) as two,
        ):
            entity = {"name": "Ada", "entityType": "person", "observations": []}
            ok(await call(one, "create_entities", {"entities": [entity]}))

            async def observe(session: ClientSession, who: str) -> None:
                for i in range(40):
                    ok(
                        await call(
                            session,
                            "add_observations",
                            {"observations": [{"entityName": "Ada", "contents": [f"{who}{i}"]}]},
                        )
                    )

            async with anyio.create_task_group() as group:
                group.start_soon(observe, one, "one-")
                group.start_soon(observe, two, "two-")
            for session in (one, two):
                graph = ok(await call(session, "open_nodes", {"names": ["Ada"]}))
                assert len(graph["entities"][0]["observations"]) == 80

    anyio.run(main)


def test_an_attached_store_keeps_working_while_its_owner_closes(tmp_path: Path) -> None:
    import threading

    path = tmp_path / "store"
    owner = RdfStore.open(path)
    attached = RdfStore.open(path)
    errors: list[BaseException] = []
    stop = threading.Event()

    def work() -> None:
        try:
            while not stop.is_set():
                attached.update("n", lambda v: (v or 0) + 1)
        except BaseException as exc:  # the test reports it
            errors.append(exc)

    worker = threading.Thread(target=work)
    worker.start()
    time.sleep(0.3)
    owner.close()  # the socket goes first, the files a moment later
    time.sleep(0.5)
    stop.set()
    worker.join(timeout=60)
    assert errors == []
    from rdfmem.backends.attached import AttachedBackend

    assert isinstance(attached.backend, AttachedBackend) and attached.backend.owner
    count = attached.get("n")
    attached.close()
    with RdfStore.open(path) as again:
        assert again.get("n") == count > 0
