"""Shared fixtures: the contract suites run against every backend.

``make_store`` is parametrized over the backends; a test that takes it runs once for each.
Backends that need a real server (``tests/servers.py``) fail in CI when the server is
missing and skip locally, with the reason.
"""

from __future__ import annotations

import gc
import inspect
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rdfmem import OxigraphBackend, RdflibBackend, RdfStore

IN_CI = bool(os.environ.get("CI"))

#: Real servers started by the ``servers`` plugin (``remote_store_factory``).
pytest_plugins = ["servers"]

#: The embedded backends of the contract suite.
LOCAL_BACKENDS = ["oxigraph-memory", "oxigraph-disk", "rdflib"]
#: Real servers: the whole contract on Oxigraph server, the key/value contract on Virtuoso.
REMOTE_BACKENDS = ["oxigraph-server", "virtuoso"]


def need(condition: bool, reason: str) -> None:
    """Skip locally, fail in CI: a test that needs a missing part must not pass silently."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required in CI: {reason}")
    pytest.skip(reason)


StoreFactory = Callable[..., RdfStore]


def _local_factory(kind: str, tmp_path: Path, opened: list[RdfStore]) -> StoreFactory:
    shared: dict[str, Any] = {}

    def make(**options: Any) -> RdfStore:
        # Stores made by one factory share one backend, as namespaces on one dataset do.
        if "backend" not in shared:
            if kind == "oxigraph-memory":
                shared["backend"] = OxigraphBackend()
            elif kind == "oxigraph-disk":
                shared["backend"] = OxigraphBackend(tmp_path / "store")
            elif kind == "rdflib":
                shared["backend"] = RdflibBackend()
            else:  # pragma: no cover
                raise ValueError(kind)
            store = RdfStore(shared["backend"], **options)
        else:
            store = RdfStore(shared["backend"], **options)
        opened.append(store)
        return store

    return make


@pytest.fixture(params=LOCAL_BACKENDS + REMOTE_BACKENDS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A factory of stores on one fresh backend of each kind."""
    opened: list[RdfStore] = []
    kind = request.param
    factory: StoreFactory
    if kind in LOCAL_BACKENDS:
        factory = _local_factory(kind, tmp_path, opened)
    else:
        factory = request.getfixturevalue("remote_store_factory")(kind, opened)
    yield factory
    if opened:
        opened[0].close()


@pytest.fixture
def store(make_store: StoreFactory) -> RdfStore:
    """One store on a fresh backend, for each backend."""
    return make_store()


_THREADED: dict[object, bool] = {}


@pytest.fixture(autouse=True)
def _garbage_collected_before_threads(request: pytest.FixtureRequest) -> None:
    """Before a test that starts threads, collect the garbage earlier tests left on this
    thread. pyoxigraph refuses to free its query results on another thread than the one
    that made them, and the collector runs on whichever thread allocates: a worker thread
    could otherwise free an earlier test's results (an "unraisable" RuntimeError, which
    fails the test that happens to be running). Only there: a full collection costs."""
    function = getattr(request, "function", None)
    if function is None:
        return
    threaded = _THREADED.get(function)
    if threaded is None:
        try:
            threaded = "Thread(" in inspect.getsource(function)
        except (OSError, TypeError):
            threaded = False
        _THREADED[function] = threaded
    if threaded:
        gc.collect()
