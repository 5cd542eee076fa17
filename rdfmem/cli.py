"""``rdfmem``: the command line (also ``python -m rdfmem``). Thin commands over library calls.

STORE is a folder holding an on-disk Oxigraph store, ``:memory:`` for a fresh in-memory one,
or the URL of a SPARQL endpoint (``http://…``; reads, and updates where the server allows).
Errors print one line and exit with status 1; bad usage exits with status 2.
"""

from __future__ import annotations

import io
import json
import secrets
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click
from pyoxigraph import (
    BlankNode,
    DefaultGraph,
    Literal,
    NamedNode,
    Quad,
    RdfFormat,
    parse,
    serialize,
)

from .errors import FormatError, RdfMemError, StoreAlreadyOpen
from .formats import check_rdf, rdf_format, results_format
from .ontology import PREFIXES, ontology_path
from .results import GraphResult, SelectResult
from .store import RdfStore

__all__ = ["cli", "format_table", "main", "open_store"]

F = TypeVar("F", bound=Callable[..., Any])
_PROGRESS_BYTES = 4 << 20
_PROGRESS_TRIPLES = 200_000


# -- opening stores -----------------------------------------------------------------------


def open_store(spec: str, *, create: bool = False, token: str | None = None) -> RdfStore:
    """The store named on the command line.

    Raises:
        click.ClickException: no store there (and ``create`` is false), or it is held open by
            another process.
    """
    if spec == ":memory:":
        return RdfStore()
    if spec.startswith(("http://", "https://")):
        try:
            headers = {"Authorization": f"Bearer {token}"} if token else None
            remote: RdfStore = RdfStore.connect(spec, headers=headers)
            return remote
        except ImportError as exc:  # pragma: no cover - until rdfmem.remote ships
            raise click.ClickException(f"remote stores are not available: {exc}") from exc
    path = Path(spec)
    if not create and not path.exists():
        raise click.ClickException(
            f"no store at {spec} (give the folder of an on-disk store, :memory: or a URL)"
        )
    if path.exists() and not path.is_dir():
        raise click.ClickException(f"{spec} is a file, not the folder of an on-disk store")
    try:
        return RdfStore.open(path)
    except StoreAlreadyOpen as exc:
        raise click.ClickException(
            f"the store at {spec} is open in another process (an agent, or rdfmem serve); "
            "query that process's endpoint instead, e.g. "
            "rdfmem query http://127.0.0.1:7879/sparql 'ASK {}'"
        ) from exc


@contextmanager
def _store(spec: str, *, create: bool = False, token: str | None = None) -> Iterator[RdfStore]:
    store = open_store(spec, create=create, token=token)
    try:
        yield store
    except RdfMemError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        store.close()


def _text_arg(text: str | None, file: Path | None, what: str) -> str:
    if file is not None:
        if text is not None:
            raise click.UsageError(f"give the {what} as an argument or with --file, not both")
        return file.read_text(encoding="utf-8")
    if text is None or text == "-":
        if sys.stdin.isatty() and text is None:
            raise click.UsageError(f"give a {what} (an argument, --file FILE, or '-' for stdin)")
        return sys.stdin.read()
    return text


# -- rendering ----------------------------------------------------------------------------


def _short(term: object, prefixes: dict[str, str]) -> str:
    if isinstance(term, NamedNode):
        for name, iri in prefixes.items():
            if term.value.startswith(iri) and len(term.value) > len(iri):
                local = term.value[len(iri) :]
                plain = local.replace("-", "").replace("_", "").replace(":", "").replace(".", "")
                if plain.isalnum() and local[0].isalnum() and local[-1] != ".":
                    return f"{name}:{local}"
        return f"<{term.value}>"
    if isinstance(term, BlankNode):
        return f"_:{term.value}"
    if isinstance(term, Literal):
        return term.value
    return "" if term is None else str(term)


def format_table(
    variables: Sequence[str],
    rows: Sequence[dict[str, Any]],
    *,
    prefixes: dict[str, str] | None = None,
    width: int = 60,
) -> str:
    """Rows of terms as a plain text table: IRIs shortened with ``prefixes``, literals by
    their text, long cells cut at ``width`` characters.

    >>> print(format_table(["who", "n"], [{"who": NamedNode("urn:a"), "n": Literal(3)}]))
    who     | n
    --------+--
    <urn:a> | 3
    <BLANKLINE>
    (1 row)
    """
    names = PREFIXES if prefixes is None else prefixes
    cells = []
    for row in rows:
        line = []
        for var in variables:
            text = " ".join(_short(row.get(var), names).split())
            line.append(text if len(text) <= width else text[: width - 1] + "…")
        cells.append(line)
    widths = [max([len(v)] + [len(line[i]) for line in cells]) for i, v in enumerate(variables)]
    out = [" | ".join(v.ljust(w) for v, w in zip(variables, widths, strict=True)).rstrip()]
    out.append("-+-".join("-" * w for w in widths))
    out.extend(
        " | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells
    )
    out.append("")
    out.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return "\n".join(out)


def _write_result(result: Any, output: str, store: RdfStore) -> None:
    echo = click.echo
    if isinstance(result, bool):
        if output == "table":
            echo("true" if result else "false")
        elif output == "json":
            echo(json.dumps({"head": {}, "boolean": result}))
        else:
            echo("true" if result else "false")
        return
    if isinstance(result, GraphResult):
        fmt = "turtle" if output in ("table", "json") else output
        try:
            prefixes = store.prefixes if rdf_format(fmt) == RdfFormat.TURTLE else None
            data = result.serialize(rdf_format(fmt), prefixes=prefixes)
        except FormatError as exc:
            raise click.ClickException(f"{exc} (CONSTRUCT and DESCRIBE give triples)") from exc
        click.echo(data.decode("utf-8"), nl=False)
        return
    assert isinstance(result, SelectResult)
    if output == "table":
        echo(format_table(result.variables, list(result), prefixes=store.prefixes))
        return
    try:
        text = result.serialize(results_format(output)).decode("utf-8")
    except FormatError as exc:
        raise click.ClickException(f"{exc} (SELECT gives rows)") from exc
    click.echo(text, nl=not text.endswith("\n"))


# -- the commands -------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rdfmem")
def cli() -> None:
    """rdfmem: an AI agent's memory in RDF.

    Start with `rdfmem demo`, then serve or query what it built.
    """


def _store_argument(f: F) -> F:
    return click.argument("store", metavar="STORE")(f)


@cli.command()
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path), default="rdfmem-demo")
def demo(folder: Path) -> None:
    """Build a realistic agent memory on disk in FOLDER, run every named query on it and
    write a Turtle export.

    \b
    Example:
      rdfmem demo ./agent-memory
    """
    from .demo import run_demo

    try:
        report = run_demo(folder)
    except RdfMemError as exc:
        raise click.ClickException(str(exc)) from exc
    for line in report.built:
        click.echo(line)
    for section in report.queries:
        click.echo()
        click.secho(f"== {section.title}", bold=True)
        if section.sparql_params:
            click.echo(f"   named query {section.name} with {section.sparql_params}")
        click.echo(format_table(section.variables, section.rows, prefixes=report.prefixes))
    for line in report.skipped:
        click.echo(f"(skipped: {line})")
    click.echo()
    click.echo(f"Wrote {report.store_path} (the store) and {report.export_path} (Turtle).")
    click.echo("Next:")
    click.echo(f"  rdfmem serve {report.store_path}     # then open http://127.0.0.1:7879/")
    click.echo(
        "  curl -H 'Accept: text/csv' http://127.0.0.1:7879/sparql "
        "--data-urlencode 'query=SELECT * WHERE { GRAPH ?g { ?s ?p ?o } } LIMIT 10'"
    )
    click.echo(f"  rdfmem query {report.store_path} --named active_goals")
    click.echo(f"  rdfmem stats {report.store_path}")


@cli.command()
@_store_argument
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=7879, show_default=True, type=click.IntRange(0, 65535))
@click.option("--allow-update", is_flag=True, help="Accept SPARQL Update (with the token).")
@click.option(
    "--token",
    envvar="RDFMEM_TOKEN",
    help="Bearer token updates must carry (env RDFMEM_TOKEN; generated when missing).",
)
@click.option("--cors", multiple=True, metavar="ORIGIN", help="Allow browser calls from ORIGIN.")
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="Also answer to Host NAME (localhost, IP addresses and --host are always; '*': any).",
)
@click.option("--max-connections", default=256, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--header-timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0.001),
    help="Seconds a client may take to send a request's headers (and, x3, its body).",
)
@click.option("--timeout", default=30.0, show_default=True, type=click.FloatRange(min=0.001))
@click.option("--max-concurrent", default=4, show_default=True, type=click.IntRange(min=1))
@click.option("--max-result-bytes", default=64 << 20, show_default=True, type=click.IntRange(min=1))
@click.option("--max-body", default=1 << 20, show_default=True, type=click.IntRange(min=1))
@click.option("--access-log/--no-access-log", default=True, show_default=True)
def serve(
    store: str,
    host: str,
    port: int,
    allow_update: bool,
    token: str | None,
    cors: tuple[str, ...],
    allowed_hosts: tuple[str, ...],
    max_connections: int,
    header_timeout: float,
    timeout: float,
    max_concurrent: int,
    max_result_bytes: int,
    max_body: int,
    access_log: bool,
) -> None:
    """Serve STORE over the SPARQL 1.1 Protocol (and /store, /queries, /health).

    \b
    Example:
      rdfmem serve agent.db --port 7879
      curl 'http://127.0.0.1:7879/sparql?query=ASK%7B%7D'
    """
    from .server import serve as run

    if allow_update and not token:
        token = secrets.token_urlsafe(24)
        click.echo(f"Updates need: Authorization: Bearer {token}", err=True)
    with _store(store, create=True) as opened:
        click.echo(f"Serving {store} at http://{host}:{port}/sparql (Ctrl-C stops)", err=True)
        run(
            opened,
            host=host,
            port=port,
            access_log=access_log,
            allow_update=allow_update,
            token=token,
            cors=cors,
            allowed_hosts=allowed_hosts,
            max_connections=max_connections,
            header_timeout=header_timeout,
            body_timeout=3 * header_timeout,
            timeout=timeout,
            max_concurrent=max_concurrent,
            max_result_bytes=max_result_bytes,
            max_body=max_body,
        )


_QUERY_FORMATS = ["table", "json", "csv", "tsv", "xml", "turtle", "ntriples", "jsonld", "rdfxml"]


@cli.command()
@_store_argument
@click.argument("sparql", required=False)
@click.option("-f", "--file", type=click.Path(dir_okay=False, path_type=Path), help="Query file.")
@click.option("-n", "--named", metavar="NAME", help="Run a shipped named query instead.")
@click.option("-p", "--param", multiple=True, metavar="NAME=VALUE", help="Named query parameter.")
@click.option(
    "-o", "--output", type=click.Choice(_QUERY_FORMATS), default="table", show_default=True
)
@click.option(
    "--allow-network", is_flag=True, help="Let SERVICE reach the network (refused by default)."
)
def query(
    store: str,
    sparql: str | None,
    file: Path | None,
    named: str | None,
    param: tuple[str, ...],
    output: str,
    allow_network: bool,
) -> None:
    """Run a SPARQL query (or a named query) on STORE and print the result.

    \b
    Examples:
      rdfmem query agent.db 'SELECT * WHERE { ?s ?p ?o } LIMIT 5'
      rdfmem query agent.db --named recent_decisions -p limit=3 -o csv
      rdfmem query http://127.0.0.1:7879/sparql -f goals.rq -o json
    """
    bindings: dict[str, Any] | None = None
    if named is not None:
        from .server.named import load_named_query

        if sparql is not None or file is not None:
            raise click.UsageError("give a query or --named NAME, not both")
        try:
            definition = load_named_query(named)
        except KeyError as exc:
            raise click.ClickException(str(exc.args[0])) from exc
        given = {}
        for item in param:
            key, eq, value = item.partition("=")
            if not eq:
                raise click.UsageError(f"--param takes NAME=VALUE, not {item!r}")
            given[key] = value
        try:
            text, prepared = definition.prepare(given)
        except RdfMemError as exc:
            raise click.ClickException(str(exc)) from exc
        bindings = dict(prepared)
    else:
        if param:
            raise click.UsageError("--param goes with --named")
        text = _text_arg(sparql, file, "query")
    with _store(store) as opened:
        result = opened.query(text, bindings=bindings, allow_network=allow_network)
        _write_result(result, output, opened)


@cli.command()
@_store_argument
@click.argument("sparql", required=False)
@click.option("-f", "--file", type=click.Path(dir_okay=False, path_type=Path), help="Update file.")
@click.option(
    "--token", envvar="RDFMEM_TOKEN", help="Bearer token for a served store (env RDFMEM_TOKEN)."
)
@click.option(
    "--allow-network",
    is_flag=True,
    help="Let LOAD and SERVICE reach the network (refused by default).",
)
def update(
    store: str, sparql: str | None, file: Path | None, token: str | None, allow_network: bool
) -> None:
    """Run a SPARQL 1.1 Update on STORE (all of it or none of it).

    \b
    Example:
      rdfmem update agent.db 'INSERT DATA { <urn:a> <urn:b> "c" }'
      RDFMEM_TOKEN=… rdfmem update http://127.0.0.1:7879/sparql -f fix.ru
    """
    text = _text_arg(sparql, file, "update")
    with _store(store, create=True, token=token) as opened:
        opened.sparql_update(text, allow_network=allow_network)
    click.echo("OK", err=True)


def _graph_option(f: F) -> F:
    return click.option(
        "-g", "--graph", metavar="IRI", help="One named graph (default: the default graph)."
    )(f)


@cli.command()
@_store_argument
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="File.")
@click.option("--format", "fmt", help="turtle, trig, ntriples, nquads, jsonld, rdfxml …")
@_graph_option
def export(store: str, output: Path | None, fmt: str | None, graph: str | None) -> None:
    """Write STORE as RDF: every graph in a dataset format (TriG, N-Quads, JSON-LD; TriG by
    default), one graph in a triple format (Turtle, N-Triples, RDF/XML).

    \b
    Examples:
      rdfmem export agent.db -o memory.trig
      rdfmem export agent.db --format turtle --graph urn:rdfmem:graph:store
    """
    try:
        chosen = rdf_format(fmt or (output.name if output and output.suffix else "trig"))
    except FormatError as exc:
        raise click.ClickException(str(exc)) from exc
    if graph is not None and chosen.supports_datasets:
        chosen = RdfFormat.TURTLE if fmt is None else chosen
    with _store(store) as opened:
        if graph is None and not chosen.supports_datasets:
            click.echo(
                f"{chosen.name} holds one graph: exporting the default graph "
                "(use --format trig for every graph, or --graph IRI)",
                err=True,
            )
        if output is None:
            data = _export_bytes(opened, chosen, graph)
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
            return
        count = _export_file(opened, chosen, graph, output)
    click.echo(f"Wrote {count} triples to {output}", err=True)


def _export_bytes(store: RdfStore, fmt: RdfFormat, graph: str | None) -> bytes:
    if graph is None:
        return store.export(fmt).encode("utf-8")
    if fmt.supports_datasets:
        return bytes(serialize(_graph_quads(store, graph), None, fmt) or b"")
    return store.export(fmt, graph=graph).encode("utf-8")


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


def _export_file(store: RdfStore, fmt: RdfFormat, graph: str | None, output: Path) -> int:
    """Graph by graph, with a progress bar, when the format can be written in pieces."""
    counts = _counts(store)
    total = sum(n for _, n in counts) if graph is None else dict(counts).get(graph, 0)
    piecewise = fmt in (RdfFormat.TRIG, RdfFormat.N_QUADS) and graph is None
    if not piecewise or total < _PROGRESS_TRIPLES:
        output.write_bytes(_export_bytes(store, fmt, graph))
        return total
    with output.open("wb") as out, click.progressbar(length=total, label="Exporting") as bar:
        for name, n in counts:
            if name is None:
                quads = list(store.triples(DefaultGraph()))
            else:
                quads = _graph_quads(store, name)
            serialize(quads, out, fmt, prefixes=dict(store.prefixes))
            bar.update(n)
    return total


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
@_store_argument
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--format", "fmt", help="RDF format (default: from each file's extension).")
@_graph_option
@click.option("--base", metavar="IRI", help="Base IRI for relative IRIs.")
@click.option(
    "--progress/--no-progress",
    default=None,
    help=f"Show a progress bar (default: for files over {_PROGRESS_BYTES >> 20} MiB).",
)
def load(
    store: str,
    files: tuple[Path, ...],
    fmt: str | None,
    graph: str | None,
    base: str | None,
    progress: bool | None,
) -> None:
    """Load RDF FILES into STORE (triples into --graph, or the default graph). A file that
    does not parse is not loaded at all.

    \b
    Example:
      rdfmem load agent.db memory.trig notes.ttl
    """
    with _store(store, create=True) as opened:
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
    if len(files) > 1:
        click.echo(f"Loaded {total} triples from {len(files)} files", err=True)


@cli.command()
@_store_argument
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
    with _store(store) as opened:
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


def _shacl(graphs: list[tuple[str, str]], shapes: Path) -> tuple[list[str], int]:
    """Readable SHACL violations of each graph (N-Triples text, validated on its own), and
    how many triples were checked."""
    import pyshacl
    import rdflib

    shapes_graph = rdflib.Graph().parse(shapes)
    names = rdflib.Graph()
    for prefix, iri in PREFIXES.items():
        names.bind(prefix, iri)
    problems = []
    checked = 0
    for graph_name, ntriples in graphs:
        data = rdflib.Graph().parse(data=ntriples, format="nt")
        checked += len(data)
        _, results, _ = pyshacl.validate(data, shacl_graph=shapes_graph, inference="none")
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
@_store_argument
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
def stats(store: str, as_json: bool) -> None:
    """Triples per graph, keys per namespace and nodes per type in STORE.

    \b
    Example:
      rdfmem stats agent.db
    """
    with _store(store) as opened:
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
    return [(_short(r["type"], store.prefixes), int(r["n"].value)) for r in rows]


# -- MCP (rdfmem.mcp) ----------------------------------------------------------------------


def _mcp_store(spec: str, update_url: str | None = None, *, create: bool = True) -> RdfStore:
    """The store ``rdfmem mcp`` serves; a held on-disk store says how to share it. On a
    SPARQL server, updates go to ``update_url``, else to the query URL with a last
    ``/query`` made ``/update`` (Oxigraph server, Fuseki), else to the query URL."""
    if spec.startswith(("http://", "https://")):
        if update_url is None and spec.rstrip("/").endswith("/query"):
            update_url = spec.rstrip("/")[: -len("query")] + "update"
        return RdfStore.connect(spec, update_url)
    try:
        return open_store(spec, create=create)
    except click.ClickException as exc:
        if isinstance(exc.__cause__, StoreAlreadyOpen):
            raise click.ClickException(
                f"the store at {spec} is open in another process (another rdfmem mcp, an "
                "agent or rdfmem serve); an on-disk store has one owner. Share it with many "
                f"clients through one server: rdfmem mcp {spec} --http, or keep the memory "
                "on a SPARQL server: rdfmem mcp http://HOST:7878/query"
            ) from exc
        raise


@cli.command("mcp")
@_store_argument
@click.option("--http", "use_http", is_flag=True, help="Streamable HTTP at /mcp, not stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address (--http).")
@click.option("--port", default=7880, show_default=True, type=click.IntRange(0, 65535))
@click.option("--project", metavar="NAME", help="Keep this project's memory apart.")
@click.option(
    "--query-timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(0.001),
    help="Seconds a sparql_query may run.",
)
@click.option(
    "--max-rows",
    default=1000,
    show_default=True,
    type=click.IntRange(min=1),
    help="Rows a sparql_query returns at most.",
)
@click.option("--update-url", metavar="URL", help="SPARQL Update URL of a server STORE.")
def mcp_command(
    store: str,
    use_http: bool,
    host: str,
    port: int,
    project: str | None,
    query_timeout: float,
    max_rows: int,
    update_url: str | None,
) -> None:
    """Serve STORE to agents over the Model Context Protocol: a drop-in for the official
    memory server (same nine tools), plus rdfmem's memories, decisions and SPARQL.

    \b
    Examples:
      rdfmem mcp ~/.rdfmem/memory                   # stdio, for an MCP host
      rdfmem mcp ~/.rdfmem/memory --http --port 7880  # many clients, http://…/mcp
      rdfmem mcp http://127.0.0.1:7878/query --project webapp
    """
    try:
        from .mcp.server import serve_http, serve_stdio
        from .mcp.services import Services
    except ImportError as exc:
        raise click.ClickException(
            f"rdfmem mcp needs the MCP SDK ({exc.name or exc}): pip install 'rdfmem[mcp]'"
        ) from exc
    if project is not None and not project:
        raise click.UsageError("--project takes a non-empty name")
    spec = str(Path(store).expanduser()) if "://" not in store else store
    opened = _mcp_store(spec, update_url)
    services = Services(opened, project, query_timeout=query_timeout, max_rows=max_rows)
    try:
        if use_http:
            click.echo(f"rdfmem mcp: serving {store} at http://{host}:{port}/mcp", err=True)
            serve_http(services, host=host, port=port)
        else:
            serve_stdio(services)
    finally:
        opened.close()


@contextmanager
def _store_errors(store: RdfStore) -> Iterator[RdfStore]:
    try:
        yield store
    except RdfMemError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        store.close()


@cli.command("import")
@_store_argument
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--project", metavar="NAME", help="Import into this project's graph.")
def import_(store: str, file: Path, project: str | None) -> None:
    """Import an MCP memory server's memory.jsonl into STORE's knowledge graph: all of it,
    or nothing when a line is broken.

    \b
    Example:
      rdfmem import ~/.rdfmem/memory memory.jsonl
    """
    from .mcp import Client, KnowledgeGraph, read_jsonl

    try:
        model = read_jsonl(file.read_text(encoding="utf-8"), source=str(file))
    except (RdfMemError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"nothing imported: {exc}") from exc
    opened = _mcp_store(store)
    with _store_errors(opened):
        graph = KnowledgeGraph(opened, project)
        entities, observations, relations = graph.import_model(model, Client("rdfmem import"))
    click.echo(
        f"Imported {entities} entities, {observations} observations and {relations} "
        f"relations from {file}",
        err=True,
    )


@cli.command("export-jsonl")
@_store_argument
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="File.")
@click.option("--project", metavar="NAME", help="Export this project's graph.")
def export_jsonl(store: str, output: Path | None, project: str | None) -> None:
    """Write STORE's knowledge graph as an MCP memory server's memory.jsonl.

    \b
    Example:
      rdfmem export-jsonl ~/.rdfmem/memory -o memory.jsonl
    """
    from .mcp import KnowledgeGraph, write_jsonl

    with _store_errors(_mcp_store(store, create=False)) as opened:
        text = write_jsonl(KnowledgeGraph(opened, project).model())
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        click.echo(f"Wrote {text.count(chr(10))} lines to {output}", err=True)


def main(argv: Sequence[str] | None = None) -> None:
    """The ``rdfmem`` console script."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="rdfmem")


if __name__ == "__main__":  # pragma: no cover
    main()
