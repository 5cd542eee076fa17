"""History costs before and after a change, side by side in one run (issue 24).

Runs ``bench_history.py`` of a past commit (``--before``, taken with ``git archive``: the
checkout is not touched) and of the working tree, alternately (``--rounds`` each, so both
see the same load on the machine), and prints every row of both as
``before | after | after/before`` for p50, p99 and the slowest call.

Run: ``python benchmarks/bench_history_compare.py --before HEAD --quick`` (small sizes),
or without ``--quick`` for the full sizes (writes ``benchmarks/results/history-compare.md``).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from results_io import write_results

ROOT = Path(__file__).resolve().parents[1]
_ROW = re.compile(r"^\| (?P<name>[^|]+?) \| (?P<calls>[\d,]+) \| (?P<rest>.*)\|$")


def run(tree: Path, quick: bool, out: Path, only: str | None) -> str:
    args = [sys.executable, str(tree / "benchmarks" / "bench_history.py"), "--out", str(out)]
    if quick:
        args.append("--quick")
    script = (tree / "benchmarks" / "bench_history.py").read_text(encoding="utf-8")
    if only is not None and '"--only"' in script:  # older scripts run every section
        args += ["--only", only]
    done = subprocess.run(
        args,
        cwd=tree,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tree)},
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"bench_history.py failed in {tree}:\n{done.stderr[-3000:]}")
    return out.read_text(encoding="utf-8")


def rows(table: str) -> dict[tuple[str, str], list[str]]:
    """``(section, row name) -> [p50, p99, slowest]`` of one bench_history.py table."""
    found: dict[tuple[str, str], list[str]] = {}
    section = ""
    for line in table.splitlines():
        if line.startswith("### "):
            section = line[4:]
            continue
        if line.startswith("History quads kept per write"):
            found[(section, "history quads kept per write")] = [line.split(":")[1].split()[0]]
            continue
        match = _ROW.match(line)
        if match and match["name"] not in ("store", "read"):
            cells = [c.strip() for c in match["rest"].split("|")]
            found[(section, _RENAMED.get(match["name"], match["name"]))] = cells[:3]
    return found


#: Rows renamed since: the old name -> the new one.
_RENAMED = {"get(key, as_of=t)": "get(key, as_of=t), first read of each key"}


def _num(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def merge(before: list[dict[tuple[str, str], list[str]]], after: list[dict]) -> list[str]:
    lines: list[str] = []
    section = None
    for key in after[0]:
        if key[0] != section:
            section = key[0]
            lines += [
                "",
                f"### {section}",
                "",
                "| row | round | p50 before | p50 after | p99 before | p99 after "
                "| slowest before | slowest after | p50 after/before |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
            ]
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            old, new = b.get(key, ["-"] * 3), a[key]
            old = old + ["-"] * (3 - len(old))
            new = new + ["-"] * (3 - len(new))
            x, y = _num(old[0]), _num(new[0])
            change = f"{y / x:.2f}x" if x and y is not None else "-"
            lines.append(
                f"| {key[1]} | {i + 1} | {old[0]} | {new[0]} | {old[1]} | {new[1]} "
                f"| {old[2]} | {new[2]} | {change} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", default="HEAD", help="the commit to compare with")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--only", choices=("writes", "reads", "changes"), default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rdfmem-history-compare-") as tmp:
        old = Path(tmp) / "before"
        old.mkdir()
        archive = Path(tmp) / "before.tar"
        with archive.open("wb") as sink:
            subprocess.run(["git", "archive", args.before], cwd=ROOT, stdout=sink, check=True)
        with tarfile.open(archive) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(old, filter="data")
            else:  # Python < 3.11.4: our own archive
                tar.extractall(old)
        before, after = [], []
        for i in range(args.rounds):
            before.append(rows(run(old, args.quick, Path(tmp) / f"before-{i}.md", args.only)))
            after.append(rows(run(ROOT, args.quick, Path(tmp) / f"after-{i}.md", args.only)))
    lines = [
        f"# History before ({args.before}) and after (working tree)",
        "",
        f"{'--quick' if args.quick else 'full'} run, {args.rounds} rounds each, alternating; "
        "every call timed (bench_history.py), times in ms.",
        *merge(before, after),
    ]
    text = "\n".join(lines)
    print(text)
    target = args.out or Path(__file__).parent / "results" / "history-compare.md"
    write_results(target, text, quick=args.quick and args.out is None)


if __name__ == "__main__":
    main()
