"""A busy port is an error before anything says "serving" (issue 26, item 9)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from rdfmem import RdfStore
from rdfmem.core.errors import BackingError
from rdfmem.server import serve


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port another program listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        yield int(other.getsockname()[1])


def test_serve_on_a_busy_port_raises_before_it_announces(busy_port: int) -> None:
    heard: list[str] = []
    store = RdfStore()
    with pytest.raises(BackingError, match=f"127.0.0.1:{busy_port}: the port is in use"):
        serve(store, port=busy_port, announce=heard.append)
    assert heard == []
    store.close()


def test_rdfmem_serve_on_a_busy_port_exits_with_the_reason_and_never_says_serving(
    busy_port: int,
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rdfmem", "serve", ":memory:", "--port", str(busy_port)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "the port is in use" in done.stderr and "--port" in done.stderr
    assert "serving" not in done.stderr.lower()
