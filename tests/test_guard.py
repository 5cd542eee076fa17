"""``sparql_guard.find_forbidden``: every spelling of SERVICE and LOAD, judged as the engine
reads the text, in linear time."""

from __future__ import annotations

import contextlib
import time

import pyoxigraph as ox
import pytest
import rdflib
from hypothesis import given, settings
from hypothesis import strategies as st
from test_server_support import (
    Listener,
)

from rdfmem.core.guard import find_forbidden

pytest_plugins = ["test_server_support"]


@pytest.mark.parametrize(
    "query",
    [
        "SELECT ?service WHERE { ?service a <http://schema.org/Service> }",
        "PREFIX ex: <urn:ex:> SELECT * WHERE { ?s ex:payload ?load ; ex:download 'SERVICE' }",
        'SELECT * WHERE { ?s ?p """LOAD <http://x/>\nSERVICE""" } # SERVICE LOAD',
        "PREFIX schema: <http://schema.org/> SELECT * { ?s schema:serviceType _:loader }",
        "SELECT * { <http://example.org/service/load> ?p ?o FILTER(LANG(?o) = 'en') }",
    ],
)
def test_words_in_names_strings_and_comments_are_not_refused(query: str) -> None:
    assert find_forbidden(query) is None


_GLUE = st.sampled_from(["", " ", "\n", "#c\n", ".", " . ", "\t", "\r\n"])
_BEFORE = st.sampled_from(
    [
        "",
        "true",
        "false",
        "1",
        "1.5",
        "1e3",
        '"x"',
        '"x"@en',
        "<urn:x>",
        "ex:x",
        "_:b",
        "ex:x.y",
        "ex:x-y",
        "ex:x%41",
        "?v",
        '"x"^^ex:t',
        "[]",
        "()",
        "'''x'''",
        "{}",
    ]
)
_TARGET = st.sampled_from([":", ":x", "?u", "<{url}>", "<{url}x>"])


@settings(max_examples=150, deadline=None)
@given(
    before=_BEFORE,
    glue=_GLUE,
    keyword=st.sampled_from(["SERVICE", "SERVICE SILENT", "SERVICESILENT"]),
    flips=st.lists(st.booleans(), min_size=14, max_size=14),
    after=_GLUE,
    target=_TARGET,
)
def test_guard_passes_nothing_that_pyoxigraph_would_fetch(
    listener: Listener,
    before: str,
    glue: str,
    keyword: str,
    flips: list[bool],
    after: str,
    target: str,
) -> None:
    """Against pyoxigraph itself: whatever the guard lets through must not connect out."""
    spelt = "".join(c.lower() if flip else c for c, flip in zip(keyword, flips, strict=False))
    query = (
        f"PREFIX : <{listener.url}> PREFIX ex: <urn:ex:> SELECT * WHERE {{ "
        f"BIND(IRI(<{listener.url}>) AS ?u) <urn:s> <urn:p> {before}{glue}{spelt}{after}"
        f"{target.format(url=listener.url)}{{}} }}"
    )
    if find_forbidden(query) is not None:
        return
    store = ox.Store()
    for obj in ("true", "false", "1", "1.5", "1e3", '"x"', '"x"@en', "<urn:x>", "<urn:ex:x>"):
        store.update(f"INSERT DATA {{ <urn:s> <urn:p> {obj} }}")
    hits = listener.hits
    with contextlib.suppress(SyntaxError, OSError, RuntimeError, TypeError):
        list(store.query(query))  # type: ignore[arg-type]
    assert listener.hits == hits, query


# -- linear time (issue 10, items 1 and 2) ---------------------------------------------------

#: Inputs that made the former regex-based guard backtrack: each is (a prefix, a unit repeated).
ADVERSARIAL = {
    "banner of #": ("", "#"),
    "comment then a-": ("# c\nSELECT * { ?s ?p ", "a-"),
    "unterminated escaped quotes": ("SELECT * { ?s ?p ", "'\\'"),
    "unclosed IRIs": ("SELECT * { ?s ?p ", "<a"),
    "escapes": ("SELECT * { ?s ?p ", "\\u0022"),
    "long string of escapes": ("SELECT * { ?s ?p '''", "\\'"),
    "prefixed name dots": ("SELECT * { ?s ?p ", "ex:a."),
    "less-than chain": ("ASK { FILTER(", "?a<"),
}


def _best_time(text: str) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        find_forbidden(text)
        best = min(best, time.perf_counter() - started)
    return best


@pytest.mark.parametrize("case", sorted(ADVERSARIAL))
def test_guard_time_grows_linearly(case: str) -> None:
    """10x the input takes about 10x the time (quadratic would be 100x), and ~100 KB stays
    well under a second: a DoS test with loose bounds, not a speed benchmark."""
    prefix, unit = ADVERSARIAL[case]
    small = prefix + unit * (10_000 // len(unit)) + "LOAD"
    large = prefix + unit * (100_000 // len(unit)) + "LOAD"
    small_time, large_time = _best_time(small), _best_time(large)
    assert large_time < 2.0, f"{case}: {large_time:.2f} s for 100 KB"
    assert large_time < 35 * max(small_time, 0.002), (case, small_time, large_time)


# -- escapes: the text the engine parses (issue 10, item 3) ----------------------------------


def escaped_payloads(url: str) -> list[str]:
    """Queries that fetch ``url`` once ``\\u`` escapes are expanded, as rdflib does."""
    return [
        # an escaped quote closes the string early, a comment swallows the real closing quote
        f'SELECT * WHERE {{ FILTER("x\\u0022) SERVICE <{url}> {{ ?s ?p ?o }} #" = "y")\n}}',
        # an escaped newline ends a comment
        f"SELECT * WHERE {{ # note\\u000A SERVICE <{url}> {{ ?s ?p ?o }}\n}}",
        # the keyword itself spelt with escapes, short and long
        f"SELECT * WHERE {{ \\u0053ERVICE <{url}> {{ ?s ?p ?o }} }}",
        f"SELECT * WHERE {{ SERV\\U00000049CE <{url}> {{ ?s ?p ?o }} }}",
        # a long string closed by escaped quotes
        f"SELECT * WHERE {{ FILTER('''x\\u0027\\u0027\\u0027) SERVICE <{url}> {{}} #''' = 'y')\n}}",
    ]


def escaped_updates(url: str) -> list[str]:
    return [
        f'INSERT DATA {{ <urn:a> <urn:b> "\\u0022 }} ; LOAD <{url}> ; '
        f'INSERT DATA {{ <urn:a> <urn:b> \\u0022" }}',
        f"CLEAR SILENT GRAPH <urn:x> # \\u000A; LOAD <{url}>",
        f"\\u004cOAD <{url}>",
        # rdflib ends comments at a newline only; other engines at a carriage return too
        f"SELECT * WHERE {{ # note\\u000d SERVICE <{url}> {{ ?s ?p ?o }}\n}}",
    ]


@pytest.mark.parametrize("index", range(5))
def test_escaped_service_is_live_on_rdflib_and_refused(listener: Listener, index: int) -> None:
    """Each payload really fetches when rdflib runs it unguarded, and the guard refuses it."""
    query = escaped_payloads(listener.url)[index]
    assert find_forbidden(query) is not None, query
    hits = listener.hits
    with contextlib.suppress(Exception):
        list(rdflib.Graph().query(query))  # evaluated as it is read
    deadline = time.monotonic() + 5  # the listener counts on its own thread
    while listener.hits == hits and time.monotonic() < deadline:
        time.sleep(0.01)
    assert listener.hits > hits, f"the payload is not live, so the test proves nothing: {query}"


@pytest.mark.parametrize("index", range(4))
def test_escaped_load_and_carriage_return_are_refused(listener: Listener, index: int) -> None:
    assert find_forbidden(escaped_updates(listener.url)[index]) is not None


@pytest.mark.parametrize(
    "text",
    [
        "SELECT * { ?s ?p 'say\\\\u0022hi' }",  # an escaped backslash, then plain text
        "SELECT * { ?s <urn:a\\u0073ervice> ?o }",
        "SELECT ?\\u0073ervice { ?service ?p ?o }",
        "SELECT * { ?s ?p '\\u0053ERVICE' }",
    ],
)
def test_escapes_inside_names_and_strings_are_not_refused(text: str) -> None:
    assert find_forbidden(text) is None
