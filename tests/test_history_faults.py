"""History under network faults, on a real Oxigraph server and a real Virtuoso (issue 24:
"concurrent writers keep one version per acknowledged write, no gaps").

Clients with ``history=True``, each through its own ``faultproxy.FaultProxy`` (requests
delayed past the lease's time to live, delivered twice, answered to nobody after the
server applied them, connections reset), increment one shared counter and set keys of
their own. Then, read by a clean client:

* the shared counter's versions hold 1, 2, ..., its value, each once and in that order:
  every applied increment left exactly one version, none was doubled by a request
  delivered twice, none is missing;
* each key's versions hold every acknowledged value of that key once, and only values
  some client sent; the last version holds the current value;
* every version but a resource's first names the one before it (``prov:wasRevisionOf``),
  and no two versions name the same one: a chain, never a fork.

Seeded (``RDFMEM_FAULT_SEED``) and bounded like ``test_faults.py``: the CI slice runs
``CI_OPS`` operations per server, ``RDFMEM_FAULT_OPS`` sets more by hand.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest
from faultproxy import FaultProxy
from servers import Server

from rdfmem import BackingError, LeaseDenied, LeaseExpired, QueryError, RdfStore, Unreachable

SEED = int(os.environ.get("RDFMEM_FAULT_SEED", "22"))
CI_OPS = 60
OPS = int(os.environ.get("RDFMEM_FAULT_OPS", str(CI_OPS)))
WORKERS = 3
KEYS = 3  # keys of each worker, each set several times
TTL_MS = 1000
WEIGHTS = {"pass": 0.78, "delay": 0.06, "duplicate": 0.08, "drop": 0.04, "reset": 0.04}
AMBIGUOUS = (Unreachable, BackingError, QueryError)
PROV = "http://www.w3.org/ns/prov#"


@dataclass
class Tally:
    """What the clients were told."""

    acked: dict[str, list[int]] = field(default_factory=dict)  # key -> values, in order
    sent: dict[str, set[int]] = field(default_factory=dict)  # every value tried
    outcomes: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _worker(number: int, store: RdfStore, ops: int, tally: Tally, seed: int) -> None:
    rng = random.Random(seed)
    for i in range(ops):
        counter = rng.random() < 0.5
        key = "shared" if counter else f"k-{number}-{rng.randrange(KEYS)}"
        value = 1_000 * number + i  # unique among every value sent
        if not counter:
            with tally.lock:
                tally.sent.setdefault(key, set()).add(value)
        try:
            if counter:
                store.update("shared", lambda n: (n or 0) + 1)
            else:
                store.set(key, value)
            outcome = "acked"
        except (LeaseExpired, LeaseDenied) as exc:
            outcome = type(exc).__name__  # refused: nothing written
        except AMBIGUOUS as exc:
            outcome = "unsure:" + type(exc).__name__
            time.sleep(0.3)  # as a client would, before trying the server again
        with tally.lock:
            tally.outcomes[outcome] += 1
            if outcome == "acked" and not counter:
                tally.acked.setdefault(key, []).append(value)


@pytest.mark.faults
@pytest.mark.server
@pytest.mark.slow
def test_every_applied_write_leaves_one_version_under_faults(server: Server) -> None:
    seed = SEED + (0 if server.name == "oxigraph" else 1000)
    tally = Tally()
    proxies = [
        FaultProxy(server.port, seed=seed + n, weights=WEIGHTS, delay_s=1.5 * TTL_MS / 1000)
        for n in range(WORKERS)
    ]
    stores = [
        RdfStore.connect(
            p.url(server.query_url),
            p.url(server.update_url),
            history=True,
            agent=f"urn:agent:worker-{n}",
            lease_ttl_ms=TTL_MS,
            lease_wait_ms=30_000,
            timeout=10,
        )
        for n, p in enumerate(proxies)
    ]
    per_worker = max(1, OPS // WORKERS)
    workers = [
        threading.Thread(target=_worker, args=(n, stores[n], per_worker, tally, seed + n))
        for n in range(WORKERS)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(600)
    for store in stores:
        store.close()
    for proxy in proxies:
        proxy.close()
    time.sleep(1.5 * TTL_MS / 1000 + 0.5)  # the last late copies a proxy sends arrive

    report = (
        f"{server.name}: outcomes {dict(tally.outcomes)}, "
        f"faults {dict(sum((p.counts for p in proxies), Counter()))}"
    )
    print(report)
    checker = RdfStore.connect(server.query_url, server.update_url, history=True)
    try:
        final = checker.get("shared", 0)
        counted = [v.value for v in checker.history("shared")]
        assert counted == list(range(1, final + 1)), (counted, report)
        for key, values in tally.sent.items():
            kept = [v.value for v in checker.history(key)]
            assert len(kept) == len(set(kept)), (key, kept, report)  # none doubled
            assert set(kept) <= values, (key, kept, report)  # only values sent
            acked = tally.acked.get(key, [])
            assert set(acked) <= set(kept), (key, acked, kept, report)  # none lost
            assert checker.get(key) == (kept[-1] if kept else None), (key, report)
        # A chain per resource: no version is revised twice (no fork), and every resource
        # has one first version (no gap: each later one names its predecessor).
        forks = server.rows(
            f"SELECT ?old (COUNT(?v) AS ?n) WHERE {{ GRAPH ?h {{ ?v <{PROV}wasRevisionOf> ?old }} }} "
            "GROUP BY ?old HAVING (COUNT(?v) > 1)",
        )
        assert forks == [], (forks, report)
        firsts = server.rows(
            f"SELECT ?s (COUNT(?v) AS ?n) WHERE {{ GRAPH ?h {{ ?v <{PROV}specializationOf> ?s "
            f"FILTER NOT EXISTS {{ ?v <{PROV}wasRevisionOf> ?old }} }} }} GROUP BY ?s",
        )
        assert firsts and all(int(r["n"]["value"]) == 1 for r in firsts), (firsts, report)
    finally:
        checker.close()
