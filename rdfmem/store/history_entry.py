"""One key/value write and its history as one SPARQL DATA request, made from strings.

``KeyValue.set``, ``update`` and ``delete`` change one entry. On an embedded Oxigraph
store keeping history without retention, ``entry_request`` writes the whole request of
such a write: the entry's edit in its data graph and its version in the history graph,
one ``DELETE DATA`` block and one ``INSERT DATA`` block (``OxigraphBackend.apply_text``),
from the strings it needs: no ``Quad``, ``NamedNode`` nor ``Stamp`` is made on the way,
and the entry's literal is written out once for both graphs. It records exactly the quads
``Recorder.record`` makes for the same activity (``tests/test_history_entry.py``).

>>> import datetime as _dt
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

import random
from collections.abc import Sequence

from pyoxigraph import Literal

from rdfmem.store.history import (
    HISTORY_PREFIX,
    VALUE,
    VERSION_PREFIX,
    Recorder,
    current_attribution,
    time_of_version,
    time_token,
    token_of_version,
)
from rdfmem.store.history_text import activity_data, version_data, when_text

__all__ = ["EntryTexts", "EntryWrite", "entry_request", "new_token"]

_VALUE = f"<{VALUE.value}>"


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
    token = clock.token()
    if newest and token <= newest:
        # A head from a clock ahead of this process's (rare): its time is read.
        after = time_of_version(f"{VERSION_PREFIX}{newest}")
        token = time_token(clock.now(after))
    # Unique across processes writing at the same microsecond (``random`` is seeded again
    # in a forked child).
    return f"{token}-{random.getrandbits(32):08x}"


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
    at = when_text(token)
    s, p = f"<{subject}>", texts.predicate
    data, state = [], []
    for value in new:
        literal = str(value)
        data.append(f"{s} {p} {literal} .")
        # The JSON text as a plain string (``Recorder.record``: Virtuoso mishandles one
        # typed literal written twice in a request): the literal's text up to its datatype.
        state.append(f" ; {_VALUE} {literal[: literal.rindex(chr(34)) + 1]}")
    version, text, head_gone = version_data(token, 0, subject, head, at, state)
    added = [f"GRAPH {texts.history} {{ {activity_data(token, by, why, at)}{text} }}"]
    if data:
        added.append(f" GRAPH {texts.graph} {{ {' '.join(data)} }}")
    gone = [f"{s} {p} {value} ." for value in old]
    removed = f"GRAPH {texts.graph} {{ {' '.join(gone)} }}" if gone else ""
    if head_gone:
        removed += f" GRAPH {texts.history} {{ {head_gone} }}"
    return EntryWrite(removed, "".join(added), version, not new, by, why)
