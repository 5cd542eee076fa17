"""The tools one server offers, as it can run them: the chosen names (``toolsets``), with
schemas that offer only what this server can do (the ``project`` scope of the memory tools
only with ``--project``).

>>> [s.name for s in specs(("open_nodes", "memory_save"), project=False)]
['open_nodes', 'memory_save']
>>> specs(("memory_save",), project=False)[0].input_schema["properties"]["scope"]["enum"]
['global', 'session']
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from rdfmem.mcp.history_tools import HISTORY_TOOLS
from rdfmem.mcp.kg_tools import KG_TOOLS
from rdfmem.mcp.own_tools import OWN_TOOLS
from rdfmem.mcp.pages import PAGE_TOOLS
from rdfmem.mcp.sparql import SPARQL_TOOL
from rdfmem.mcp.specs import Spec

__all__ = ["specs"]

_SCOPE_WITHOUT_PROJECT = "global (every project) or session (with session)"


def _every() -> dict[str, Spec]:
    return {s.name: s for s in [*KG_TOOLS, *PAGE_TOOLS, *HISTORY_TOOLS, *OWN_TOOLS, SPARQL_TOOL]}


def _without_project(spec: Spec) -> Spec:
    """``spec`` with ``project`` left out of its ``scope`` argument."""
    props = spec.input_schema.get("properties", {})
    scope = props.get("scope")
    if scope is None or "project" not in scope.get("enum", ()):
        return spec
    schema: dict[str, Any] = copy.deepcopy(spec.input_schema)
    fitted = schema["properties"]["scope"]
    fitted["enum"] = [v for v in fitted["enum"] if v != "project"]
    fitted["description"] = _SCOPE_WITHOUT_PROJECT
    return replace(spec, input_schema=schema)


def specs(names: Sequence[str], *, project: bool) -> list[Spec]:
    """The tools called ``names`` (known names, see ``toolsets.ALL``), in that order, fitted
    to a server with (``project``) or without a project."""
    every = _every()
    chosen = [every[n] for n in names]
    return chosen if project else [_without_project(s) for s in chosen]
