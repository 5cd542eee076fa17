"""``sparql_guard.find_forbidden``: every spelling of SERVICE and LOAD, judged as the engine
reads the text, in linear time."""

from __future__ import annotations

import contextlib

import pyoxigraph as ox
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_server_support import (
    Listener,
)

from rdfmem.sparql_guard import find_forbidden

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
