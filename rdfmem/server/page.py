"""The service description (``GET /sparql`` without a query) and the HTML query page at ``/``."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from urllib.parse import urlencode

from pyoxigraph import BlankNode, Literal, NamedNode, Triple

from rdfmem.server.choices import Choices
from rdfmem.server.named import NamedQuery
from rdfmem.server.negotiate import GRAPH_OFFERS, RESULTS_OFFERS

__all__ = ["named_index", "query_page", "service_description"]

SD = "http://www.w3.org/ns/sparql-service-description#"
_RDF_TYPE = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")
_TITLE = NamedNode("http://purl.org/dc/terms/title")


def service_description(endpoint: str, *, allow_update: bool) -> list[Triple]:
    """SPARQL 1.1 Service Description triples for the endpoint at ``endpoint``.

    >>> triples = service_description("http://127.0.0.1:7879/sparql", allow_update=False)
    >>> any(t.object == NamedNode(SD + "SPARQL11Query") for t in triples)
    True
    """
    service = NamedNode(endpoint)
    dataset, graph = BlankNode(), BlankNode()
    triples = [
        Triple(service, _RDF_TYPE, NamedNode(SD + "Service")),
        Triple(service, NamedNode(SD + "endpoint"), service),
        Triple(service, _TITLE, Literal("rdfmem SPARQL endpoint")),
        Triple(service, NamedNode(SD + "supportedLanguage"), NamedNode(SD + "SPARQL11Query")),
        Triple(service, NamedNode(SD + "defaultDataset"), dataset),
        Triple(dataset, _RDF_TYPE, NamedNode(SD + "Dataset")),
        Triple(dataset, NamedNode(SD + "defaultGraph"), graph),
        Triple(graph, _RDF_TYPE, NamedNode(SD + "Graph")),
    ]
    if allow_update:
        triples.append(
            Triple(service, NamedNode(SD + "supportedLanguage"), NamedNode(SD + "SPARQL11Update"))
        )
    formats = {offer.format.iri for offer in RESULTS_OFFERS + GRAPH_OFFERS}
    for iri in sorted(formats):
        triples.append(Triple(service, NamedNode(SD + "resultFormat"), NamedNode(iri)))
    return triples


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>rdfmem SPARQL endpoint</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body { font: 15px/1.4 system-ui, sans-serif; margin: 1.5em auto; max-width: 70em; padding: 0 1em; }
textarea { width: 100%; height: 12em; font: 13px monospace; box-sizing: border-box; }
table { border-collapse: collapse; margin-top: 1em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } #status { color: #555; margin-left: 1em; }
pre { background: #f7f7f7; padding: .5em; overflow: auto; } code { font-size: 13px; }
ul.named li { margin-bottom: .6em; } form.named { margin: .2em 0 0 1em; font-size: 13px; }
form.named label { margin-right: .8em; } form.named select { max-width: 22em; }
</style></head>
<body>
<h1>rdfmem SPARQL endpoint</h1>
<p>SPARQL 1.1 Protocol at <code>/sparql</code> (<a href="sparql">service description</a>);
Graph Store reads at <code>/store?default</code> or <code>/store?graph=IRI</code>;
<a href="queries">named queries</a> at <code>/queries/NAME?param=value</code>;
<a href="health">health</a>.</p>
<form id="form"><textarea id="query" name="query" spellcheck="false">__QUERY__</textarea>
<p><button type="submit">Run query</button><span id="status"></span></p></form>
<div id="out"></div>
<h2>Pictures</h2>
<p>Each named graph drawn (<code>/graph?graph=IRI</code>; also as Mermaid or Graphviz with
<code>&amp;format=mermaid</code> or <code>dot</code>):</p>
<ul>__GRAPHS__</ul>
<h2>Named queries</h2>
<p>Each link runs the query with the values shown; change them in its form.</p>
<ul class="named">__NAMED__</ul>
<script>
const form = document.getElementById("form"), out = document.getElementById("out"),
      status = document.getElementById("status");
function cell(term) {
  if (!term) return "";
  if (term.type === "uri") return "<" + term.value + ">";
  if (term.type === "bnode") return "_:" + term.value;
  let text = JSON.stringify(term.value);
  if (term["xml:lang"]) text += "@" + term["xml:lang"];
  else if (term.datatype) text += "^^<" + term.datatype + ">";
  return text;
}
form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const shared = new URL(location.href);
  shared.searchParams.set("query", document.getElementById("query").value);
  history.replaceState(null, "", shared);
  out.replaceChildren(); status.textContent = "running…";
  const started = performance.now();
  const response = await fetch("sparql", {
    method: "POST",
    headers: {"Content-Type": "application/sparql-query",
              "Accept": "application/sparql-results+json, text/turtle;q=0.9"},
    body: document.getElementById("query").value});
  const text = await response.text();
  const ms = Math.round(performance.now() - started);
  if (!response.ok) { status.textContent = response.status + " (" + ms + " ms)";
    const pre = document.createElement("pre"); pre.textContent = text; out.append(pre); return; }
  if (!(response.headers.get("Content-Type") || "").includes("json")) {
    status.textContent = ms + " ms";
    const pre = document.createElement("pre"); pre.textContent = text; out.append(pre); return; }
  const data = JSON.parse(text);
  if ("boolean" in data) {
    status.textContent = ms + " ms"; out.textContent = String(data.boolean); return; }
  const table = document.createElement("table"), head = table.insertRow();
  for (const v of data.head.vars) {
    const th = document.createElement("th"); th.textContent = "?" + v; head.append(th); }
  for (const b of data.results.bindings) { const row = table.insertRow();
    for (const v of data.head.vars) row.insertCell().textContent = cell(b[v]); }
  status.textContent = data.results.bindings.length + " rows, " + ms + " ms";
  out.append(table);
});
if (__AUTORUN__) form.requestSubmit();
</script>
</body></html>
"""

_DEFAULT_QUERY = """SELECT ?g (COUNT(*) AS ?triples)
WHERE { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o } } }
GROUP BY ?g ORDER BY DESC(?triples)"""


def query_page(
    named: Sequence[NamedQuery],
    *,
    query: str | None = None,
    choices: Choices | None = None,
) -> str:
    """The HTML query page: a form posting to ``/sparql``, the named queries and the
    pictures of the named graphs. Given a ``query`` (the page's own ``?query=``, a shared
    link), the form holds it and runs it.

    Each named query has a link with its defaults filled and a small form for its
    parameters, offering the values of ``choices`` (the ids, levels, topics and graphs of
    the store). A query with a required parameter that nothing fills gets a form and no
    link, so every link on the page answers.

    >>> "<textarea" in query_page([])
    True
    >>> "ASK {}" in query_page([], query="ASK {}")
    True
    """
    shown = query or _DEFAULT_QUERY
    found = choices or Choices()
    items = [_named_item(item, found) for item in named]
    listed = "\n".join(items) or "<li>none</li>"
    page = _PAGE.replace("__QUERY__", html.escape(shown))
    page = page.replace("__AUTORUN__", "true" if query else "false")
    page = page.replace("__GRAPHS__", _pictures(found.graphs))
    return page.replace("__NAMED__", listed)


def _summary(item: NamedQuery) -> str:
    """The first sentence of the query's leading comment, without its own name."""
    lines = []
    for line in item.text.splitlines():
        text = line.strip()
        if not text.startswith("#") or not text.lstrip("# ").strip():
            break
        lines.append(text.lstrip("#").strip())
    summary = " ".join(lines).removeprefix(f"{item.name}:").strip()
    cut = summary.find(". ")
    return summary if cut < 0 else summary[: cut + 1]


def _defaults(item: NamedQuery, found: Choices) -> dict[str, str] | None:
    """The values a link fills in: a default, else the first value offered (the last for
    ``to_id``, so a path has two ends); None when a required parameter has neither."""
    values: dict[str, str] = {}
    for p in item.params:
        offered = found.offered(p.name)
        if p.default is not None:
            values[p.name] = p.default
        elif p.required and offered:
            values[p.name] = offered[-1] if p.name == "to_id" else offered[0]
        elif p.required:
            return None
    if item.limit is not None:
        values["limit"] = str(item.limit)
    return values


def _field(name: str, datatype: str, chosen: str, offered: Sequence[str], required: bool) -> str:
    label = html.escape(name)
    if offered:
        options = [] if required else ['<option value="">(every one)</option>']
        for value in offered:
            mark = " selected" if value == chosen else ""
            shown = html.escape(value)
            options.append(f'<option value="{shown}"{mark}>{shown}</option>')
        return f'<label>{label} <select name="{label}">{"".join(options)}</select></label>'
    kind = "number" if datatype in ("integer", "decimal", "double") else "text"
    need = " required" if required else ""
    value = html.escape(chosen)
    return f'<label>{label} <input name="{label}" type="{kind}" value="{value}"{need}></label>'


def _named_item(item: NamedQuery, found: Choices) -> str:
    name = html.escape(item.name)
    defaults = _defaults(item, found)
    if defaults is None:
        head = f"<b>{name}</b> <i>(nothing in this store to ask about yet)</i>"
    else:
        params = urlencode(defaults)
        href = html.escape(f"queries/{item.name}" + (f"?{params}" if params else ""))
        head = f'<a href="{href}">{name}</a>'
    fields = []
    for p in item.params:
        offered = found.offered(p.name)
        chosen = (defaults or {}).get(p.name, p.default or "")
        fields.append(_field(p.name, p.datatype, chosen, offered, p.required))
    if item.limit is not None:
        fields.append(_field("limit", "integer", str(item.limit), (), False))
    form = (
        f'<form class="named" method="get" action="queries/{name}">'
        + " ".join(fields)
        + ' <button type="submit">Run</button></form>'
    )
    return f"<li>{head} — {html.escape(_summary(item))}{form}</li>"


def _pictures(graphs: Sequence[str]) -> str:
    if not graphs:
        return "<li>no named graphs yet</li>"
    return "\n".join(
        f'<li><a href="{html.escape("graph?" + urlencode({"graph": g}))}">{html.escape(g)}</a></li>'
        for g in graphs
    )


def named_index(named: Sequence[NamedQuery], base: str) -> bytes:
    """``GET /queries``: every named query with its parameters, as JSON."""
    doc = [
        {
            "name": q.name,
            "url": f"{base}/queries/{q.name}",
            "parameters": [p.describe() for p in q.params],
        }
        for q in named
    ]
    return json.dumps(doc, ensure_ascii=False, indent=2).encode("utf-8")
