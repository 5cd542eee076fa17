"""One key/value write and its history as one SPARQL DATA request, made from strings.

``KeyValue.set``, ``update`` and ``delete`` change one entry. On an embedded Oxigraph
store keeping history without retention, ``entry_request`` writes the whole request of
such a write: the entry's edit in its data graph and its version in the history graph,
one ``DELETE DATA`` block and one ``INSERT DATA`` block (``OxigraphBackend.apply_text``),
from the strings it needs: no ``Quad``, ``NamedNode`` nor ``Stamp`` is made on the way,
and the entry's literal is written out once for both graphs. It records exactly the quads
``Recorder.record`` makes for the same activity (``tests/test_history_entry.py``).

>>> from pyoxigraph import Literal
>>> from rdfmem.store.history import HistoryClock, Recorder
>>> class Fixed(HistoryClock):
...     def now(self, after=None):
...         return _dt.datetime(2026, 1, 1, 12, 30, tzinfo=_dt.timezone.utc)
>>> texts = EntryTexts("urn:rdfmem:graph:store", "urn:rdfmem:store:value")
>>> write = entry_request(Recorder("urn:agent:a", clock=Fixed()), texts,
...     "urn:rdfmem:store:k", None, [], [Literal("1")])
>>> write.version.startswith("urn:rdfmem:version:20260101T123000.000000Z-"), write.by
(True, 'urn:agent:a')
>>> write.removed
''
"""

from __future__ import annotations

import datetime as _dt
import random
from collections.abc import Sequence

from pyoxigraph import Literal

from rdfmem.store.history import (
    ACTIVITY_PREFIX,
    ASSOCIATED,
    ENDED,
    GENERATED_AT,
    GENERATED_BY,
    HISTORY_PREFIX,
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
    current_attribution,
    depth_of,
    time_of_version,
    token_of_version,
    utc_time,
)

__all__ = ["EntryTexts", "EntryWrite", "activity_data", "entry_request", "new_token"]

_UTC = _dt.timezone.utc
_ENDED = f"<{ENDED.value}>"
_ASSOCIATED = f"<{ASSOCIATED.value}>"
_HOUR = f"<{HOUR.value}>"
_REASON = f"<{REASON.value}>"
_SPECIALIZES = f"<{SPECIALIZES.value}>"
_GENERATED_AT = f"<{GENERATED_AT.value}>"
_GENERATED_BY = f"<{GENERATED_BY.value}>"
_REVISION_OF = f"<{REVISION_OF.value}>"
_INVALIDATED_AT = f"<{INVALIDATED_AT.value}>"
_LATEST = f"<{LATEST.value}>"
_VALUE = f"<{VALUE.value}>"
_TOMBSTONE = f" ; <{RDF_TYPE.value}> <{TOMBSTONE.value}>"
_DATETIME = XSD_DATETIME.value


def _token(at: _dt.datetime) -> str:
    # ``time_token`` of a clock's time (in UTC already, as a ``HistoryClock`` gives it).
    if at.tzinfo is not _UTC:
        at = utc_time(at)
    return (
        f"{at.year:04d}{at.month:02d}{at.day:02d}T{at.hour:02d}{at.minute:02d}"
        f"{at.second:02d}.{at.microsecond:06d}Z"
    )


def new_token(recorder: Recorder, newest: str = "") -> str:
    """A new activity's token (``Stamp.token``: its time token, "-", 8 hex digits): later
    than the time token ``newest`` (the head's it replaces) and than any time this process
    gave, as ``Recorder.stamp_after``'s.

    >>> from rdfmem.store.history import HistoryClock
    >>> ahead = Recorder(clock=HistoryClock())  # a clock of its own: the process's stays
    >>> len(new_token(ahead)), new_token(ahead, "29991231T235959.999998Z")[:23]
    (32, '29991231T235959.999999Z')
    """
    clock = recorder.clock
    token = _token(clock.now())
    if newest and token <= newest:
        # A head from a clock ahead of this process's (rare): its time is read.
        after = time_of_version(f"{VERSION_PREFIX}{newest}")
        token = _token(clock.now(after))
    # Unique across processes writing at the same microsecond (``random`` is seeded again
    # in a forked child).
    return f"{token}-{random.getrandbits(32):08x}"


def activity_data(token: str, by: str, why: str | None, when: str) -> str:
    """The quads of the activity ``token`` (``Stamp.quads``: its time ``when``, the
    ``when_text`` of the token; its agent ``by``, its reason ``why`` and its hour) as
    SPARQL DATA text, ending with " ."."""
    t = token
    text = (
        f"<{ACTIVITY_PREFIX}{token}> {_ENDED} {when} ; {_ASSOCIATED} <{by}> ; "
        f'{_HOUR} "{t[0:4]}-{t[4:6]}-{t[6:8]}T{t[9:11]}"'
    )
    if why is not None:
        text += f" ; {_REASON} {Literal(why)}"
    return text + " ."


class EntryTexts:
    """The fixed texts of one key/value namespace's writes: its data graph, its history
    graph and its value predicate, as SPARQL terms."""

    __slots__ = ("graph", "history", "predicate")

    def __init__(self, graph: str, predicate: str) -> None:
        self.graph = f"<{graph}>"
        self.history = f"<{HISTORY_PREFIX}{graph}>"
        self.predicate = f"<{predicate}>"


class EntryWrite:
    """A write made by ``entry_request``: the ``DELETE DATA`` and ``INSERT DATA`` blocks'
    insides (``removed``, "" for none; ``added``), and what the version index notes: the
    version's IRI, whether it records a deletion, its agent and reason."""

    __slots__ = ("added", "by", "deleted", "removed", "version", "why")

    def __init__(
        self, removed: str, added: str, version: str, deleted: bool, by: str, why: str | None
    ) -> None:
        self.removed = removed
        self.added = added
        self.version = version
        self.deleted = deleted
        self.by = by
        self.why = why


def entry_request(
    recorder: Recorder,
    texts: EntryTexts,
    subject: str,
    head: str | None,
    old: Sequence[Literal],
    new: Sequence[Literal],
    *,
    when: str | None = None,
) -> EntryWrite:
    """One entry's write and its version: ``subject`` (an IRI) held the values ``old`` and
    holds ``new`` after the write (literals; none: no entry), and ``head`` is its latest
    version (None: it has none). The version holds the new value as a plain string
    (``rm:entryValue``), or is a tombstone; the activity is attributed as
    ``Recorder.stamp`` does. ``when``: the activity's token (tests; default a new one)."""
    said = current_attribution()
    by = said.by or recorder.agent
    why = said.why
    token = when or new_token(recorder, "" if head is None else token_of_version(head))
    t = token
    at = f'"{t[0:4]}-{t[4:6]}-{t[6:8]}T{t[9:11]}:{t[11:13]}:{t[13:22]}Z"^^<{_DATETIME}>'
    activity = f"<{ACTIVITY_PREFIX}{token}>"
    if head is None:
        version = f"{VERSION_PREFIX}{token}-0-d1"
    else:
        depth = depth_of(head)
        tail = "" if depth is None else f"-d{depth + 1}"
        version = f"{VERSION_PREFIX}{token}-0{tail}"
    s, v, g, p = f"<{subject}>", f"<{version}>", texts.graph, texts.predicate
    added = [
        f"GRAPH {texts.history} {{ {activity_data(token, by, why, at)} {v} {_SPECIALIZES} {s} ; "
        f"{_GENERATED_AT} {at} ; {_GENERATED_BY} {activity}"
    ]
    if head is not None:
        added.append(f" ; {_REVISION_OF} <{head}>")
    data = []
    for value in new:
        text = str(value)
        data.append(f"{s} {p} {text} .")
        # The JSON text as a plain string (``Recorder.record``: Virtuoso mishandles one
        # typed literal written twice in a request): the literal's text up to its datatype.
        added.append(f" ; {_VALUE} {text[: text.rindex(chr(34)) + 1]}")
    if not new:
        added.append(_TOMBSTONE)
    added.append(f" . {s} {_LATEST} {v} .")
    if head is not None:
        added.append(f" <{head}> {_INVALIDATED_AT} {at} .")
    added.append(" }")
    if data:
        added.append(f" GRAPH {g} {{ {' '.join(data)} }}")
    gone = [f"{s} {p} {value} ." for value in old]
    removed = f"GRAPH {g} {{ {' '.join(gone)} }}" if gone else ""
    if head is not None:
        removed += f" GRAPH {texts.history} {{ {s} {_LATEST} <{head}> . }}"
    return EntryWrite(removed, "".join(added), version, not new, by, why)
