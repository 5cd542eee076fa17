"""Durability: a writer killed with SIGKILL loses nothing it acknowledged."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rdfmem import RdfStore

CHILD = textwrap.dedent(
    """
    import sys
    from rdfmem import RdfStore

    store = RdfStore.open(sys.argv[1])
    i = 0
    while True:
        store.set(f"fresh:{i}", {"i": i, "text": "x" * (i % 300)})
        value = store.update("counter", lambda n: (n or 0) + 1)
        print(f"{i} {value}", flush=True)
        i += 1
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")
@pytest.mark.parametrize("round_", range(4))
def test_acknowledged_writes_survive_sigkill(tmp_path: Path, round_: int) -> None:
    path = tmp_path / "db"
    # The second run starts on what the first kill left, and is killed in turn.
    acked: list[tuple[int, int]] = []
    for run in range(2):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(path)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert child.stdout is not None
        wanted = 150 + 97 * round_ + 31 * run
        for seen, line in enumerate(child.stdout, start=1):
            i, value = map(int, line.split())
            acked.append((i, value))
            if seen >= wanted:
                child.send_signal(signal.SIGKILL)  # mid-write: the loop never pauses
                break
        child.wait(timeout=30)
        # Lines the child printed before it died are acknowledgements too.
        acked.extend(tuple(map(int, line.split())) for line in child.stdout if line.endswith("\n"))
        child.stdout.close()
        assert child.returncode == -signal.SIGKILL

        with RdfStore.open(path) as store:
            for i, _ in acked:
                assert store.get(f"fresh:{i}") == {"i": i, "text": "x" * (i % 300)}
            last = acked[-1][1]
            # The update in flight when killed may or may not have landed, never half.
            assert store.get("counter") in (last, last + 1)
            assert store.count(subject="urn:rdfmem:store:counter") == 1
