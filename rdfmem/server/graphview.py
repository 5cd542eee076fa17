"""The page at ``/`` with the store's values offered, and ``/graph``: a named graph drawn.

``GET /graph?graph=IRI`` answers an HTML page holding the graph drawn as SVG, laid out here
(nothing is loaded from elsewhere: no script, font or style from the internet), with a
legend of kinds, statuses and edge types; ``&format=svg`` the SVG alone, ``mermaid`` or
``dot`` the same picture as text for those tools; ``&max_nodes=N`` draws at most N nodes
(2,000 by default, 3,000 at most). Without ``graph`` it lists the graphs to draw.

The work runs where every read of the endpoint runs (``jobs.py``): on a query worker, in a
child process killed at the time limit on a backend evaluated in this process.

``page_routes(endpoint)`` gives the routes, in the form ``app.py`` lists its own.
"""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from rdfmem.core.errors import HttpError, RdfMemError
from rdfmem.server.answers import Answer
from rdfmem.server.choices import read_choices, read_graphs
from rdfmem.server.drawing import STATUS_STYLE, colours, dot, mermaid, svg
from rdfmem.server.endpoint import Endpoint, error_response
from rdfmem.server.incoming import one, one_or_first, query_pairs
from rdfmem.server.named import list_named_queries
from rdfmem.server.page import query_page
from rdfmem.server.picture import MAX_NODES, Picture, read_picture

__all__ = ["GraphView", "graph_page", "page_routes"]

_Handler = Callable[[Request], Awaitable[Response]]
#: The most nodes one drawing may ask for: the layout's memory grows with their square.
MOST_NODES = 3000
_HTML = "text/html; charset=utf-8"
_TYPES = {
    "html": _HTML,
    "svg": "image/svg+xml",
    "mermaid": "text/vnd.mermaid; charset=utf-8",
    "dot": "text/vnd.graphviz; charset=utf-8",
}
_SAFE_HEADERS = {"X-Content-Type-Options": "nosniff"}

_GRAPH_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>__TITLE__ — rdfmem</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1em; }
.legend span { display: inline-block; margin: 0 1em .3em 0; }
.swatch { display: inline-block; width: .9em; height: .9em; border-radius: 50%;
          vertical-align: -.1em; margin-right: .3em; border: 1px solid #333; }
.line { display: inline-block; width: 1.6em; height: 0; border-top: 2px solid;
        vertical-align: .25em; margin-right: .3em; }
svg.picture { max-width: 100%; height: auto; border: 1px solid #ddd; background: #fff; }
</style></head>
<body>
<div><a href="./">rdfmem</a> · <form method="get" action="graph" style="display:inline">
<label>graph <select name="graph">__OPTIONS__</select></label>
<button type="submit">Draw</button></form></div>
<h1>__TITLE__</h1>
<p id="counts">__COUNTS__ · as <a href="__MERMAID__">Mermaid</a>, <a href="__DOT__">Graphviz
DOT</a>, <a href="__SVG__">SVG</a></p>
<div class="legend">__LEGEND__</div>
__SVG_ELEMENT__
<script>
addEventListener("load", () => {
  document.documentElement.dataset.loadedMs = String(Math.round(performance.now()));
});
</script>
</body></html>
"""


def _legend(picture: Picture) -> str:
    parts = []
    for kind, colour in colours(n.kind for n in picture.nodes).items():
        parts.append(
            f'<span class="kind"><i class="swatch" style="background:{colour}"></i>'
            f"{html.escape(kind)}</span>"
        )
    for status in sorted({n.status for n in picture.nodes} - {"", "active"}):
        stroke, width, dash, opacity = STATUS_STYLE[status]
        line = "dashed" if dash else "solid"
        parts.append(
            f'<span class="status"><i class="swatch" style="border:{width}px {line} {stroke};'
            f'opacity:{opacity}"></i>{html.escape(status)}</span>'
        )
    for label, colour in colours(e.label for e in picture.edges).items():
        parts.append(
            f'<span class="edge-type"><i class="line" style="border-color:{colour}"></i>'
            f"{html.escape(label)}</span>"
        )
    return " ".join(parts)


def graph_page(picture: Picture, graphs: list[str]) -> str:
    """The HTML page showing ``picture``, with a choice of ``graphs`` to draw instead."""
    options = "".join(
        f'<option value="{html.escape(g)}"{" selected" if g == picture.graph else ""}>'
        f"{html.escape(g)}</option>"
        for g in graphs
    )
    counts = f"{len(picture.nodes)} nodes, {len(picture.edges)} edges"
    if picture.truncated:
        counts += " (the first ones only: raise max_nodes to draw more)"
    links = {
        f"__{fmt.upper()}__": html.escape(
            "graph?" + urlencode({"graph": picture.graph, "format": fmt})
        )
        for fmt in ("mermaid", "dot", "svg")
    }
    page = _GRAPH_PAGE.replace("__OPTIONS__", options).replace("__COUNTS__", counts)
    for key, value in links.items():
        page = page.replace(key, value)
    page = page.replace("__LEGEND__", _legend(picture))
    page = page.replace("__TITLE__", html.escape(picture.graph))
    return page.replace("__SVG_ELEMENT__", svg(picture))


def _chooser(graphs: list[str]) -> str:
    items = "\n".join(
        f'<li><a href="{html.escape("graph?" + urlencode({"graph": g}))}">{html.escape(g)}</a></li>'
        for g in graphs
    )
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>Graphs — rdfmem'
        "</title></head><body><h1>Graphs to draw</h1><ul>"
        + (items or "<li>no named graphs yet</li>")
        + '</ul><p><a href="./">rdfmem</a></p></body></html>'
    )


def _max_nodes(given: list[tuple[str, str]]) -> int:
    raw = one(given, "max_nodes")
    if raw is None or raw == "":
        return MAX_NODES
    if not raw.isdigit() or not 1 <= int(raw) <= MOST_NODES:
        raise HttpError(400, f"max_nodes must be an integer from 1 to {MOST_NODES}, not {raw!r}")
    return int(raw)


def _drawn(store: Any, graph: str, fmt: str, limit: int) -> Answer:
    try:
        picture = read_picture(store, graph, max_nodes=limit)
    except RdfMemError as exc:
        raise HttpError(400, str(exc)) from exc
    graphs = read_graphs(store)
    if not picture.nodes and graph not in graphs:
        listed = ", ".join(graphs) or "none"
        raise HttpError(404, f"no graph {graph} in this store; its graphs: {listed}")
    if fmt == "svg":
        body = svg(picture)
    elif fmt == "mermaid":
        body = mermaid(picture)
    elif fmt == "dot":
        body = dot(picture)
    else:
        body = graph_page(picture, graphs)
    return Answer(body.encode("utf-8"), _TYPES[fmt])


class GraphView:
    """The handlers of ``/`` and ``/graph`` over one endpoint's store and workers."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint

    async def page(self, request: Request) -> Response:
        """``GET /``: the query page, with the values the store holds offered."""
        try:
            shown = one_or_first(query_pairs(request), "query")
            store, named = self.endpoint.store, list_named_queries()
            answer = await self.endpoint.runner.run(
                lambda cancel: Answer(
                    query_page(named, query=shown, choices=read_choices(store)).encode("utf-8"),
                    _HTML,
                )
            )
            return Response(answer.body, 200, _SAFE_HEADERS, media_type=answer.content_type)
        except HttpError as exc:
            return error_response(exc)

    async def graph(self, request: Request) -> Response:
        """``GET /graph``: one graph drawn (see the module docstring)."""
        try:
            given = query_pairs(request)
            graph = one(given, "graph")
            fmt = one(given, "format") or "html"
            if fmt not in _TYPES:
                raise HttpError(400, f"format is one of {', '.join(_TYPES)}, not {fmt!r}")
            limit = _max_nodes(given)
            store = self.endpoint.store
            if not graph:
                answer = await self.endpoint.runner.run(
                    lambda cancel: Answer(_chooser(read_graphs(store)).encode(), _HTML)
                )
            else:
                answer = await self.endpoint.runner.run(
                    lambda cancel: _drawn(store, graph, fmt, limit)
                )
            return Response(answer.body, 200, _SAFE_HEADERS, media_type=answer.content_type)
        except HttpError as exc:
            return error_response(exc)


def page_routes(endpoint: Endpoint) -> list[tuple[str, _Handler, list[str]]]:
    """``/`` (the query page with the store's values offered) and ``/graph``, as
    ``(path, handler, methods)`` in the form of ``app.py``'s list of routes."""
    view = GraphView(endpoint)
    return [("/", view.page, ["GET"]), ("/graph", view.graph, ["GET"])]
