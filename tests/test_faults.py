"""Fault injection against the real servers: nothing acknowledged is lost or doubled.

Clients (threads, each through its own ``faultproxy.FaultProxy``, and one client process)
run random ``update`` / ``set`` operations on one Oxigraph server and one Virtuoso started
for this module, while the proxies delay requests past the lease's time to live, deliver
them twice, drop the answer after the server applied them and reset connections; the
server is killed and started again mid-run, and the client process is SIGKILLed. Then:

* every acknowledged ``set`` is there, once, with its value; no key holds two values;
* each counter is exact: at least the acknowledged increments, at most those plus the
  increments whose outcome the client could not know (no answer came), and exactly the
  acknowledged ones when there were none of those;
* after recovery (the dead claims swept, abandoned scratch graphs dropped) no claim and
  no scratch graph is left;
* no operation waited for the others longer than the bound below. That wait includes
  queueing behind live holders, so it is reported, and bounded loosely; the wait a dead or
  stuck holder alone causes is bounded by one TTL plus the lease guard in
  ``test_fault_dead_holder.py``.

Seeded (``RDFMEM_FAULT_SEED``, default 22) and bounded: the CI slice runs
``CI_OPS`` operations per server; ``RDFMEM_FAULT_OPS=1000`` runs more by hand.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import need
from faultproxy import FaultProxy
from servers import OxigraphServer, Server, VirtuosoServer

from rdfmem import (
    BackingError,
    LeaseDenied,
    LeaseExpired,
    QueryError,
    RemoteStore,
    Unreachable,
)
from rdfmem.backends.sparql.lease_run import run
from rdfmem.backends.sparql.lease_steps import sweep
from rdfmem.backends.sparql.writes import ABANDONED_AFTER_S, drop_abandoned

SEED = int(os.environ.get("RDFMEM_FAULT_SEED", "22"))
CI_OPS = 120
OPS = int(os.environ.get("RDFMEM_FAULT_OPS", str(CI_OPS)))
WORKERS = 4
TTL_MS = 1000
WEIGHTS = {"pass": 0.80, "delay": 0.06, "duplicate": 0.06, "drop": 0.04, "reset": 0.04}
#: The longest an operation may wait for other clients, beyond its own requests' injected
#: delays: each of the other clients' claims for one lease's time to live, plus slack for
#: a busy 2-core machine.
BOUND_S = WORKERS * TTL_MS / 1000 + 3.0
AMBIGUOUS = (Unreachable, BackingError, QueryError)


@dataclass
class Tally:
    """What the clients were told."""

    acked_sets: dict[str, int] = field(default_factory=dict)
    unsure_sets: set[str] = field(default_factory=set)
    acked_incs: Counter[str] = field(default_factory=Counter)
    unsure_incs: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    waited_s: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


@pytest.fixture(scope="module", params=["oxigraph", "virtuoso"])
def own_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """A server for this module alone: the suite kills and restarts it."""
    kind: type[Server] = OxigraphServer if request.param == "oxigraph" else VirtuosoServer
    tool = "oxigraph" if request.param == "oxigraph" else "virtuoso-t"
    need(shutil.which(tool) is not None, f"the {tool} server")
    server = kind(tmp_path_factory.mktemp(f"faults-{request.param}"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _worker(
    number: int, store: RemoteStore, proxy: FaultProxy, ops: int, tally: Tally, seed: int
) -> None:
    rng = random.Random(seed)
    for i in range(ops):
        kind = rng.choice(["shared", "own", "set", "set"])
        key = {"shared": "c-shared", "own": f"c-{number}"}.get(kind, f"k-{number}-{i}")
        delayed, started = proxy.delayed_s, time.monotonic()
        try:
            if kind == "set":
                store.set(key, i)
            else:
                store.update(key, lambda n: (n or 0) + 1)
            outcome = "acked"
        except (LeaseExpired, LeaseDenied) as exc:
            outcome = type(exc).__name__  # refused: nothing written
        except AMBIGUOUS as exc:
            outcome = "unsure:" + type(exc).__name__
            time.sleep(0.3)  # as a client would, before trying the server again
            delayed += 0.3
        waited = time.monotonic() - started - (proxy.delayed_s - delayed)
        with tally.lock:
            tally.outcomes[outcome] += 1
            tally.waited_s.append(waited)
            if outcome == "acked" and kind == "set":
                tally.acked_sets[key] = i
            elif outcome == "acked":
                tally.acked_incs[key] += 1
            elif outcome.startswith("unsure") and kind == "set":
                tally.unsure_sets.add(key)
            elif outcome.startswith("unsure"):
                tally.unsure_incs[key] += 1


_CHILD = textwrap.dedent(
    """
    import sys
    from rdfmem import RdfStore
    from rdfmem import StoreError
    store = RdfStore.connect(sys.argv[1], sys.argv[2], lease_ttl_ms={ttl}, timeout=10)
    while True:
        print("start", flush=True)
        try:
            store.update("c-shared", lambda n: (n or 0) + 1)
            print("acked", flush=True)
        except StoreError:  # refused, or no answer (counted as unsure either way)
            pass
    """
)


def _child(server: Server, tmp: Path, tally: Tally, run_s: float, seed: int) -> None:
    """A client process incrementing the shared counter, SIGKILLed mid-run."""
    script = tmp / "child.py"
    script.write_text(_CHILD.format(ttl=TTL_MS))
    child = subprocess.Popen(
        [sys.executable, str(script), server.query_url, server.update_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert child.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(child.stdout or []), daemon=True)
    reader.start()
    waited = time.monotonic() + 20
    while lines.count("acked\n") < 5 and time.monotonic() < waited:
        time.sleep(0.05)  # until it works (its start-up takes a second or more)
    time.sleep(random.Random(seed).uniform(0.0, 1.0) * run_s)
    child.send_signal(signal.SIGKILL)
    child.wait()
    reader.join(5)
    child.stdout.close()
    acked = sum(1 for line in lines if line.strip() == "acked")
    started = sum(1 for line in lines if line.strip() == "start")
    with tally.lock:
        tally.acked_incs["c-shared"] += acked
        tally.unsure_incs["c-shared"] += started - acked  # the one in flight, if any
        tally.outcomes["child-acked"] += acked


def _restarts(server: Server, stop: threading.Event, seed: int, every_s: float) -> int:
    """Kill the server (SIGKILL) and start it again on the same port and data, now and
    then, until ``stop``; returns how many times."""
    rng, times = random.Random(seed), 0
    while not stop.wait(rng.uniform(0.5, 1.5) * every_s):
        server.kill()
        time.sleep(0.2)
        server.start()
        times += 1
    return times


@pytest.mark.faults
@pytest.mark.server
@pytest.mark.slow
def test_no_acknowledged_write_is_lost_or_doubled_under_faults(
    own_server: Server, tmp_path: Path
) -> None:
    server = own_server
    server.wipe()
    seed = SEED + (0 if server.name == "oxigraph" else 1000)
    tally = Tally()
    proxies = [
        FaultProxy(server.port, seed=seed + n, weights=WEIGHTS, delay_s=1.5 * TTL_MS / 1000)
        for n in range(WORKERS)
    ]
    stores = [
        RemoteStore.connect(
            p.url(server.query_url),
            p.url(server.update_url),
            lease_ttl_ms=TTL_MS,
            lease_wait_ms=30_000,
            timeout=10,
        )
        for p in proxies
    ]
    per_worker = max(1, OPS // WORKERS)
    started = time.monotonic()
    stop = threading.Event()
    restarted: list[int] = []
    # Virtuoso takes seconds to start: fewer restarts there.
    every_s = 6.0 if server.name == "oxigraph" else 15.0
    killer = threading.Thread(
        target=lambda: restarted.append(_restarts(server, stop, seed, every_s))
    )
    workers = [
        threading.Thread(
            target=_worker, args=(n, stores[n], proxies[n], per_worker, tally, seed + n)
        )
        for n in range(WORKERS)
    ]
    killer.start()
    for w in workers:
        w.start()
    _child(server, tmp_path, tally, run_s=3.0, seed=seed)
    for w in workers:
        w.join(600)
    stop.set()
    killer.join(120)
    elapsed = time.monotonic() - started
    for store in stores:
        store.close()
    for proxy in proxies:
        proxy.close()

    # Recovery: once the last copy a proxy sends late has arrived (a claim's insert
    # delivered again re-creates that claim, which then lives one time to live), dead
    # claims are swept and abandoned scratch graphs dropped (as the next staging client
    # would an hour later).
    time.sleep(1.5 * TTL_MS / 1000 + TTL_MS / 1000 + 1.0)
    checker = RemoteStore.connect(server.query_url, server.update_url)
    try:
        backend = checker.backend
        swept = run(sweep(backend.lease_graph), backend)
        dropped = drop_abandoned(
            backend,
            now=time.time() + ABANDONED_AFTER_S + 1,
            empty_graph_patterns=server.name == "oxigraph",
        )

        values: dict[str, list[int]] = {}
        for row in server.rows(
            "SELECT ?s ?v WHERE { GRAPH <urn:rdfmem:graph:store> { ?s <urn:rdfmem:store:value> ?v } }",
        ):
            key = row["s"]["value"].rsplit(":", 1)[-1]
            values.setdefault(key, []).append(int(row["v"]["value"]))
        report = (
            f"{server.name}: {sum(tally.outcomes.values())} operations in {elapsed:.1f} s, "
            f"outcomes {dict(tally.outcomes)}, faults {dict(sum((p.counts for p in proxies), Counter()))}, "
            f"restarts {restarted}, swept {swept} dead claims, dropped {len(dropped)} scratch graphs, "
            f"longest wait (queueing behind live holders included) {max(tally.waited_s):.2f} s"
        )
        print(report)
        doubled = {k: v for k, v in values.items() if len(v) > 1}
        assert not doubled, report
        for key, value in tally.acked_sets.items():
            assert values.get(key) == [value], (key, report)
        for key in set(tally.acked_incs) | set(tally.unsure_incs):
            got = values.get(key, [0])[0]
            low, high = tally.acked_incs[key], tally.acked_incs[key] + tally.unsure_incs[key]
            assert low <= got <= high, (key, got, low, high, report)
        assert not server.rows("SELECT * WHERE { GRAPH <urn:rdfmem:graph:leases> { ?s ?p ?o } }")
        assert not server.rows(
            "SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } "
            'FILTER(STRSTARTS(STR(?g), "urn:rdfmem:graph:staging:")) }',
        )
        assert max(tally.waited_s) <= BOUND_S, report
    finally:
        checker.close()  # also when an assertion fails: no socket left to a later test
