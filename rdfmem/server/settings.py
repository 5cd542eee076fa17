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
    ):
        if value <= 0:
            raise ServerConfigError(f"{name} must be positive, not {value!r}")
    return settings
