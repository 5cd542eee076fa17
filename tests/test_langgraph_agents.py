"""``RdfBaseStore`` where LangGraph users put it: injected into a compiled graph, and under
LangMem's memory tools (offline: a deterministic embedding function), on each backend."""

from __future__ import annotations

import asyncio
import json
import operator
import warnings
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import IndexConfig
from langgraph.warnings import LangGraphDeprecatedSinceV10
from test_langgraph_store import no_pending_garbage, threaded  # noqa: F401

from rdfmem import RdfStore
from rdfmem.core.results import SelectResult
from rdfmem.embeddings import HashingEmbedder
from rdfmem.langgraph import RdfBaseStore

with warnings.catch_warnings():
    # trustcall, which langmem imports, still imports Send from langgraph.constants.
    warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
    from langmem import (  # type: ignore[import-untyped]
        create_manage_memory_tool,
        create_search_memory_tool,
    )

_EMBEDDER = HashingEmbedder(dimension=64)


def embed(texts: Sequence[str]) -> list[list[float]]:
    return [[float(x) for x in row] for row in _EMBEDDER.embed(list(texts))]


def memory_store(store: RdfStore) -> RdfBaseStore:
    return RdfBaseStore(store, index=IndexConfig(dims=64, embed=embed, fields=["text"]))


class State(TypedDict):
    user: str
    said: str
    recalled: Annotated[list[str], operator.add]


def remember(state: State, runtime: Runtime[None]) -> dict[str, Any]:
    assert runtime.store is not None
    if state["said"].endswith("?"):
        return {}  # a question: nothing to remember
    memories = runtime.store.search(("memories", state["user"]), limit=100)
    runtime.store.put(("memories", state["user"]), f"m{len(memories)}", {"text": state["said"]})
    return {}


def recall(state: State, runtime: Runtime[None]) -> dict[str, Any]:
    assert runtime.store is not None
    found = runtime.store.search(("memories", state["user"]), query=state["said"], limit=2)
    return {"recalled": [item.value["text"] for item in found]}


def build() -> Any:
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    return builder


@threaded
def test_a_compiled_graph_writes_and_reads_memories_through_the_store(store: RdfStore) -> None:
    lg = memory_store(store)
    graph = build().compile(store=lg)
    graph.invoke({"user": "eli", "said": "I drink green tea every morning", "recalled": []})
    graph.invoke({"user": "eli", "said": "my cat is called Miso", "recalled": []})
    graph.invoke({"user": "ana", "said": "I prefer coffee", "recalled": []})
    out = graph.invoke({"user": "eli", "said": "what tea do I drink?", "recalled": []})
    assert out["recalled"][0] == "I drink green tea every morning"
    assert "I prefer coffee" not in out["recalled"]  # another user's namespace
    # The memories are RDF any SPARQL client can read.
    rows = store.query(
        "SELECT ?key WHERE { GRAPH ?g { ?i <https://w3id.org/rdfmem#namespace> 'memories.eli' ;"
        " <https://w3id.org/rdfmem#key> ?key } } ORDER BY ?key"
    )
    assert isinstance(rows, SelectResult)
    assert [row["key"].value for row in rows] == ["m0", "m1"]


@threaded
def test_a_compiled_graph_runs_async_with_the_store(store: RdfStore) -> None:
    graph = build().compile(store=memory_store(store))

    async def main() -> list[str]:
        await graph.ainvoke({"user": "eli", "said": "deploy with make release", "recalled": []})
        out = await graph.ainvoke({"user": "eli", "said": "how do I deploy?", "recalled": []})
        return list(out["recalled"])

    assert asyncio.run(main())[0] == "deploy with make release"


@threaded
def test_langmem_tools_manage_and_search_memories(store: RdfStore) -> None:
    lg = RdfBaseStore(store, index=IndexConfig(dims=64, embed=embed))
    namespace = ("memories", "{langgraph_user_id}")
    manage = create_manage_memory_tool(namespace, store=lg)
    search = create_search_memory_tool(namespace, store=lg)
    config: Any = {"configurable": {"langgraph_user_id": "u1"}}

    created = manage.invoke({"content": "User likes dark mode", "action": "create"}, config)
    assert created.startswith("created memory ")
    memory_id = created.split()[-1]
    manage.invoke({"content": "User prefers Python for backends", "action": "create"}, config)
    found = json.loads(search.invoke({"query": "which theme does the user like?"}, config))
    assert found[0]["value"]["content"] == "User likes dark mode"
    assert found[0]["namespace"] == ["memories", "u1"]

    manage.invoke(
        {"content": "User likes light mode now", "action": "update", "id": memory_id}, config
    )
    item = lg.get(("memories", "u1"), memory_id)
    assert item is not None and item.value["content"] == "User likes light mode now"

    async def delete() -> Any:
        await manage.ainvoke({"action": "delete", "id": memory_id}, config)
        return await search.ainvoke({"query": "theme mode"}, config)

    left = json.loads(asyncio.run(delete()))
    assert [m["value"]["content"] for m in left] == ["User prefers Python for backends"]
    other: Any = {"configurable": {"langgraph_user_id": "u2"}}
    assert json.loads(search.invoke({"query": "Python"}, other)) == []
