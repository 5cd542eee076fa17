"""The triple half of ``RdfStore`` (the Dagonizer TripleStore, with real joins), and SPARQL.

Patterns compile to SPARQL in pure functions (``compile_patterns``) that tests check without
a backend; a single pattern is answered by the backend's index directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from os import PathLike
from pathlib import Path
from typing import Any, TypeAlias

from pyoxigraph import (
    BlankNode,
    DefaultGraph,
    NamedNode,
    Quad,
    QueryBoolean,
    QuerySolutions,
    RdfFormat,
    Variable,
    serialize,
)

from rdfmem.backends.base import Backend
from rdfmem.core.errors import FormatError, InvalidTerm, NetworkAccessRefused, QueryError
from rdfmem.core.formats import rdf_format
from rdfmem.core.guard import find_forbidden
from rdfmem.core.results import GraphResult, Row, SelectResult
from rdfmem.core.terms import sparql_term, to_graph, to_object, to_predicate, to_subject
from rdfmem.store.history import HISTORY_PREFIX as _HISTORY_PREFIX
from rdfmem.store.history_triples import triple_history
from rdfmem.store.history_wire import apply_versioned

__all__ = ["Pattern", "TripleStore", "compile_patterns"]

Pattern: TypeAlias = tuple[Any, Any, Any] | tuple[Any, Any, Any, Any]
_WILD = "__rdfmem_w"
_GRAPH = "__rdfmem_g"
_MAX_LOCKED = 100  # subjects a versioned write locks one by one; past it, the whole store
QueryResult: TypeAlias = SelectResult | bool | GraphResult


def _pattern_terms(pattern: Sequence[Any]) -> tuple[Any, Any, Any, Any]:
    if not isinstance(pattern, (tuple, list)) or len(pattern) not in (3, 4):
        raise InvalidTerm(f"a pattern is a tuple (s, p, o) or (s, p, o, g), not {pattern!r}")
    s, p, o = pattern[:3]
    g = pattern[3] if len(pattern) == 4 else None
    return (
        None if s is None else to_subject(s, variables=True),
        None if p is None else to_predicate(p, variables=True),
        None if o is None else to_object(o, variables=True),
        None if g is None else to_graph(g, variables=True),
    )


def _check_user_variable(term: Any) -> None:
    if isinstance(term, Variable) and term.value.startswith("__rdfmem"):
        raise InvalidTerm(f"variable names starting with __rdfmem are reserved: ?{term.value}")


def compile_patterns(patterns: Sequence[Pattern], *, form: str = "select") -> tuple[str, list[str]]:
    """SPARQL for a join of patterns: ``(query, user variables)``.

    ``form`` is ``select``, ``ask`` or ``count``. A ``None`` slot becomes a fresh variable;
    a pattern without a graph matches the default graph or any named graph.

    >>> q, names = compile_patterns([("?doc", "urn:author", "?who"), ("?who", "urn:name", "Al")])
    >>> names
    ['doc', 'who']
    >>> print(q)  # doctest: +NORMALIZE_WHITESPACE
    SELECT DISTINCT ?doc ?who WHERE {
    { { ?doc <urn:author> ?who . } UNION { GRAPH ?__rdfmem_g0 { ?doc <urn:author> ?who . } } }
    { { ?who <urn:name> "Al" . } UNION { GRAPH ?__rdfmem_g1 { ?who <urn:name> "Al" . } } }
    }
    """
    names: list[str] = []
    groups: list[str] = []
    wild = 0
    for index, pattern in enumerate(patterns):
        terms = list(_pattern_terms(pattern))
        for i, term in enumerate(terms[:3]):
            if term is None:
                terms[i] = Variable(f"{_WILD}{wild}")
                wild += 1
            elif isinstance(term, BlankNode):
                raise InvalidTerm(
                    "a blank node cannot be matched inside a join (SPARQL reads it as a "
                    "variable); select it with a single pattern instead"
                )
            else:
                _check_user_variable(term)
            name = terms[i].value if isinstance(terms[i], Variable) else None
            if name is not None and not name.startswith("__rdfmem") and name not in names:
                names.append(name)
        s, p, o, g = terms
        triple = f"{sparql_term(s)} {sparql_term(p)} {sparql_term(o)} ."
        if g is None:
            groups.append(f"{{ {{ {triple} }} UNION {{ GRAPH ?{_GRAPH}{index} {{ {triple} }} }} }}")
        elif isinstance(g, DefaultGraph):
            groups.append(f"{{ {triple} }}")
        else:
            if isinstance(g, BlankNode):
                raise InvalidTerm("a blank node cannot name a graph inside a join")
            _check_user_variable(g)
            if isinstance(g, Variable) and g.value not in names:
                names.append(g.value)
            groups.append(f"GRAPH {sparql_term(g)} {{ {triple} }}")
    body = "\n".join(groups)
    if form == "ask":
        return f"ASK {{\n{body}\n}}", names
    if form == "count":
        return f"SELECT (COUNT(*) AS ?{_WILD}n) WHERE {{\n{body}\n}}", names
    projection = " ".join("?" + n for n in names) if names else "*"
    distinct = "DISTINCT " if names else ""
    return f"SELECT {distinct}{projection} WHERE {{\n{body}\n}}", names


def refuse_network(sparql: str, *, allow_network: bool = False) -> None:
    """Refuse SPARQL that would reach the network (``SERVICE``, ``LOAD``) unless allowed.

    The text is judged by ``sparql_guard.find_forbidden``, the check ``rdfmem serve`` makes:
    keywords only, not strings, IRIs, comments or names.

    >>> refuse_network("SELECT * { ?s <urn:load> 'SERVICE' }")
    >>> refuse_network("LOAD <http://example.org/x.ttl>", allow_network=True)

    Raises:
        NetworkAccessRefused: ``SERVICE`` or ``LOAD`` without ``allow_network``.
    """
    if allow_network:
        return
    found = find_forbidden(sparql)
    if found is not None:
        raise NetworkAccessRefused(
            f"{found.keyword} at line {found.line}, column {found.column} would reach the "
            "network; pass allow_network=True to allow it"
        )


def _slots(quad: Quad) -> tuple[Any, Any, Any, Any]:
    return (quad.subject, quad.predicate, quad.object, quad.graph_name)


class TripleStore:
    """assert / retract / select / ask / count / triples / clear_graph, plus SPARQL."""

    backend: Backend
    prefixes: dict[str, str]

    # -- editing ------------------------------------------------------------------------

    def _quad(self, s: Any, p: Any, o: Any, graph: Any) -> Quad:
        subject, predicate, obj = to_subject(s), to_predicate(p), to_object(o)
        name = DefaultGraph() if graph is None else to_graph(graph)
        for term in (subject, predicate, obj, name):
            if isinstance(term, Variable):
                raise InvalidTerm(f"a variable cannot be asserted or retracted: ?{term.value}")
        return Quad(subject, predicate, obj, name)  # type: ignore[arg-type]

    def assert_(self, s: Any, p: Any, o: Any, graph: Any = None) -> None:
        """Add a triple to ``graph`` (the default graph when None).

        Raises:
            InvalidTerm: a slot is not a term of its position, or is a variable.
        """
        quad = self._quad(s, p, o, graph)
        with self._section([quad]):
            self._edit([], [quad])

    def assert_many(self, triples: Iterable[Sequence[Any]], graph: Any = None) -> int:
        """Add many triples ``(s, p, o)`` or quads ``(s, p, o, g)`` in one atomic step;
        a triple without a graph goes to ``graph`` (the default graph when None).
        Returns how many were given. Nothing is added when one of them is malformed.

        >>> from rdfmem import RdfStore
        >>> store = RdfStore()
        >>> store.assert_many([("urn:a", "urn:p", 1), ("urn:b", "urn:p", 2, "urn:g")])
        2

        Raises:
            InvalidTerm: a slot is not a term of its position; nothing is added.
        """
        quads = []
        for item in triples:
            if len(item) not in (3, 4):
                raise InvalidTerm(f"expected (s, p, o) or (s, p, o, g), not {item!r}")
            quads.append(
                self._quad(item[0], item[1], item[2], item[3] if len(item) == 4 else graph)
            )
        with self._section(quads):
            self._edit([], quads)
        return len(quads)

    def retract(self, s: Any, p: Any, o: Any, graph: Any = None) -> bool:
        """Remove a triple from ``graph`` (the default graph when None); True if it was there."""
        quad = self._quad(s, p, o, graph)
        with self._section([quad]):
            found = list(self.backend.match(*_slots(quad)))
            if not found:
                return False
            self._edit(found, [])
        return True

    def clear_graph(self, graph: Any) -> None:
        """Remove every triple of one graph (``DefaultGraph()`` for the default graph)."""
        name = to_graph(graph)
        if isinstance(name, Variable):
            raise InvalidTerm("clear_graph needs a graph, not a variable")
        with self._section(None):
            self._edit(list(self.backend.match(None, None, None, name)), [])

    def _section(self, quads: Sequence[Quad] | None) -> AbstractContextManager[Any]:
        # The write lock; on a store keeping history, the write's section over the
        # subjects it versions (``exclusive``: also across processes and clients, so the
        # heads read in it stay the heads), or over the whole store (None, or many).
        if getattr(self, "_history", None) is None:
            return self.backend.lock
        subjects = list(
            dict.fromkeys(q.subject for q in quads or () if isinstance(q.subject, NamedNode))
        )
        whole = quads is None or len(subjects) > _MAX_LOCKED
        return self.backend.exclusive([] if whole else subjects)

    def _edit(self, remove: list[Quad], add: list[Quad]) -> None:
        # ``backend.apply``, with a version of each resource it changes when the store
        # keeps history (``rdfmem.store.history_triples``), in the same write.
        recorder = getattr(self, "_history", None)
        if recorder is None:
            self.backend.apply(remove, add)
            return
        renames: Callable[[NamedNode], Mapping[NamedNode, NamedNode]] = getattr(
            self, "_renames_for", lambda graph: {}
        )
        gone, added = triple_history(self.backend, recorder, remove, add, renames)
        if not gone and not added:
            self.backend.apply(remove, add)
            return
        apply_versioned(self.backend, [*remove, *gone], [*add, *added])

    def triples(self, graph: Any = None) -> Iterator[Quad]:
        """The quads of one graph, or of every graph when None: read at the call, so the
        iterator may be used on any thread and after ``close()``."""
        name = None if graph is None else to_graph(graph)
        if isinstance(name, Variable):
            raise InvalidTerm("triples() needs a graph, not a variable")
        return iter(list(self.backend.match(None, None, None, name)))

    # -- patterns -----------------------------------------------------------------------

    def _patterns(
        self,
        patterns: Sequence[Pattern] | None,
        subject: Any,
        predicate: Any,
        object: Any,
        graph: Any,
    ) -> list[Pattern]:
        if patterns is not None:
            if isinstance(patterns, tuple):
                return [patterns]
            return list(patterns)
        return [(subject, predicate, object, graph)]

    def _match_one(self, pattern: Pattern) -> Iterator[Row]:
        s, p, o, g = _pattern_terms(pattern)
        slots = [("s", s), ("p", p), ("o", o), ("g", g)]
        bound = [None if isinstance(t, Variable) else t for _, t in slots]
        for _, t in slots:
            _check_user_variable(t)
        variables = [(i, t.value) for i, (_, t) in enumerate(slots) if isinstance(t, Variable)]
        graph_is_variable = isinstance(g, Variable)
        for quad in self.backend.match(*bound):
            if graph_is_variable and isinstance(quad.graph_name, DefaultGraph):
                continue  # as in SPARQL, a graph variable binds named graphs only
            row: dict[str, Any] = {}
            values = (quad.subject, quad.predicate, quad.object, quad.graph_name)
            for i, name in variables:
                if name in row and row[name] != values[i]:
                    break  # a repeated variable must bind the same term
                row[name] = values[i]
            else:
                yield row

    def select(
        self,
        patterns: Sequence[Pattern] | None = None,
        *,
        subject: Any = None,
        predicate: Any = None,
        object: Any = None,
        graph: Any = None,
    ) -> list[Row]:
        """Rows binding the patterns' variables: one pattern, or several joined.

        >>> from pyoxigraph import NamedNode
        >>> from rdfmem import RdfStore
        >>> store = RdfStore()
        >>> store.assert_("urn:doc:1", "urn:author", NamedNode("urn:alice"))  # str: a literal
        >>> store.assert_("urn:alice", "urn:name", "Alice")
        >>> rows = store.select([("?doc", "urn:author", "?who"), ("?who", "urn:name", "?name")])
        >>> [(r["doc"].value, r["name"].value) for r in rows]
        [('urn:doc:1', 'Alice')]

        Raises:
            InvalidTerm: a slot that is not a term or variable of its position.
        """
        todo = self._patterns(patterns, subject, predicate, object, graph)
        if len(todo) == 1:
            rows = list(self._match_one(todo[0]))
            # Distinct rows, as a join returns them.
            seen: set[tuple[tuple[str, str], ...]] = set()
            unique = []
            for row in rows:
                key = tuple(sorted((k, str(v)) for k, v in row.items()))
                if key not in seen:
                    seen.add(key)
                    unique.append(row)
            return unique
        sparql, _ = compile_patterns(todo)
        return list(self.query(sparql, allow_network=True))  # type: ignore[arg-type]

    def ask(
        self,
        patterns: Sequence[Pattern] | None = None,
        *,
        subject: Any = None,
        predicate: Any = None,
        object: Any = None,
        graph: Any = None,
    ) -> bool:
        """True when the patterns match at least once."""
        todo = self._patterns(patterns, subject, predicate, object, graph)
        if len(todo) == 1:
            return next(self._match_one(todo[0]), None) is not None
        sparql, _ = compile_patterns(todo, form="ask")
        return bool(self.query(sparql, allow_network=True))

    def count(
        self,
        patterns: Sequence[Pattern] | None = None,
        *,
        subject: Any = None,
        predicate: Any = None,
        object: Any = None,
        graph: Any = None,
    ) -> int:
        """How many quads (one pattern) or solutions (a join) match."""
        todo = self._patterns(patterns, subject, predicate, object, graph)
        if len(todo) == 1:
            return sum(1 for _ in self._match_one(todo[0]))
        sparql, _ = compile_patterns(todo, form="count")
        rows = self.query(sparql, allow_network=True)
        assert isinstance(rows, SelectResult)
        term = rows[0][f"{_WILD}n"]
        return int(term.value)

    # -- SPARQL -------------------------------------------------------------------------

    def query(
        self,
        sparql: str,
        *,
        base_iri: str | None = None,
        default_graph: Any = None,
        named_graphs: Sequence[Any] | None = None,
        bindings: Mapping[str, Any] | None = None,
        allow_network: bool = False,
    ) -> QueryResult:
        """Run a SPARQL 1.1 query: SELECT gives a ``SelectResult``, ASK a bool,
        CONSTRUCT/DESCRIBE a ``GraphResult``.

        ``bindings`` pre-bind variables to values (terms, or Python values made literals; a
        ``str`` is always a literal) without pasting anything into the query text; as in
        SEP-0007, a bound variable of a SELECT must be in its projection (``SELECT *`` or
        named). ``default_graph`` (one graph or a list) and ``named_graphs`` narrow the
        dataset, as the SPARQL Protocol's ``default-graph-uri`` and ``named-graph-uri`` do.
        ``SERVICE`` is refused unless ``allow_network=True`` (the rdflib backend refuses it
        even then: it never fetches). ``FROM``/``FROM NAMED`` only name graphs of the store.

        Raises:
            NetworkAccessRefused: ``SERVICE`` without ``allow_network=True``; nothing ran.
            QueryError: the query does not parse (the message says where) or fails.
        """
        refuse_network(sparql, allow_network=allow_network)
        defaults = None
        if default_graph is not None:
            items = default_graph if isinstance(default_graph, (list, tuple)) else [default_graph]
            defaults = [to_graph(g) for g in items]
        named = None if named_graphs is None else [to_graph(g) for g in named_graphs]
        subs = None
        if bindings:
            subs = {}
            for name, value in bindings.items():
                term = to_object(value)
                if isinstance(term, Variable):
                    raise InvalidTerm(f"binding {name!r} must be a value, not a variable")
                subs[name.lstrip("?")] = term
        # No local holds the raw result: a frame kept alive after the call (rdflib's parser
        # keeps tracebacks) would keep pyoxigraph's unsendable solutions with it, and the
        # collector could then free them on another thread, which pyoxigraph refuses.
        return _wrap(
            self.backend.query(
                sparql,
                base_iri=base_iri,
                default_graph=defaults,  # type: ignore[arg-type]
                named_graphs=named,  # type: ignore[arg-type]
                substitutions=subs,
            ),
        )

    def sparql_update(
        self, sparql: str, *, base_iri: str | None = None, allow_network: bool = False
    ) -> None:
        """Run a SPARQL 1.1 Update request, all of it or none of it.

        ``LOAD`` and ``SERVICE`` are refused unless ``allow_network=True`` (the rdflib
        backend refuses them even then).

        Raises:
            NetworkAccessRefused: ``LOAD`` or ``SERVICE`` without ``allow_network=True``;
                nothing is changed.
            QueryError: the update does not parse or fails; nothing is changed.
        """
        refuse_network(sparql, allow_network=allow_network)
        with self.backend.lock:
            self.backend.update(sparql, base_iri=base_iri)

    # -- files --------------------------------------------------------------------------

    def export(
        self, format: str | RdfFormat = "turtle", graph: Any = None, *, history: bool = True
    ) -> str:
        """The store as text: a triple format exports one graph (the default graph when
        None), a dataset format (TriG, N-Quads) every graph; ``history=False`` leaves the
        history graphs (``urn:rdfmem:history:…``) out, for inspecting the data alone.

        Raises:
            FormatError: an unknown format.
        """
        fmt = rdf_format(format)
        name = None if graph is None else to_graph(graph)
        if isinstance(name, Variable):
            raise InvalidTerm("export needs a graph, not a variable")
        if not history and fmt.supports_datasets:
            kept = [
                q
                for q in self.backend.match()
                if not str(getattr(q.graph_name, "value", "")).startswith(_HISTORY_PREFIX)
            ]
            text = serialize(kept, None, fmt, prefixes=self.prefixes) or b""
            return text.decode("utf-8")
        return self.backend.dump(fmt, from_graph=name, prefixes=self.prefixes).decode("utf-8")

    def load(
        self,
        data_or_path: str | bytes | PathLike[str] | None = None,
        format: str | RdfFormat | None = None,
        *,
        data: str | bytes | None = None,
        path: str | PathLike[str] | None = None,
        graph: Any = None,
        base_iri: str | None = None,
    ) -> int:
        """Load RDF: text or bytes (``data``, or a ``str``/``bytes`` first argument), or a file
        (``path``, or a ``pathlib.Path`` first argument). A ``str`` first argument is always
        data, never a file name: give ``path=`` or a ``Path`` to read a file. Triples go to
        ``graph`` (the default graph when None). Blank nodes are renamed apart: ``_:x`` in two
        documents, or in two loads of one, are two nodes. Nothing is loaded when the input
        does not parse. Returns the quads read.

        >>> from rdfmem import RdfStore
        >>> store = RdfStore()
        >>> store.load("_:a <urn:p> _:b .", "ntriples") + store.load(data=b"_:a <urn:p> _:b .",
        ...                                                        format="nt")
        2
        >>> len({q.subject for q in store.triples()})
        2

        Raises:
            FormatError: the input does not parse (or is refused, as RDF/XML whose entities
                would expand without bound), no format was given for data, or no single
                source was given.
            OSError: ``path`` cannot be read.
        """
        given = [x for x in (data_or_path, data, path) if x is not None]
        if len(given) != 1:
            raise FormatError("give one source to load: data (str or bytes) or a path")
        guess: str | None = None
        raw: bytes
        if path is not None or isinstance(data_or_path, PathLike):
            file = Path(path if path is not None else data_or_path)  # type: ignore[arg-type]
            raw = file.read_bytes()
            guess = file.name
        else:
            source = given[0]
            if isinstance(source, str):
                raw = source.encode("utf-8")
            elif isinstance(source, (bytes, bytearray, memoryview)):
                raw = bytes(source)
            else:
                raise FormatError(
                    f"cannot load a {type(source).__name__}: give str, bytes or a path"
                )
        if format is None and guess is None:
            raise FormatError("give the format of RDF passed as data (format='turtle', …)")
        fmt = rdf_format(format if format is not None else guess)  # type: ignore[arg-type]
        name = None if graph is None else to_graph(graph)
        if isinstance(name, (Variable, DefaultGraph)):
            name = None
        backend = self.backend
        hub = getattr(self, "indexes", None)  # an RdfStore's index hub: kept from the load
        if hub is None:
            with backend.lock:
                return backend.load(raw, fmt, base_iri=base_iri, to_graph=name)
        loaded: int = hub.load(
            lambda see: backend.load(raw, fmt, base_iri=base_iri, to_graph=name, observe=see)
        )
        return loaded


def _wrap(raw: Any) -> QueryResult:
    """The backend's raw answer as rdfmem's result type, read whole here: no pyoxigraph
    object (thread-bound, and pinning an on-disk store) outlives this call, so a result may
    be read on any thread and after ``close()``. ``RdfStore.stream`` is the lazy way."""
    if isinstance(raw, QuerySolutions):
        result = SelectResult(raw)
        del raw
        result.rows  # noqa: B018 - reads the rows and frees the solutions, here
        return result
    if isinstance(raw, (bool, QueryBoolean)):
        return bool(raw)
    try:
        triples = list(raw)
    except (OSError, RuntimeError, ValueError) as exc:  # evaluated as it is read
        del raw
        raise QueryError(f"SPARQL query failed: {exc}") from exc
    del raw  # pyoxigraph results must be freed on the thread that made them
    return GraphResult(triples)
