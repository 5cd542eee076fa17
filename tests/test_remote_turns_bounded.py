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
from servers import Server

from rdfmem import RdfStore
from rdfmem.backends.sparql.text import (
    CHANGE_GRAPH_IRI,
    CHANGED_AT,
    CHANGED_GRAPH,
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
    """A record as a write stamped at ``at`` and committed only now would leave it."""
    name = f"urn:rdfmem:change:{uuid.uuid4().hex}"
    update = (
        f"INSERT DATA {{ GRAPH <{CHANGE_GRAPH_IRI}> {{ <{name}> {CHANGED_AT} "
        f'"{at}"^^<{XSD_DATETIME}> ; {CHANGED_GRAPH} <{graph}> ; '
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


@pytest.mark.parametrize("zone", ["Z", "+00:00", "+01:00"])
def test_a_record_that_commits_late_is_reported_by_the_next_look(server: Server, zone: str) -> None:
    """A record dated well before the reader's last look, committed after it (a write that
    took seconds): the count of that span differs, and the look reads it. Its date in any
    spelling with a time zone: one the client cannot count as the server does is read in
    full too. (A date without a zone is not one Oxigraph server orders against a zoned one:
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
    if zone == "+01:00":  # the same instant in another zone
        at = xsd_instant(server_now - 10.0 + 3600)[:-1] + "+01:00"
    elif zone == "+00:00":
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
