"""Which tools a server advertises (``rdfmem mcp --tools``): a preset or a list of names.

Names are the contract, so they are spelt out here rather than read from the tool modules:
choosing a set imports nothing heavy, and a server answers ``initialize`` before it loads
its tools.

* ``official``: exactly the nine tools of the official memory server.
* ``memory`` (the default): those nine and rdfmem's ``memory_*`` notes; a host switching
  from the official server keeps every tool it had, and the list stays short.
* ``all``: every tool (the decision graph, generalisations, ``sparql_query``, ``stats``,
  and the past: ``history``, ``read_graph_as_of``).

rdfmem's read tools of ``memory`` take ``asOf`` (the past, on a store keeping history), but
``memory`` leaves ``history`` out to keep the default list short: ``--tools all`` (or
``--tools NAME,…,history``) offers it.

>>> choose("official")[-1], len(choose("memory")), choose("read_graph, stats")
('open_nodes', 14, ('read_graph', 'stats'))
>>> try:
...     choose("memory_save,nope")
... except ToolInputError as exc:
...     print(str(exc)[:52])
--tools: unknown tool 'nope'; pass official, memory,
"""

from __future__ import annotations

from rdfmem.core.errors import ToolInputError

__all__ = ["ALL", "DEFAULT", "MEMORY", "OFFICIAL", "PRESETS", "choose"]

#: The official memory server's nine tools, in its order.
OFFICIAL: tuple[str, ...] = (
    "create_entities",
    "create_relations",
    "add_observations",
    "delete_entities",
    "delete_observations",
    "delete_relations",
    "read_graph",
    "search_nodes",
    "open_nodes",
)
#: The official nine and rdfmem's titled notes.
MEMORY: tuple[str, ...] = (
    *OFFICIAL,
    "memory_save",
    "memory_search",
    "memory_read",
    "memory_list",
    "memory_forget",
)
#: Every tool, in the order a server lists them.
ALL: tuple[str, ...] = (
    *OFFICIAL,
    "read_graph_page",
    "read_graph_as_of",
    "memory_save",
    "memory_search",
    "memory_read",
    "memory_list",
    "memory_forget",
    "decision_add_node",
    "decision_add_edge",
    "decision_update_node",
    "decision_supersede",
    "decision_get",
    "decision_query",
    "generalisation_save",
    "generalisation_search",
    "generalisation_list",
    "history",
    "sparql_query",
    "stats",
)
PRESETS: dict[str, tuple[str, ...]] = {"official": OFFICIAL, "memory": MEMORY, "all": ALL}
#: What ``rdfmem mcp`` advertises without ``--tools``.
DEFAULT = "memory"


def choose(text: str) -> tuple[str, ...]:
    """The tools ``--tools text`` names: a preset, or names separated by commas (listed in
    the server's order, each once).

    Raises:
        ToolInputError: an unknown preset or tool name, or nothing named.
    """
    text = text.strip()
    if text in PRESETS:
        return PRESETS[text]
    wanted = {part.strip() for part in text.split(",") if part.strip()}
    for name in sorted(wanted):
        if name not in ALL:
            raise ToolInputError(
                f"--tools: unknown tool {name!r}; pass official, memory, all, or names from: "
                + ", ".join(ALL)
            )
    if not wanted:
        raise ToolInputError("--tools: pass official, memory, all, or tool names with commas")
    return tuple(n for n in ALL if n in wanted)
