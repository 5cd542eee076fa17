"""Scoped, titled memories with topics and embeddings search (from fnord's Memory).

A memory lives in one of three scopes: ``global``, ``project`` (needs a project id) and
``session`` (needs a session id). Each scope is its own named graph, the project and session
graphs named by their ids, so two projects never see each other's memories::

    urn:rdfmem:memories:global
    urn:rdfmem:memories:project:{project id, percent-encoded}
    urn:rdfmem:memories:session:{session id, percent-encoded}

Within a scope a memory is known by the slug of its title ("API v2.0" -> ``api-v2-0``), so
titles are unique by slug. Its RDF::

    <urn:rdfmem:memory:global:api-v2-0> a rm:Memory ; rm:scope "global" ;
        dcterms:title "API v2.0" ; rm:slug "api-v2-0" ; rm:content "…" ; rm:topic "api" ;
        rm:embedding "…"^^rm:float32Vector ; dcterms:created … ; dcterms:modified … .

>>> from rdfmem import RdfStore
>>> memories = Memories(RdfStore(), project="rdfmem")
>>> _ = memories.save(Memory("project", "Release Steps", "Tag, build the wheel, publish."))
>>> _ = memories.save(Memory("global", "Tea", "Eli drinks green tea."))
>>> [(m.title, round(score, 2)) for m, score in memories.search("how do we publish a release?")]
[('Release Steps', 0.93)]

On a store keeping history (``RdfStore(history=True)``), each ``save`` and ``forget``
records a version of the memory in the same request (``rdfmem.store.history``), and
``history``, ``read(as_of=)``, ``list(as_of=)`` and ``search(as_of=)`` read the past
(``rdfmem.domain.memory_history``).
"""

from __future__ import annotations

import builtins
import datetime as _dt
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

from pyoxigraph import NamedNode

from rdfmem.core.errors import InvalidTitle, InvalidValue, MemoryNotFound, MemoryScopeError
from rdfmem.core.ontology import named_query
from rdfmem.core.terms import sparql_term
from rdfmem.domain import memory_history
from rdfmem.domain.embeddings import (
    Embedder,
    HashingEmbedder,
    VectorIndex,
    literal_vector,
    vector_literal,
)
from rdfmem.domain.hybrid import Ranking, TextIndex, TextWrite, check_ranking
from rdfmem.domain.hybrid import search as ranked_search
from rdfmem.domain.memory_model import (
    SCOPES,
    Memory,
    Scope,
    is_valid_title,
    slug_to_title,
    title_problems,
    title_to_slug,
)
from rdfmem.domain.memory_rdf import (
    _CLASS,
    _CONTENT,
    _GRAPH_PREFIX,
    _SCOPE,
    _SUBJECT_PREFIX,
    _TITLE,
    _TOPIC,
    _column,
    _delete_request,
    _vector_list,
)
from rdfmem.domain.memory_rdf import (  # re-exported: rdfmem.domain.reembed, benchmarks
    _embedding_text as _embedding_text,
)
from rdfmem.domain.memory_rdf import (
    _from_rdf as _from_rdf,
)
from rdfmem.domain.memory_rdf import (
    _triples as _triples,
)
from rdfmem.store.history_reads import Version
from rdfmem.store.indexes.follow_hub import one_look
from rdfmem.store.own_writes import self_contained
from rdfmem.store.rdfstore import RdfStore

__all__ = [
    "SCOPES",
    "Memories",
    "Memory",
    "Scope",
    "is_valid_title",
    "slug_to_title",
    "title_to_slug",
    "title_problems",
]

# -- the store ----------------------------------------------------------------------------


def _escape(text: str) -> str:
    """Percent-encoding of everything but unreserved characters: safe in any IRI position."""
    return quote(text, safe="-._~")


class Memories:
    """The memories an agent can reach: global, plus a project's and a session's when given.

    Args:
        store: where the memories live.
        project: the current project's id; the ``project`` scope needs one.
        session: the current session's (conversation's) id; the ``session`` scope needs one.
        embedder: makes the embeddings that ``search`` compares; ``HashingEmbedder()`` (offline,
            no model) when None.
        ranking: how ``search`` ranks: ``hybrid`` (default: keyword and vector evidence
            fused), ``keyword`` (BM25) or ``vector`` (cosine alone; saves then keep no
            keyword index, which is rebuilt by the next search that needs it).

    Raises:
        MemoryScopeError: a project or session id that is not a non-empty string.
    """

    def __init__(
        self,
        store: RdfStore,
        project: str | None = None,
        session: str | None = None,
        *,
        embedder: Embedder | None = None,
        ranking: Ranking = "hybrid",
    ) -> None:
        for kind, value in (("project", project), ("session", session)):
            if value is not None and (not isinstance(value, str) or not value):
                raise MemoryScopeError(f"a {kind} id is a non-empty string, not {value!r}")
        self.store = store
        self.project = project
        self.session = session
        self.embedder: Embedder = embedder if embedder is not None else HashingEmbedder()
        self.ranking = check_ranking(ranking)
        self._index = VectorIndex(store)
        self._texts = TextIndex(store, (_TITLE, _TOPIC, _CONTENT))

    def _writing_texts(self, graph: NamedNode) -> AbstractContextManager[TextWrite]:
        if self.ranking == "vector":
            return nullcontext(TextWrite())
        return self._texts.writing(graph)

    @property
    def scopes(self) -> tuple[Scope, ...]:
        """The scopes available here: ``global`` always, the others when their id is set."""
        ids = {"global": "", "project": self.project, "session": self.session}
        return tuple(s for s in SCOPES if ids[s] is not None)

    def graph(self, scope: str) -> NamedNode:
        """The named graph of ``scope``.

        Raises:
            MemoryScopeError: an unknown scope, or one not available (no project or session).
        """
        if scope == "global":
            return NamedNode(_GRAPH_PREFIX + "global")
        if scope not in SCOPES:
            raise MemoryScopeError(f"unknown memory scope {scope!r}; scopes are {SCOPES}")
        scope_id = self.project if scope == "project" else self.session
        if scope_id is None:
            raise MemoryScopeError(
                f"no {scope} scope here: make Memories(store, {scope}=...) to use it"
            )
        return NamedNode(f"{_GRAPH_PREFIX}{scope}:{_escape(scope_id)}")

    def _subject(self, scope: str, slug: str) -> NamedNode:
        graph = self.graph(scope).value
        return NamedNode(_SUBJECT_PREFIX + graph[len(_GRAPH_PREFIX) :] + ":" + _escape(slug))

    # -- writing ---------------------------------------------------------------------------

    def save(self, memory: Memory) -> Memory:
        """Store ``memory`` and return it as stored: slug from the title, embeddings made when
        None, ``inserted_at`` kept and ``updated_at`` now when it replaces the memory with the
        same title.

        Raises:
            MemoryScopeError: its scope is not available here.
            InvalidTitle: the title breaks the title rules (``reasons`` lists every one), or
                another memory of the scope has a title with the same slug.
            InvalidValue: embeddings given with another dimension than the embedder's.
        """
        graph = self.graph(memory.scope)
        problems = title_problems(memory.title)
        if problems:
            raise InvalidTitle(memory.title, problems)
        slug = title_to_slug(memory.title)
        subject = self._subject(memory.scope, slug)
        embeddings: Any = memory.embeddings
        if embeddings is None:
            embeddings = self.embedder.embed([_embedding_text(memory)])[0]
        elif len(embeddings) != self.embedder.dimension:
            raise InvalidValue(
                f"embeddings of {len(embeddings)} dimensions, but {self.embedder!r} makes "
                f"{self.embedder.dimension}: search compares vectors of one model only"
            )
        literal = vector_literal(embeddings)
        within = subject.value[: subject.value.rindex(":") + 1]
        with (
            self.store.exclusive(subject, within=within),
            self._index.writing(graph, subject) as vectors,
            self._writing_texts(graph) as texts,
            self_contained(),  # its update reads only the subject (``store.own_writes``)
        ):
            old = self._stored(graph, subject)
            if old is not None and old.title != memory.title:
                raise InvalidTitle(
                    memory.title,
                    [f"its slug {slug!r} is the slug of {old.title!r} in {memory.scope} memory"],
                )
            now = datetime.now(timezone.utc)
            stored = memory.model_copy(
                update={
                    "slug": slug,
                    "embeddings": _vector_list(literal),
                    "inserted_at": old.inserted_at if old is not None else memory.inserted_at,
                    "updated_at": now if old is not None else memory.updated_at,
                }
            )
            lines = _triples(subject, stored, literal)
            body = "\n".join(lines)
            g = sparql_term(graph)
            update = (
                f"{_delete_request(graph, subject)} ;\nINSERT DATA {{ GRAPH {g} {{\n{body}\n}} }}"
            )
            self.store.sparql_update(
                memory_history.versioned(self.store, update, graph, subject, lines)
            )
            vectors.put(subject, literal_vector(literal))
            texts.put(subject, _embedding_text(stored))
        return stored

    def append(self, memory: Memory, text: str) -> Memory:
        """Add ``text`` to the end of the memory's content (no separator), make its
        embeddings anew, save it and return it.

        Raises:
            MemoryScopeError, InvalidTitle: as ``save``.
        """
        grown = memory.model_copy(update={"content": memory.content + text, "embeddings": None})
        return self.save(grown)

    def forget(self, scope: str, title: str) -> None:
        """Remove the memory with this title (by slug) from ``scope``.

        An incomplete record (see ``read``) at that title is removed as well.

        Raises:
            MemoryScopeError: the scope is unknown or not available.
            MemoryNotFound: nothing is stored at that title.
        """
        graph = self.graph(scope)
        subject = self._subject(scope, title_to_slug(title))
        with (
            self.store.exclusive(subject),
            self._index.writing(graph, subject) as vectors,
            self._writing_texts(graph) as texts,
        ):
            # The remains of an incomplete record (not a memory to any read) go too.
            if not self.store.ask(subject=subject, graph=graph):
                raise MemoryNotFound(f"no {scope} memory titled {title!r}")
            update = _delete_request(graph, subject)
            self.store.sparql_update(
                memory_history.versioned(self.store, update, graph, subject, [])
            )
            vectors.remove(subject)
            texts.remove(subject)

    # -- reading ---------------------------------------------------------------------------

    def read(self, scope: str, title: str, *, as_of: datetime | None = None) -> Memory:
        """The memory of ``scope`` whose title has the slug of ``title`` (as it was at
        ``as_of``, on a store keeping history; a naive datetime means UTC).

        **One rule for incomplete records, on every read path**: a record that is not a
        whole memory (no content, no title, no scope, or a field that is not a literal,
        as another SPARQL client or an interrupted write on a server that does not roll
        back may leave) is not a memory: ``read`` raises ``MemoryNotFound``, ``exists`` is
        False, ``list``, ``search`` and ``by_topic`` leave it out. ``save`` at its title
        replaces it; ``forget`` removes it.

        Raises:
            MemoryScopeError: the scope is unknown or not available.
            MemoryNotFound: no such memory (then).
            HistoryUnavailable: ``as_of`` on a store keeping no history.
        """
        graph = self.graph(scope)
        subject = self._subject(scope, title_to_slug(title))
        if as_of is not None:
            what = f"{scope} memory titled {title!r}"
            return memory_history.read_as_of(self.store, graph, subject, as_of, what)
        found = self._read([(graph, subject)]).get(subject.value)
        if found is None:
            raise MemoryNotFound(f"no {scope} memory titled {title!r}")
        return found

    def exists(self, scope: str, title: str) -> bool:
        """True when ``scope`` holds a memory whose title has the slug of ``title``.

        Raises:
            MemoryScopeError: the scope is unknown or not available.
        """
        graph = self.graph(scope)
        return self._stored(graph, self._subject(scope, title_to_slug(title))) is not None

    def search(
        self,
        query: str,
        limit: int = 10,
        *,
        as_of: datetime | None = None,
        valid_at: datetime | None = None,
    ) -> builtins.list[tuple[Memory, float]]:
        """The memories of every available scope closest to ``query``, scores above 0,
        highest first, at most ``limit``. By ``ranking``: ``hybrid`` fuses BM25 over title,
        topics and content with the cosine of embeddings (``rdfmem.domain.hybrid.fuse``:
        0.8 x BM25 / the query's best BM25 + 0.2 x cosine), ``keyword`` is BM25, ``vector``
        the cosine.

        Memories whose embeddings have another dimension than the embedder's are not
        compared by vector. On an embedded store the vectors and keyword postings are kept
        in memory, changed by each save and forget; on a remote store they are read
        afresh with one query each (vectors are followed with the server's change log).

        ``as_of``: the memories as they were then (a store keeping history; ranked the same
        way over the scopes as they were, ``rdfmem.domain.memory_history``). ``valid_at``:
        only the memories holding at that world time (``Memory.valid_at``; one without
        ``valid_from`` and ``valid_until`` always holds).

        Raises:
            HistoryUnavailable: ``as_of`` on a store keeping no history.
            InvalidValue: ``as_of`` or ``valid_at`` is not a datetime.
        """
        if as_of is not None:
            past = self._past(as_of)
            try:
                return past.search(query, limit, valid_at=valid_at)
            finally:
                past.store.close()
        if valid_at is not None and not isinstance(valid_at, _dt.datetime):
            raise InvalidValue(f"valid_at takes a datetime, not {valid_at!r}")
        graphs = [self.graph(s) for s in self.scopes]
        wanted = limit
        while True:
            with one_look(self.store):  # a remote store's followers: one change-log look
                hits = ranked_search(
                    self.ranking, self._texts, self._index, self.embedder, graphs, query, wanted
                )
            found = self._read((graph, subject) for graph, subject, _ in hits)
            out = [(found[s.value], score) for _, s, score in hits if s.value in found]
            if valid_at is None:
                return out
            held = [(m, score) for m, score in out if m.valid_at(valid_at)]
            if len(held) >= limit or len(hits) < wanted:
                return held[:limit]
            wanted *= 4  # memories not holding then took places: look further down

    def history(self, scope: str, title: str) -> builtins.list[Version]:
        """Every version of the memory whose title has the slug of ``title``, oldest
        first: ``.value`` the ``Memory`` it was (None once forgotten), ``.at`` (UTC),
        ``.by``, ``.why``, ``.deleted``; ``[]`` when it never had one.

        Raises:
            MemoryScopeError: the scope is unknown or not available.
            HistoryUnavailable: the store keeps no history.
        """
        graph = self.graph(scope)
        subject = self._subject(scope, title_to_slug(title))
        return memory_history.versions(self.store, graph, subject)

    def _past(self, moment: datetime) -> Memories:
        """These memories as they were at ``moment``, in a fresh in-memory store."""
        graphs = [self.graph(s) for s in self.scopes]
        past = memory_history.past_store(self.store, graphs, moment)
        return Memories(
            past, self.project, self.session, embedder=self.embedder, ranking=self.ranking
        )

    def by_topic(self, topic: str) -> list[Memory]:
        """The memories of every available scope tagged ``topic``, by scope then title."""
        out: list[Memory] = []
        for scope in self.scopes:
            graph = self.graph(scope)
            rows = self.store.query(
                named_query("memories_by_topic"), bindings={"graph": graph, "topic": topic}
            )
            found = self._read((graph, s) for s in _column(rows, "memory"))
            out.extend(sorted(found.values(), key=lambda m: m.title))
        return out

    def _stored(self, graph: NamedNode, subject: NamedNode) -> Memory | None:
        """The memory stored at ``subject``, read by quad pattern: on a SPARQL server,
        inside ``exclusive``, the lease's own read brought it along."""
        props: dict[str, list[Any]] = {}
        for quad in self.store.match(subject, None, None, graph):
            props.setdefault(quad.predicate.value, []).append(quad.object)
        return _from_rdf(props) if props else None

    def _read(self, pairs: Iterable[tuple[NamedNode, NamedNode]]) -> dict[str, Memory]:
        """The stored memories among ``(graph, subject)`` pairs (one query), by subject IRI."""
        wanted = list(dict.fromkeys(pairs))
        if not wanted:
            return {}
        values = " ".join(f"({sparql_term(g)} {sparql_term(s)})" for g, s in wanted)
        rows = self.store.query(
            f"SELECT ?s ?p ?o WHERE {{ VALUES (?g ?s) {{ {values} }} GRAPH ?g {{ ?s ?p ?o }} }}"
        )
        props: dict[str, dict[str, list[Any]]] = {}
        for row in rows:  # type: ignore[union-attr]
            props.setdefault(row["s"].value, {}).setdefault(row["p"].value, []).append(row["o"])
        out: dict[str, Memory] = {}
        for iri, p in props.items():
            memory = _from_rdf(p)
            if memory is not None:
                out[iri] = memory
        return out

    def __repr__(self) -> str:
        return f"Memories({self.store!r}, project={self.project!r}, session={self.session!r})"

    def list(
        self, scope: str | None = None, *, as_of: datetime | None = None
    ) -> builtins.list[str]:
        """The titles in ``scope``, or in every available scope (in scope order) when None;
        sorted within a scope. ``as_of``: the titles there were then (a store keeping
        history).

        Raises:
            MemoryScopeError: the scope is unknown or not available.
            HistoryUnavailable: ``as_of`` on a store keeping no history.
        """
        if as_of is not None:
            if scope is not None:
                self.graph(scope)  # an unknown scope says so before the past is read
            past = self._past(as_of)
            try:
                return past.list(scope)
            finally:
                past.store.close()
        scopes = self.scopes if scope is None else (scope,)
        titles: builtins.list[str] = []
        for name in scopes:
            graph = sparql_term(self.graph(name))
            # Whole memories only (``read`` says the rule): the fields a Memory needs.
            rows = self.store.query(
                f"SELECT DISTINCT ?title WHERE {{ GRAPH {graph} {{ ?m a {sparql_term(_CLASS)} ; "
                f"{sparql_term(_TITLE)} ?title ; {sparql_term(_CONTENT)} ?content ; "
                f"{sparql_term(_SCOPE)} ?scope }} "
                "FILTER(isLiteral(?title) && isLiteral(?content) && "
                '?scope IN ("global", "project", "session")) } ORDER BY ?title'
            )
            titles.extend(row["title"].value for row in rows)  # type: ignore[union-attr]
        return titles
