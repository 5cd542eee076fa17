"""Nodes by type and status, newest by creation, and links in both directions, for one
named graph: what the decision graph's named queries and traversals read.

A node is an IRI with a ``kind`` (its type), a ``status``, an ordering key (creation time,
then id) and an opaque ``value`` (the domain's record of it, returned as is). Links are the
pairs ``(source, target)`` joined by at least one edge, each with a bit mask of the kinds of
edge that join them (the caller numbers its kinds); a traversal follows the links whose mask
shares a bit with the ``mask`` it is given (every link by default). Traversals stop when
done: ``reachable`` is a breadth-first search that visits each node once, ``shortest_path``
a breadth-first search from both ends that stops when they meet.

>>> g = GraphIndex("urn:g")
>>> for i, iri in enumerate("abcd"):
...     g.put_node(iri, "decision", "active", (i, iri), iri.upper())
>>> for s, t in ["ab", "ac", "bd", "cd"]:
...     g.link(s, t)
>>> g.reachable("a"), g.reachable("d", backwards=True)
(['b', 'c', 'd'], ['b', 'c', 'a'])
>>> g.shortest_path("a", "d"), g.newest("decision", 2), g.newest("decision", 9)
(['a', 'b', 'd'], ['d', 'c'], ['d', 'c', 'b', 'a'])
>>> g.link("a", "d", 2)                      # a link of another kind
>>> g.shortest_path("a", "d"), g.shortest_path("a", "d", mask=1), g.reachable("a", mask=2)
(['a', 'd'], ['a', 'b', 'd'], ['d'])
"""

from __future__ import annotations

import bisect
import pickle
from collections.abc import Iterable
from typing import Any

__all__ = ["ALL", "GraphIndex"]

#: The mask that follows links of every kind.
ALL = -1


class _Node:
    __slots__ = ("_raw", "_value", "key", "kind", "status")

    def __init__(self, kind: str, status: str, key: Any, value: Any, raw: bytes = b"") -> None:
        self.kind = kind
        self.status = status
        self.key = key
        self._value = value
        self._raw = raw  # a saved index's value, unpickled when first read

    @property
    def value(self) -> Any:
        if self._raw:
            self._value, self._raw = pickle.loads(self._raw), b""  # the owner's own file
        return self._value

    def raw(self) -> bytes:
        return self._raw or pickle.dumps(self._value, protocol=pickle.HIGHEST_PROTOCOL)


class _SavedNodes(dict[str, _Node]):
    """The nodes of a saved index, made one by one as they are first asked for: loading
    the index makes no node object (30,000 of them cost 70 ms, on the first turn after
    opening). Each is made from the saved ``(kind, status, key)`` and pickled value by
    ``get``, ``[]``, ``in``, ``pop`` or iteration; the dict holds the nodes made so far,
    ``_left`` the others by IRI."""

    __slots__ = ("_left",)

    def __init__(self, iris: list[str], fields: list[tuple[str, str, Any]], raws: list[bytes]):
        super().__init__()
        self._left = dict(zip(iris, zip(fields, raws, strict=True), strict=True))

    def _make(self, iri: str) -> _Node | None:
        saved = self._left.pop(iri, None)
        if saved is None:
            return None
        (kind, status, key), raw = saved
        node = _Node(kind, status, key, None, raw)
        super().__setitem__(iri, node)
        return node

    def saved(self) -> tuple[list[str], list[tuple[str, str, Any]], list[bytes]]:
        """IRIs, ``(kind, status, key)`` and pickled values of every node, in iteration
        order, without making the nodes not made yet (``GraphIndex.__getstate__``)."""
        iris, fields, raws = [], [], []
        for iri, node in dict.items(self):
            iris.append(iri)
            fields.append((node.kind, node.status, node.key))
            raws.append(node.raw())
        for iri, (kind_status_key, raw) in self._left.items():
            iris.append(iri)
            fields.append(kind_status_key)
            raws.append(raw)
        return iris, fields, raws

    def _all(self) -> None:
        for iri in list(self._left):
            self._make(iri)

    def get(self, iri: str, default: Any = None) -> Any:
        found = super().get(iri)
        return found if found is not None else (self._make(iri) or default)

    def __getitem__(self, iri: str) -> _Node:
        found: _Node | None = self.get(iri)
        if found is None:
            raise KeyError(iri)
        return found

    def __contains__(self, iri: object) -> bool:
        return super().__contains__(iri) or iri in self._left

    def __setitem__(self, iri: str, node: _Node) -> None:
        self._left.pop(iri, None)
        super().__setitem__(iri, node)

    def pop(self, iri: str, default: Any = None) -> Any:
        self._make(iri)
        return super().pop(iri, default)

    def __len__(self) -> int:
        return super().__len__() + len(self._left)

    def __iter__(self) -> Any:
        self._all()
        return super().__iter__()

    def items(self) -> Any:
        self._all()
        return super().items()

    def values(self) -> Any:
        self._all()
        return super().values()

    def keys(self) -> Any:
        self._all()
        return super().keys()


class GraphIndex:
    """The node and link index of one named graph (see the module docstring).

    Not thread-safe by itself: ``IndexHub`` users hold ``backend.lock`` around every call.
    """

    def __init__(self, graph: str) -> None:
        self.graph = graph
        #: The store generation this index was last consistent with (-1: never built).
        self.seen = -1
        self.nodes: dict[str, _Node] = {}
        self.out: dict[str, dict[str, int]] = {}  # source -> target -> kinds (bit mask)
        self.into: dict[str, dict[str, int]] = {}  # target -> source -> kinds
        self._by_kind: dict[str, list[tuple[Any, str]]] = {}  # kind -> sorted (key, iri)
        self._by_status: dict[tuple[str, str], list[tuple[Any, str]]] = {}  # (kind, status)

    def clear(self) -> None:
        self.nodes, self.out, self.into, self._by_kind, self._by_status = {}, {}, {}, {}, {}

    def __getstate__(self) -> dict[str, Any]:
        # Saved beside an on-disk store (``IndexHub.export``): each node's value pickled on
        # its own, so that loading the index makes no node objects until they are read.
        state = dict(self.__dict__)
        if isinstance(self.nodes, _SavedNodes):  # as loaded: the nodes never read stay raw
            state["nodes"] = self.nodes.saved()
            return state
        nodes = list(self.nodes.items())
        state["nodes"] = (
            [iri for iri, _ in nodes],
            [(n.kind, n.status, n.key) for _, n in nodes],
            [n.raw() for _, n in nodes],
        )
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        iris, fields, raws = state.pop("nodes")
        self.__dict__.update(state)
        self.nodes = _SavedNodes(iris, fields, raws)

    def rebuild(
        self,
        nodes: Iterable[tuple[str, str, str, Any, Any]],
        links: Iterable[tuple[str, str] | tuple[str, str, int]],
    ) -> None:
        """Replace everything with ``(iri, kind, status, key, value)`` nodes and
        ``(source, target)`` or ``(source, target, mask)`` links."""
        self.clear()
        for iri, kind, status, key, value in nodes:
            self.nodes[iri] = _Node(kind, status, key, value)
        for node_iri, node in self.nodes.items():
            self._by_kind.setdefault(node.kind, []).append((node.key, node_iri))
            self._by_status.setdefault((node.kind, node.status), []).append((node.key, node_iri))
        for entries in [*self._by_kind.values(), *self._by_status.values()]:
            entries.sort()
        for source, target, *mask in links:
            self.link(source, target, mask[0] if mask else 1)

    # -- changes ---------------------------------------------------------------------------

    def put_node(self, iri: str, kind: str, status: str, key: Any, value: Any) -> None:
        """Add or replace a node (its links stay)."""
        old = self.nodes.get(iri)
        if old is not None:
            self._unsort(iri, old)
        self.nodes[iri] = _Node(kind, status, key, value)
        bisect.insort(self._by_kind.setdefault(kind, []), (key, iri))
        bisect.insort(self._by_status.setdefault((kind, status), []), (key, iri))

    def remove_node(self, iri: str) -> None:
        """Remove a node and every link to or from it."""
        old = self.nodes.pop(iri, None)
        if old is not None:
            self._unsort(iri, old)
        for target in self.out.pop(iri, {}):
            self.into.get(target, {}).pop(iri, None)
        for source in self.into.pop(iri, {}):
            self.out.get(source, {}).pop(iri, None)

    def link(self, source: str, target: str, mask: int = 1) -> None:
        """Record a link ``source -> target`` of the kinds in ``mask`` (once, however many
        edges make it)."""
        targets = self.out.setdefault(source, {})
        targets[target] = targets.get(target, 0) | mask
        sources = self.into.setdefault(target, {})
        sources[source] = sources.get(source, 0) | mask

    def unlink(self, source: str, target: str, mask: int = ALL) -> None:
        """Forget the kinds in ``mask`` of the link ``source -> target`` (all by default)."""
        for ends, a, b in ((self.out, source, target), (self.into, target, source)):
            found = ends.get(a)
            if found is not None and b in found:
                left = found[b] & ~mask
                if left:
                    found[b] = left
                else:
                    del found[b]

    def _unsort(self, iri: str, node: _Node) -> None:
        for entries in (
            self._by_kind.get(node.kind, []),
            self._by_status.get((node.kind, node.status), []),
        ):
            i = bisect.bisect_left(entries, (node.key, iri))
            if i < len(entries) and entries[i] == (node.key, iri):
                del entries[i]

    # -- reads -----------------------------------------------------------------------------

    def value(self, iri: str) -> Any:
        node = self.nodes.get(iri)
        return None if node is None else node.value

    def oldest(self, kind: str, status: str | None = None) -> list[str]:
        """Nodes of ``kind`` (and ``status``), oldest first."""
        if status is None:
            return [iri for _, iri in self._by_kind.get(kind, ())]
        return [iri for _, iri in self._by_status.get((kind, status), ())]

    def newest(self, kind: str, limit: int) -> list[str]:
        """The ``limit`` newest nodes of ``kind``, newest first."""
        entries = self._by_kind.get(kind, [])
        return [iri for _, iri in reversed(entries[max(0, len(entries) - limit) :])]

    def reachable(self, start: str, *, backwards: bool = False, mask: int = ALL) -> list[str]:
        """The nodes reached from ``start`` over links of the kinds in ``mask`` (followed
        backwards when ``backwards``), ``start`` left out: by distance, then by key; IRIs
        that are not nodes are walked through but not returned."""
        adjacency = self.into if backwards else self.out
        if start not in self.nodes:
            return []
        nodes = self.nodes
        seen = {start}
        order: list[str] = []
        level = [start]
        while level:
            following = []
            for iri in level:
                for nxt, kinds in adjacency.get(iri, {}).items():
                    if kinds & mask and nxt not in seen:
                        seen.add(nxt)
                        following.append(nxt)
            level = following
            found = [(nodes[i].key, i) for i in following if i in nodes]
            found.sort()
            order.extend(i for _, i in found)
        return order

    def shortest_path(self, start: str, end: str, *, mask: int = ALL) -> list[str]:
        """A shortest path ``start`` … ``end`` over links of the kinds in ``mask`` (both
        ends included; ``[]`` when none), the smallest
        in IRI order among equally short ones: a breadth-first search from both ends, level
        by level, stopping at the level where they meet."""
        if start not in self.nodes or end not in self.nodes:
            return []
        if start == end:
            return [start]
        out, into = self.out, self.into
        ahead: dict[str, int] = {start: 0}  # node -> distance from start
        behind: dict[str, int] = {end: 0}  # node -> distance to end
        front, back = [start], [end]
        meet: list[str] = []
        while front and back and not meet:
            if len(front) <= len(back):
                depth = ahead[front[0]] + 1
                grown = []
                for iri in front:
                    for nxt, kinds in out.get(iri, {}).items():
                        if kinds & mask and nxt not in ahead:
                            ahead[nxt] = depth
                            grown.append(nxt)
                front = grown
                meet = [i for i in grown if i in behind]
            else:
                depth = behind[back[0]] + 1
                grown = []
                for iri in back:
                    for prev, kinds in into.get(iri, {}).items():
                        if kinds & mask and prev not in behind:
                            behind[prev] = depth
                            grown.append(prev)
                back = grown
                meet = [i for i in grown if i in ahead]
        if not meet:
            return []
        total = min(ahead[i] + behind[i] for i in meet)
        # Nodes on some shortest path, from the meeting nodes outwards on both sides.
        on_path = {i for i in meet if ahead[i] + behind[i] == total}
        layer = set(on_path)
        while layer:
            earlier: set[str] = set()
            for iri in layer:
                if iri in ahead:
                    want = ahead[iri] - 1
                    earlier.update(
                        p
                        for p, k in into.get(iri, {}).items()
                        if k & mask and ahead.get(p, -2) == want
                    )
            on_path |= earlier
            layer = earlier
        layer = {i for i in on_path if i in behind}
        while layer:
            later: set[str] = set()
            for iri in layer:
                want = behind[iri] - 1
                later.update(
                    n for n, k in out.get(iri, {}).items() if k & mask and behind.get(n, -2) == want
                )
            later -= on_path
            on_path |= later
            layer = later
        # Smallest IRI first at each step, among nodes that stay on a shortest path.
        path = [start]
        for step in range(1, total + 1):
            left = total - step
            candidates = [
                n
                for n, k in out.get(path[-1], {}).items()
                if k & mask and n in on_path and (ahead.get(n) == step or behind.get(n) == left)
            ]
            path.append(min(candidates))
        return path

    def nbytes(self) -> int:
        """About how many bytes the index holds (Python objects, estimated)."""
        links = sum(len(s) for s in self.out.values())
        return 330 * len(self.nodes) + 2 * 140 * links

    def __repr__(self) -> str:
        return f"GraphIndex({self.graph!r}, nodes={len(self.nodes)})"
