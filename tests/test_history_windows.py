"""``changes_since`` at the edges of its window (issue 24): the window is read through the
``rm:hour`` buckets it touches, and in its first and last buckets only the writes inside
it count. The history is made by rdfmem's own ``Recorder`` at chosen instants (a clock
that says what it is told) and written into the store as any write of it is."""

from __future__ import annotations

import datetime as dt

import pytest
from conftest import StoreFactory
from pyoxigraph import NamedNode, Quad

from rdfmem import RdfStore
from rdfmem.core.keys import encode_value
from rdfmem.store.history import LATEST, VALUE, HistoryClock, Recorder, attributed

UTC = dt.timezone.utc
KV = NamedNode("urn:rdfmem:graph:store")
VALUE_PREDICATE = NamedNode("urn:rdfmem:store:value")


class _Told(HistoryClock):
    def __init__(self) -> None:
        super().__init__()
        self.next = dt.datetime(2026, 1, 1, tzinfo=UTC)

    def now(self, after: dt.datetime | None = None) -> dt.datetime:
        return self.next


def at(hour: int, minute: int = 0, second: int = 0, micro: int = 0) -> dt.datetime:
    return dt.datetime(2026, 3, 1, hour, minute, second, micro, tzinfo=UTC)


#: (instant, key, value: None deletes, reason)
WRITES = [
    (at(10, 59, 59, 999_999), "a", 1, None),
    (at(11), "b", 1, None),
    (at(11, 30), "a", 2, "moved"),
    (at(11, 59, 59, 999_999), "b", None, "done"),
    (at(12), "a", 3, None),
    (at(12, 0, 0, 1), "b", 2, None),
    (at(13, 15), "a", None, None),
]


def write_history(store: RdfStore) -> None:
    clock = _Told()
    recorder = Recorder("urn:agent:told", clock=clock)
    heads: dict[NamedNode, NamedNode] = {}
    entries: dict[NamedNode, Quad] = {}
    for moment, key, value, why in WRITES:
        clock.next = moment
        s = NamedNode(f"urn:rdfmem:store:{key}")
        state = [] if value is None else [Quad(s, VALUE_PREDICATE, encode_value(value), KV)]
        head = heads.get(s)
        with attributed(why=why):
            gone, added = recorder.record(
                KV, [(s, state)], {s: head} if head else {}, rename={VALUE_PREDICATE: VALUE}
            )
        made = next(q.object for q in added if q.predicate == LATEST)
        assert isinstance(made, NamedNode)
        heads[s] = made
        old = [entries.pop(s)] if s in entries else []
        if state:
            entries[s] = state[0]
        store.backend.apply(old + gone, state + added)


def seen(
    store: RdfStore, since: dt.datetime, until: dt.datetime, graph: str | None = None
) -> list[tuple[object, ...]]:
    return [
        (c.at, c.key, c.deleted, c.why, c.by)
        for c in store.changes_since(since, until, graph=graph)
    ]


def expected(since: dt.datetime, until: dt.datetime) -> list[tuple[object, ...]]:
    return [
        (moment, key, value is None, why, "urn:agent:told")
        for moment, key, value, why in WRITES
        if since <= moment <= until
    ]


@pytest.mark.parametrize(
    ("since", "until"),
    [
        (at(11), at(12)),  # both ends on a bucket's first instant: both ends count
        (at(11), at(11, 59, 59, 999_999)),  # one hour, one bucket
        (at(11, 0, 0, 1), at(11, 59, 59, 999_998)),  # within a bucket: its edges left out
        (at(10, 59, 59, 999_999), at(12, 0, 0, 1)),  # three buckets, an instant into each end
        (at(11, 30), at(13, 15)),  # the middle bucket read whole
        (at(12, 0, 0, 2), at(13, 14, 59, 999_999)),  # nothing in it
    ],
)
def test_a_window_holds_the_writes_inside_it_and_no_other(
    make_store: StoreFactory, since: dt.datetime, until: dt.datetime
) -> None:
    store = make_store(history=True)
    write_history(store)
    want = expected(since, until)
    assert seen(store, since, until) == want
    assert seen(store, since, until, graph=KV.value) == want


def test_a_long_window_reads_a_query_per_day_and_keeps_the_order(
    make_store: StoreFactory,
) -> None:
    store = make_store(history=True)
    write_history(store)
    since, until = at(0) - dt.timedelta(days=2), at(23) + dt.timedelta(days=1)
    found = store.changes_since(since, until)
    assert [(c.at, c.key) for c in found] == [(m, k) for m, k, _, _ in WRITES]
    assert [c.version for c in found] == sorted(c.version for c in found)
    assert all(c.activity.startswith("urn:rdfmem:activity:") for c in found)


@pytest.mark.parametrize(
    "since",
    [
        at(0) - dt.timedelta(days=366 * 2),  # two years before: over a year of buckets
        dt.datetime(1970, 1, 1, tzinfo=UTC),
        dt.datetime(1, 1, 1, tzinfo=UTC),
    ],
)
def test_a_window_of_more_than_a_year_holds_every_write_in_it(
    make_store: StoreFactory, since: dt.datetime
) -> None:
    # "What changed since the last run", a run over a year ago or never: not one bucket
    # a query for every hour since, nor the first year's buckets alone.
    store = make_store(history=True)
    write_history(store)
    until = at(23) + dt.timedelta(days=400)
    assert seen(store, since, until) == expected(since, until)
    assert seen(store, since, until, graph=KV.value) == expected(since, until)
    assert seen(store, since, at(11, 30)) == expected(since, at(11, 30))
