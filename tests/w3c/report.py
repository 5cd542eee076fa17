"""Pass counts of the W3C SPARQL suites, raw engine beside rdfmem, per backend.

Run from ``tests/``: ``python -m w3c.report [--output ../benchmarks/results/w3c.md]``. The
Oxigraph server column needs the ``oxigraph`` CLI (``pip install oxigraph``).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from rdfmem import RdflibBackend, RdfStore

from .engines import (
    Engine,
    RawOxigraph,
    RawRdflib,
    RawServer,
    Rdfmem,
    prebound,
    prepare,
    run_case,
    run_prebound,
)
from .suite import SUITES, load_cases, suites_dir


def _count(engine: Engine, cases: list) -> tuple[int, list[str]]:
    failed = [c.id for c in cases if run_case(engine, c) is not None]
    return len(cases) - len(failed), failed


def _prebound_lines(root: Path, pairs: list[tuple[str, Engine, Engine]]) -> list[str]:
    """Pre-bound variables: each rdfmem store against raw pyoxigraph's substitutions."""
    cases = load_cases(root, "sparql11-query") + load_cases(root, "data-r2")
    items = prebound(cases)
    refused = 0
    reference = RawOxigraph()
    for case, name, value in items:
        try:
            text, base = prepare(reference, case)
            reference.query(text, base, {name: value})
        except Exception:  # the reference's own refusal, counted
            refused += 1
    lines = [
        "",
        "## Pre-bound variables (SEP-0007)",
        "",
        "Every SELECT test of the query suite and of `data-r2` with one projected variable",
        f"bound to a value of its expected result: {len(items)} runs (blank node values left",
        "out: a binding cannot name one). The reference is raw pyoxigraph with `substitutions`",
        "(on disk for the server, so that `SAMPLE` reads solutions in the same order); a",
        f"binding the reference refuses ({refused} runs) counts as agreement. A disagreement",
        "is a run whose answer differs from the reference's (or that fails where it answers).",
        "",
        "| backend | runs | agree with embedded Oxigraph | disagreements |",
        "|---|---:|---:|---|",
    ]
    for label, _, mine in pairs:
        if label == "rdflib":
            continue  # rdflib's own pre-binding is another engine's: not compared here
        with tempfile.TemporaryDirectory(prefix="rdfmem-w3c-ref-") as folder:
            reference = RawOxigraph(Path(folder) if "server" in label else None)
            wrong = [
                f"{case.id.rsplit('/', 1)[-1]} ?{name}"
                for case, name, value in items
                if run_prebound(mine, reference, case, name, value) is not None
            ]
        lines.append(
            f"| {label} | {len(items)} | {len(items) - len(wrong)} | {', '.join(wrong) or 'none'} |"
        )
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", type=Path, help="write the Markdown table here")
    args = parser.parse_args()
    root = suites_dir()
    if root is None:
        raise SystemExit("cannot obtain the W3C suites (pip download of the rdflib sdist)")
    pairs: list[tuple[str, Engine, Engine]] = [
        ("embedded Oxigraph", RawOxigraph(), Rdfmem("rdfmem", RdfStore)),
        ("rdflib", RawRdflib(), Rdfmem("rdfmem", lambda: RdfStore(backend=RdflibBackend()))),
    ]
    server = None
    if shutil.which("oxigraph"):
        from servers import OxigraphServer

        server = OxigraphServer(Path(tempfile.mkdtemp(prefix="rdfmem-w3c-")))
        server.start()
        base = server.query_url.rsplit("/", 1)[0]
        opened: list[RdfStore] = []

        def fresh() -> RdfStore:
            server.wipe()  # type: ignore[union-attr]
            while opened:
                opened.pop().close()
            opened.append(server.connect())  # type: ignore[union-attr]
            return opened[-1]

        raw = RawServer("raw", server.query_url, server.update_url, base + "/store")
        pairs.append(("Oxigraph server (remote store)", raw, Rdfmem("rdfmem", fresh)))
    lines = [
        "# W3C SPARQL test suites: raw engine and rdfmem",
        "",
        "Evaluation tests of the SPARQL 1.1 query and update suites and of the SPARQL 1.0",
        "`dataset` and `graph` folders (W3C test data from the rdflib 7.6.0 sdist on PyPI),",
        "run by `tests/test_w3c.py`; written by `python -m w3c.report` from `tests/`.",
        "A regression is a test the raw engine passes and rdfmem fails.",
        "",
        "| backend | suite | tests | raw engine | rdfmem | regressions |",
        "|---|---|---:|---:|---:|---|",
    ]
    try:
        for label, raw_engine, mine in pairs:
            for suite in SUITES:
                cases = load_cases(root, suite)
                raw_passed, raw_failed = _count(raw_engine, cases)
                my_passed, my_failed = _count(mine, cases)
                worse = sorted(set(my_failed) - set(raw_failed))
                lines.append(
                    f"| {label} | {suite} | {len(cases)} | {raw_passed} | {my_passed} | "
                    f"{', '.join(w.rsplit('/', 1)[-1] for w in worse) or 'none'} |"
                )
                print(lines[-1], flush=True)
        lines.extend(_prebound_lines(root, pairs))
    finally:
        if server is not None:
            server.stop()
    text = "\n".join(lines) + "\n"
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    else:
        print(text)


if __name__ == "__main__":
    main()
