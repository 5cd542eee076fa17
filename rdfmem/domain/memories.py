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
[('Release Steps', 0.65)]
"""

from __future__ import annotations

import builtins
import json
import unicodedata
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime, timezone
from typing import Any, Literal, get_args
from urllib.parse import quote

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pyoxigraph import Literal as RdfLiteral
from pyoxigraph import NamedNode

from rdfmem.core.errors import InvalidTitle, InvalidValue, MemoryNotFound, MemoryScopeError
from rdfmem.core.ontology import PREFIXES, RDFMEM, named_query
from rdfmem.core.results import SelectResult
from rdfmem.core.terms import RDF_JSON, from_literal, sparql_term, to_object
from rdfmem.domain.embeddings import (
    EMBEDDING,
    Embedder,
    HashingEmbedder,
    VectorIndex,
    literal_vector,
    vector_literal,
)
from rdfmem.domain.hybrid import Ranking, TextIndex, TextWrite, check_ranking
from rdfmem.domain.hybrid import search as ranked_search
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

Scope = Literal["global", "project", "session"]
#: The scopes, in the order ``list`` and ``search`` visit them.
SCOPES: tuple[Scope, ...] = get_args(Scope)

_RDF_TYPE = NamedNode(PREFIXES["rdf"] + "type")
_CLASS = NamedNode(RDFMEM + "Memory")
_SCOPE = NamedNode(RDFMEM + "scope")
_TITLE = NamedNode(PREFIXES["dcterms"] + "title")
_SLUG = NamedNode(RDFMEM + "slug")
_CONTENT = NamedNode(RDFMEM + "content")
_TOPIC = NamedNode(RDFMEM + "topic")
_TOPIC_ORDER = NamedNode(RDFMEM + "topicsInOrder")
_CREATED = NamedNode(PREFIXES["dcterms"] + "created")
_MODIFIED = NamedNode(PREFIXES["dcterms"] + "modified")
_GRAPH_PREFIX = "urn:rdfmem:memories:"
_SUBJECT_PREFIX = "urn:rdfmem:memory:"


# -- titles and slugs ---------------------------------------------------------------------


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def _is_alnum(char: str) -> bool:
    """A letter (any script) or digit; a combining mark belongs to the letter it marks."""
    return char.isalnum() or unicodedata.category(char).startswith("M")


def title_problems(title: str) -> list[str]:
    """Every title rule ``title`` breaks (empty when it is valid).

    >>> for problem in title_problems("-Foo  Bar"):
    ...     print(problem)
    starts with '-', not a letter or digit
    has 2 non-alphanumeric characters in a row: '  '
    """
    if not isinstance(title, str):
        return [f"a title is text, not {type(title).__name__}"]
    text = _nfc(title)
    if not text:
        return ["is empty"]
    problems = []
    if not _is_alnum(text[0]):
        problems.append(f"starts with {text[0]!r}, not a letter or digit")
    if not _is_alnum(text[-1]):
        problems.append(f"ends with {text[-1]!r}, not a letter or digit")
    runs = []
    start = None
    for i, char in enumerate(text + "a"):
        if not _is_alnum(char):
            start = i if start is None else start
            continue
        if start is not None and i - start > 1:
            runs.append(text[start:i])
        start = None
    for run in runs:
        problems.append(f"has {len(run)} non-alphanumeric characters in a row: {run!r}")
    return problems


def is_valid_title(title: str) -> bool:
    """A title is non-empty, starts and ends with a letter or digit, and never has two
    non-alphanumeric characters in a row. Letters include non-ASCII ones.

    >>> [is_valid_title(t) for t in ["API v2.0", "don't panic", "Café", "Foo  Bar", "Foo."]]
    [True, True, True, False, False]
    """
    return not title_problems(title)


def title_to_slug(title: str) -> str:
    """Lowercase, each run of non-alphanumerics a ``-``, no ``-`` at either end.

    >>> title_to_slug("API v2.0"), title_to_slug("foo_bar"), title_to_slug("Café Central")
    ('api-v2-0', 'foo-bar', 'café-central')
    """
    out: list[str] = []
    for char in _nfc(title):
        if _is_alnum(char):
            out.append(char.lower())
        elif out and out[-1] != "-":
            out.append("-")
    return _nfc("".join(out).strip("-"))


def slug_to_title(slug: str) -> str:
    """Each ``-`` a space, each word capitalised.

    >>> slug_to_title("api-v2-0")
    'Api V2 0'
    """
    return " ".join(word.capitalize() for word in slug.split("-"))


# -- the model ----------------------------------------------------------------------------


class Memory(BaseModel):
    """One memory. ``slug`` comes from the title and the times are now when omitted.

    Fields may also be given by position, in the order ``scope, title, content, topics,
    embeddings, slug, inserted_at, updated_at``.

    >>> m = Memory("global", "API v2.0", "Use /v2 for new clients.", ["api"])
    >>> (m.slug, m.topics, m.embeddings)
    ('api-v2-0', ['api'], None)
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    scope: Scope
    title: str
    content: str
    topics: list[str] = Field(default_factory=list)
    #: Left out of ``repr``: hundreds of floats that say nothing to a reader.
    embeddings: list[float] | None = Field(default=None, repr=False)
    slug: str = ""
    inserted_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    updated_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))

    def __init__(self, *args: Any, **data: Any) -> None:
        names = list(type(self).model_fields)
        if len(args) > len(names):
            raise TypeError(f"Memory takes at most {len(names)} positional fields")
        for name, value in zip(names, args, strict=False):
            if name in data:
                raise TypeError(f"Memory got {name!r} twice")
            data[name] = value
        super().__init__(**data)

    @model_validator(mode="before")
    @classmethod
    def _fill(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if v is not None or k == "embeddings"}
            if not data.get("slug") and isinstance(data.get("title"), str):
                data["slug"] = title_to_slug(data["title"])
            if isinstance(data.get("topics"), (list, tuple)):
                data["topics"] = list(dict.fromkeys(data["topics"]))
        return data


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
            body = "\n".join(_triples(subject, stored, literal))
            g = sparql_term(graph)
            self.store.sparql_update(
                f"{_delete_request(graph, subject)} ;\nINSERT DATA {{ GRAPH {g} {{\n{body}\n}} }}"
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
            self.store.sparql_update(_delete_request(graph, subject))
            vectors.remove(subject)
            texts.remove(subject)

    # -- reading ---------------------------------------------------------------------------

    def read(self, scope: str, title: str) -> Memory:
        """The memory of ``scope`` whose title has the slug of ``title``.

        **One rule for incomplete records, on every read path**: a record that is not a
        whole memory (no content, no title, no scope, or a field that is not a literal,
        as another SPARQL client or an interrupted write on a server that does not roll
        back may leave) is not a memory: ``read`` raises ``MemoryNotFound``, ``exists`` is
        False, ``list``, ``search`` and ``by_topic`` leave it out. ``save`` at its title
        replaces it; ``forget`` removes it.

        Raises:
            MemoryScopeError: the scope is unknown or not available.
            MemoryNotFound: no such memory.
        """
        graph = self.graph(scope)
        subject = self._subject(scope, title_to_slug(title))
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

    def search(self, query: str, limit: int = 10) -> list[tuple[Memory, float]]:
        """The memories of every available scope closest to ``query``, scores above 0,
        highest first, at most ``limit``. By ``ranking``: ``hybrid`` fuses BM25 over title,
        topics and content with the cosine of embeddings (``rdfmem.domain.hybrid.fuse``:
        0.8 x BM25 / the query's best BM25 + 0.2 x cosine), ``keyword`` is BM25, ``vector``
        the cosine.

        Memories whose embeddings have another dimension than the embedder's are not
        compared by vector. On an embedded store the vectors and keyword postings are kept
        in memory, changed by each save and forget; on a remote store they are read
        afresh with one query each (vectors are followed with the server's change log).
        """
        graphs = [self.graph(s) for s in self.scopes]
        hits = ranked_search(
            self.ranking, self._texts, self._index, self.embedder, graphs, query, limit
        )
        found = self._read((graph, subject) for graph, subject, _ in hits)
        return [(found[s.value], score) for _, s, score in hits if s.value in found]

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

    def list(self, scope: str | None = None) -> builtins.list[str]:
        """The titles in ``scope``, or in every available scope (in scope order) when None;
        sorted within a scope.

        Raises:
            MemoryScopeError: the scope is unknown or not available.
        """
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


# -- RDF ----------------------------------------------------------------------------------


def _embedding_text(memory: Memory) -> str:
    return "\n".join([memory.title, " ".join(memory.topics), memory.content])


def _vector_list(literal: RdfLiteral) -> list[float]:
    values: list[float] = literal_vector(literal).astype(np.float64).tolist()
    return values


def _triples(subject: NamedNode, m: Memory, embedding: RdfLiteral) -> list[str]:
    s = sparql_term(subject)

    def line(predicate: NamedNode, term: Any) -> str:
        return f"{s} {sparql_term(predicate)} {sparql_term(term)} ."

    out = [
        line(_RDF_TYPE, _CLASS),
        line(_SCOPE, RdfLiteral(m.scope)),
        line(_TITLE, RdfLiteral(m.title)),
        line(_SLUG, RdfLiteral(m.slug)),
        line(_CONTENT, RdfLiteral(m.content)),
        line(EMBEDDING, embedding),
        line(_CREATED, to_object(m.inserted_at)),
        line(_MODIFIED, to_object(m.updated_at)),
    ]
    out.extend(line(_TOPIC, RdfLiteral(t)) for t in m.topics)
    if len(m.topics) > 1:
        order = RdfLiteral(json.dumps(m.topics, ensure_ascii=False), datatype=RDF_JSON)
        out.append(line(_TOPIC_ORDER, order))
    return out


def _delete_request(graph: NamedNode, subject: NamedNode) -> str:
    g, s = sparql_term(graph), sparql_term(subject)
    return f"DELETE {{ GRAPH {g} {{ {s} ?p ?o }} }} WHERE {{ GRAPH {g} {{ {s} ?p ?o }} }}"


def _from_rdf(p: dict[str, list[Any]]) -> Memory | None:
    """A memory from its properties, or None when they do not make one."""

    def one(predicate: NamedNode) -> Any:
        terms = p.get(predicate.value) or []
        term = terms[0] if terms else None
        return from_literal(term) if isinstance(term, RdfLiteral) else None

    if _CLASS not in (p.get(_RDF_TYPE.value) or []):
        return None
    topics = [t.value for t in p.get(_TOPIC.value, []) if isinstance(t, RdfLiteral)]
    order = one(_TOPIC_ORDER)
    have = set(topics)
    ordered = [t for t in (order if isinstance(order, list) else []) if t in have]
    topics = list(dict.fromkeys(ordered)) + sorted(have.difference(ordered))
    vectors = [t for t in p.get(EMBEDDING.value, []) if isinstance(t, RdfLiteral)]
    try:
        embeddings = _vector_list(vectors[0]) if vectors else None
    except InvalidValue:
        embeddings = None
    try:
        return Memory(
            scope=one(_SCOPE),
            title=one(_TITLE),
            content=one(_CONTENT),
            topics=topics,
            embeddings=embeddings,
            slug=one(_SLUG),
            inserted_at=one(_CREATED),
            updated_at=one(_MODIFIED),
        )
    except ValidationError:
        return None  # written by someone else and incomplete: not a memory


def _column(rows: Any, name: str) -> list[NamedNode]:
    assert isinstance(rows, SelectResult)
    return [row[name] for row in rows if isinstance(row.get(name), NamedNode)]  # type: ignore[misc]
