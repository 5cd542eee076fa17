"""Where a benchmark writes its table.

Project rule: benchmark results are written only by full runs; a ``--quick`` run never
overwrites committed results. A quick run's table goes to a fresh file in the system's temp
folder instead, and the script says where. Scripts import this as ``from results_io import
write_results`` (``python benchmarks/bench_x.py`` puts ``benchmarks/`` on ``sys.path``).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path


def write_results(path: Path, text: str, *, quick: bool) -> Path:
    """Write ``text`` to ``path`` on a full run; on a quick run (``quick=True``) write it to a
    new file in the system temp folder instead, leaving ``path`` untouched. Returns the path
    written. A script whose ``--out`` was given explicitly passes ``quick=False``: an explicit
    destination is honoured even with ``--quick``."""
    path = Path(path)
    if quick:
        with tempfile.NamedTemporaryFile(
            "w",
            encoding="utf-8",
            prefix=f"rdfmem-quick-{path.stem}-",
            suffix=path.suffix or ".md",
            delete=False,
        ) as handle:
            handle.write(text)
        written = Path(handle.name)
        print(
            f"--quick: {path.name} left as it is; this run's table is in {written}",
            file=sys.stderr,
        )
        return written
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
