"""A read run on a thread of its own while the caller makes another: a follower's whole reads
of a remote store (the server answers one while this process parses the other).

>>> later = started(lambda: 6 * 7)
>>> later()
42
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["started"]

T = TypeVar("T")


def started(read: Callable[[], T]) -> Callable[[], T]:
    """Start ``read()`` on a daemon thread now; the callable returned waits for it and
    returns its result, or raises its error. A result nobody asks for is dropped."""
    box: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            box.append((True, read()))
        except BaseException as exc:  # handed to the caller, raised there
            box.append((False, exc))

    thread = threading.Thread(target=run, name="rdfmem-read", daemon=True)
    thread.start()

    def result() -> T:
        thread.join()
        ok, value = box[0]
        if not ok:
            raise value
        out: T = value
        return out

    return result
