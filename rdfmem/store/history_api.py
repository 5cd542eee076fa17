"""``RdfStore``'s history methods: who wrote what when and why, and the store as it was.

``RdfStore`` inherits them (``history``, ``history_of``, ``as_of_quads``,
``changes_since``, ``compact_history``, ``attributed``, ``versioning_update``); the
recording itself happens in the writes (``rdfmem.store.kv``, ``rdfmem.store.remote``) and,
for a domain write made in SPARQL, in the operations ``versioning_update`` returns.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any

from pyoxigraph import BlankNode, NamedNode, Quad

from rdfmem.backends.base import Backend
from rdfmem.core.errors import InvalidTerm, InvalidValue
from rdfmem.core.keys import KeyCodec, decode_value
from rdfmem.store.history import (
    ACTIVITY_PREFIX,
    GENERATED_AT,
    GENERATED_BY,
    HAD_TYPE,
    INVALIDATED_AT,
    LATEST,
    RDF_TYPE,
    REVISION_OF,
    SPECIALIZES,
    TOMBSTONE,
    VALUE,
    VERSION_PREFIX,
    Recorder,
    StateLines,
    attributed,
    current_attribution,
    data_graph_of,
    history_graph,
    latest_versions,
    require,
    token_of_version,
    utc_time,
)
from rdfmem.store.history_changelog import after_domain_write
from rdfmem.store.history_compact import compact
from rdfmem.store.history_entry import new_token
from rdfmem.store.history_lines import TYPE_TEXT, checked_lines, sent_lines
from rdfmem.store.history_reads import Change, Version, changes, history_graphs, state_at
from rdfmem.store.history_reads import versions_of as _versions_of
from rdfmem.store.history_text import activity_data, when_text
from rdfmem.store.indexes.hub import IndexHub
from rdfmem.store.indexes.versions import VersionIndex, fresh_index

__all__ = ["HistoryMethods"]


def _node(value: object, what: str) -> NamedNode:
    if isinstance(value, NamedNode):
        return value
    if not isinstance(value, str):
        raise InvalidTerm(f"{what} must be an IRI, not {value!r}")
    try:
        return NamedNode(value)
    except ValueError as exc:
        raise InvalidTerm(f"{what} must be an IRI, not {value!r}") from exc


class HistoryMethods:
    """The history half of ``RdfStore`` (see ``rdfmem.store.history``)."""

    backend: Backend
    _history: Recorder | None
    _hub: IndexHub | None
    _codec: KeyCodec
    _kv_graph: NamedNode
    _value_predicate: NamedNode

    @property
    def keeps_history(self) -> bool:
        """True when this store records history (``history=True``)."""
        return self._history is not None

    def _recorder(self) -> Recorder:
        return require(self._history)

    def attributed(
        self, by: str | NamedNode | None = None, why: str | None = None
    ) -> AbstractContextManager[None]:
        """Attribute the writes of the block (this thread or task, and the async twins it
        awaits; any store) to the agent IRI ``by``, for the reason ``why``. Blocks nest.

        >>> from rdfmem import RdfStore
        >>> store = RdfStore(history=True, agent="urn:agent:x")
        >>> with store.attributed(by="urn:agent:planner", why="user asked"):
        ...     store.set("meeting", "Tuesday")
        >>> [(v.value, v.by, v.why) for v in store.history("meeting")]
        [('Tuesday', 'urn:agent:planner', 'user asked')]

        Raises:
            InvalidTerm: ``by`` is not an IRI.  InvalidValue: ``why`` is not a str.
        """
        return attributed(by, why)

    def history(self, key: str) -> list[Version]:
        """Every version of ``key``'s entry, oldest first: ``.value`` (None once deleted),
        ``.at`` (UTC), ``.by``, ``.why``, ``.deleted``.

        Raises:
            HistoryUnavailable: the store keeps no history.
            InvalidKey: the key is empty or not a str.
        """
        self._recorder()
        subject = self._codec.subject(key)
        renames = {self._value_predicate: VALUE}
        out = []
        for v in _versions_of(self.backend, self._kv_graph, subject, renames):
            value = None
            for quad in v.state:
                if quad.predicate == self._value_predicate:
                    value = decode_value(quad.object)
            out.append(_with(v, value=value, key=key))
        return out

    def history_of(self, graph: Any, subject: Any) -> list[Version]:
        """Every version of ``subject`` of the data graph ``graph``, oldest first; each
        ``.state`` holds its quads as they were (the domain layers read them).

        Raises:
            HistoryUnavailable: the store keeps no history.
            InvalidTerm: ``graph`` or ``subject`` is not an IRI.
        """
        self._recorder()
        g, s = _node(graph, "graph"), _node(subject, "subject")
        return _versions_of(self.backend, g, s, self._renames_for(g))

    def as_of_quads(self, graph: Any, subject: Any, moment: _dt.datetime) -> list[Quad] | None:
        """``subject``'s quads in ``graph`` at ``moment``: [] when it did not exist then
        (deleted, or not yet written while history was kept before), None when the kept
        history says nothing about it.

        Raises:
            HistoryUnavailable: the store keeps no history.
            InvalidTerm, InvalidValue: not an IRI, or ``moment`` not a datetime.
        """
        self._recorder()
        g, s = _node(graph, "graph"), _node(subject, "subject")
        state = state_at(self.backend, g, s, utc_time(moment), self._renames_for(g), self._hub)
        return None if state is None else list(state)

    def changes_since(
        self, since: _dt.datetime, until: _dt.datetime | None = None, *, graph: Any = None
    ) -> list[Change]:
        """Every version made from ``since`` to ``until`` (now), oldest first, in every
        data graph or in ``graph``: read by hour buckets, so a short window stays fast
        whatever the history's size. ``.key`` is set for this namespace's entries.

        Raises:
            HistoryUnavailable: the store keeps no history.
        """
        self._recorder()
        g = None if graph is None else _node(graph, "graph")
        keys = (self._kv_graph.value, self._codec.key_of)
        return changes(self.backend, since, until, g, keys, self._hub)

    def compact_history(
        self,
        before: _dt.datetime | None = None,
        *,
        keep: int | None = None,
        graphs: Iterable[Any] | None = None,
    ) -> int:
        """Forget the versions replaced at or before ``before`` (and, with ``keep``, all but
        each resource's newest ``keep``), in every history graph or those of ``graphs``.
        The current state and the state at ``before`` stay readable; the compaction is
        recorded (an ``rm:Compaction`` activity). Returns how many versions went.

        Raises:
            HistoryUnavailable: the store keeps no history.
            InvalidValue: ``before`` is not a datetime, or ``keep`` not an int >= 1.
        """
        recorder = self._recorder()
        cut = None if before is None else utc_time(before)
        if keep is not None and (type(keep) is not int or keep < 1):
            raise InvalidValue(f"keep must be an int >= 1, not {keep!r}")
        if graphs is None:
            targets = [
                NamedNode(d)
                for h in history_graphs(self.backend)
                if (d := data_graph_of(h.value)) is not None
            ]
        else:
            targets = [_node(g, "graph") for g in graphs]
        return compact(self.backend, recorder, targets, before=cut, keep=keep)

    def versioning_update(
        self,
        graph: Any,
        subjects: Iterable[Any],
        *,
        states: Mapping[Any, Sequence[Quad] | StateLines] | None = None,
    ) -> str:
        """SPARQL Update operations that record a version of each of ``subjects`` of
        ``graph`` as it stands after the operations they follow: append them with
        ``" ;\\n"`` to a domain write's update, so both land in one request (one
        transaction). Each version copies the subject's quads of ``graph`` (``rdf:type`` as
        ``rm:hadType``), or is a tombstone when it has none left. One activity (now, the
        current attribution) covers them all.

        ``states``: the quads a subject has in ``graph`` after the operations, when the
        caller knows them (a write that replaces all of a subject's quads: ``[]`` for a
        deletion). On an embedded store its version is then written as data (no pattern
        for Oxigraph to evaluate, no test for a tombstone); elsewhere, and for the other
        subjects, it is copied from the graph by the request.

        Raises:
            HistoryUnavailable: the store keeps no history.
            InvalidTerm: ``graph`` or a subject is not an IRI, or a quad of ``states``
                is not about its subject.
        """
        recorder = self._recorder()
        g = _node(graph, "graph")
        nodes = list(dict.fromkeys(_node(s, "subject") for s in subjects))
        if not nodes:
            return ""
        # An embedded store (every write passes through it) reads the heads now, inside
        # the write's section: the heads move as data, with no pattern to evaluate.
        heads, index = self._heads(g, nodes) if self._hub is not None else (None, None)
        known = None
        if states:  # checked on every store; keys may be IRIs as text, as ``subjects``
            known = _known_states(nodes, {_node(k, "subject"): v for k, v in states.items()})
        hub = self._hub
        made: list[tuple[str, str, str, str | None]] | None = None
        if hub is not None and hub.in_write and recorder.retention is None:
            made = []  # the index learns these versions once the block's request is sent
        ops = versioning_operations(
            recorder, g, nodes, heads, known if heads is not None else None, made
        )
        if hub is not None and made:
            after_domain_write(hub, g.value, made, known, index)
        return ops

    def _heads(
        self, graph: NamedNode, nodes: list[NamedNode]
    ) -> tuple[dict[NamedNode, NamedNode], VersionIndex | None]:
        # Each subject's latest version on an embedded store: inside a ``writing`` block
        # (the lock held), from the version index when it is fresh and knows the subject's
        # chain (the versions this store's writes noted), else ``rm:latestVersion``; and
        # that index (None outside a block), for ``after_domain_write`` in the same section.
        hub = self._hub
        if hub is None or not hub.in_write:
            return latest_versions(self.backend, graph, nodes), None
        index = fresh_index(hub, graph.value, history_graph(graph).value)
        heads: dict[NamedNode, NamedNode] = {}
        unknown = []
        for node in nodes:
            chain = index.chains.get(node.value)
            if chain is None and not index.complete:
                unknown.append(node)
            elif chain:
                heads[node] = NamedNode(chain[-1])
        if unknown:
            heads.update(latest_versions(self.backend, graph, unknown))
        return heads, index

    def _renames_for(self, graph: NamedNode) -> dict[NamedNode, NamedNode]:
        return {self._value_predicate: VALUE} if graph == self._kv_graph else {}


def _with(item: Any, **changes: Any) -> Any:
    return replace(item, **changes)


def _known_states(
    subjects: list[NamedNode], states: Mapping[NamedNode, Sequence[Quad] | StateLines]
) -> dict[NamedNode, list[tuple[bool, str]]]:
    # Each given state as (is rdf:type, "predicate object ." text) pairs, checked to be about
    # its subject. A blank node written as data would be a new one: such a subject is left
    # to the pattern copy.
    known: dict[NamedNode, list[tuple[bool, str]]] = {}
    for subject in subjects:
        state = states.get(subject)
        if state is None:
            continue
        if isinstance(state, StateLines):
            lines = state.lines
            pairs = sent_lines(subject, lines) if state.sent else checked_lines(subject, lines)
        else:
            stray = [q for q in state if q.subject != subject]
            if stray:
                raise InvalidTerm(
                    f"states[{subject.value!r}] must hold only quads about {subject.value!r}, "
                    f"not {stray[0]}"
                )
            pairs = [
                (q.predicate == RDF_TYPE, f"<{q.predicate.value}> {q.object} .")
                for q in state
                if not isinstance(q.object, BlankNode)
            ]
            if len(pairs) < len(state):
                continue
        if pairs is not None:
            known[subject] = pairs
    return known


def versioning_operations(
    recorder: Recorder,
    graph: NamedNode,
    subjects: list[NamedNode],
    heads: Mapping[NamedNode, NamedNode] | None = None,
    states: Mapping[NamedNode, list[tuple[bool, str]]] | None = None,
    made: list[tuple[str, str, str, str | None]] | None = None,
) -> str:
    """The SPARQL Update operations of ``HistoryMethods.versioning_update``: every head
    moves first (the previous versions get their end), then one ``INSERT DATA`` of the
    activity and the new versions, then each subject's state (or tombstone).

    ``heads``: each subject's latest version, read by the caller inside the write's
    section (``latest_versions``): the heads then move as ``DELETE DATA`` / ``INSERT
    DATA``, and the activity is later than each of them. None: each head is found by
    the request itself (``DELETE … INSERT … WHERE``), as on a server. ``states``: the
    subjects' quads after the write, when known: those versions' states go into the
    ``INSERT DATA`` (a tombstone for ``[]``) instead of being copied by a pattern.
    ``made`` gets ``(subject, version, agent, reason)`` of each version (IRIs)."""
    newest = max((token_of_version(v.value) for v in heads.values()), default="") if heads else ""
    token = new_token(recorder, newest)
    said = current_attribution()
    by, why = said.by or recorder.agent, said.why
    h, g = f"<{history_graph(graph).value}>", f"<{graph.value}>"
    when = when_text(token)
    a = f"<{ACTIVITY_PREFIX}{token}>"
    data = [activity_data(token, by, why, when)]
    moves, ends, copies = [], [], []
    for n, subject in enumerate(subjects):
        s, v = f"<{subject.value}>", f"<{VERSION_PREFIX}{token}-{n}>"
        if made is not None:
            made.append((subject.value, v[1:-1], by, why))
        if heads is None:
            moves.append(
                f"DELETE {{ GRAPH {h} {{ {s} {_LATEST} ?old }} }} "
                f"INSERT {{ GRAPH {h} {{ ?old {_INVALIDATED_AT} {when} . "
                f"{v} {_REVISION_OF} ?old }} }} "
                f"WHERE {{ GRAPH {h} {{ {s} {_LATEST} ?old }} }}"
            )
        elif subject in heads:
            old = f"<{heads[subject].value}>"
            ends.append(f"{s} {_LATEST} {old} .")
            data.append(f"{old} {_INVALIDATED_AT} {when} . {v} {_REVISION_OF} {old} .")
        data.append(
            f"{v} {_SPECIALIZES} {s} ; {_GENERATED_AT} {when} ; "
            f"{_GENERATED_BY} {a} . {s} {_LATEST} {v} ."
        )
        known = None if states is None else states.get(subject)
        if known is not None:
            data.extend(_state_text(v, known))
            continue
        copies.append(
            f"INSERT {{ GRAPH {h} {{ {v} ?q ?o }} }} WHERE {{ GRAPH {g} {{ {s} ?p ?o }} "
            f"BIND (IF(?p = {TYPE_TEXT}, {_HAD_TYPE}, ?p) AS ?q) }}"
        )
        copies.append(
            f"INSERT {{ GRAPH {h} {{ {v} a {_TOMBSTONE} }} }} "
            f"WHERE {{ {{ SELECT (COUNT(*) AS ?left) WHERE {{ GRAPH {g} {{ {s} ?p ?o }} }} }} "
            f"FILTER (?left = 0) }}"
        )
    if ends:
        moves.append(f"DELETE DATA {{ GRAPH {h} {{ {' '.join(ends)} }} }}")
    inserted = f"INSERT DATA {{ GRAPH {h} {{ {' '.join(data)} }} }}"
    return " ;\n".join([*moves, inserted, *copies])


_LATEST = f"<{LATEST.value}>"
_INVALIDATED_AT = f"<{INVALIDATED_AT.value}>"
_REVISION_OF = f"<{REVISION_OF.value}>"
_SPECIALIZES = f"<{SPECIALIZES.value}>"
_GENERATED_AT = f"<{GENERATED_AT.value}>"
_GENERATED_BY = f"<{GENERATED_BY.value}>"
_HAD_TYPE = f"<{HAD_TYPE.value}>"
_TOMBSTONE = f"<{TOMBSTONE.value}>"
_TOMBSTONE_LINE = f"<{RDF_TYPE.value}> {_TOMBSTONE} ."


def _state_text(version: str, state: list[tuple[bool, str]]) -> list[str]:
    # A version's state as data: the quads with the version as subject, ``rdf:type``
    # written ``rm:hadType`` (what the pattern copy writes), a line each; a tombstone
    # when empty.
    if not state:
        return [f"{version} {_TOMBSTONE_LINE}"]
    out = []
    for typed, text in state:
        if typed:  # rdf:type: the object follows the predicate's "> "
            text = f"{_HAD_TYPE} {text[text.index('> ') + 2 :]}"
        out.append(f"{version} {text}\n")
    return out
