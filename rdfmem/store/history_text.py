"""History as SPARQL DATA text, written straight from strings (issue 24: the write cost).

``Recorder.record`` makes the history quads of a write as ``Quad`` objects; the writers
here make the same quads as text for a ``DELETE DATA`` / ``INSERT DATA`` block, with no
``Quad``, ``NamedNode`` nor ``Stamp`` on the way: ``record_text`` (a key/value write,
``rdfmem.store.kv``), ``activity_data`` and ``version_data`` (``history_entry``,
``history_api.versioning_operations``), ``when_text`` (a time token's literal). The
vocabulary and the ``Recorder`` are ``rdfmem.store.history``'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyoxigraph import Literal, NamedNode, Quad

from rdfmem.store.history import (
    ACTIVITY_PREFIX,
    ASSOCIATED,
    ENDED,
    GENERATED_AT,
    GENERATED_BY,
    HAD_TYPE,
    HOUR,
    INVALIDATED_AT,
    LATEST,
    RDF_TYPE,
    REASON,
    REVISION_OF,
    SPECIALIZES,
    TOMBSTONE,
    VALUE,
    VERSION_PREFIX,
    XSD_DATETIME,
    Recorder,
    depth_of,
    history_graph,
)

__all__ = ["activity_data", "record_text", "version_data", "when_text"]


def when_text(token: str) -> str:
    """The ``xsd:dateTime`` literal of a time token, as SPARQL text (``date_literal``'s).

    >>> when_text("20261123T231500.000012Z")
    '"2026-11-23T23:15:00.000012Z"^^<http://www.w3.org/2001/XMLSchema#dateTime>'
    """
    t = token
    return f'"{t[0:4]}-{t[4:6]}-{t[6:8]}T{t[9:11]}:{t[11:13]}:{t[13:22]}Z"^^<{XSD_DATETIME.value}>'


_ENDED_TEXT = f"<{ENDED.value}>"
_ASSOCIATED_TEXT = f"<{ASSOCIATED.value}>"
_HOUR_TEXT = f"<{HOUR.value}>"
_REASON_TEXT = f"<{REASON.value}>"


def activity_data(token: str, by: str, why: str | None, when: str) -> str:
    """The quads of the activity ``token`` (``Stamp.quads``: its time ``when``, the
    ``when_text`` of the token; its agent ``by``, its reason ``why`` and its hour) as
    SPARQL DATA text, ending with " ."."""
    t = token
    text = (
        f"<{ACTIVITY_PREFIX}{token}> {_ENDED_TEXT} {when} ; {_ASSOCIATED_TEXT} <{by}> ; "
        f'{_HOUR_TEXT} "{t[0:4]}-{t[4:6]}-{t[6:8]}T{t[9:11]}"'
    )
    if why is not None:
        text += f" ; {_REASON_TEXT} {Literal(why)}"
    return text + " ."


def version_data(
    token: str, n: int, subject: str, prev: str | None, when: str, state: Sequence[str]
) -> tuple[str, str, str]:
    """Version ``n`` of ``subject`` by the activity ``token`` at ``when``, after ``prev``
    (None: the first), holding ``state`` (``" ; <p> o"`` texts; none: a tombstone), as
    ``record`` writes it: ``(its IRI, its quads' DATA text, the old head's or "")``."""
    depth = 1 if prev is None else depth_of(prev)
    tail = "" if depth is None else f"-d{depth + (prev is not None)}"
    version = f"{VERSION_PREFIX}{token}-{n}{tail}"
    v, s = f"<{version}>", f"<{subject}>"
    added = [
        f" {v} {_SPECIALIZES_TEXT} {s} ; {_GENERATED_AT_TEXT} {when} ; "
        f"{_GENERATED_BY_TEXT} <{ACTIVITY_PREFIX}{token}>"
    ]
    if prev is not None:
        added.append(f" ; {_REVISION_OF_TEXT} <{prev}>")
    added.extend(state)
    if not state:
        added.append(_TOMBSTONE_TEXT)
    added.append(f" . {s} {_LATEST_TEXT} {v} .")
    if prev is None:
        return version, "".join(added), ""
    added.append(f" <{prev}> {_INVALIDATED_AT_TEXT} {when} .")
    return version, "".join(added), f"{s} {_LATEST_TEXT} <{prev}> ."


def record_text(
    recorder: Recorder,
    graph: NamedNode,
    changes: Sequence[tuple[NamedNode, Sequence[Quad]]],
    heads: Mapping[NamedNode, NamedNode],
    *,
    rename: Mapping[NamedNode, NamedNode] | None = None,
    made: list[tuple[str, str, bool]] | None = None,
) -> tuple[str, str]:
    """``recorder.record``'s quads as SPARQL DATA text, written straight from the strings (no
    ``Quad`` objects): ``(removed, added)``, each ``GRAPH <history> { ... }`` or "", for
    a ``DELETE DATA`` / ``INSERT DATA`` block (``OxigraphBackend.apply_text``). The
    same quads as ``record`` for the same stamp (``tests/test_history_text.py``)."""
    history = history_graph(graph)
    stamp = recorder.stamp_after(heads.values())
    token = stamp.token
    when = when_text(token)
    added = [activity_data(token, stamp.by, stamp.why, when)]
    removed: list[str] = []
    names = {RDF_TYPE: HAD_TYPE, **rename} if rename else _TYPE_ONLY
    for n, (subject, state) in enumerate(changes):
        prev = heads.get(subject)
        lines = []
        for q in state:
            pred = names.get(q.predicate, q.predicate)
            o = q.object
            if pred == VALUE and isinstance(o, Literal):
                o = Literal(o.value)  # as ``record``: the JSON text as a plain string
            lines.append(f" ; <{pred.value}> {o}")
        head = None if prev is None else prev.value
        version, text, gone = version_data(token, n, subject.value, head, when, lines)
        added.append(text)
        removed += [gone] if gone else []
        if made is not None:
            made.append((subject.value, version, not state))
    h = f"<{history.value}>"
    gone = f"GRAPH {h} {{ {' '.join(removed)} }}" if removed else ""
    return gone, f"GRAPH {h} {{ {''.join(added)} }}"


_TYPE_ONLY = {RDF_TYPE: HAD_TYPE}
_SPECIALIZES_TEXT = f"<{SPECIALIZES.value}>"
_GENERATED_AT_TEXT = f"<{GENERATED_AT.value}>"
_GENERATED_BY_TEXT = f"<{GENERATED_BY.value}>"
_REVISION_OF_TEXT = f"<{REVISION_OF.value}>"
_INVALIDATED_AT_TEXT = f"<{INVALIDATED_AT.value}>"
_LATEST_TEXT = f"<{LATEST.value}>"
_TOMBSTONE_TEXT = f" ; <{RDF_TYPE.value}> <{TOMBSTONE.value}>"
