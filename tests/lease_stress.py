"""A stress of the remote lease protocol: many clients hammer one counter with short leases.

Processes, each with several threads (each thread its own client), run ``update(key,
n + 1)`` on one counter with a short lease, and with random pauses inside the update
(some close to the lease's end, so that writes leave near its end). Each thread counts
the increments it saw acknowledged and those whose outcome it cannot know (no answer); a
``LeaseExpired`` / ``LeaseDenied`` says nothing was written. The invariant:

    acknowledged <= final value <= acknowledged + unknown

Used by ``tests/test_remote_lease_stress.py`` (bounded, seeded) and by hand::

    python tests/lease_stress.py virtuoso --procs 6 --threads 3 --ops 60 --ttl-ms 400 --runs 5

(starts its own server in a temporary directory; prints one line per run).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

WORKER = r"""
import json, random, sys, threading, time
from rdfmem import LeaseDenied, LeaseExpired, RemoteStore, Unreachable, BackingError, QueryError
query, update, key, ops, threads, ttl, seed = sys.argv[1:8]
ops, threads, ttl, seed = int(ops), int(threads), int(ttl), int(seed)
totals = {"acked": 0, "refused": 0, "unknown": 0, "failed": 0, "errors": []}
lock = threading.Lock()

def work(i):
    rng = random.Random(seed * 1000 + i)
    store = RemoteStore.connect(query, update, lease_ttl_ms=ttl, lease_wait_ms=60_000)
    # The trusted part of a lease: a pause drawn near its end sends the write late.
    trusted = ttl / 1000.0 - min(ttl / 5000.0, 1.0)
    def bump(n):
        r = rng.random()
        if r < 0.15:
            time.sleep(trusted * rng.uniform(0.6, 0.74))  # just before a renewal is due
        elif r < 0.25:
            time.sleep(trusted * rng.uniform(0.74, 1.1))  # renewed, or past its end
        elif r < 0.6:
            time.sleep(rng.uniform(0, 0.01))
        return (n or 0) + 1
    try:
        for _ in range(ops):
            try:
                store.update(key, bump)
                outcome = "acked"
            except (LeaseExpired, LeaseDenied):
                outcome = "refused"
            except Unreachable:
                outcome = "unknown"
            except (BackingError, QueryError) as exc:
                outcome = "failed"
                with lock:
                    totals["errors"].append(str(exc)[:300])
            with lock:
                totals[outcome] += 1
    finally:
        store.close()

ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(json.dumps(totals))
"""


@dataclass
class Outcome:
    """One stress run: what the clients saw and what the server holds."""

    acked: int
    refused: int
    unknown: int
    failed: int
    final: int
    values: int
    seconds: float
    errors: list[str]

    @property
    def lost(self) -> int:
        """Acknowledged increments missing from the counter."""
        return max(0, self.acked - self.final)

    @property
    def extra(self) -> int:
        """Increments in the counter that no client could have made."""
        return max(0, self.final - self.acked - self.unknown - self.failed)


def stress(
    query_url: str,
    update_url: str,
    *,
    procs: int,
    threads: int,
    ops: int,
    ttl_ms: int,
    seed: int,
    key: str = "counter",
    timeout: float = 600.0,
) -> Outcome:
    """Run one stress on a server (the counter ``key`` should not exist yet)."""
    from rdfmem import RemoteStore

    started = time.monotonic()
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER,
                query_url,
                update_url,
                key,
                str(ops),
                str(threads),
                str(ttl_ms),
                str(seed * 100 + p),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for p in range(procs)
    ]
    totals = {"acked": 0, "refused": 0, "unknown": 0, "failed": 0}
    errors: list[str] = []
    for proc in workers:
        out, err = proc.communicate(timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"a stress worker failed: {err.decode()[-3000:]}")
        seen = json.loads(out.decode().strip().splitlines()[-1])
        for name in totals:
            totals[name] += seen[name]
        errors += seen["errors"]
    seconds = time.monotonic() - started
    store = RemoteStore.connect(query_url, update_url)
    try:
        final = store.get(key) or 0
        values = store.count(predicate=store.value_predicate)
    finally:
        store.close()
    return Outcome(**totals, final=final, values=values, seconds=seconds, errors=errors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("server", choices=["virtuoso", "oxigraph"])
    parser.add_argument("--procs", type=int, default=6)
    parser.add_argument("--threads", type=int, default=3)
    parser.add_argument("--ops", type=int, default=40)
    parser.add_argument("--ttl-ms", type=int, default=400)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=22)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from servers import OxigraphServer, VirtuosoServer

    kind = VirtuosoServer if args.server == "virtuoso" else OxigraphServer
    with tempfile.TemporaryDirectory() as tmp:
        server = kind(Path(tmp))
        server.start()
        try:
            bad = 0
            for run in range(args.runs):
                server.wipe()
                out = stress(
                    server.query_url,
                    server.update_url,
                    procs=args.procs,
                    threads=args.threads,
                    ops=args.ops,
                    ttl_ms=args.ttl_ms,
                    seed=args.seed + run,
                )
                bad += bool(out.lost or out.extra or out.values > 1)
                print(
                    f"run {run}: acked={out.acked} refused={out.refused} unknown={out.unknown} "
                    f"failed={out.failed} final={out.final} values={out.values} "
                    f"lost={out.lost} extra={out.extra} {out.seconds:.1f}s",
                    flush=True,
                )
                for error in out.errors[:3]:
                    print("   ", error, flush=True)
            print(f"bad runs: {bad}/{args.runs}")
        finally:
            server.stop()


if __name__ == "__main__":
    threading.excepthook = lambda args: None
    main()
