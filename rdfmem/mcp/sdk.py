"""The parts of the official ``mcp`` SDK that ``rdfmem mcp`` serves with: its low-level
``Server``, its stdio transport and its wire types, loaded without the SDK's package
``__init__`` files.

``import mcp`` runs ``mcp/__init__.py``, which loads the SDK's HTTP client (httpx, its
session group, OAuth) and, through ``mcp.server``'s ``__init__``, the high-level
``MCPServer``: a fifth of the SDK's import, none of which a stdio server uses. So, when
nothing has imported ``mcp`` yet, the two packages are put in place empty (their modules,
with their real paths and specs) and only the submodules named here are loaded. The
packages stay whole for everyone else: the first name asked of one that is not loaded yet
runs the package's own ``__init__`` then (``import mcp; mcp.ClientSession`` and
``from mcp.server import MCPServer`` work as ever, with the same module objects).

The protocol is still the SDK's, every byte of it; this only chooses what to load.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import threading
import types as _modules
from typing import Any

__all__ = [
    "MCPError",
    "Server",
    "ServerRequestContext",
    "ServerSession",
    "SessionMessage",
    "stdio_server",
    "types",
]

#: The packages whose ``__init__`` waits until a name not loaded yet is asked of them.
_DEFERRED = ("mcp", "mcp.server")
_completing = threading.RLock()


class _DeferredPackage(_modules.ModuleType):
    """A package module whose ``__init__`` has not run yet: it runs on the first lookup of
    a name the package does not hold yet, and the module becomes a plain one."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name not in ("__all__", "__version__"):
            raise AttributeError(name)  # a probe (copy, inspect): not worth completing for
        _complete(self)
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") from None


def _complete(module: _modules.ModuleType) -> None:
    """Run ``module``'s own ``__init__`` in it (once)."""
    with _completing:
        deferred = type(module) is _DeferredPackage
        if not deferred:
            return
        module.__class__ = _modules.ModuleType
        spec = module.__spec__
        assert spec is not None and spec.loader is not None
        spec.loader.exec_module(module)


def _defer_packages() -> None:
    """Put ``mcp`` and ``mcp.server`` in place without running their ``__init__``, unless
    something imported ``mcp`` already (then everything is as the SDK made it)."""
    if "mcp" in sys.modules:
        return
    path: list[str] | None = None
    for name in _DEFERRED:
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.submodule_search_locations is None:
            return  # not installed: the imports below say so
        module = importlib.util.module_from_spec(spec)
        module.__class__ = _DeferredPackage
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)
        path = list(spec.submodule_search_locations)


_defer_packages()

import mcp.types as types  # noqa: E402 - after the packages are in place
from mcp.server.context import ServerRequestContext  # noqa: E402
from mcp.server.lowlevel.server import Server  # noqa: E402
from mcp.server.session import ServerSession  # noqa: E402
from mcp.server.stdio import stdio_server  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp.shared.message import SessionMessage  # noqa: E402
