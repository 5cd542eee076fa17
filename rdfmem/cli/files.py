"""``rdfmem export``, ``load``, ``validate`` and ``stats``: the store as RDF files."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from pyoxigraph import (
    DefaultGraph,
    Literal,
    NamedNode,
    Quad,
    RdfFormat,
    Triple,
    parse,
    serialize,
)

from rdfmem.cli.group import cli, graph_option, store_argument
from rdfmem.cli.render import format_table, short
from rdfmem.cli.stores import store_session
from rdfmem.core.errors import FormatError, RdfMemError
from rdfmem.core.formats import check_rdf, rdf_format
from rdfmem.core.ontology import PREFIXES, RDFMEM, ontology_path
from rdfmem.core.results import SelectResult
from rdfmem.domain.embeddings import FLOAT32_VECTOR
from rdfmem.domain.reembed import embed_missing
from rdfmem.store.history import HISTORY_PREFIX
from rdfmem.store.rdfstore import RdfStore

__all__ = ["export", "load", "stats", "validate"]

_PROGRESS_BYTES = 4 << 20
_PROGRESS_TRIPLES = 200_000


#: The formats ``export`` draws a graph in rather than writing its triples.
DRAWINGS = ("mermaid", "dot")


@cli.command()
@store_argument
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="File.")
@click.option(
    "--format",
    "fmt",
    help="turtle, trig, ntriples, nquads, jsonld, rdfxml …; or mermaid, dot (a drawing of --graph)",
)
@graph_option
@click.option(
    "--with-vectors",
    is_flag=True,
    help="Keep the embedding vectors (left out by default: rdfmem load makes them again).",
)
def export(
    store: str, output: Path | None, fmt: str | None, graph: str | None, with_vectors: bool
) -> None:
    """Write STORE as RDF: every graph in a dataset format (TriG, N-Quads, JSON-LD; TriG by
    default), one graph in a triple format (Turtle, N-Triples, RDF/XML); or draw one graph
    as a Mermaid flowchart or Graphviz DOT (the decision graph with its edge types and
    statuses, the knowledge graph, a memory scope …, as /graph of rdfmem serve draws it).

    Embedding vectors (rm:float32Vector literals) are left out unless --with-vectors:
    they are most of a memory's bytes and nothing a person reads.

    \b
    Examples:
      rdfmem export agent.db -o memory.trig
      rdfmem export agent.db --format turtle --graph urn:rdfmem:graph:store
      rdfmem export agent.db --format mermaid --graph urn:rdfmem:graph:decisions
    """
    suffix = output.suffix[1:] if output is not None else ""
    drawing = fmt if fmt in DRAWINGS else suffix if fmt is None and suffix in DRAWINGS else None
    if drawing is not None:
        _draw(store, output, drawing, graph)
        return
    try:
        chosen = rdf_format(fmt or (output.name if output and output.suffix else "trig"))
    except FormatError as exc:
        raise click.ClickException(f"{exc}, or mermaid or dot to draw a graph") from exc
    if graph is not None and chosen.supports_datasets:
        chosen = RdfFormat.TURTLE if fmt is None else chosen
    with store_session(store) as opened:
        if graph is None and not chosen.supports_datasets:
            # A triple format holds one graph: never write a "backup" that leaves out the
            # named graphs (an agent's memory lives in them), and never count them as written.
            named = sum(n for name, n in _counts(opened) if name is not None)
            if named:
                raise click.ClickException(
                    f"{chosen.name} holds one graph, and this store has {named} triples in "
                    "named graphs that it would leave out: use --format trig or nquads (or a "
                    ".trig / .nq file) to write every graph, or --graph IRI to write one"
                )
        if output is None:
            data, _ = _export_bytes(opened, chosen, graph, with_vectors)
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
            return
        count = _export_file(opened, chosen, graph, output, with_vectors)
    click.echo(f"Wrote {count} triples to {output}", err=True)


def _draw(store: str, output: Path | None, kind: str, graph: str | None) -> None:
    from rdfmem.server.drawing import dot, mermaid
    from rdfmem.server.picture import MAX_NODES, read_picture

    with store_session(store) as opened:
        if graph is None:
            names = ", ".join(name for name, _ in _counts(opened) if name is not None)
            raise click.ClickException(
                f"--format {kind} draws one graph: give --graph IRI (this store's graphs: "
                f"{names or 'none'})"
            )
        try:
            picture = read_picture(opened, graph)
        except RdfMemError as exc:
            raise click.ClickException(str(exc)) from exc
    text = mermaid(picture) if kind == "mermaid" else dot(picture)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        click.echo(
            f"Drew {len(picture.nodes)} nodes and {len(picture.edges)} edges to {output}", err=True
        )
    if picture.truncated:
        click.echo(f"Only the first {MAX_NODES} nodes were drawn.", err=True)


def _is_vector(quad: Quad) -> bool:
    obj = quad.object
    return isinstance(obj, Literal) and obj.datatype == FLOAT32_VECTOR


def _export_bytes(
    store: RdfStore, fmt: RdfFormat, graph: str | None, vectors: bool = True
) -> tuple[bytes, int | None]:
    """The export, and how many triples it holds when they were counted (without vectors)."""
    if vectors:
        if graph is None:
            return store.export(fmt).encode("utf-8"), None
        if fmt.supports_datasets:
            return bytes(serialize(_graph_quads(store, graph), None, fmt) or b""), None
        return store.export(fmt, graph=graph).encode("utf-8"), None
    if graph is not None:
        quads = _graph_quads(store, graph)
    elif fmt.supports_datasets:
        quads = list(store.triples(None))
    else:
        quads = list(store.triples(DefaultGraph()))
    kept = [q for q in quads if not _is_vector(q)]
    items: list[Quad] | list[Triple] = kept
    if not fmt.supports_datasets:
        items = [Triple(q.subject, q.predicate, q.object) for q in kept]
    data = serialize(items, None, fmt, prefixes=dict(store.prefixes))
    return bytes(data or b""), len(kept)


def _graph_quads(store: RdfStore, graph: str) -> list[Quad]:
    name = NamedNode(graph)
    return [Quad(q.subject, q.predicate, q.object, name) for q in store.triples(name)]


def _counts(store: RdfStore) -> list[tuple[str | None, int]]:
    rows = store.query(
        "SELECT ?g (COUNT(*) AS ?n) WHERE { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o } } } "
        "GROUP BY ?g ORDER BY ?g"
    )
    assert isinstance(rows, SelectResult)
    return [(r["g"].value if "g" in r else None, int(r["n"].value)) for r in rows]


def _export_file(
    store: RdfStore, fmt: RdfFormat, graph: str | None, output: Path, vectors: bool = True
) -> int:
    """Graph by graph, with a progress bar, when the format can be written in pieces."""
    counts = _counts(store)
    if graph is not None:
        total = dict(counts).get(graph, 0)
    elif fmt.supports_datasets:
        total = sum(n for _, n in counts)
    else:  # a triple format: the default graph alone
        total = dict(counts).get(None, 0)
    piecewise = fmt in (RdfFormat.TRIG, RdfFormat.N_QUADS) and graph is None
    if not piecewise or total < _PROGRESS_TRIPLES:
        data, written = _export_bytes(store, fmt, graph, vectors)
        output.write_bytes(data)
        return total if written is None else written
    written = 0
    with output.open("wb") as out, click.progressbar(length=total, label="Exporting") as bar:
        for name, n in counts:
            if name is None:
                quads = list(store.triples(DefaultGraph()))
            else:
                quads = _graph_quads(store, name)
            if not vectors:
                quads = [q for q in quads if not _is_vector(q)]
            serialize(quads, out, fmt, prefixes=dict(store.prefixes))
            written += len(quads)
            bar.update(n)
    return written


class _Progress(io.RawIOBase):
    """A binary file that moves a progress bar as it is read."""

    def __init__(self, path: Path, bar: Any) -> None:
        super().__init__()
        self._file = path.open("rb")
        self._bar = bar

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._file.readinto(buffer)
        self._bar.update(n)
        return n

    def close(self) -> None:
        self._file.close()
        super().close()


def _check_with_progress(path: Path, fmt: RdfFormat, base: str | None) -> int:
    """Parse ``path`` once with a progress bar, so bad input is reported before any write."""
    size = path.stat().st_size
    count = 0
    with click.progressbar(length=size, label=f"Reading {path.name}") as bar:
        source = io.BufferedReader(_Progress(path, bar), 1 << 16)
        try:
            for _ in parse(source, fmt, base_iri=base):
                count += 1
        except (SyntaxError, ValueError) as exc:
            raise FormatError(f"{path}: cannot parse {fmt.name}: {exc}") from exc
        finally:
            source.close()
    return count


@cli.command()
@store_argument
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--format", "fmt", help="RDF format (default: from each file's extension).")
@graph_option
@click.option("--base", metavar="IRI", help="Base IRI for relative IRIs.")
@click.option(
    "--progress/--no-progress",
    default=None,
    help=f"Show a progress bar (default: for files over {_PROGRESS_BYTES >> 20} MiB).",
)
@click.option(
    "--embed/--no-embed",
    default=True,
    help="Make vectors for memories and generalisations loaded without any (default: on).",
)
def load(
    store: str,
    files: tuple[Path, ...],
    fmt: str | None,
    graph: str | None,
    base: str | None,
    progress: bool | None,
    embed: bool,
) -> None:
    """Load RDF FILES into STORE (triples into --graph, or the default graph). A file that
    does not parse is not loaded at all. Memories and generalisations that come without
    vectors (rdfmem export leaves them out) get them made again by the default embedder.

    \b
    Example:
      rdfmem load agent.db memory.trig notes.ttl
    """
    with store_session(store, create=True) as opened:
        total = 0
        for path in files:
            chosen = rdf_format(fmt or path.name)
            big = path.stat().st_size >= _PROGRESS_BYTES
            if progress or (progress is None and big):
                if chosen == RdfFormat.RDF_XML:  # entity bombs, before any parse
                    check_rdf(path.read_bytes(), chosen)
                _check_with_progress(path, chosen, base)
            n = opened.load(path=path, format=chosen, graph=graph, base_iri=base)
            click.echo(f"{path}: {n} triples", err=True)
            total += n
        made = embed_missing(opened) if embed else 0
    if len(files) > 1:
        click.echo(f"Loaded {total} triples from {len(files)} files", err=True)
    if made:
        click.echo(f"Made vectors for {made} memories and generalisations without one", err=True)


@cli.command()
@store_argument
@click.option(
    "--shapes",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="SHACL shapes (default: rdfmem's shapes.ttl).",
)
def validate(store: str, shapes: Path | None) -> None:
    """Check STORE against SHACL shapes (rdfmem's own by default); exit 1 on violations.

    \b
    Example:
      rdfmem validate agent.db
    """
    try:
        import pyshacl  # noqa: F401
    except ImportError as exc:
        raise click.ClickException("validate needs pyshacl: pip install 'rdfmem[shacl]'") from exc
    shapes_path = shapes or ontology_path() / "shapes.ttl"
    with store_session(store) as opened:
        graphs = [
            (name or "(default graph)", opened.export("ntriples", graph=name))
            for name, _ in _counts(opened)
        ]
    problems, checked = _shacl(graphs, shapes_path)
    if not problems:
        click.echo(f"Conforms to {shapes_path.name}: {checked} triples checked, no violations.")
        return
    for problem in problems:
        click.echo(problem)
        click.echo()
    raise click.ClickException(f"{len(problems)} violation(s) of {shapes_path.name}")


_SH = "http://www.w3.org/ns/shacl#"
_RESULTS = """PREFIX sh: <http://www.w3.org/ns/shacl#>
SELECT ?severity ?focus ?path ?value ?message ?shape WHERE {
  ?r a sh:ValidationResult ; sh:focusNode ?focus ; sh:resultSeverity ?severity .
  OPTIONAL { ?r sh:resultPath ?path } OPTIONAL { ?r sh:value ?value }
  OPTIONAL { ?r sh:resultMessage ?message } OPTIONAL { ?r sh:sourceShape ?shape }
} ORDER BY ?focus ?path"""


def _history_shapes(shapes: Any) -> Any:
    """The shapes a history graph is held to: ``rm:ActivityShape`` and ``rm:VersionShape``
    only (a version copies its resource's properties, which the data shapes would judge as
    data)."""
    import rdflib

    keep = {rdflib.URIRef(RDFMEM + "ActivityShape"), rdflib.URIRef(RDFMEM + "VersionShape")}
    targets = {
        rdflib.URIRef(_SH + t)
        for t in ("targetClass", "targetSubjectsOf", "targetObjectsOf", "targetNode")
    }
    out = rdflib.Graph()
    for s, p, o in shapes:
        if p not in targets or s in keep:
            out.add((s, p, o))
    return out


def _shacl(graphs: list[tuple[str, str]], shapes: Path) -> tuple[list[str], int]:
    """Readable SHACL violations of each graph (N-Triples text, validated on its own), and
    how many triples were checked."""
    import pyshacl
    import rdflib

    shapes_graph = rdflib.Graph().parse(shapes)
    history_shapes = _history_shapes(shapes_graph)
    names = rdflib.Graph()
    for prefix, iri in PREFIXES.items():
        names.bind(prefix, iri)
    problems = []
    checked = 0
    for graph_name, ntriples in graphs:
        data = rdflib.Graph().parse(data=ntriples, format="nt")
        checked += len(data)
        judge = history_shapes if graph_name.startswith(HISTORY_PREFIX) else shapes_graph
        _, results, _ = pyshacl.validate(data, shacl_graph=judge, inference="none")
        for row in results.query(_RESULTS):
            severity = str(row.severity).removeprefix(_SH)
            lines = [f"{severity} in {graph_name}: {row.message or 'shape not satisfied'}"]
            lines.append(f"  focus node: {row.focus.n3(names.namespace_manager)}")
            if row.path is not None:
                lines.append(f"  path:       {row.path.n3(names.namespace_manager)}")
            if row.value is not None:
                lines.append(f"  value:      {row.value.n3(names.namespace_manager)}")
            if isinstance(row.shape, rdflib.URIRef):
                lines.append(f"  shape:      {row.shape.n3(names.namespace_manager)}")
            problems.append("\n".join(lines))
    return problems, checked


@cli.command()
@store_argument
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
def stats(store: str, as_json: bool) -> None:
    """Triples per graph, keys per namespace and nodes per type in STORE.

    \b
    Example:
      rdfmem stats agent.db
    """
    with store_session(store) as opened:
        graphs = _counts(opened)
        keys = _keys_per_namespace(opened)
        types = _nodes_per_type(opened)
    if as_json:
        doc = {
            "graphs": [{"graph": g, "triples": n} for g, n in graphs],
            "keys": [{"namespace": ns, "keys": n} for ns, n in keys],
            "types": [{"type": t, "nodes": n} for t, n in types],
        }
        click.echo(json.dumps(doc, indent=2))
        return
    click.secho("Triples per graph", bold=True)
    click.echo(_plain_table(["graph", "triples"], [(g or "(default graph)", n) for g, n in graphs]))
    click.secho("\nKeys per namespace", bold=True)
    click.echo(_plain_table(["namespace", "keys"], [(ns or "(none)", n) for ns, n in keys]))
    click.secho("\nNodes per type", bold=True)
    click.echo(_plain_table(["type", "nodes"], types))


def _plain_table(header: list[str], rows: Sequence[tuple[Any, ...]]) -> str:
    as_rows = [{h: Literal(str(v)) for h, v in zip(header, row, strict=True)} for row in rows]
    return format_table(header, as_rows, prefixes={})


def _keys_per_namespace(store: RdfStore) -> list[tuple[str, int]]:
    from urllib.parse import unquote

    rows = store.query(
        "SELECT ?s ?g ?p WHERE { GRAPH ?g { ?s ?p ?o } }",
        bindings={"g": NamedNode(store.graph), "p": NamedNode(store.value_predicate)},
    )
    counts: dict[str, int] = {}
    for row in rows:  # type: ignore[union-attr]
        iri = row["s"].value
        if not iri.startswith(store.subject_prefix):
            continue
        rest = iri[len(store.subject_prefix) :]
        namespace = unquote(rest.split(":", 1)[0]) if ":" in rest else ""
        counts[namespace] = counts.get(namespace, 0) + 1
    return sorted(counts.items())


def _nodes_per_type(store: RdfStore) -> list[tuple[str, int]]:
    rows = store.query(
        "SELECT ?type (COUNT(DISTINCT ?s) AS ?n) WHERE { { ?s a ?type } UNION "
        "{ GRAPH ?g { ?s a ?type } } } GROUP BY ?type ORDER BY DESC(?n) ?type"
    )
    assert isinstance(rows, SelectResult)
    return [(short(r["type"], store.prefixes), int(r["n"].value)) for r in rows]
