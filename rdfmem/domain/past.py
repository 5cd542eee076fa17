"""A data graph as it was at a past moment, rebuilt from the history a store keeps.

The domain layers answer their ``as_of=`` reads with it: the resources alive at the moment
(those whose version in effect then, the latest made at or before it, is not a
tombstone), each with its quads as that version kept them. ``snapshot`` loads them into a
fresh in-memory store, so a past read runs the very code of a current one (the same
queries, rankings and indexes) over the graph as it was.

Only what was written while history was kept can be rebuilt: a resource written before
(or by a writer that did not version it) has no version, and is missing from the past.

>>> import datetime as dt
>>> from pyoxigraph import NamedNode
>>> from rdfmem import RdfStore
>>> store = RdfStore(history=True)
>>> g, s = "urn:example:g", "urn:example:s"
>>> store.sparql_update(
...     f'INSERT DATA {{ GRAPH <{g}> {{ <{s}> <urn:example:p> "before" }} }} ;\\n'
...     + store.versioning_update(g, [s])
... )
>>> then = dt.datetime.now(dt.timezone.utc)
>>> store.sparql_update(
...     f"DELETE WHERE {{ GRAPH <{g}> {{ <{s}> ?p ?o }} }} ;\\n" + store.versioning_update(g, [s])
... )
>>> [q.object.value for q in quads_at(store, NamedNode(g), then)]
['before']
>>> quads_at(store, NamedNode(g), dt.datetime.now(dt.timezone.utc))
[]
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable

from pyoxigraph import NamedNode, Quad

from rdfmem.core.errors import HistoryUnavailable
from rdfmem.core.results import SelectResult
from rdfmem.core.terms import sparql_term
from rdfmem.store.history import (
    GENERATED_AT,
    GENERATED_BY,
    HAD_TYPE,
    INVALIDATED_AT,
    LATEST,
    RDF_TYPE,
    REVISION_OF,
    SKIP,
    SPECIALIZES,
    TOMBSTONE,
    history_graph,
    time_token,
    token_of_version,
    utc_time,
)
from rdfmem.store.rdfstore import RdfStore

__all__ = ["moment_of", "quads_at", "require_history", "snapshot"]

_CHUNK = 500  # versions per VALUES block
_BOOKKEEPING = frozenset(
    {SPECIALIZES, GENERATED_AT, GENERATED_BY, INVALIDATED_AT, REVISION_OF, LATEST, SKIP}
)
#: The bookkeeping predicates, left out by the query that reads states (fewer rows).
_SKIPPED = ", ".join(sorted(sparql_term(p) for p in _BOOKKEEPING))


def require_history(store: RdfStore) -> None:
    """Nothing when ``store`` keeps history.

    Raises:
        HistoryUnavailable: it keeps none (open it with ``history=True``).
    """
    if not store.keeps_history:
        raise HistoryUnavailable(
            "this store keeps no history, so it cannot say what was true before: open it "
            "with history=True (RdfStore(history=True), RdfStore.open(path, history=True), "
            "RdfStore.connect(..., history=True))"
        )


def moment_of(store: RdfStore, moment: object) -> _dt.datetime:
    """``moment`` in UTC, checked, for a read of the past of ``store``.

    Raises:
        HistoryUnavailable: the store keeps no history.
        InvalidValue: ``moment`` is not a datetime (a naive one means UTC).
    """
    require_history(store)
    return utc_time(moment)


def quads_at(store: RdfStore, graph: NamedNode, moment: _dt.datetime) -> list[Quad]:
    """The quads of ``graph`` at ``moment``: each resource alive then, as its version then
    kept it. Two kinds of query, through the store's public reads: every version's IRI
    (its time is in its IRI: ``time_of_version``), then the states of the versions in
    effect, 500 a query; so its cost follows the size of the graph's history.

    Raises:
        HistoryUnavailable: the store keeps no history.
    """
    t = moment_of(store, moment)
    bound = time_token(t)
    h = sparql_term(history_graph(graph))
    best: dict[str, tuple[str, NamedNode]] = {}
    for row in _rows(
        store, f"SELECT ?v ?s WHERE {{ GRAPH {h} {{ ?v <{SPECIALIZES.value}> ?s }} }}"
    ):
        v, subject = row["v"], row["s"]
        if not isinstance(v, NamedNode) or not isinstance(subject, NamedNode):
            continue
        token = token_of_version(v.value)
        held = best.get(subject.value)
        if token and token <= bound and (held is None or held[0] < token):
            best[subject.value] = (token, v)
    subject_of = {v.value: NamedNode(s) for s, (_, v) in best.items()}
    versions = list(subject_of)
    found: dict[str, list[Quad]] = {}
    dead: set[str] = set()
    for i in range(0, len(versions), _CHUNK):
        values = " ".join(sparql_term(NamedNode(v)) for v in versions[i : i + _CHUNK])
        sparql = (
            f"SELECT ?v ?p ?o WHERE {{ GRAPH {h} {{ VALUES ?v {{ {values} }} ?v ?p ?o "
            f"FILTER (?p NOT IN ({_SKIPPED})) }} }}"
        )
        for row in _rows(store, sparql):
            iri, p, o = str(row["v"].value), row["p"], row["o"]
            if p == RDF_TYPE and o == TOMBSTONE:
                dead.add(iri)
            # (a version's own rdf:type is rm:Tombstone: its data's types are rm:hadType)
            if not isinstance(p, NamedNode) or p in _BOOKKEEPING or p == RDF_TYPE:
                continue
            predicate = RDF_TYPE if p == HAD_TYPE else p
            found.setdefault(iri, []).append(Quad(subject_of[iri], predicate, o, graph))
    return [q for v in versions if v not in dead for q in found.get(v, ())]


def _rows(store: RdfStore, sparql: str) -> SelectResult:
    result = store.query(sparql)
    assert isinstance(result, SelectResult)
    return result


def snapshot(store: RdfStore, graphs: Iterable[NamedNode], moment: _dt.datetime) -> RdfStore:
    """A new in-memory store holding ``graphs`` as they were at ``moment`` (nothing else).

    Raises:
        HistoryUnavailable: the store keeps no history.
    """
    past = RdfStore()
    quads = [q for g in dict.fromkeys(graphs) for q in quads_at(store, g, moment)]
    if quads:
        past.assert_many([(q.subject, q.predicate, q.object, q.graph_name) for q in quads])
    return past
