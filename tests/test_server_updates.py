"""``rdfmem serve`` updates: refused without --allow-update or the token; LOAD always."""

from __future__ import annotations

import httpx
import pytest
from test_server_support import (
    SELECT_ALL,
    TOKEN,
    Listener,
)

from rdfmem import RdfStore
from rdfmem.server import BackgroundServer, ServerConfigError, create_app

pytest_plugins = ["test_server_support"]


def test_updates_are_refused_without_allow_update(client: httpx.Client) -> None:
    response = client.post("/sparql", data={"update": "CLEAR ALL"})
    assert response.status_code == 403
    assert "--allow-update" in response.text
    direct = client.post(
        "/sparql",
        content=b"CLEAR ALL",
        headers={"Content-Type": "application/sparql-update", "Authorization": "Bearer x"},
    )
    assert direct.status_code == 403
    assert (
        len(client.get("/sparql", params={"query": SELECT_ALL}).json()["results"]["bindings"]) == 3
    )


def test_update_needs_the_right_bearer_token(writable: tuple[BackgroundServer, RdfStore]) -> None:
    server, store = writable
    update = "INSERT DATA { <urn:ex:dan> <urn:ex:says> 'hi' }"
    for headers in (
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": TOKEN},
        {"Authorization": f"Basic {TOKEN}"},
    ):
        refused = httpx.post(server.sparql_url, data={"update": update}, headers=headers)
        assert refused.status_code == 403
    assert not store.ask(subject="urn:ex:dan")
    ok = httpx.post(
        server.sparql_url,
        content=update.encode(),
        headers={"Content-Type": "application/sparql-update", "Authorization": f"Bearer {TOKEN}"},
    )
    assert ok.status_code == 204
    assert store.ask(subject="urn:ex:dan")
    description = httpx.get(server.sparql_url, headers={"Accept": "application/n-triples"})
    assert "SPARQL11Update" in description.text


def test_bad_update_changes_nothing(writable: tuple[BackgroundServer, RdfStore]) -> None:
    server, store = writable
    before = sorted(str(q) for q in store.triples())
    auth = {"Authorization": f"Bearer {TOKEN}"}
    bad = httpx.post(server.sparql_url, data={"update": "INSERT DATA { <urn:x> }"}, headers=auth)
    assert bad.status_code == 400
    load = httpx.post(
        server.sparql_url, data={"update": "load <http://127.0.0.1:9/x.ttl>"}, headers=auth
    )
    assert load.status_code == 403 and "LOAD" in load.text
    assert sorted(str(q) for q in store.triples()) == before


def test_allow_update_needs_a_token() -> None:
    with pytest.raises(ServerConfigError, match="token"):
        create_app(RdfStore(), allow_update=True)


@pytest.mark.parametrize(
    "update",
    [
        "LOAD <{url}>",
        "load silent <{url}> into graph <urn:g>",
        "# LOAD\nLoAd<{url}>",
        "CLEAR SILENT GRAPH <urn:x> ; LOAD <{url}>",
        "INSERT { ?s ?p ?o } WHERE { SERVICE <{url}> { ?s ?p ?o } }",
    ],
)
def test_load_is_refused_even_with_the_token(
    writable: tuple[BackgroundServer, RdfStore], listener: Listener, update: str
) -> None:
    server, _ = writable
    hits = listener.hits
    response = httpx.post(
        server.sparql_url,
        data={"update": update.replace("{url}", listener.url)},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert response.status_code == 403
    assert listener.hits == hits
