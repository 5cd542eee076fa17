"""``rdfmem mcp --keep-warm``: the stdio servers a host starts hand their sessions to one
warm holder process (real processes, the SDK's own stdio client)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import StdioServerParameters
from test_mcp_support import call, ok, rdfmem_params, stdio_session


@pytest.fixture
def runtime() -> Iterator[dict[str, str]]:
    """The holders' folder, the test's own; every holder left is ended afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="rdfmem-kw-"))  # short: a socket's name is
    yield {"XDG_RUNTIME_DIR": str(folder)}
    for pid in _holders(folder):
        _end(pid)
    shutil.rmtree(folder, ignore_errors=True)


def _holders(folder: Path) -> list[int]:
    """The holder processes whose sockets are in ``folder`` (by their command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--hold-at" in argv and any(a.startswith(str(folder).encode()) for a in argv):
            found.append(int(entry.name))
    return found


def _end(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _run_folder(runtime: dict[str, str]) -> Path:
    return Path(runtime["XDG_RUNTIME_DIR"]) / f"rdfmem-{os.getuid()}"


async def _keep_one(params: StdioServerParameters) -> None:
    """One session that writes the entity ``Kept``."""
    async with stdio_session(params) as s:
        entity = {"name": "Kept", "entityType": "thing", "observations": []}
        ok(await call(s, "create_entities", {"entities": [entity]}))


async def _names(params: StdioServerParameters) -> list[str]:
    """The entities a new session reads."""
    async with stdio_session(params) as s:
        return [e["name"] for e in ok(await call(s, "read_graph", {}))["entities"]]


def test_later_sessions_are_served_by_the_same_warm_holder(
    tmp_path: Path, runtime: dict[str, str]
) -> None:
    params = rdfmem_params(str(tmp_path / "mem"), "--keep-warm", "60", env=runtime)

    async def main() -> None:
        async with stdio_session(params) as first:
            ok(
                await call(
                    first,
                    "create_entities",
                    {
                        "entities": [
                            {"name": "Alice", "entityType": "person", "observations": ["Likes tea"]}
                        ]
                    },
                )
            )
        [holder] = _holders(Path(runtime["XDG_RUNTIME_DIR"]))
        async with stdio_session(params) as second:  # the first host's session has ended
            found = ok(await call(second, "search_nodes", {"query": "tea"}))
            assert [e["name"] for e in found["entities"]] == ["Alice"]
        assert _holders(Path(runtime["XDG_RUNTIME_DIR"])) == [holder]  # no second holder

    anyio.run(main)


def test_two_hosts_at_once_share_the_holder_and_see_each_others_writes(
    tmp_path: Path, runtime: dict[str, str]
) -> None:
    params = rdfmem_params(str(tmp_path / "mem"), "--keep-warm", "60", env=runtime)

    async def main() -> None:
        async with stdio_session(params) as a, stdio_session(params) as b:
            for i in range(20):
                writer = a if i % 2 else b
                ok(
                    await call(
                        writer,
                        "create_entities",
                        {
                            "entities": [
                                {"name": f"e{i}", "entityType": "thing", "observations": []}
                            ]
                        },
                    )
                )
            for session in (a, b):
                graph = ok(await call(session, "read_graph", {}))
                assert sorted(e["name"] for e in graph["entities"]) == sorted(
                    f"e{i}" for i in range(20)
                )
        assert len(_holders(Path(runtime["XDG_RUNTIME_DIR"]))) == 1

    anyio.run(main)


def test_the_holder_exits_when_idle_and_a_new_start_brings_one_back(
    tmp_path: Path, runtime: dict[str, str]
) -> None:
    params = rdfmem_params(str(tmp_path / "mem"), "--keep-warm", "1", env=runtime)
    folder = Path(runtime["XDG_RUNTIME_DIR"])

    async def main() -> None:
        await _keep_one(params)
        deadline = time.monotonic() + 15
        while _holders(folder) and time.monotonic() < deadline:
            await anyio.sleep(0.1)
        assert _holders(folder) == []  # gone about a second after its last session
        assert not list(_run_folder(runtime).glob("*.sock"))  # and its socket with it
        assert await _names(params) == ["Kept"]

    anyio.run(main)


def test_a_killed_holder_is_replaced_by_the_next_start(
    tmp_path: Path, runtime: dict[str, str]
) -> None:
    params = rdfmem_params(str(tmp_path / "mem"), "--keep-warm", "60", env=runtime)
    folder = Path(runtime["XDG_RUNTIME_DIR"])

    async def main() -> None:
        await _keep_one(params)
        [holder] = _holders(folder)
        _end(holder)  # its socket file stays behind, stale
        await anyio.sleep(0.5)
        assert list(_run_folder(runtime).glob("*.sock"))
        assert await _names(params) == ["Kept"]
        [replacement] = _holders(folder)
        assert replacement != holder

    anyio.run(main)


def test_other_options_get_a_holder_of_their_own(tmp_path: Path, runtime: dict[str, str]) -> None:
    store = str(tmp_path / "mem")

    async def main() -> None:
        official = rdfmem_params(store, "--keep-warm", "60", "--tools", "official", env=runtime)
        every = rdfmem_params(store, "--keep-warm", "60", "--tools", "all", env=runtime)
        async with stdio_session(official) as s:
            assert len((await s.list_tools()).tools) == 9
        async with stdio_session(every) as s:
            assert len((await s.list_tools()).tools) > 9
        assert len(_holders(Path(runtime["XDG_RUNTIME_DIR"]))) == 2

    anyio.run(main)


def test_sigterm_ends_the_holder_cleanly(tmp_path: Path, runtime: dict[str, str]) -> None:
    store = tmp_path / "mem"
    params = rdfmem_params(str(store), "--keep-warm", "600", env=runtime)
    folder = Path(runtime["XDG_RUNTIME_DIR"])

    async def main() -> None:
        await _keep_one(params)
        [holder] = _holders(folder)
        os.kill(holder, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while _holders(folder) and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        assert _holders(folder) == []
        assert not list(_run_folder(runtime).glob("*.sock"))

    anyio.run(main)
    # It closed the store: this process opens it as its owner, with the write in it.
    from rdfmem import RdfStore
    from rdfmem.mcp import KnowledgeGraph

    opened = RdfStore.open(store)
    try:
        graph = KnowledgeGraph(opened).read_graph()
        assert [e["name"] for e in graph["entities"]] == ["Kept"]
    finally:
        opened.close()
