"""Generalisations: abstracted memories with a level and a confidence (from Gralkor).

A generalisation travels as text in the ``GEN|v1|`` wire format: one header line of JSON
metadata, then the free-text content::

    GEN|v1|{"id":"abc123","level":2,"confidence":0.85,"generalises":["def456"]}
    Eli prefers concise, structured responses by default.

``Generalisations(store, group_id)`` keeps them as plain RDF in the named graph of the
partition ``"{group_id}_gen"``, so any SPARQL tool reads them without the wire format::

    <urn:rdfmem:generalisation:eli:abc123> a rm:Generalisation ;
        dcterms:identifier "abc123" ; rm:level 2 ; rm:confidence 0.85e0 ;
        rm:content "Eli prefers …" ; prov:wasDerivedFrom <urn:rdfmem:generalisation:eli:def456> ;
        dcterms:created "…"^^xsd:dateTime ; rm:embedding "…"^^rm:float32Vector .

>>> g = Generalisation(id="abc123", content="Eli prefers concise answers.", level=2,
...                    confidence=0.85, generalises=["def456"])
>>> encode(g).splitlines()[0]
'GEN|v1|{"id":"abc123","level":2,"confidence":0.85,"generalises":["def456"]}'
>>> decode(encode(g))[1]
'Eli prefers concise answers.'
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote, unquote

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pyoxigraph import Literal, NamedNode

from rdfmem.core.errors import (
    GeneralisationNotFound,
    GeneralisationParseError,
    InvalidKey,
    NotAGeneralisation,
)
from rdfmem.core.ontology import PREFIXES, RDFMEM, named_query
from rdfmem.core.results import SelectResult
from rdfmem.core.terms import RDF_JSON, from_literal, sparql_term, to_object
from rdfmem.domain.embeddings import (
    EMBEDDING,
    Embedder,
    HashingEmbedder,
    VectorIndex,
    vector_literal,
)
from rdfmem.domain.hybrid import TextIndex
from rdfmem.domain.hybrid import search as ranked_search
from rdfmem.store.rdfstore import RdfStore

__all__ = ["PREFIX", "Generalisation", "Generalisations", "decode", "encode"]

#: The first characters of every generalisation in the wire format.
PREFIX = "GEN|v1|"
_GROUP_ID = re.compile(r"[a-zA-Z0-9_-]+")
_REQUIRED = ("id", "level", "confidence")

_RDF_TYPE = NamedNode(PREFIXES["rdf"] + "type")
_CLASS = NamedNode(RDFMEM + "Generalisation")
_IDENTIFIER = NamedNode(PREFIXES["dcterms"] + "identifier")
_LEVEL = NamedNode(RDFMEM + "level")
_CONFIDENCE = NamedNode(RDFMEM + "confidence")
_CONTENT = NamedNode(RDFMEM + "content")
_DERIVED_FROM = NamedNode(PREFIXES["prov"] + "wasDerivedFrom")
_ORDER = NamedNode(RDFMEM + "generalisesInOrder")
_CREATED = NamedNode(PREFIXES["dcterms"] + "created")
_MODIFIED = NamedNode(PREFIXES["dcterms"] + "modified")


class Generalisation(BaseModel):
    """An abstracted memory: ``level`` (0 = concrete), ``confidence`` (0..1), and the ids of
    what it generalises.

    Fields may also be given by position, in the order ``id, content, level, confidence,
    generalises, created_at``.

    >>> Generalisation("g1", "Users like short answers.", 1, 0.9).generalises
    []
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    id: str = Field(min_length=1)
    content: str
    level: int = Field(ge=0, strict=True)
    confidence: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    generalises: list[str] = Field(default_factory=list)
    created_at: datetime | None = None

    def __init__(self, *args: Any, **data: Any) -> None:
        names = list(type(self).model_fields)
        if len(args) > len(names):
            raise TypeError(f"Generalisation takes at most {len(names)} positional fields")
        for name, value in zip(names, args, strict=False):
            if name in data:
                raise TypeError(f"Generalisation got {name!r} twice")
            data[name] = value
        super().__init__(**data)

    @field_validator("generalises")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))

    @field_validator("confidence", mode="before")
    @classmethod
    def _no_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("confidence is a number from 0 to 1, not a boolean")
        return value


# -- the wire format --------------------------------------------------------------------


def encode(g: Generalisation) -> str:
    """``GEN|v1|`` + the JSON of id, level, confidence and generalises, a newline, the content.

    ``created_at`` is not part of the wire format.
    """
    meta = {"id": g.id, "level": g.level, "confidence": g.confidence, "generalises": g.generalises}
    header = json.dumps(meta, ensure_ascii=False, separators=(",", ":"))
    return f"{PREFIX}{header}\n{g.content}"


def decode(raw: str) -> tuple[Generalisation, str]:
    """The generalisation in ``raw`` and its content (trimmed; inner newlines kept).

    The text is split on its first newline: the first line is the header.

    >>> g, content = decode('GEN|v1|{"id":"a","level":0,"confidence":1}\\n  Hi.\\nBye.  ')
    >>> (g.id, g.generalises, content)
    ('a', [], 'Hi.\\nBye.')

    Raises:
        NotAGeneralisation: the text has no newline or does not start with ``GEN|v1|``.
        GeneralisationParseError: the header is not a JSON object (``field`` is
            ``"metadata"``), or lacks or mistypes ``id``, ``level``, ``confidence`` or
            ``generalises`` (``field`` names it).
    """
    if not isinstance(raw, str):
        raise NotAGeneralisation(f"a generalisation is text, not {type(raw).__name__}")
    header, newline, body = raw.partition("\n")
    if not header.startswith(PREFIX):
        raise NotAGeneralisation(f"text does not start with {PREFIX!r}: {raw[:40]!r}")
    if not newline:
        raise NotAGeneralisation(
            f"a generalisation has a header line, a newline, then content: "
            f"{raw[:40]!r} has no newline"
        )
    try:
        meta = json.loads(header[len(PREFIX) :])
    except ValueError as exc:
        raise GeneralisationParseError(
            f"the {PREFIX} header is not valid JSON: {exc}", field="metadata"
        ) from exc
    if not isinstance(meta, dict):
        raise GeneralisationParseError(
            f"the {PREFIX} header must be a JSON object, not {type(meta).__name__}",
            field="metadata",
        )
    for name in _REQUIRED:
        if name not in meta:
            raise GeneralisationParseError(f"the {PREFIX} header has no {name!r}", field=name)
    content = body.strip()
    fields = {name: meta[name] for name in (*_REQUIRED, "generalises") if name in meta}
    if fields.get("generalises") is None:
        fields["generalises"] = []
    try:
        g = Generalisation(content=content, **fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "metadata"
        raise GeneralisationParseError(
            f"the {PREFIX} header has a bad {field!r}: {first['msg']}", field=field
        ) from exc
    return g, content


# -- the store ----------------------------------------------------------------------------


def _escape(text: str) -> str:
    """Percent-encoding of everything but unreserved characters: safe in any IRI position."""
    return quote(text, safe="-._~")


class Generalisations:
    """The generalisations of one group, in the named graph of partition ``{group_id}_gen``.

    >>> gens = Generalisations(RdfStore(), "eli")
    >>> _ = gens.add(Generalisation("g1", "Eli likes tea in the morning.", 0, 0.7))
    >>> _ = gens.add(Generalisation("g2", "Eli likes hot drinks.", 1, 0.8, ["g1"]))
    >>> [g.id for g in gens.lineage("g2")]
    ['g1']
    >>> [(g.id, round(score, 2)) for g, score in gens.search("tea", 1)]
    [('g1', 0.88)]

    Raises:
        InvalidKey: ``group_id`` does not match ``^[a-zA-Z0-9_-]+$``.
    """

    def __init__(self, store: RdfStore, group_id: str, *, embedder: Embedder | None = None) -> None:
        if not isinstance(group_id, str) or not _GROUP_ID.fullmatch(group_id):
            raise InvalidKey(f"a group id matches ^[a-zA-Z0-9_-]+$, not {group_id!r}")
        self.store = store
        self.group_id = group_id
        #: The Gralkor partition name.
        self.partition = f"{group_id}_gen"
        #: The named graph holding this group's generalisations.
        self.graph = NamedNode(f"urn:rdfmem:partition:{self.partition}")
        self.embedder: Embedder = embedder if embedder is not None else HashingEmbedder()
        self._subject_prefix = f"urn:rdfmem:generalisation:{group_id}:"
        self._index = VectorIndex(store)
        self._texts = TextIndex(store, (_CONTENT,))

    def subject(self, id: str) -> NamedNode:
        """The IRI of the generalisation ``id`` in this group (escaped: any id is safe)."""
        return NamedNode(self._subject_prefix + _escape(id))

    # -- writing ---------------------------------------------------------------------------

    def add(self, g: Generalisation) -> Generalisation:
        """Store ``g``, replacing one with the same id; returns it as stored (``created_at``
        set to now when None, or kept from the one replaced)."""
        return self._put(g, must_exist=False)

    def update(self, g: Generalisation) -> Generalisation:
        """Replace the generalisation with ``g.id`` in place; returns it as stored.

        Raises:
            GeneralisationNotFound: no generalisation has that id in this group.
        """
        return self._put(g, must_exist=True)

    def delete(self, id: str) -> bool:
        """Remove the generalisation ``id`` (what it generalises is left alone); True when
        there was one, False when there was nothing to remove (the rule of every ``delete``
        verb: ``RdfStore.delete``, ``DecisionGraph.delete_node``)."""
        subject = self.subject(id)
        with (
            self.store.exclusive(subject),
            self._index.writing(self.graph, subject) as vectors,
            self._texts.writing(self.graph) as texts,
        ):
            if not self._exists(subject):
                return False
            self.store.sparql_update(self._versioned(self._delete_request(subject), subject))
            vectors.remove(subject)
            texts.remove(subject)
        return True

    def _put(self, g: Generalisation, *, must_exist: bool) -> Generalisation:
        subject = self.subject(g.id)
        vector = self.embedder.embed([g.content])[0]
        now = datetime.now(timezone.utc)
        with (
            self.store.exclusive(subject),
            self._index.writing(self.graph, subject) as vectors,
            self._texts.writing(self.graph) as texts,
        ):
            old = self._read([subject]).get(subject.value)
            if old is None and must_exist:
                raise GeneralisationNotFound(
                    f"no generalisation {g.id!r} in group {self.group_id!r} to update"
                )
            created = g.created_at or (old.created_at if old is not None else None) or now
            stored = g.model_copy(update={"created_at": created})
            lines = self._triples(subject, stored, modified=now if old is not None else None)
            lines.append(
                f"{sparql_term(subject)} {sparql_term(EMBEDDING)} "
                f"{sparql_term(vector_literal(vector))} ."
            )
            body = "\n".join(lines)
            graph = sparql_term(self.graph)
            self.store.sparql_update(
                self._versioned(
                    f"{self._delete_request(subject)} ;\n"
                    f"INSERT DATA {{ GRAPH {graph} {{\n{body}\n}} }}",
                    subject,
                )
            )
            vectors.put(subject, vector)
            texts.put(subject, stored.content)
        return stored

    def _versioned(self, update: str, subject: NamedNode) -> str:
        # On a store keeping history, the generalisation's version lands in the same
        # request (``RdfStore.versioning_update``; inside the write's ``exclusive``).
        if not self.store.keeps_history:
            return update
        return update + " ;\n" + self.store.versioning_update(self.graph, [subject])

    def _triples(
        self, subject: NamedNode, g: Generalisation, modified: datetime | None
    ) -> list[str]:
        s = sparql_term(subject)
        out = [
            f"{s} {sparql_term(_RDF_TYPE)} {sparql_term(_CLASS)} .",
            f"{s} {sparql_term(_IDENTIFIER)} {sparql_term(Literal(g.id))} .",
            f"{s} {sparql_term(_LEVEL)} {sparql_term(to_object(g.level))} .",
            f"{s} {sparql_term(_CONFIDENCE)} {sparql_term(to_object(float(g.confidence)))} .",
            f"{s} {sparql_term(_CONTENT)} {sparql_term(Literal(g.content))} .",
        ]
        for target in dict.fromkeys(g.generalises):
            out.append(f"{s} {sparql_term(_DERIVED_FROM)} {sparql_term(self.subject(target))} .")
        if len(g.generalises) > 1:
            order = Literal(json.dumps(g.generalises, ensure_ascii=False), datatype=RDF_JSON)
            out.append(f"{s} {sparql_term(_ORDER)} {sparql_term(order)} .")
        if g.created_at is not None:
            out.append(f"{s} {sparql_term(_CREATED)} {sparql_term(to_object(g.created_at))} .")
        if modified is not None:
            out.append(f"{s} {sparql_term(_MODIFIED)} {sparql_term(to_object(modified))} .")
        return out

    def _delete_request(self, subject: NamedNode) -> str:
        graph, s = sparql_term(self.graph), sparql_term(subject)
        return (
            f"DELETE {{ GRAPH {graph} {{ {s} ?p ?o }} }} WHERE {{ GRAPH {graph} {{ {s} ?p ?o }} }}"
        )

    # -- reading ---------------------------------------------------------------------------

    def get(self, id: str) -> Generalisation:
        """The generalisation ``id``.

        Raises:
            GeneralisationNotFound: no generalisation has that id in this group.
        """
        subject = self.subject(id)
        found = self._read([subject]).get(subject.value)
        if found is None:
            raise GeneralisationNotFound(f"no generalisation {id!r} in group {self.group_id!r}")
        return found

    def __contains__(self, id: object) -> bool:
        return isinstance(id, str) and bool(id) and self._exists(self.subject(id))

    def by_level(self, level: int) -> list[Generalisation]:
        """The generalisations at ``level``, most confident first (then by id)."""
        rows = self.store.query(
            named_query("generalisations_by_level"),
            bindings={"graph": self.graph, "level": to_object(int(level))},
        )
        found = self._read(_subjects(rows, "generalisation"))
        return sorted(found.values(), key=lambda g: (-g.confidence, g.id))

    def lineage(self, id: str) -> list[Generalisation]:
        """Everything ``id`` generalises, directly or through others (a SPARQL property path
        over ``prov:wasDerivedFrom``): highest level first, then by id; ``id`` itself is left
        out, even in a cycle, and so are ids that are not stored.

        Raises:
            GeneralisationNotFound: no generalisation has that id in this group.
        """
        if not self._exists(self.subject(id)):
            raise GeneralisationNotFound(f"no generalisation {id!r} in group {self.group_id!r}")
        rows = self.store.query(
            named_query("generalisation_lineage"),
            bindings={"graph": self.graph, "id": Literal(id)},
        )
        found = self._read(_subjects(rows, "generalisation"))
        return sorted(found.values(), key=lambda g: (-g.level, g.id))

    def search(
        self, query: str | None = None, limit: int = 10, *, text: str | None = None
    ) -> list[tuple[Generalisation, float]]:
        """The generalisations closest to ``query`` by BM25 over their content fused with the
        cosine of embeddings (as ``Memories.search``), as
        ``(generalisation, score)`` with a score above 0, best first, at most ``limit``; each
        ``encode``\\s to text that ``decode``\\s back. ``text=`` is the older name of
        ``query`` (as ``Memories.search`` names it) and still works.

        Raises:
            TypeError: no search text, or both ``query`` and ``text``.
        """
        if text is not None:
            if query is not None:
                raise TypeError("search takes query or text (its older name), not both")
            query = text
        if query is None:
            raise TypeError("search needs the text to search for: search(query, limit)")
        if limit <= 0:
            return []
        hits = ranked_search(
            "hybrid", self._texts, self._index, self.embedder, [self.graph], query, limit
        )
        found = self._read([subject for _, subject, _ in hits])
        return [(found[s.value], score) for _, s, score in hits if s.value in found]

    def _exists(self, subject: NamedNode) -> bool:
        return self.store.ask(subject=subject, predicate=_RDF_TYPE, object=_CLASS, graph=self.graph)

    def _read(self, subjects: Iterable[NamedNode]) -> dict[str, Generalisation]:
        """The stored generalisations among ``subjects`` (one query), by subject IRI."""
        wanted = list(dict.fromkeys(subjects))
        if not wanted:
            return {}
        values = " ".join(sparql_term(s) for s in wanted)
        rows = self.store.query(
            f"SELECT ?s ?p ?o WHERE {{ VALUES ?s {{ {values} }} "
            f"GRAPH {sparql_term(self.graph)} {{ ?s ?p ?o }} }}"
        )
        props: dict[str, dict[str, list[Any]]] = {}
        for row in rows:  # type: ignore[union-attr]
            props.setdefault(row["s"].value, {}).setdefault(row["p"].value, []).append(row["o"])
        out: dict[str, Generalisation] = {}
        for iri, p in props.items():
            g = self._from_rdf(p)
            if g is not None:
                out[iri] = g
        return out

    def _from_rdf(self, p: dict[str, list[Any]]) -> Generalisation | None:
        """A generalisation from its properties, or None when they do not make one."""

        def one(predicate: NamedNode) -> Any:
            terms = p.get(predicate.value) or []
            term = terms[0] if terms else None
            return from_literal(term) if isinstance(term, Literal) else None

        if _CLASS not in (p.get(_RDF_TYPE.value) or []):
            return None
        targets = [
            self._id_of(t.value) for t in p.get(_DERIVED_FROM.value, []) if isinstance(t, NamedNode)
        ]
        order = one(_ORDER)
        generalises = _in_order(targets, order if isinstance(order, list) else [])
        created = one(_CREATED)
        try:
            return Generalisation(
                id=one(_IDENTIFIER),
                content=one(_CONTENT),
                level=one(_LEVEL),
                confidence=one(_CONFIDENCE),
                generalises=generalises,
                created_at=created if isinstance(created, datetime) else None,
            )
        except ValidationError:
            return None  # written by someone else and incomplete: not a generalisation

    def _id_of(self, iri: str) -> str:
        if iri.startswith(self._subject_prefix):
            return unquote(iri[len(self._subject_prefix) :])
        return iri

    def __repr__(self) -> str:
        return f"Generalisations({self.store!r}, {self.group_id!r})"


def _subjects(rows: Any, name: str) -> list[NamedNode]:
    assert isinstance(rows, SelectResult)
    return [row[name] for row in rows if isinstance(row.get(name), NamedNode)]  # type: ignore[misc]


def _in_order(present: list[str], order: list[Any]) -> list[str]:
    """``present`` in the stored ``order``; values the order does not know come last, sorted."""
    have = set(present)
    ordered = [x for x in dict.fromkeys(order) if isinstance(x, str) and x in have]
    return ordered + sorted(have.difference(ordered))
