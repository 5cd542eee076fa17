"""The page at ``/`` of ``rdfmem serve``: every link and every form, as the page fills it,
answers 200 from a real server over the demo memory; the forms offer the store's ids."""

from __future__ import annotations

from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit

import httpx
import pytest

from rdfmem import RdfStore
from rdfmem.cli.demo import run_demo
from rdfmem.core.ontology import ontology_path
from rdfmem.server import BackgroundServer


class _Page(HTMLParser):
    """The links of a page, and each form with the values it would submit untouched."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.forms: list[tuple[str, list[tuple[str, str]]]] = []
        self.selects: dict[tuple[str, str], list[str]] = {}
        self._select: tuple[str, bool, list[tuple[str, bool]]] | None = None
        self._form: tuple[str, list[tuple[str, str]]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        got = {k: v or "" for k, v in attrs}
        if tag == "a" and "href" in got:
            self.links.append(got["href"])
        elif tag == "form" and "action" in got:
            self._form = (got["action"], [])
        elif tag == "input" and self._form is not None:
            self._form[1].append((got["name"], got.get("value", "")))
        elif tag == "select":
            self._select = (got["name"], "required" in got, [])
        elif tag == "option" and self._select is not None:
            self._select[2].append((got.get("value", ""), "selected" in got))

    def handle_endtag(self, tag: str) -> None:
        if tag == "select" and self._select is not None:
            name, _, options = self._select
            chosen = [v for v, picked in options if picked] or [options[0][0]]
            if self._form is not None:
                self._form[1].append((name, chosen[0]))
                self.selects[(self._form[0], name)] = [v for v, _ in options]
            self._select = None
        elif tag == "form" and self._form is not None:
            self.forms.append(self._form)
            self._form = None


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("page")
    run_demo(folder)
    with RdfStore.open(folder / "store") as store, BackgroundServer(store) as server:
        routed = httpx.get(server.url + "/graph").status_code != 404
        assert routed, "rdfmem/server/app.py does not list graphview.page_routes(endpoint)"
        yield server.url + "/"


def _read(url: str) -> _Page:
    answer = httpx.get(url)
    assert answer.status_code == 200, answer.text
    page = _Page()
    page.feed(answer.text)
    return page


def test_every_link_and_form_on_the_page_answers(served: str) -> None:
    page = _read(served)
    named = [link for link in page.links if link.startswith("queries/")]
    shipped = {p.stem for p in (ontology_path() / "queries").glob("*.rq")}
    # Every shipped named query has a link: the demo fills them all.
    assert {link.split("?")[0].removeprefix("queries/") for link in named} == shipped
    failures = []
    for link in page.links:
        answer = httpx.get(urljoin(served, link))
        if answer.status_code != 200:
            failures.append((link, answer.status_code, answer.text[:200]))
    for action, fields in page.forms:
        url = urljoin(served, action) + "?" + urlencode(fields)
        answer = httpx.get(url)
        if answer.status_code != 200:
            failures.append((url, answer.status_code, answer.text[:200]))
    assert failures == []
    assert {action.removeprefix("queries/") for action, _ in page.forms} == shipped


def test_the_links_ask_about_what_the_store_holds(served: str) -> None:
    page = _read(served)
    link = next(x for x in page.links if x.startswith("queries/decision_node?"))
    rows = httpx.get(urljoin(served, link)).json()["results"]["bindings"]
    assert len(rows) == 1  # a real node, not an empty id
    asked = dict(parse_qsl(urlsplit(link).query))
    assert rows[0]["id"]["value"] == asked["node_id"]
    topic = next(x for x in page.links if x.startswith("queries/memories_by_topic?"))
    assert httpx.get(urljoin(served, topic)).json()["results"]["bindings"]


def test_the_forms_offer_the_ids_and_graphs_of_the_store(served: str) -> None:
    page = _read(served)
    ids = page.selects[("queries/path_between", "from_id")]
    assert {"ship-v2", "pick-backend", "p95-120ms"} <= set(ids)
    assert set(page.selects[("queries/generalisation_lineage", "id")]) == {
        "fewer-services",
        "gin-index",
        "index-first",
        "short-queries",
    }
    graphs = page.selects[("queries/active_goals", "graph")]
    assert graphs[0] == "" and "urn:rdfmem:graph:decisions" in graphs  # "" = every graph
    chosen = dict(next(fields for action, fields in page.forms if action.endswith("/path_between")))
    path = httpx.get(urljoin(served, "queries/path_between"), params={**chosen, "graph": ""}).json()
    assert path["results"]["bindings"]  # the defaults name two ends joined by a path


def test_a_required_value_left_empty_says_what_to_pass(served: str) -> None:
    answer = httpx.get(urljoin(served, "queries/decision_node"))
    assert answer.status_code == 400 and "node_id" in answer.text


def test_an_empty_store_offers_no_link_that_would_fail(tmp_path: Path) -> None:
    with RdfStore() as store, BackgroundServer(store) as server:
        page = _read(server.url + "/")
        for link in page.links:
            assert httpx.get(urljoin(server.url + "/", link)).status_code == 200, link
        assert not any(x.startswith("queries/path_between") for x in page.links)
