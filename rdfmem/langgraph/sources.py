"""Where a LangGraph store reads its items: a mirror in memory, or the server every time.

On an embedded backend every write passes through rdfmem (``exclusive_writer``), so
``Mirror`` keeps the items of the store's graph and their vectors in memory, changed in
the same critical section as each write. It knows it is stale when rdfmem's index hub
(``rdfmem.store.indexes``) has seen a write that may have touched its graph since the mirror's own
last write (another store object, raw SPARQL, ``load``, ``clear_graph``), and then it reloads
the graph with one index scan; writes known to touch only other graphs leave it alone.
On a remote store other clients write too, so ``Remote`` asks the server at every read.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pyoxigraph import Literal, NamedNode, Quad

from rdfmem.core.results import SelectResult
from rdfmem.core.terms import sparql_term
from rdfmem.domain.embeddings import EMBEDDING
from rdfmem.langgraph.records import Record, record_from_properties, split_namespace, vector_owner
from rdfmem.langgraph.requests import namespace_filter
from rdfmem.langgraph.vectors import FLOAT32_VECTOR, VectorRows, literal_vector
from rdfmem.langgraph.vocab import (
    CREATED,
    EXPIRES,
    FIELD,
    ITEM,
    KEY,
    MODIFIED,
    NAMESPACE,
    RDF_TYPE,
    TTL_MINUTES,
    VALUE,
    VECTOR_OF,
    item_iri,
)
from rdfmem.store.rdfstore import RdfStore

__all__ = ["Mirror", "Remote", "Source"]


def _group(rows: Iterable[tuple[Any, Any, Any]]) -> dict[str, dict[str, list[Any]]]:
    props: dict[str, dict[str, list[Any]]] = {}
    for s, p, o in rows:
        if isinstance(s, NamedNode):
            props.setdefault(s.value, {}).setdefault(p.value, []).append(o)
    return props


def _group_quads(quads: Iterable[Quad]) -> dict[str, dict[str, list[Any]]]:
    """``_group`` straight from quads (a reload reads every quad of the graph)."""
    props: dict[str, dict[str, list[Any]]] = {}
    for quad in quads:
        subject = quad.subject
        if not isinstance(subject, NamedNode):
            continue
        iri = subject.value
        found = props.get(iri)
        if found is None:
            found = props[iri] = {}
        predicate = quad.predicate.value
        values = found.get(predicate)
        if values is None:
            found[predicate] = [quad.object]
        else:
            values.append(quad.object)
    return props


def _vector(props: dict[str, list[Any]], dims: int) -> Any:
    for term in props.get(EMBEDDING.value) or ():
        if isinstance(term, Literal) and term.datatype == FLOAT32_VECTOR:
            try:
                vector = literal_vector(term)
            except ValueError:
                return None
            return vector if vector.shape[0] == dims else None
    return None


def build(props: dict[str, dict[str, list[Any]]], rows: VectorRows | None) -> dict[str, Record]:
    """Records by item IRI from grouped properties, their vectors added to ``rows``."""
    records: dict[str, Record] = {}
    for iri, p in props.items():
        record = record_from_properties(p)
        if record is not None and item_iri(record.namespace, record.key).value == iri:
            records[iri] = record
    if rows is not None:
        for p in props.values():
            owner = vector_owner(p)
            if owner is None or owner[0] not in records:
                continue
            vector = _vector(p, rows.dims)
            if vector is not None:
                record = records[owner[0]]
                record.fields[owner[1]] = rows.add(vector, record)
    return records


class Source:
    """What a read needs: one item, the items under a prefix (oldest first), namespaces."""

    def get(self, namespace: tuple[str, ...], key: str) -> Record | None:
        raise NotImplementedError  # pragma: no cover - both sources define it

    def under(
        self, prefix: tuple[str, ...], *, vectors: bool
    ) -> tuple[Iterator[Record], VectorRows | None]:
        """The items under ``prefix``, oldest first, and the rows their vectors are in
        (None without vectors)."""
        raise NotImplementedError  # pragma: no cover

    def namespaces(self) -> list[tuple[str, ...]]:
        raise NotImplementedError  # pragma: no cover


class Mirror(Source):
    """The items of one graph in memory: oldest first overall and by namespace."""

    def __init__(self, dims: int | None) -> None:
        self.dims = dims
        self.generation = -1
        self.by_ns: dict[tuple[str, ...], dict[str, Record]] = {}
        self.ordered: dict[tuple[tuple[str, ...], str], Record] = {}
        self.rows = VectorRows(dims) if dims else None

    def load(self, quads: Iterable[Quad]) -> None:
        """Replace everything with the items among ``quads`` (one graph's)."""
        self.rows = VectorRows(self.dims) if self.dims else None
        records = build(_group_quads(quads), self.rows)
        self.by_ns = {}
        self.ordered = {}
        for record in sorted(records.values(), key=lambda r: r.order):
            self.by_ns.setdefault(record.namespace, {})[record.key] = record
            self.ordered[(record.namespace, record.key)] = record

    def get(self, namespace: tuple[str, ...], key: str) -> Record | None:
        items = self.by_ns.get(namespace)
        return items.get(key) if items is not None else None

    def matching(self, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
        """The namespaces that are ``prefix`` or under it."""
        n = len(prefix)
        return [ns for ns in self.by_ns if ns[:n] == prefix]

    def count(self, namespaces: Iterable[tuple[str, ...]]) -> int:
        return sum(len(self.by_ns[ns]) for ns in namespaces)

    def under(
        self, prefix: tuple[str, ...], *, vectors: bool = True
    ) -> tuple[Iterator[Record], VectorRows | None]:
        names = self.matching(prefix)
        if len(names) == 1:
            return iter(list(self.by_ns[names[0]].values())), self.rows
        if len(names) == len(self.by_ns):
            return iter(list(self.ordered.values())), self.rows
        wanted = set(names)
        return iter([r for r in self.ordered.values() if r.namespace in wanted]), self.rows

    def namespaces(self) -> list[tuple[str, ...]]:
        return list(self.by_ns)

    def put(self, record: Record, vectors: Iterable[tuple[str, Any]]) -> None:
        """Add or replace an item (its place stays when it is replaced)."""
        self.delete(record.namespace, record.key, keep_place=True)
        if self.rows is not None:
            for path, vector in vectors:
                record.fields[path] = self.rows.add(vector, record)
        self.by_ns.setdefault(record.namespace, {})[record.key] = record
        self.ordered[(record.namespace, record.key)] = record

    def delete(self, namespace: tuple[str, ...], key: str, *, keep_place: bool = False) -> None:
        items = self.by_ns.get(namespace)
        old = items.get(key) if items is not None else None
        if old is None or items is None:
            return
        if self.rows is not None:
            for row in old.fields.values():
                self.rows.remove(row)
        if not keep_place:
            del items[key]
            del self.ordered[(namespace, key)]
            if not items:
                del self.by_ns[namespace]


class Remote(Source):
    """Reads straight from the store (a SPARQL server other clients write to)."""

    def __init__(self, store: RdfStore, graph: NamedNode, dims: int | None) -> None:
        self.store = store
        self.graph = graph
        self.dims = dims

    def get(self, namespace: tuple[str, ...], key: str) -> Record | None:
        subject = item_iri(namespace, key)
        rows = self.store.select([(subject, "?p", "?o", self.graph)])
        props = _group((subject, r["p"], r["o"]) for r in rows)
        return build(props, None).get(subject.value)

    def under(
        self, prefix: tuple[str, ...], *, vectors: bool
    ) -> tuple[Iterator[Record], VectorRows | None]:
        """Two queries, one row per item and one per vector."""
        g = sparql_term(self.graph)
        items = (
            f"?s {sparql_term(RDF_TYPE)} {sparql_term(ITEM)} ; "
            f"{sparql_term(NAMESPACE)} ?ns . {namespace_filter('ns', prefix)}"
        )
        columns = [(KEY, "k"), (VALUE, "v"), (CREATED, "c"), (MODIFIED, "m")]
        optional = [(EXPIRES, "e"), (TTL_MINUTES, "t")]
        body = " ".join(f"?s {sparql_term(p)} ?{name} ." for p, name in columns)
        body += " ".join(f" OPTIONAL {{ ?s {sparql_term(p)} ?{name} }}" for p, name in optional)
        result = self.store.query(
            f"SELECT ?s ?ns ?k ?v ?c ?m ?e ?t WHERE {{ GRAPH {g} {{ {items} {body} }} }}"
        )
        props: dict[str, dict[str, list[Any]]] = {}
        names = [(NAMESPACE, "ns"), *columns, *optional]
        type_of = [ITEM]
        for row in _rows(result):
            found = {p.value: [row[name]] for p, name in names if name in row}
            found[RDF_TYPE.value] = type_of
            props[row["s"].value] = found
        rows = VectorRows(self.dims) if vectors and self.dims else None
        if rows is not None:
            result = self.store.query(
                f"SELECT ?s ?f ?x WHERE {{ GRAPH {g} {{ {items} "
                f"?v {sparql_term(VECTOR_OF)} ?s ; {sparql_term(FIELD)} ?f ; "
                f"{sparql_term(EMBEDDING)} ?x }} }}"
            )
            for i, row in enumerate(_rows(result)):
                props[f"_:{i}"] = {
                    VECTOR_OF.value: [row["s"]],
                    FIELD.value: [row["f"]],
                    EMBEDDING.value: [row["x"]],
                }
        records = build(props, rows)
        return iter(sorted(records.values(), key=lambda r: r.order)), rows

    def namespaces(self) -> list[tuple[str, ...]]:
        result = self.store.query(
            f"SELECT DISTINCT ?ns WHERE {{ GRAPH {sparql_term(self.graph)} "
            f"{{ ?s {sparql_term(RDF_TYPE)} {sparql_term(ITEM)} ; "
            f"{sparql_term(NAMESPACE)} ?ns }} }}"
        )
        return [split_namespace(r["ns"].value) for r in _rows(result)]


def _rows(result: Any) -> list[dict[str, Any]]:
    assert isinstance(result, SelectResult)
    return list(result)
