"""Many processes, one on-disk memory (issue 21): what works, and what a second process pays.

Three measurements, each with real processes (``process_child.py``, driven over a pipe, or
``rdfmem mcp STORE`` through the MCP SDK's own stdio client):

* **updates**: ``--procs`` processes (3) each ``RdfStore.open(path)`` the same folder, then
  all at once ``--updates`` (100) x ``store.update("counter", +1)``. Expected: 300 at the end,
  every process opened. Each process's update latencies: p50 / p99 / slowest.
* **attached turns**: a store of N memories and N nodes; the first process to open it (the
  owner) runs agent turns (``workload.py``) while a second one (attached) is open and idle,
  then the attached one while the owner idles, then both in alternation; every turn counted
  from the first. The attached process's p50, p99 and slowest against the owner's (target:
  ≤ 2x), and the requests a turn sends to the owner (median).
* **two MCP servers**: two ``rdfmem mcp STORE`` stdio servers on one folder; each adds
  ``--observations`` (40) observations to one entity, both at the same time; then each reads
  the entity back. Expected: 80 kept, and each server sees all 80.

A measurement that cannot run says why (the error each process got) in the table rather
than stopping the script: today a second process fails to open the store
(``StoreAlreadyOpen``), and the table says so.

Run: ``python benchmarks/bench_processes.py [--quick]``; writes
``benchmarks/results/processes.md``. ``--only turns --size 10000 --turns 60`` runs just the
attached turns (into a temporary file unless ``--out`` is given): the side-by-side check of
a change.
"""

# ruff: noqa: RUF001  (the markdown tables print multiplication signs)
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import queue
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from latency import NO_WARM_UP, Latencies, load_average, machine, ms, ratio
from processes_mcp import two_servers
from results_io import write_results

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results" / "processes.md"
CHILD = Path(__file__).parent / "process_child.py"


class Child:
    """A ``process_child.py`` process: ``ask`` sends a command and waits for its answer."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        self.answers: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.answers.put(line)
        self.answers.put("")  # the process ended

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def answer(self, timeout: float) -> dict[str, Any]:
        try:
            line = self.answers.get(timeout=timeout)
        except queue.Empty:
            return {"ok": False, "error": f"no answer within {timeout:g} s"}
        if not line:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            return {"ok": False, "error": f"the process ended: {err.strip()[-500:]}"}
        reply: dict[str, Any] = json.loads(line)
        return reply

    def ask(self, command: str, timeout: float) -> dict[str, Any]:
        self.send(command)
        return self.answer(timeout)

    def stop(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def updates(folder: Path, procs: int, count: int, timeout: float) -> dict[str, Any]:
    path = folder / "counter-store"
    children = [Child() for _ in range(procs)]
    rows: list[dict[str, Any]] = []
    try:
        for child in children:  # opened one after another: the first is the owner
            rows.append({"open": child.ask(f"open {path}", timeout)})
        for child, row in zip(children, rows, strict=True):
            if row["open"]["ok"]:
                child.send(f"updates {count}")  # all at once
        for child, row in zip(children, rows, strict=True):
            if row["open"]["ok"]:
                row["updates"] = child.answer(timeout)
        for child in children:
            child.ask("close", timeout)
    finally:
        for child in children:
            child.stop()
    final = read_counter(path, timeout)
    print("updates", final, [r["open"].get("error") for r in rows], flush=True)
    return {"procs": procs, "count": count, "rows": rows, "final": final}


def read_counter(path: Path, timeout: float) -> dict[str, Any]:
    """The counter, read by a fresh process once the others have exited."""
    child = Child()
    try:
        opened = child.ask(f"open {path}", timeout)
        return child.ask("get counter", timeout) if opened["ok"] else opened
    finally:
        child.stop()


PHASES = {
    "owner": "the owner alone (the attached process open, idle)",
    "attached": "the attached process alone (the owner open, idle)",
    "both": "both, one turn each in alternation",
}


def attached_turns(folder: Path, n: int, turns: int, timeout: float) -> dict[str, Any]:
    """The owner's turns, then the attached process's, then both in alternation: ``turns``
    turns per process per phase, every one counted."""
    from workload import preload_rdfmem

    from rdfmem import RdfStore

    path = folder / "turns-store"
    store = RdfStore.open(path)
    t0 = time.perf_counter()
    preload_rdfmem(store, n, random.Random(n))
    store.close()
    out: dict[str, Any] = {"n": n, "turns": turns, "load_s": time.perf_counter() - t0}
    children = {"owner": Child(), "attached": Child()}
    seconds: dict[tuple[str, str], list[float]] = {}
    requests: dict[tuple[str, str], list[int]] = {}
    errors: dict[str, str] = {}
    graphs: dict[str, tuple[str, int, str]] = {}  # process -> when its HNSW graph came, how
    plan = {"owner": ["owner"], "attached": ["attached"], "both": ["owner", "attached"]}
    try:
        for name, child in children.items():
            opened = child.ask(f"open {path}", timeout)
            out[f"open_{name}"] = opened.get("seconds")
            if not opened["ok"]:
                errors[name] = opened["error"]
        for k, (phase, who) in enumerate(plan.items(), 1):
            for i in range(turns):
                for name in who:
                    if name in errors:
                        continue
                    first_id = 100_000 * k + 2 * i + (name == "attached")  # ids never reused
                    done = children[name].ask(f"turn {first_id}", timeout)
                    if done["ok"]:
                        seconds.setdefault((phase, name), []).append(done["seconds"])
                        requests.setdefault((phase, name), []).append(done.get("requests", 0))
                        state = done.get("graph", "none")
                        if state != "none" and name not in graphs:
                            graphs[name] = (phase, i + 1, state)
                    else:
                        errors[name] = f"{phase}, turn {i + 1}: {done['error']}"
    finally:
        for child in children.values():
            child.stop()
    out["errors"] = errors
    out["graphs"] = graphs
    out["lat"] = {k: Latencies.of(v) for k, v in seconds.items()}
    out["requests"] = {k: sorted(v)[len(v) // 2] for k, v in requests.items()}
    print("turns", {k: v.summary()["p50_ms"] for k, v in out["lat"].items()}, errors, flush=True)
    return out


# -- report ---------------------------------------------------------------------------------


def updates_table(u: dict[str, Any]) -> list[str]:
    expected = u["procs"] * u["count"]
    final = u["final"]
    got = final.get("value") if final["ok"] else f"could not read: {final['error']}"
    lines = [
        f"## {u['procs']} processes × {u['count']} `update` on one on-disk store",
        "",
        f"Expected {expected}; **the counter holds {got}**"
        + (" (as expected)." if got == expected else " (NOT as expected)."),
        "",
        "| process | opened (ms) | updates done | p50 | p99 | slowest | error |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    for k, row in enumerate(u["rows"], 1):
        opened = row["open"]
        done = row.get("updates", {})
        lat = Latencies.of(done.get("seconds") or [])
        cells = f"{ms(lat.p50)} | {ms(lat.p99)} | {ms(lat.slowest)}" if lat.n else "— | — | —"
        error = opened.get("error") or done.get("error") or ""
        open_ms = ms(opened["seconds"]) if opened["ok"] else "failed"
        lines.append(f"| {k} | {open_ms} | {lat.n} | {cells} | {error[:300]} |")
    return [*lines, ""]


def turns_table(t: dict[str, Any]) -> list[str]:
    lat = t["lat"]
    lines = [
        f"## Turns of an attached process against the owner's ({t['n']:,} memories and "
        f"{t['n']:,} nodes)",
        "",
        f"The owner opened the store first, the attached process second (opening: owner "
        f"{_ms(t.get('open_owner'))} ms, attached {_ms(t.get('open_attached'))} ms). Then "
        f"{t['turns']} turns per process in each phase, in this order, every one counted. "
        "Milliseconds:",
        "",
        "| phase | process | turns | requests to the owner (median per turn) | first | p50 "
        "| p99 | slowest |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for (phase, name), run in lat.items():
        sent = t.get("requests", {}).get((phase, name), "—")
        lines.append(
            f"| {PHASES[phase]} | {name} | {run.n} | {sent} | {ms(run.first)} | {ms(run.p50)} | "
            f"{ms(run.p99)} | {ms(run.slowest)} |"
        )
    for name, error in t["errors"].items():
        lines.append(f"| {name} failed | {error[:300]} | | | | | | |")
    pairs = [("owner", "attached"), ("both", "both")]
    ratios = []
    for (po, pa), label in zip(pairs, ("each alone", "in alternation"), strict=True):
        o, a = lat.get((po, "owner")), lat.get((pa, "attached"))
        if o is not None and a is not None and o.n == a.n == t["turns"]:
            ratios.append(
                f"{label}: p50 {ratio(a.p50 / o.p50)}, p99 {ratio(a.p99 / o.p99)}, slowest "
                f"{ratio(a.slowest / o.slowest)}, all turns {ratio(a.total / o.total)}"
            )
    how = {
        "built": "built in that process",
        "taken": "taken from the graph file another process of the store saved",
    }
    came = [
        f"{name}: from its turn {turn} of phase “{PHASES[phase]}” ({how.get(state, state)})"
        for name, (phase, turn, state) in t.get("graphs", {}).items()
    ]
    lines += [
        "",
        "The memory vectors' HNSW graph was in place (after a turn) — "
        + ("; ".join(came) if came else "in neither process (exact search throughout)")
        + ".",
    ]
    first_o, first_a = lat.get(("owner", "owner")), lat.get(("attached", "attached"))
    if first_o is not None and first_a is not None:
        lines += [
            "",
            f"First turn after opening: attached {ms(first_a.first)} ms, owner "
            f"{ms(first_o.first)} ms ({ratio(first_a.first / first_o.first)}; the attached "
            "process starts from the indexes the owner hands over at its first look, "
            "`rdfmem.backends.owner_indexes`).",
        ]
    if ratios:
        lines += ["", "Attached ÷ owner (target ≤ 2×), " + "; ".join(ratios) + "."]
    else:
        lines += ["", "No ratio: a process did not run all its turns (see the error)."]
    return [*lines, ""]


def _ms(seconds: float | None) -> str:
    return "failed" if seconds is None else ms(seconds)


def mcp_table(m: dict[str, Any]) -> list[str]:
    expected = 2 * m["count"]
    lines = [
        f"## Two `rdfmem mcp STORE` stdio servers × {m['count']} `add_observations`",
        "",
        f"Both on one folder, through the MCP SDK's `ClientSession`; each adds {m['count']} "
        "observations to the same entity, both at once, then reads it back with "
        f"`open_nodes`. Expected: {expected} kept, each server sees all {expected}.",
        "",
        "| server | initialize (ms) | calls ok | p50 | p99 | slowest | observations it sees "
        "| error |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for k, s in enumerate(m["servers"], 1):
        lat = Latencies.of(s.get("seconds") or [])
        cells = f"{ms(lat.p50)} | {ms(lat.p99)} | {ms(lat.slowest)}" if lat.n else "— | — | —"
        init = ms(s["init_s"]) if s.get("init_s") is not None else "failed"
        sees = s.get("sees", "—")
        lines.append(f"| {k} | {init} | {lat.n} | {cells} | {sees} | {s.get('error', '')[:300]} |")
    sees = [s.get("sees") for s in m["servers"]]
    verdict = "as expected" if sees == [expected, expected] else "NOT as expected"
    return [*lines, "", f"Seen by the two servers: {sees} ({verdict}).", ""]


def report(results: dict[str, Any], command: str, load: tuple[str, float]) -> str:
    return "\n".join(
        [
            "# Many processes, one on-disk memory (issue 21)",
            "",
            f"Run {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, `{command}`, "
            f"{load[0]} at the start and {load[1]:.1f} at the end.",
            "",
            f"**{NO_WARM_UP}**",
            "",
            *(updates_table(results["updates"]) if "updates" in results else []),
            *(turns_table(results["turns"]) if "turns" in results else []),
            *(mcp_table(results["mcp"]) if "mcp" in results else []),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: under a minute")
    parser.add_argument("--procs", type=int, default=3)
    parser.add_argument("--updates", type=int, default=100)
    parser.add_argument("--size", type=int, default=10_000, help="memories and nodes stored")
    parser.add_argument("--turns", type=int, default=200, help="turns per process")
    parser.add_argument("--observations", type=int, default=40, help="per MCP server")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per answer")
    parser.add_argument("--out", type=Path, help=f"default {RESULTS} (full runs only)")
    parser.add_argument(
        "--only",
        choices=["updates", "turns", "mcp"],
        action="append",
        help="run only this measurement (repeatable); written to a temporary file unless "
        "--out is given",
    )
    args = parser.parse_args()
    if args.quick:
        args.size, args.turns, args.timeout = 1_000, 40, 120
    started = machine()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        wanted = set(args.only or ["updates", "turns", "mcp"])
        if "updates" in wanted:
            results["updates"] = updates(folder, args.procs, args.updates, args.timeout)
        if "turns" in wanted:
            results["turns"] = attached_turns(folder, args.size, args.turns, args.timeout)
        if "mcp" in wanted:
            results["mcp"] = two_servers(folder / "mcp-store", args.observations, args.timeout)
    command = " ".join(["python", "benchmarks/bench_processes.py", *sys.argv[1:]])
    text = report(results, command, (started, load_average()))
    partial = (args.quick or args.only is not None) and args.out is None
    write_results(args.out or RESULTS, text, quick=partial)
    print(text)


if __name__ == "__main__":
    main()
