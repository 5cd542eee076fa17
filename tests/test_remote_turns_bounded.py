"""A change-log look bounded by what is new (issue 21, remote turns): a reader reads in full
only the records written since its last look, and counts the rest of its window in the same
request; a record that commits late, or one whose date it cannot count, is still reported.
"""

from __future__ import annotations

import time
import uuid

import httpx
import pytest
from pyoxigraph import NamedNode
from servers import Server, filed_records

from rdfmem import RdfStore
from rdfmem.backends.sparql.text import (
    CHANGE_GRAPH_IRI,
    CHANGED_AT,
    CHANGED_GRAPH,
    CHANGED_IN,
    CHANGED_SUBJECT,
    Changes,
    xsd_instant,
)

EX = "http://example.org/"
XSD_DATETIME = "http://www.w3.org/2001/XMLSchema#dateTime"


@pytest.fixture
def oxigraph(oxigraph_server: Server) -> Server:
    oxigraph_server.wipe()
    return oxigraph_server


def look(store: RdfStore, cursor: tuple[float, frozenset[str]] | None) -> tuple[Changes, int, int]:
    """One ``changes_since``: its answer, the requests it sent and the bytes it received."""
    sent: list[int] = []
    client: httpx.Client = store.backend.client  # type: ignore[attr-defined]

    def count(response: httpx.Response) -> None:
        sent.append(len(response.read()))

    client.event_hooks["response"].append(count)
    try:
        changes = store.backend.changes_since(cursor)  # type: ignore[attr-defined]
    finally:
        client.event_hooks["response"].remove(count)
    return changes, len(sent), sum(sent)


def late_record(server: Server, at: str, graph: str, subject: str) -> None:
    """A record as a write stamped at ``at`` and committed only now would leave it (filed
    under its second as the server files it: the first 19 characters of its date)."""
    name = f"urn:rdfmem:change:{uuid.uuid4().hex}"
    update = (
        f"INSERT DATA {{ GRAPH <{CHANGE_GRAPH_IRI}> {{ <{name}> {CHANGED_AT} "
        f'"{at}"^^<{XSD_DATETIME}> ; {CHANGED_IN} "{at[:19]}" ; {CHANGED_GRAPH} <{graph}> ; '
        f"{CHANGED_SUBJECT} <{subject}> }} }}"
    )
    httpx.post(server.update_url, data={"update": update}, timeout=30).raise_for_status()


def test_a_look_after_hundreds_of_writes_reads_only_what_is_new(oxigraph: Server) -> None:
    writer, reader = oxigraph.connect(change_log=True), oxigraph.connect(change_log=True)
    cursor = reader.backend.changes_since().cursor  # type: ignore[attr-defined]
    for i in range(400):  # 400 records in the reader's window (more than it leaves out
        writer.assert_(EX + f"s{i}", EX + "p", i, graph="urn:g")  # by name in a full look)
    time.sleep(1.5)  # the next look's window holds them all, a second and more before it
    first, _, _ = look(reader, cursor)
    assert len(first.subjects) == 400 and not first.everything
    quiet, requests, size = look(reader, first.cursor)
    # Nothing new: one request, a few rows back (a full look read 144 of the records again,
    # ~90 KB).
    assert (quiet.graphs, quiet.everything) == (frozenset(), False)
    assert requests == 1 and size < 3_000, (requests, size)
    writer.assert_(EX + "new", EX + "p", 1, graph="urn:g")
    news, requests, size = look(reader, quiet.cursor)
    assert news.subjects == {(NamedNode("urn:g"), NamedNode(EX + "new"))}
    assert requests == 1 and size < 5_000, (requests, size)
    again, _, _ = look(reader, news.cursor)  # reported once
    assert (again.graphs, again.everything) == (frozenset(), False)
    writer.close()
    reader.close()


@pytest.mark.parametrize("zone", ["Z", "+00:00"])
def test_a_record_that_commits_late_is_reported_by_the_next_look(server: Server, zone: str) -> None:
    """A record dated well before the reader's last look, committed after it (a write that
    took seconds): the count of that span differs, and the look reads it. Its date in
    either UTC spelling (one the client does not count as the server does is read in full).
    (A record is filed under the first 19 characters of the server's ``NOW()``: a date in
    another zone would be filed under another hour, which no bounded look lists, but no
    server writes one: where ``NOW()`` is not written in UTC with a ``Z``, looks read no
    buckets. A date without a zone is not one Oxigraph server orders against a zoned one:
    no look, bounded or full, reads it there; Virtuoso writes its own dates so.)"""
    writer, reader = server.connect(change_log=True), server.connect(change_log=True)
    cursor = reader.backend.changes_since().cursor  # type: ignore[attr-defined]
    for i in range(5):
        writer.assert_(EX + f"s{i}", EX + "p", i, graph="urn:g")
    time.sleep(1.5)
    changes, _, _ = look(reader, cursor)
    assert len(changes.subjects) == 5
    server_now = changes.cursor[0] + 60.0  # the look's server time (the default slack)
    at = xsd_instant(server_now - 10.0)  # ten seconds before that look
    if zone == "+00:00":
        at = at[:-1] + zone
    late_record(server, at, "urn:late", EX + "late")
    changes, _, _ = look(reader, changes.cursor)
    assert NamedNode("urn:late") in changes.graphs or changes.everything
    assert (NamedNode("urn:late"), NamedNode(EX + "late")) in changes.subjects or (
        changes.everything or NamedNode("urn:late") in changes.whole
    )
    again, _, _ = look(reader, changes.cursor)  # reported once
    assert NamedNode("urn:late") not in again.graphs
    writer.close()
    reader.close()


def test_followers_stay_exact_while_looks_are_bounded(oxigraph: Server) -> None:
    """Many looks, writes between them and late records among them: the subjects reported
    are every one written, each once."""
    writer, reader = oxigraph.connect(change_log=True), oxigraph.connect(change_log=True)
    cursor = reader.backend.changes_since().cursor  # type: ignore[attr-defined]
    reported: list[str] = []
    written: list[str] = []
    for turn in range(30):
        for k in range(3):
            subject = EX + f"t{turn}-{k}"
            writer.assert_(subject, EX + "p", k, graph="urn:g")
            written.append(subject)
        if turn % 7 == 3:  # a late one, dated 5 s before the reader's last look
            subject = EX + f"late{turn}"
            late_record(oxigraph, xsd_instant(cursor[0] + 55.0), "urn:g", subject)
            written.append(subject)
        changes, _, _ = look(reader, cursor)
        assert not changes.everything
        reported += [s.value for _, s in changes.subjects]
        cursor = changes.cursor
    assert sorted(reported) == sorted(written)
    log = reader.backend._log  # type: ignore[attr-defined]
    assert log.bounded >= 20 and log.missed >= 4  # each late record made one full look
    writer.close()
    reader.close()


def test_a_look_reads_the_seconds_since_the_last_look_not_the_whole_log(
    oxigraph: Server,
) -> None:
    """An hour of log (3,000 records of other writers): a look after the first names the
    seconds it reads and counts, and reports exactly what was written since, once. (A
    look that read the date of every record cost the server 27 ms at 20,000 records and
    grew with the log.)"""
    writer, reader = oxigraph.connect(change_log=True), oxigraph.connect(change_log=True)
    filed_records(oxigraph.update_url, 3_000, start=time.time() - 3_600.0, span=3_480.0)
    first = reader.backend.changes_since()  # type: ignore[attr-defined]
    assert first.everything
    sent: list[bytes] = []
    client: httpx.Client = reader.backend.client  # type: ignore[attr-defined]
    client.event_hooks["request"].append(lambda request: sent.append(request.read()))
    cursor = first.cursor
    for turn in range(3):
        for k in range(2):
            writer.assert_(EX + f"n{turn}-{k}", EX + "p", k, graph="urn:g")
        sent.clear()
        changes, requests, size = look(reader, cursor)
        assert changes.subjects == {
            (NamedNode("urn:g"), NamedNode(EX + f"n{turn}-{k}")) for k in range(2)
        }
        assert not changes.everything and requests == 1 and size < 5_000, (requests, size)
        assert b"changedIn" in sent[0] and b"VALUES" in sent[0]
        cursor = changes.cursor
    writer.close()
    reader.close()


def test_a_cursor_hours_old_is_answered_by_a_full_look(oxigraph: Server) -> None:
    """A cursor from long ago (here: the epoch) spans more seconds than a look lists: the
    look reads the dates of the whole log instead, and reports everything since."""
    writer, reader = oxigraph.connect(change_log=True), oxigraph.connect(change_log=True)
    reader.backend.changes_since()  # type: ignore[attr-defined]  # the server's clock known
    writer.assert_(EX + "s", EX + "p", 1, graph="urn:g")
    changes, requests, _ = look(reader, (0.0, frozenset()))
    assert (NamedNode("urn:g"), NamedNode(EX + "s")) in changes.subjects or changes.everything
    assert NamedNode("urn:g") in changes.graphs and requests <= 2
    writer.close()
    reader.close()
