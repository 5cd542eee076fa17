"""The endpoint's settings: limits and permissions, checked once when the app is made."""

from __future__ import annotations

from dataclasses import dataclass

from rdfmem.core.errors import ServerConfigError

__all__ = ["ServerConfigError", "ServerSettings", "checked"]


@dataclass(frozen=True)
class ServerSettings:
    """The endpoint's limits and permissions (see ``create_app``)."""

    allow_update: bool = False
    token: str | None = None
    cors: tuple[str, ...] = ()
    timeout: float = 30.0
    max_concurrent: int = 4
    max_waiting: int = 64
    max_result_bytes: int = 64 << 20
    max_body: int = 1 << 20
    allowed_hosts: tuple[str, ...] = ()
    isolate: bool = True
    body_timeout: float = 30.0
    #: ``"pool"``: isolated reads run in kept child processes (``rdfmem.store.sandbox``);
    #: ``"fork"``: in a child forked for each read (``isolate.py``), to compare.
    sandbox: str = "pool"
    #: Bytes one isolated read may allocate (its child's ``RLIMIT_AS`` above its size).
    memory_cap: int = 1 << 30


def checked(settings: ServerSettings) -> ServerSettings:
    """``settings``, once they make sense.

    >>> checked(ServerSettings(timeout=0))
    Traceback (most recent call last):
    ...
    rdfmem.core.errors.ServerConfigError: timeout must be positive, not 0

    Raises:
        ServerConfigError: updates allowed without a token, or a limit below 1.
    """
    if settings.allow_update and not settings.token:
        raise ServerConfigError("allow_update needs a token that updates must carry")
    for name, value in (
        ("timeout", settings.timeout),
        ("max_concurrent", settings.max_concurrent),
        ("max_result_bytes", settings.max_result_bytes),
        ("max_body", settings.max_body),
        ("memory_cap", settings.memory_cap),
    ):
        if value <= 0:
            raise ServerConfigError(f"{name} must be positive, not {value!r}")
    if settings.sandbox not in ("pool", "fork"):
        raise ServerConfigError(f"sandbox is 'pool' or 'fork', not {settings.sandbox!r}")
    return settings
