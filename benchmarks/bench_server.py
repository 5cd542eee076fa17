"""SELECT requests per second: ``rdfmem serve`` against ``oxigraph serve``, one run.

Both servers hold the same data on disk (subjects x 5 triples) and answer the same mix of
point queries ``SELECT ?o WHERE { <urn:ex:sN> <urn:ex:p> ?o }`` (N random) with SPARQL JSON,
and of two-pattern joins (``<urn:ex:sN> <urn:ex:next> ?n . ?n <urn:ex:p> ?o``). rdfmem serve
answers a point query on its event loop (a bounded amount of work) and every other read in
the sandbox, a kept child process it can kill at the time limit (a plain ``GET
/sparql?query=``, as sent here, skips the ASGI stack: ``rdfmem.server.lane``); rdfmem with that isolation
turned off (``isolate=False``, not a CLI option) shows what the child process costs per
query. All from the same load generator: ``wrk`` when it is installed (``apt-get install
wrk``) and ``--python-client`` is not given, else processes of Python threads with httpx
(which then costs more CPU per answer than either server, on the same cores, and says so).
Each server is measured with one connection (latency-bound) and with several (throughput),
every server in turn, ``--rounds`` times; each row also gives the server's CPU per answer
(its processes and their children), the load average is reported at the start and the end.

Run: ``python benchmarks/bench_server.py [--quick] [--python-client] [--rounds N]
[--seconds S] [--only readers,rdfmem] [--connections 8] [--baseline DIR]`` (``--baseline``:
also ``rdfmem serve`` from another copy of the package, e.g. the code before a change, side
by side in the same rounds); a full run writes
``benchmarks/results/server.md`` (a ``--quick`` one a temporary file).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx
from results_io import write_results
from server_wrk import run_wrk

from rdfmem import RdfStore

ROOT = Path(__file__).resolve().parent
ACCEPT = "application/sparql-results+json"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"

_WRK_SCRIPT = """
local path, n
init = function(args)
  path = args[1]
  n = tonumber(args[2])
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16) % 1000)
end
request = function()
  local i = math.random(0, n - 1)
  local q = "PREFIX" .. i .. "SUFFIX"
  return wrk.format("GET", path .. "?query=" .. q, {["Accept"] = "ACCEPT"})
end
""".replace("ACCEPT", ACCEPT)

#: The two query shapes, split around the random subject number.
QUERIES = {
    "point": ("SELECT ?o WHERE { <urn:ex:s", "> <urn:ex:p> ?o }"),
    "join": ("SELECT ?o WHERE { <urn:ex:s", "> <urn:ex:next> ?n . ?n <urn:ex:p> ?o }"),
}


def wrk_script(kind: str) -> str:
    prefix, suffix = QUERIES[kind]
    return _WRK_SCRIPT.replace("PREFIX", quote(prefix, safe="")).replace(
        "SUFFIX", quote(suffix, safe="")
    )


@dataclass
class Result:
    server: str
    query: str
    connections: int
    rps: float
    p50_ms: float
    p99_ms: float
    slowest_ms: float
    errors: int
    cpu_us: float = float("nan")  # server CPU (the process and its children) per answer
    round: int = 1


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_data(path: Path, subjects: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        for i in range(subjects):
            out.write(f'<urn:ex:s{i}> <urn:ex:p> "value {i}" .\n')
            out.write(
                f'<urn:ex:s{i}> <urn:ex:rank> "{i}"^^<http://www.w3.org/2001/XMLSchema#integer> .\n'
            )
            out.write(f"<urn:ex:s{i}> <urn:ex:next> <urn:ex:s{(i + 1) % subjects}> .\n")
            out.write(f'<urn:ex:s{i}> <http://www.w3.org/2000/01/rdf-schema#label> "S{i}"@en .\n')
            out.write(f"<urn:ex:s{i}> <{RDF_TYPE}> <urn:ex:Thing> .\n")


def wait_ready(url: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited: {process.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
        try:
            if httpx.get(url, params={"query": "ASK {}"}, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not start")


_NO_ISOLATION = (
    "import sys; from rdfmem import RdfStore; from rdfmem.server import serve; "
    "store = RdfStore.open(sys.argv[1]); "
    "serve(store, port=int(sys.argv[2]), access_log=False, isolate=False)"
)


_FORK_PER_READ = (
    "import sys; from rdfmem import RdfStore; from rdfmem.server import serve; "
    "store = RdfStore.open(sys.argv[1]); "
    "serve(store, port=int(sys.argv[2]), access_log=False, sandbox='fork')"
)


#: The servers, in the order they are measured (``--only`` picks some).
SERVER_KEYS = ("oxigraph", "rdfmem", "readers", "forking", "threads")

#: Reader processes of ``rdfmem serve --workers N`` measured by default (``--readers``).
READERS = max(1, min(4, os.cpu_count() or 1))
_WITH_READERS = (
    "import sys; from rdfmem import RdfStore; from rdfmem.server import serve; "
    "store = RdfStore.open(sys.argv[1]); "
    "serve(store, port=int(sys.argv[2]), access_log=False, workers=int(sys.argv[3]))"
)


def readers_name(count: int) -> str:
    return f"rdfmem serve, {count} reader{'s' if count > 1 else ''}"


def start_rdfmem_readers(store: Path, port: int, count: int) -> subprocess.Popen[bytes]:
    """rdfmem serve with ``count`` reader processes on one socket (read-only opens)."""
    return subprocess.Popen(
        [sys.executable, "-c", _WITH_READERS, str(store), str(port), str(count)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def start_rdfmem_threads(store: Path, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", _NO_ISOLATION, str(store), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def start_rdfmem_forking(store: Path, port: int) -> subprocess.Popen[bytes]:
    """rdfmem serve as before the sandbox: a child forked for every non-point read."""
    return subprocess.Popen(
        [sys.executable, "-c", _FORK_PER_READ, str(store), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def start_rdfmem(store: Path, port: int, code: str | None = None) -> subprocess.Popen[bytes]:
    """``rdfmem serve``; with ``code``, the package found in that folder (``--baseline``)."""
    env = None
    if code is not None:
        env = {**os.environ, "PYTHONPATH": code}
    # ``-m`` puts the working folder first on the path: there, the package measured.
    where = code if code is not None else os.environ.get("PYTHONPATH") or str(ROOT.parent)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rdfmem",
            "serve",
            str(store),
            "--port",
            str(port),
            "--no-access-log",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        cwd=where.split(os.pathsep)[0],
    )


def start_oxigraph(location: Path, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["oxigraph", "serve-read-only", "--location", str(location), "--bind", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def point_url(base: str, i: int, kind: str = "point") -> str:
    prefix, suffix = QUERIES[kind]
    return f"{base}?query={quote(prefix + str(i) + suffix)}"


def check_answers(base: str, subjects: int) -> None:
    """Every server must give the same, right answers before they are timed."""
    for kind, expected in (("point", subjects // 2), ("join", subjects // 2 + 1)):
        response = httpx.get(point_url(base, subjects // 2, kind), headers={"Accept": ACCEPT})
        bindings = response.json()["results"]["bindings"]
        assert [b["o"]["value"] for b in bindings] == [f"value {expected}"], response.text


#: Client processes of the Python load generator: one process's GIL would bound the rate.
CLIENT_PROCESSES = 4


def _client_process(url: str, threads: int, seconds: float, subjects: int, kind: str, seed: int):  # type: ignore[no-untyped-def]
    """One load-generating process: ``threads`` keep-alive connections for ``seconds``."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()

    def worker(n: int) -> None:
        import random

        rng = random.Random(seed * 1000 + n)
        mine: list[float] = []
        failed = 0
        with httpx.Client(headers={"Accept": ACCEPT}) as client:
            # Timed from here: making a client takes a while on a busy machine.
            stop = time.monotonic() + seconds
            while time.monotonic() < stop:
                start = time.perf_counter()
                try:
                    status = client.get(point_url(url, rng.randrange(subjects), kind)).status_code
                except httpx.HTTPError:
                    status = 0
                mine.append(time.perf_counter() - start)
                if status != 200:
                    failed += 1
        with lock:
            latencies.extend(mine)
            errors[0] += failed

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return latencies, errors[0]


def run_python(
    url: str, connections: int, seconds: int, subjects: int, kind: str
) -> tuple[float, float, float, float, int]:
    """Load from up to ``CLIENT_PROCESSES`` processes, the connections spread over them."""
    import concurrent.futures
    import multiprocessing

    processes = min(CLIENT_PROCESSES, connections)
    shares = [connections // processes + (i < connections % processes) for i in range(processes)]
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(processes, mp_context=context) as pool:
        futures = [
            pool.submit(_client_process, url, share, seconds, subjects, kind, i)
            for i, share in enumerate(shares)
        ]
        parts = [f.result() for f in futures]
    elapsed = float(seconds)  # each process sent requests for exactly this long
    latencies = sorted(x for part, _ in parts for x in part)
    errors = sum(e for _, e in parts)
    if not latencies:
        return 0.0, float("nan"), float("nan"), float("nan"), errors
    p50 = statistics.median(latencies) * 1e3
    p99 = latencies[int(len(latencies) * 0.99) - 1] * 1e3
    return len(latencies) / elapsed, p50, p99, latencies[-1] * 1e3, errors


def tree_cpu(pid: int) -> float:
    """CPU seconds used so far by process ``pid`` and its descendants still alive."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return total / tick


def _http_stack() -> str:
    import importlib.util

    have = [m for m in ("httptools", "uvloop") if importlib.util.find_spec(m) is not None]
    return " and ".join(have) if have else "its pure-Python h11 parser"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--python-client", action="store_true", help="do not use wrk")
    parser.add_argument("--seconds", type=int, help="seconds per measurement")
    parser.add_argument(
        "--rounds", type=int, default=1, help="passes over every server, interleaved"
    )
    parser.add_argument(
        "--only",
        help="servers to measure besides oxigraph serve, by key: "
        + ",".join(k for k in SERVER_KEYS if k != "oxigraph"),
    )
    parser.add_argument("--connections", help="connection counts, e.g. 8 or 1,8")
    parser.add_argument(
        "--readers", default=str(READERS), help="reader process counts to measure, e.g. 1,2"
    )
    parser.add_argument(
        "--baseline",
        help="a folder holding another copy of the rdfmem package (e.g. the code before a "
        "change): its rdfmem serve is measured too, in the same rounds",
    )
    args = parser.parse_args()
    readers = [int(c) for c in args.readers.split(",")]
    levels: tuple[int, ...]
    subjects, seconds, levels = (2000, 2, (1, 8)) if args.quick else (20000, 10, (1, 8))
    if args.seconds:
        seconds = args.seconds
    if args.connections:
        levels = tuple(int(c) for c in args.connections.split(","))
    only = {"oxigraph", *(args.only.split(",") if args.only else SERVER_KEYS)}
    if shutil.which("oxigraph") is None:
        sys.exit("needs the oxigraph server CLI (pip install oxigraph)")
    use_wrk = shutil.which("wrk") is not None and not args.python_client
    tmp = Path(tempfile.mkdtemp(prefix="rdfmem-bench-server-"))
    data = tmp / "data.nt"
    write_data(data, subjects)
    with RdfStore.open(tmp / "rdfmem") as store:
        store.load(data)
    subprocess.run(
        ["oxigraph", "load", "--location", str(tmp / "oxigraph"), "--file", str(data)],
        check=True,
        capture_output=True,
    )
    scripts = {}
    for kind in QUERIES:
        scripts[kind] = tmp / f"{kind}.lua"
        scripts[kind].write_text(wrk_script(kind), encoding="utf-8")
    with RdfStore.open(tmp / "rdfmem-threads") as store:
        store.load(data)

    with RdfStore.open(tmp / "rdfmem-forking") as store:
        store.load(data)
    for count in readers:
        with RdfStore.open(tmp / f"rdfmem-readers-{count}") as store:
            store.load(data)
    if args.baseline:
        with RdfStore.open(tmp / "rdfmem-baseline") as store:
            store.load(data)

    starts = {
        "oxigraph": ("oxigraph serve", "/query", start_oxigraph, "oxigraph"),
        "rdfmem": ("rdfmem serve", "/sparql", start_rdfmem, "rdfmem"),
        "forking": ("rdfmem, fork per read", "/sparql", start_rdfmem_forking, "rdfmem-forking"),
        "threads": ("rdfmem, no child process", "/sparql", start_rdfmem_threads, "rdfmem-threads"),
    }
    servers = []
    for key in SERVER_KEYS:
        if key not in only:
            continue
        if key == "readers":
            for count in readers:
                port = free_port()
                folder = tmp / f"rdfmem-readers-{count}"
                proc = start_rdfmem_readers(folder, port, count)
                servers.append((readers_name(count), f"http://127.0.0.1:{port}/sparql", proc))
            continue
        name, path, start, where = starts[key]
        port = free_port()
        servers.append((name, f"http://127.0.0.1:{port}{path}", start(tmp / where, port)))
    if args.baseline:
        port = free_port()
        code = str(Path(args.baseline).resolve())
        proc = start_rdfmem(tmp / "rdfmem-baseline", port, code)
        servers.append((f"rdfmem serve ({code})", f"http://127.0.0.1:{port}/sparql", proc))
    results: list[Result] = []
    load_start = os.getloadavg()[0]
    print(f"load average at the start: {load_start:.1f}")
    try:
        for _, url, proc in servers:
            wait_ready(url, proc)
            check_answers(url, subjects)
        for round_ in range(1, args.rounds + 1):
            for kind in QUERIES:
                for connections in levels:
                    for name, url, proc in servers:  # interleaved: load drifts hit all alike
                        if use_wrk:
                            run_wrk(url, connections, 1, subjects, scripts[kind])  # warm-up
                        else:
                            run_python(url, connections, 1, subjects, kind)
                        before = tree_cpu(proc.pid)
                        if use_wrk:
                            measured = run_wrk(url, connections, seconds, subjects, scripts[kind])
                        else:
                            measured = run_python(url, connections, seconds, subjects, kind)
                        answers = max(1.0, measured[0] * seconds)
                        cpu_us = (tree_cpu(proc.pid) - before) / answers * 1e6
                        rps, p50, p99, slowest, errors = measured
                        results.append(
                            Result(
                                name,
                                kind,
                                connections,
                                rps,
                                p50,
                                p99,
                                slowest,
                                errors,
                                cpu_us,
                                round_,
                            )
                        )
                        print(
                            f"r{round_} {name:25} {kind:5} c={connections}: "
                            f"{measured[0]:8.0f} req/s  p50 {measured[1]:.2f} ms  "
                            f"p99 {measured[2]:.2f} ms  slowest {measured[3]:.1f} ms  "
                            f"errors {measured[4]}  server CPU {cpu_us:.0f} us/answer  "
                            f"(load {os.getloadavg()[0]:.1f})",
                            flush=True,
                        )
    finally:
        for _, _, proc in servers:
            proc.terminate()
            proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    for line in ratio_lines(results):
        print(line)
    write_report(
        results,
        subjects,
        seconds,
        "wrk" if use_wrk else f"{CLIENT_PROCESSES} Python processes of threads + httpx",
        args.quick,
        (load_start, os.getloadavg()[0]),
    )


def ratio_lines(results: list[Result]) -> list[str]:
    """Each rdfmem server's rate over Oxigraph's, per query and connections: every round's
    ratio (against Oxigraph's rate in the same round) and their median."""
    base = {(r.query, r.connections, r.round): r for r in results if r.server == "oxigraph serve"}
    ratios: dict[tuple[str, str, int], list[float]] = {}
    for r in results:
        ox = base.get((r.query, r.connections, r.round))
        if r.server != "oxigraph serve" and ox is not None and ox.rps:
            ratios.setdefault((r.server, r.query, r.connections), []).append(r.rps / ox.rps)
    return [
        f"- {server}, {query}, {connections} connection(s): "
        f"{statistics.median(values):.2f}x (rounds: {', '.join(f'{v:.2f}' for v in values)})"
        for (server, query, connections), values in ratios.items()
    ]


def write_report(
    results: list[Result],
    subjects: int,
    seconds: int,
    client: str,
    quick: bool,
    load: tuple[float, float],
) -> None:
    by = {(r.server, r.query, r.connections, r.round): r for r in results}
    lines = [
        "# Serving: SELECT requests per second",
        "",
        f"`python benchmarks/bench_server.py{' --quick' if quick else ''}` — "
        f"{subjects} subjects x 5 triples on disk, the same random point query "
        "`SELECT ?o WHERE { <urn:ex:sN> <urn:ex:p> ?o }` and two-pattern join "
        "`SELECT ?o WHERE { <urn:ex:sN> <urn:ex:next> ?n . ?n <urn:ex:p> ?o }` (SPARQL JSON) "
        f"against every server, {seconds} s per measurement after a 1 s warm-up, load "
        f"generator: {client}.",
        "",
        "rdfmem serve answers point queries on its event loop; every other read runs in the "
        "sandbox: a child process kept from one read to the next until a write, killed at "
        "the time limit and capped in memory (`rdfmem.store.sandbox`). A plain "
        "`GET /sparql?query=` (these requests) is taken from the HTTP parser's callbacks "
        "without the ASGI stack (`rdfmem.server.lane`). `rdfmem, fork per "
        "read` forks a child for each such read instead (the server before the sandbox, "
        "`sandbox='fork'`); `rdfmem, no child process` has isolation off (`isolate=False`); "
        "`rdfmem serve, N readers` is `serve(store, workers=N)` (`rdfmem serve --workers N`): "
        "N reader processes on the one listening socket, each with a read-only open of the store reopened when "
        "the owner's write generation moves, the owner keeping the writes "
        "(`rdfmem.server.fleet`).",
        "",
        "| round | query | server | connections | requests/s | p50 ms | p99 ms | slowest ms "
        "| errors | server CPU µs/answer | vs oxigraph serve |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        base = by.get(("oxigraph serve", r.query, r.connections, r.round))
        ratio = r.rps / base.rps if base else float("nan")
        lines.append(
            f"| {r.round} | {r.query} | {r.server} | {r.connections} | {r.rps:,.0f} "
            f"| {r.p50_ms:.2f} | {r.p99_ms:.2f} | {r.slowest_ms:.1f} | {r.errors} "
            f"| {r.cpu_us:.0f} | {ratio:.2f}x |"
        )
    lines += ["", "Ratios to oxigraph serve (median over rounds):", "", *ratio_lines(results)]
    costs = []
    for connections in sorted({r.connections for r in results}):
        child = by.get(("rdfmem serve", "join", connections, 1))
        thread = by.get(("rdfmem, no child process", "join", connections, 1))
        if child and thread and child.rps and thread.rps:
            costs.append(
                f"{connections} connection(s): {child.rps / thread.rps:.2f}x the requests/s "
                f"of the unisolated server, median latency {child.p50_ms:.1f} ms against "
                f"{thread.p50_ms:.1f} ms"
            )
    lines += [
        "",
        "Targets (issue 23): rdfmem serve at least 0.8x Oxigraph server's rate on point "
        "queries and on joins at 8 connections.",
        "",
        "Cost of the child process per (join) query: "
        + ("; ".join(costs) or "not measured")
        + ". The kept child answers over a pipe the event loop waits on; `fork per read` is "
        "bounded by the fork rate of the server process (its size and the machine).",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores (load average "
        f"{load[0]:.1f} at the start, {load[1]:.1f} at the end), Python "
        f"{platform.python_version()}, "
        f"uvicorn with {_http_stack()}. The load generator runs on the same cores as the "
        "servers; rdfmem serve is one Python process (one core for Python, the GIL) unless it "
        "has reader processes, while Oxigraph server answers on every core.",
        "",
    ]
    out = write_results(ROOT / "results" / "server.md", "\n".join(lines), quick=quick)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
