"""The HNSW graph of a large vector set is built once per on-disk store: the process that
builds it saves it in the store's folder, and the other processes of the store (attached,
or opening it later) take it instead of building their own, off the request path
(``rdfmem.store.indexes.graphfile``). A saved graph older than the store (its writer
killed after later writes) is never a stale answer. Real processes throughout."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import need

from rdfmem.store.indexes.graphfile import GRAPH_FILE_PREFIX
from rdfmem.store.indexes.hnsw import has_usearch
from rdfmem.store.indexes.vectors import ANN_THRESHOLD, VectorSet

ROOT = Path(__file__).resolve().parents[1]
CHILD = Path(__file__).with_name("vectors_shared_child.py")
N = ANN_THRESHOLD + 500
DIMENSION = 16


class Child:
    """One process of the store, driven line by line."""

    def __init__(self, path: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.backend = self.read()["backend"]

    def read(self) -> Any:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the child ended (code {self.proc.poll()})"
        return json.loads(line)

    def ask(self, command: str) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(60)
        for pipe in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                pipe.close()


def vector(i: int) -> np.ndarray:
    return np.random.default_rng(i).standard_normal(DIMENSION).astype(np.float32)


def exact(subjects: dict[int, int], queries: list[int]) -> list[list[list[Any]]]:
    """The exact best 5 of the store holding ``subjects`` (subject -> the seed of its
    vector), as the children answer."""
    vs = VectorSet(("g",), "p", approximate=False)
    vs.rebuild(("g", f"urn:s:{i}", vector(j)) for i, j in subjects.items())
    return [[[s, round(score, 5)] for _, s, score in vs.search(vector(q), 5)] for q in queries]


@pytest.fixture(autouse=True)
def _usearch() -> None:
    need(has_usearch(), "the ann extra (usearch) is not installed")


def saved_graphs(path: Path) -> list[Path]:
    return sorted(path.glob(GRAPH_FILE_PREFIX + "*"))


def test_an_attached_process_takes_the_owners_graph_instead_of_building_its_own(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store"
    owner = Child(path)
    attached = None
    try:
        assert owner.backend == "OxigraphBackend"
        owner.ask(f"load 0 {N}")
        for _ in range(10):  # the 9th search starts the build, off the request path
            owner.ask("search 1")
        assert owner.ask("wait") == {"graph": True, "adopted": 0}  # built here...
        assert len(saved_graphs(path)) == 1  # ...and saved for the others
        attached = Child(path)
        assert attached.backend == "AttachedBackend"
        queries = [3, 77, 5_000, N - 1, N + 7]
        first = attached.ask("search " + " ".join(map(str, queries)))
        # taken from the file at its first search, where a build waits for the 9th
        assert attached.ask("wait") == {"graph": True, "adopted": 1}
        expected = exact({i: i for i in range(N)}, queries)
        assert first == expected  # exact answers while the graph was taken
        assert attached.ask("search " + " ".join(map(str, queries))) == expected
    finally:
        owner.close()
        if attached is not None:
            attached.close()


def test_a_graph_saved_before_writes_and_a_kill_never_gives_a_stale_answer(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store"
    owner = Child(path)
    try:
        owner.ask(f"load 0 {N}")
        for _ in range(10):
            owner.ask("search 1")
        assert owner.ask("wait")["graph"]
        saved = saved_graphs(path)
        assert len(saved) == 1
        before = saved[0].stat().st_mtime_ns
        # after the graph was saved: subject 5 moves far away, 6 goes, new ones come
        owner.ask(f"move 5 {N + 100}")
        owner.ask("drop 6")
        owner.ask(f"load {N} {N + 50}")
        owner.proc.send_signal(signal.SIGKILL)  # no clean close: no index file
        owner.proc.wait(30)
    finally:
        owner.close()
    assert saved_graphs(path)[0].stat().st_mtime_ns == before  # the file is the old one
    again = Child(path)
    try:
        assert again.backend == "OxigraphBackend"
        subjects = {i: i for i in range(N + 50)}
        subjects[5] = N + 100
        del subjects[6]
        queries = [N + 100, 5, 6, N + 20, 42]
        assert again.ask("search 42") == exact(subjects, [42])
        assert again.ask("wait") == {"graph": True, "adopted": 1}  # the old file, taken
        answers = again.ask("search " + " ".join(map(str, queries)))
        assert answers == exact(subjects, queries)
        assert answers[0][0] == ["urn:s:5", 1.0]  # found where it moved to
        assert all("urn:s:6" not in [s for s, _ in hits] for hits in answers)
    finally:
        again.close()


def test_a_torn_or_foreign_graph_file_is_ignored_and_a_graph_is_built(tmp_path: Path) -> None:
    path = tmp_path / "store"
    owner = Child(path)
    try:
        owner.ask(f"load 0 {N}")
        for _ in range(10):
            owner.ask("search 1")
        assert owner.ask("wait")["graph"]
    finally:
        owner.close()
    saved = saved_graphs(path)[0]
    data = saved.read_bytes()
    saved.write_bytes(data[: len(data) // 2] + b"\0" * (len(data) - len(data) // 2))
    again = Child(path)
    try:
        assert again.ask("search 1 2") == exact({i: i for i in range(N)}, [1, 2])
        assert again.ask("wait") == {"graph": False, "adopted": 0}  # not taken: torn
        for _ in range(9):
            again.ask("search 3")
        assert again.ask("wait") == {"graph": True, "adopted": 0}  # built at the 9th
    finally:
        again.close()
