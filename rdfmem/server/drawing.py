"""A ``Picture`` drawn: SVG laid out here (``layout.py``), or Mermaid and Graphviz DOT text for
tools that lay out on their own.

Every drawing says the same things: a node's fill is its kind (goal, decision, an entity
type, memory, topic …), its outline its status (``completed`` a thick green outline,
``superseded`` dashed and faded, ``rejected`` dashed red), an edge's colour and label its type.

>>> from rdfmem.server.picture import Edge, Node, Picture
>>> p = Picture("urn:g", [Node("urn:a", "Ship it", "goal"), Node("urn:b", 'Say "hi"', "option",
...     "superseded")], [Edge("urn:a", "urn:b", "leads_to")])
>>> print(mermaid(p).splitlines()[2])
  n1["Say #quot;hi#quot;"]:::k1
>>> 'n0 -> n1 [label="leads_to"' in dot(p)
True
>>> svg(p).count('class="node"'), svg(p).count('class="edge"')
(2, 1)
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable

from rdfmem.server.layout import layout
from rdfmem.server.picture import Picture

__all__ = ["STATUS_STYLE", "colours", "dot", "mermaid", "svg"]

#: Colours given to kinds and edge types, in order of first sight (sorted by name).
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
#: How each status outlines a node: (stroke, width, dash, opacity).
STATUS_STYLE: dict[str, tuple[str, float, str, float]] = {
    "": ("#333333", 1.2, "", 1.0),
    "active": ("#333333", 1.2, "", 1.0),
    "completed": ("#2a9d4b", 3.0, "", 1.0),
    "superseded": ("#888888", 1.5, "4 3", 0.45),
    "rejected": ("#c0392b", 1.5, "4 3", 0.6),
}
#: Labels are drawn up to this many nodes; beyond, a node says its label when pointed at.
LABELLED_NODES = 300
#: Edge labels are drawn up to this many edges.
LABELLED_EDGES = 150


def colours(names: Iterable[str]) -> dict[str, str]:
    """A colour for each name, the same for the same set of names."""
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(sorted(set(names)))}


def _short(text: str, width: int = 28) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def svg(picture: Picture) -> str:
    """The picture as one SVG element, laid out by ``layout``: each node a
    ``<g class="node">`` (a circle, its label, a ``<title>`` shown when pointed at) and each
    edge a ``<g class="edge">`` (a line with an arrow, its type)."""
    nodes, edges = picture.nodes, picture.edges
    index = {node.key: i for i, node in enumerate(nodes)}
    pairs = [(index[e.source], index[e.target]) for e in edges]
    n = len(nodes)
    side = int(min(6000, max(640, 90 * n**0.5)))
    margin = 90
    points = layout(n, pairs) * (side - 2 * margin) + margin
    fills = colours(node.kind for node in nodes)
    strokes = colours(edge.label for edge in edges)
    radius = 9 if n <= LABELLED_NODES else 6
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="picture" viewBox="0 0 {side} {side}" '
        f'width="{side}" height="{side}" data-nodes="{n}" data-edges="{len(edges)}" '
        'font-family="system-ui, sans-serif" font-size="11">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="context-stroke"/></marker></defs>',
        '<g class="edges">',
    ]
    for edge, (a, b) in zip(edges, pairs, strict=True):
        (x1, y1), (x2, y2) = points[a], points[b]
        dx, dy = x2 - x1, y2 - y1
        length = max((dx * dx + dy * dy) ** 0.5, 1e-9)
        # Stop at the circles' edge, so the arrow shows.
        sx, sy = x1 + dx / length * radius, y1 + dy / length * radius
        ex, ey = x2 - dx / length * (radius + 1), y2 - dy / length * (radius + 1)
        colour = strokes[edge.label]
        label = _esc(edge.label)
        out.append(
            f'<g class="edge" data-type="{label}"><line x1="{sx:.1f}" y1="{sy:.1f}" '
            f'x2="{ex:.1f}" y2="{ey:.1f}" stroke="{colour}" stroke-width="1.3" '
            f'marker-end="url(#arrow)"/><title>{_esc(nodes[a].label)} → {label} → '
            f"{_esc(nodes[b].label)}</title>"
        )
        if len(edges) <= LABELLED_EDGES and edge.label:
            out.append(
                f'<text x="{(x1 + x2) / 2:.1f}" y="{(y1 + y2) / 2 - 3:.1f}" fill="{colour}" '
                f'text-anchor="middle" font-size="9">{label}</text>'
            )
        out.append("</g>")
    out.append('</g><g class="nodes">')
    for node, (x, y) in zip(nodes, points, strict=True):
        stroke, width, dash, opacity = STATUS_STYLE.get(node.status, STATUS_STYLE[""])
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        tip = _esc(node.label + (f"\n{node.title}" if node.title else ""))
        status = f" ({node.status})" if node.status else ""
        out.append(
            f'<g class="node" data-key="{_esc(node.key)}" data-kind="{_esc(node.kind)}" '
            f'data-status="{_esc(node.status)}" opacity="{opacity}"><circle cx="{x:.1f}" '
            f'cy="{y:.1f}" r="{radius}" fill="{fills[node.kind]}" stroke="{stroke}" '
            f'stroke-width="{width}"{dashed}/><title>{tip}\n{_esc(node.kind)}{status}</title>'
        )
        if n <= LABELLED_NODES:
            out.append(
                f'<text x="{x:.1f}" y="{y + radius + 11:.1f}" text-anchor="middle">'
                f"{_esc(_short(node.label))}</text>"
            )
        out.append("</g>")
    out.append("</g></svg>")
    return "\n".join(out)


def _mermaid_text(text: str) -> str:
    """Text safe inside a quoted Mermaid label (entity codes for what would end it)."""
    text = " ".join(text.split())
    for char, code in (("#", "#35;"), ('"', "#quot;"), ("<", "#lt;"), (">", "#gt;")):
        text = text.replace(char, code)
    return text.replace("|", "#124;")


def mermaid(picture: Picture) -> str:
    """The picture as a Mermaid ``flowchart``: a class per kind and per status."""
    index = {node.key: f"n{i}" for i, node in enumerate(picture.nodes)}
    kinds = {kind: f"k{i}" for i, kind in enumerate(sorted({n.kind for n in picture.nodes}))}
    lines = ["flowchart LR"]
    for node in picture.nodes:
        label = _mermaid_text(_short(node.label, 60))
        lines.append(f'  {index[node.key]}["{label}"]:::{kinds[node.kind]}')
    for edge in picture.edges:
        a, b = index[edge.source], index[edge.target]
        lines.append(
            f'  {a} -->|"{_mermaid_text(edge.label)}"| {b}' if edge.label else f"  {a} --> {b}"
        )
    fills = colours(kinds)
    for kind, name in kinds.items():
        lines.append(f"  %% {name}: {_mermaid_text(kind)}")
        lines.append(f"  classDef {name} fill:{fills[kind]},color:#111")
    by_status: dict[str, list[str]] = {}
    for node in picture.nodes:
        if node.status not in ("", "active"):
            by_status.setdefault(node.status, []).append(index[node.key])
    for status, keys in sorted(by_status.items()):
        stroke, width, dash, opacity = STATUS_STYLE.get(status, STATUS_STYLE[""])
        style = f"stroke:{stroke},stroke-width:{width}px,opacity:{opacity}"
        if dash:
            style += f",stroke-dasharray:{dash}"
        lines.append(f"  classDef {status} {style}")
        lines.append(f"  class {','.join(keys)} {status}")
    return "\n".join(lines) + "\n"


_DOT_ESCAPE = re.compile(r'(["\\])')


def _dot_text(text: str) -> str:
    return _DOT_ESCAPE.sub(r"\\\1", text).replace("\n", "\\n")


def dot(picture: Picture) -> str:
    """The picture as a Graphviz ``digraph`` (``dot -Tsvg`` draws it)."""
    fills = colours(node.kind for node in picture.nodes)
    strokes = colours(edge.label for edge in picture.edges)
    index = {node.key: f"n{i}" for i, node in enumerate(picture.nodes)}
    lines = [
        f'digraph "{_dot_text(picture.graph)}" {{',
        '  rankdir=LR; node [shape=box, style="rounded,filled", fontname="sans-serif"];',
        '  edge [fontname="sans-serif", fontsize=10];',
    ]
    for node in picture.nodes:
        stroke, width, dash, _ = STATUS_STYLE.get(node.status, STATUS_STYLE[""])
        style = "rounded,filled" + (",dashed" if dash else "")
        tooltip = _dot_text(node.title or node.key)
        lines.append(
            f'  {index[node.key]} [label="{_dot_text(_short(node.label, 60))}", '
            f'fillcolor="{fills[node.kind]}", color="{stroke}", penwidth={width}, '
            f'style="{style}", tooltip="{tooltip}", class="{_dot_text(node.kind)}"];'
        )
    for edge in picture.edges:
        a, b = index[edge.source], index[edge.target]
        lines.append(
            f'  {a} -> {b} [label="{_dot_text(edge.label)}", color="{strokes[edge.label]}"];'
        )
    lines.append("}")
    return "\n".join(lines) + "\n"
