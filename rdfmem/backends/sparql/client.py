"""A remote SPARQL 1.1 server, spoken to over the SPARQL 1.1 Protocol with httpx.

Portable by design, so that the same code runs on Oxigraph server, Virtuoso, Fuseki,
GraphDB or Neptune:

* Queries and updates are POSTed as forms (``query=`` / ``update=``); the two URLs may be
  the same (Virtuoso). Results are read as SPARQL JSON (XML accepted; rdfmem's own
  SELECTs as TSV from Oxigraph server: ``rows_accept``), graphs as
  N-Triples (Turtle, RDF/XML accepted), and every body is validated, even on HTTP 200.
* **The default graph** is the server's own, wherever the server has one (Oxigraph,
  Fuseki, GraphDB with its default settings): rdfmem's ``DefaultGraph()`` is the server's
  default graph, and a raw ``query`` or ``sparql_update`` is sent **exactly as written**,
  with no dataset parameters and no rewriting, so another SPARQL client and rdfmem read
  and write the same graphs and get the same answers (``GRAPH ?g`` ranges over the
  server's named graphs, the lease graph included, and no request carries a list of
  graphs, however many the server holds). Virtuoso has no writable default graph (its
  default graph is the union of all graphs): there rdfmem's default graph is the named
  graph ``urn:rdfmem:graph:default`` (``DEFAULT_GRAPH_IRI``): rdfmem's own writes name it,
  a raw query is sent as written and reads Virtuoso's default graph, the union of all
  graphs, as any Virtuoso client does (sent with ``default-graph-uri``, Virtuoso found
  nothing in any ``GRAPH <iri>`` of the query), and a raw update is sent as written, so it
  names its graph itself (Virtuoso refuses unnamed writes). ``default_graph=`` chooses
  another named graph explicitly: raw queries that state no dataset then read it as their
  default graph (the protocol's ``default-graph-uri``; on Virtuoso, ``GRAPH <iri>`` finds
  nothing in them), and a server with a real default graph writes a raw update's unnamed
  triples to its own default graph: name the graph in such updates.
* **Blank nodes are blank nodes on the server**, so that outside queries get standard
  answers (``isBlank``, ``isIRI``, ``ORDER BY``). rdfmem writes them as ``_:label`` in
  ``INSERT { … } WHERE {}`` (Virtuoso refuses them in ``INSERT DATA``): the server mints
  one node per label per request (all the quads of one ``load`` or one write go in one
  request, so they share their nodes), and rdfmem reads back the server's labels. SPARQL
  has no syntax that names an existing blank node, so the rule is: a read naming one
  (``match``, ``select``/``ask``/``count`` with a blank node) asks for every blank node
  in its place and keeps the server's node with that label; removing a quad that holds
  one deletes it by pattern when the blank nodes matching the pattern are all being
  removed, and raises ``InvalidTerm`` otherwise; the delete lands only while the pattern
  matches as many blank nodes as the check counted (a look-alike added meanwhile is never
  removed: the write is checked again); a write that names a blank node read from the
  server mints a new node (as ``INSERT DATA`` always does: give nodes that must gain
  triples later an IRI); a blank node cannot be a pre-bound value (``VALUES`` cannot
  hold one) nor name a graph.
* **Pre-bound variables** (``substitutions``) are written in with standard ``VALUES``
  blocks (``rdfmem.backends.sparql.bind``), so the remote store answers as embedded
  Oxigraph does (SEP-0007): ``VALUES`` in every group for a variable the query only
  reads, a join after the assignment for one it assigns (``BIND``, ``AS``). Values are
  built with ``sparql_term`` (N-Triples escaping): no caller text is pasted in.
* **Only queries are sent as queries**: ``query`` parses the text it will send with
  pyoxigraph (``rdfmem.core.guard.query_form``) and raises ``QueryError`` before sending an
  update or anything that does not parse as a query, since Virtuoso runs updates sent as
  ``query=``: no read path writes. (So Virtuoso's own extensions, such as ``DEFINE``
  pragmas, are not sent through ``query``.)
* **Long results**: when a server cuts a result at its row limit (Virtuoso's
  ``X-SPARQL-MaxRows``), rdfmem's own reads page through it; a raw query raises.
* **Large writes**: against Virtuoso, which refuses an update of ~1,500 quads, a write of
  more than 500 quads (``max_quads_per_request``) is staged in scratch graphs and applied
  by **one** operation, which lands only while every part is staged; a dead client's
  scratch graphs are dropped by the next client that stages (``staging_idle_ms``;
  ``rdfmem.backends.sparql.writes``).
* **One operation per write** on Virtuoso, which keeps a request's operations before one
  that failed (``rdfmem.backends.sparql.oneop``).
* ``exclusive`` is a lease on the server (``rdfmem.backends.sparql.leases``), so the key/value
  layer's read-modify-writes are atomic across processes and machines.

Errors are translated at this boundary (``raise … from exc``): a transport failure is
``Unreachable`` (endpoint and cause), HTTP 400 is ``QueryError`` with the server's message,
any other failure or a malformed body is ``BackingError``. A request the server rolled
back (SQLSTATE 40001, a deadlock: Virtuoso under concurrent writes) is sent again
(``answers``). A write's requests are planned by ``writes`` and sent under this client's
leases, which count each one sent as a write (``Backend.wrote``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import httpx
from pyoxigraph import BlankNode, NamedNode, Quad

from rdfmem.backends.base import Backend, Graph, Object, RawResult, Subject
from rdfmem.backends.sparql.answers import (
    ACCEPT,
    RESULTS,
    RETRIES,
    R,
    answer_rows,
    answer_table,
    answered,
    paged,
    results,
    retry_pause,
    rows_accept,
    truncated,
    unreachable,
)
from rdfmem.backends.sparql.bind import bind_values, query_shape
from rdfmem.backends.sparql.changelog import ChangeLog
from rdfmem.backends.sparql.leases import Leases
from rdfmem.backends.sparql.own_writes import expecting, known_quads, wrote_in_section
from rdfmem.backends.sparql.text import CHANGE_GRAPH_IRI, Changes
from rdfmem.backends.sparql.wire import (
    blanks_match,
    compile_match,
    dataset_form,
    edit_requests,
    is_scratch,
    prefetched_quads,
    row_quads,
    to_wire,
    with_base,
)
from rdfmem.backends.sparql.writes import drop, drop_abandoned, drop_gate, prepare, refusal
from rdfmem.core.errors import BackingError, InvalidTerm
from rdfmem.core.guard import query_form

__all__ = [
    "CHANGE_GRAPH_IRI",
    "Changes",
    "DEFAULT_GRAPH_IRI",
    "LEASE_GRAPH_IRI",
    "VIRTUOSO_GRAPHS",
    "SparqlBackend",
    "compile_match",
    "edit_requests",
    "retry_pause",
    "to_wire",
    "unreachable",
]

DEFAULT_GRAPH_IRI = "urn:rdfmem:graph:default"
LEASE_GRAPH_IRI = "urn:rdfmem:graph:leases"
#: The graphs a fresh Virtuoso keeps for itself (with its default ``DefaultHost``).
VIRTUOSO_GRAPHS = [
    NamedNode("http://www.openlinksw.com/schemas/virtrdf#"),
    NamedNode("http://www.w3.org/ns/ldp#"),
    NamedNode("http://www.w3.org/2002/07/owl#"),
    NamedNode("http://localhost:8890/sparql"),
    NamedNode("http://localhost:8890/DAV/"),
]
_VIRTUOSO_QUADS = 500
#: Times a write whose blank-node condition failed is planned again.
_GUARDED_ATTEMPTS = 3


class SparqlBackend(Backend):
    """A SPARQL 1.1 Protocol endpoint (and update endpoint) over httpx.

    >>> backend = SparqlBackend("http://127.0.0.1:7878/query", "http://127.0.0.1:7878/update")
    >>> backend.exclusive_writer, backend.persistent
    (False, True)
    >>> backend.close()

    Args:
        query_url: the query endpoint.
        update_url: the update endpoint; the query endpoint when None (Virtuoso, Fuseki).
        auth: httpx authentication (``("user", "password")`` or an ``httpx.Auth``).
        timeout: seconds to wait for the server, per request.
        headers: extra HTTP headers sent with every request (bodies are asked for
            uncompressed unless ``Accept-Encoding`` says otherwise).
        default_graph: a named graph to be rdfmem's default graph on this server; by
            default the server's own default graph, or ``DEFAULT_GRAPH_IRI`` against a
            server that has no writable one (Virtuoso).
        lease_graph: the named graph that holds lease claims (hidden from matches).
        change_log: keep the change log (``changes_since``): every rdfmem write records
            in ``change_graph``, in the same request, the graphs and subjects it touched.
            Off by default: the log is a named graph that every client's ``GRAPH ?g``
            sees, so outside queries would no longer get standard answers.
        change_graph: the named graph of the change log (hidden from rdfmem's matches).
        hidden_graphs: graphs that reads of every graph leave out, besides the lease graph;
            by default Virtuoso's own graphs (``VIRTUOSO_GRAPHS``) against Virtuoso.
        lease_ttl_ms, lease_wait_ms: the lease a read-modify-write takes, and how long it
            waits for another client's lease before ``LeaseDenied``.
        lease_linger_ms: how long this client keeps a claim it no longer uses, when nobody
            else wanted it, so its next write there costs a request less (0: never; see
            ``Leases``). Another client waits at most this long for it.
        max_quads_per_request: stage larger writes in scratch graphs, this many quads per
            request, then apply them in one request; by default 500 against Virtuoso.
        snapshot_reads: the server answers each query from one consistent state, so the
            lease read may bring the leased entries along (one request less per update);
            by default true for Oxigraph server only (Virtuoso reads committed rows as it
            goes: stale values).
        transport: an httpx transport (retries, proxies, tests).
        staging_idle_ms: a staged write with no part for this long (server's clock) was
            left by a dead client; the next client that stages drops it (by default four
            request timeouts, at least a minute: ``writes``).
    """

    supports_update = True
    read_only = False
    kind = "sparql"
    embedded = False
    persistent = True

    def __init__(
        self,
        query_url: str,
        update_url: str | None = None,
        *,
        auth: httpx.Auth | tuple[str, str] | None = None,
        timeout: float = 30.0,
        headers: Mapping[str, str] | None = None,
        default_graph: str | None = None,
        lease_graph: str = LEASE_GRAPH_IRI,
        change_log: bool = False,
        change_graph: str = CHANGE_GRAPH_IRI,
        hidden_graphs: Sequence[str] | None = None,
        lease_ttl_ms: int = 10_000,
        lease_wait_ms: int = 30_000,
        lease_linger_ms: int = 250,
        max_quads_per_request: int | None = None,
        snapshot_reads: bool | None = None,
        transport: httpx.BaseTransport | None = None,
        staging_idle_ms: int | None = None,
    ) -> None:
        super().__init__(exclusive_writer=False)  # other clients write the server too
        self._abandoned_checked = 0.0  # when this client last dropped abandoned staging
        self.query_url = query_url
        self.update_url = update_url or query_url
        try:
            self._default_graph = None if default_graph is None else NamedNode(default_graph)
            self.lease_graph = NamedNode(lease_graph)
            self.change_graph = NamedNode(change_graph)
            self.change_log = change_log
            self._hidden = None if hidden_graphs is None else [NamedNode(g) for g in hidden_graphs]
            httpx.URL(self.query_url)
            httpx.URL(self.update_url)
        except (ValueError, httpx.InvalidURL) as exc:
            raise InvalidTerm(f"invalid remote store option: {exc}") from exc
        self.max_quads_per_request = max_quads_per_request
        # Parts of a live staged write come every timeout: 4 of them (>= 1 min): dead.
        self.staging_idle_ms = (
            staging_idle_ms if staging_idle_ms is not None else max(60_000, int(timeout * 4000))
        )
        self._snapshot_reads = snapshot_reads
        self.server = ""  # the Server header, once seen
        # Uncompressed: Virtuoso closes the connection after each compressed answer.
        sent = {"Accept-Encoding": "identity", **dict(headers or {})}
        self.client = httpx.Client(auth=auth, timeout=timeout, headers=sent, transport=transport)
        self.leases = Leases(
            self,
            self.lease_graph,
            lease_ttl_ms,
            lease_wait_ms,
            linger_ms=lease_linger_ms,
            on_write=self.wrote,
        )
        self._closed = False
        self._default_known = self._default_chosen = default_graph is not None
        self._log = ChangeLog(self.change_graph)
        self._log.on_theirs = self.leases.contention.theirs  # others' writes: brief claims

    @property
    def closed(self) -> bool:
        """True once ``close`` was called: every request then raises ``BackingError``."""
        return self._closed

    @property
    def default_graph(self) -> NamedNode | None:
        """The named graph that is rdfmem's default graph here, or None when it is the
        server's own default graph (asks the server who it is, once, when it has to)."""
        if not self._default_known:
            answered = bool(self.server) or self.health(5000)
            if answered or self.server:
                if "virtuoso" in self.server.lower():
                    self._default_graph = NamedNode(DEFAULT_GRAPH_IRI)
                self._default_known = True
        return self._default_graph

    # -- HTTP -----------------------------------------------------------------------------

    def _post(self, url: str, form: Mapping[str, Any], accept: str, what: str) -> httpx.Response:
        if self._closed:
            raise BackingError("this remote store is closed", cause=None)
        for attempt in range(RETRIES + 1):
            try:
                response = self.client.post(url, data=form, headers={"Accept": accept})
            except httpx.TransportError as exc:
                raise unreachable(url, exc) from exc
            if self.answered(response, attempt):
                return response
            time.sleep(retry_pause(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    def answered(self, response: httpx.Response, attempt: int) -> bool:
        """True on success; False when the server rolled the request back and attempts
        remain (``rdfmem.backends.sparql.answers.answered``). Notes who the server is.

        Raises:
            QueryError, BackingError: any other failure.
        """
        self.server = response.headers.get("server", self.server)
        return answered(response, attempt)

    # -- the contract ---------------------------------------------------------------------

    def query(
        self,
        sparql: str,
        *,
        base_iri: str | None = None,
        default_graph: Sequence[Graph] | None = None,
        named_graphs: Sequence[NamedNode | BlankNode] | None = None,
        substitutions: Mapping[str, Object] | None = None,
    ) -> RawResult:
        self.leases.flush()
        form_of, states_dataset, _ = query_shape(sparql)
        text = sparql
        if substitutions:
            if any(isinstance(v, BlankNode) for v in substitutions.values()):
                raise InvalidTerm(
                    "a blank node cannot be a pre-bound value on a remote store: SPARQL "
                    "cannot name an existing blank node (bind an IRI)"
                )
            text = bind_values(text, substitutions)
        form: dict[str, Any] = {"query": with_base(text, base_iri)}
        # Judged as the server will run it: a server may run an update sent as ``query=``
        # (Virtuoso does), so only what parses as a query is sent from here.
        query_form(form["query"])
        if default_graph is not None or named_graphs is not None:
            # A dataset chosen by the caller travels as the protocol's parameters.
            form.update(dataset_form(default_graph, named_graphs, ours=self.default_graph))
        elif (
            not states_dataset and self._default_chosen and (ours := self.default_graph) is not None
        ):
            # Only a default graph the caller chose: with Virtuoso's own (rdfmem's named
            # default graph) as ``default-graph-uri``, Virtuoso finds nothing in any
            # ``GRAPH <iri>`` of the query, so raw queries there read Virtuoso's default
            # graph, the union of all graphs, as every other Virtuoso client does.
            form["default-graph-uri"] = ours.value
        response = self._post(self.query_url, form, ACCEPT[form_of], "query")
        limit = truncated(response)
        if limit:
            raise BackingError(
                f"the server cut the result at {limit} rows (its result row limit); "
                "page with LIMIT and OFFSET",
                cause=limit,
            )
        return results(response)

    def select_rows(self, sparql: str) -> list[dict[str, Any]]:
        """The rows of a SELECT rdfmem wrote (paged past a server row limit)."""
        return self._select(sparql, answer_rows)[1]

    def select_table(self, sparql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """The variables of a SELECT rdfmem wrote and its rows as tuples of terms in their
        order, None where unbound (``answer_table``: a follower's whole reads)."""
        return self._select(sparql, answer_table)

    def _select(
        self, sparql: str, read: Callable[[httpx.Response], tuple[list[str], list[R]]]
    ) -> tuple[list[str], list[R]]:
        self.leases.flush()
        accept = rows_accept(self.server)  # TSV from Oxigraph server: parsed faster
        response = self._post(self.query_url, {"query": sparql}, accept, "query")
        variables, rows = read(response)

        def page(text: str) -> list[R]:  # (cut at the server's row limit: read in pages)
            return read(self._post(self.query_url, {"query": text}, accept, "query"))[1]

        return variables, paged(sparql, variables, rows, truncated(response), page)

    def hidden_graphs(self) -> list[NamedNode]:
        """What reads of every graph leave out: the lease graph, the server's own graphs."""
        hidden = self._hidden
        if hidden is None:
            if not self.server:
                self.health(5000)
            hidden = VIRTUOSO_GRAPHS if "virtuoso" in self.server.lower() else []
            if self.server:
                self._hidden = hidden
        return [self.lease_graph, self.change_graph, *hidden]

    def snapshot_reads(self) -> bool:
        """Whether one query reads one consistent state (``snapshot_reads``; asks once)."""
        if self._snapshot_reads is None:
            if not self.server:
                self.health(5000)
            if self.server:
                self._snapshot_reads = self.server.lower().startswith("oxigraph")
        return bool(self._snapshot_reads)

    def whole_requests(self) -> bool:
        """Whether the server undoes a whole request when one of its operations fails
        (Oxigraph server; not Virtuoso, nor a server not known): asks who it is, once."""
        if not self.server:
            self.health(5000)
        return self.server.lower().startswith("oxigraph")

    def update(self, sparql: str, *, base_iri: str | None = None) -> None:
        """Run SPARQL Update, sent exactly as written: no text of it is rewritten and no
        dataset parameter is added (Virtuoso reads ``default-graph-uri`` on an update as a
        dataset that hides every named graph from its ``WHERE``)."""
        try:
            self._update(sparql, base_iri)
        finally:
            self.wrote()

    def _update(self, sparql: str, base_iri: str | None) -> None:
        self.leases.flush()
        wrote_in_section(self.leases)  # what its claim read is stale now
        if self.change_log and self.declared():
            # rdfmem's own text, whose graph and subjects its caller declared: the record
            # goes in the same request, so it commits with the write or not at all.
            self.send_update(f"{with_base(sparql, base_iri)}\n;\n{self.change_record()}")
            return
        self.send_update(with_base(sparql, base_iri))
        # Logged right after, as a change of unknown scope: readers then read everything
        # again (a client that dies between the two requests leaves it unlogged).
        if self.change_log:
            self.send_update(self.change_record())

    def declared(self) -> bool:
        """True inside this thread's ``scope`` block."""
        return self._log.declared()

    def change_record(self, sparql: str | None = None) -> str:
        """The change-log operation for an update this thread sends now (``ChangeLog.record``;
        ``sparql``: that update, under this thread's claim: its effect may be expected)."""
        section = self.leases.section() if sparql and expecting(self) else None
        rows = None if section is None else section.rows_for(self._log.scoped() or [])
        return self._log.record(sparql, rows)

    def record_name(self) -> str:  # a change record's name, known as its own (``ChangeLog``)
        return self._log.name()

    def known_quads(self, graph: NamedNode, subjects: Sequence[NamedNode]) -> list[Quad] | None:
        """The quads of ``subjects`` in ``graph`` known without a request (``own_writes``)."""
        return known_quads(self, self._log.own, graph, subjects)

    def scope(
        self, graph: NamedNode, subjects: Sequence[NamedNode]
    ) -> AbstractContextManager[None]:
        """Declare that the updates this thread sends inside the block change only
        ``subjects`` of ``graph`` (rdfmem's domain writes do; never wrap caller text). With
        the change log on, each is then recorded with that scope in its own request, so a
        reader fetches those subjects again instead of everything."""
        return self._log.scope(graph, subjects)

    def send_update(self, sparql: str, extra: Mapping[str, str] | None = None) -> None:
        """Send an update exactly as written (``extra``: protocol parameters)."""
        self._post(self.update_url, {"update": sparql, **(extra or {})}, "*/*", "update")

    def match(
        self,
        subject: Subject | None = None,
        predicate: NamedNode | None = None,
        object: Object | None = None,
        graph: Graph | None = None,
    ) -> Iterator[Quad]:
        sparql, names = compile_match(
            subject,
            predicate,
            object,
            graph,
            default_graph=self.default_graph,
            hidden=self.hidden_graphs() if graph is None else (),
        )
        if isinstance(subject, NamedNode):
            prefetched = self.leases.prefetched(subject)
            if prefetched is not None:  # read along with this thread's lease on the subject
                hidden = self.hidden_graphs() if graph is None else ()
                found = prefetched_quads(
                    prefetched,
                    subject,
                    predicate,
                    object,
                    graph,
                    default_graph=self.default_graph,
                    hidden=hidden,
                )
                return iter(found)
        if not names:
            self.leases.flush()
            response = self._post(self.query_url, {"query": sparql}, RESULTS, "query")
            if results(response):
                assert subject is not None and predicate is not None and object is not None
                return iter([Quad(subject, predicate, object, graph)])
            return iter([])
        # Rows of the server's default graph have no ?g (``compile_match``).
        needed = [n for n in names if n != "g" or self.default_graph is not None]
        rows = self.select_rows(sparql)
        for _ in range(5):
            if all(all(n in row for n in needed) for row in rows):
                break
            # A row missing a variable of the pattern: Virtuoso read a quad while another
            # request deleted it. Read again; what stays torn is read as deleted.
            rows = self.select_rows(sparql)
        rows = [
            row
            for row in rows
            if all(n in row for n in needed)
            and blanks_match(row, subject, object)
            and not is_scratch(row.get("g"))
        ]
        return iter(
            row_quads(rows, subject, predicate, object, graph, default_graph=self.default_graph)
        )

    def apply(self, remove: Sequence[Quad], add: Sequence[Quad]) -> None:
        """Remove and add quads, in one request when the server takes it (a larger write
        is staged first: ``rdfmem.backends.sparql.writes``), under this thread's leases;
        each request that writes counts as a write (``wrote``) where ``Leases`` sends it
        (with the release of a section's own claim, when it waits for it)."""
        if not remove and not add:
            return
        limit = self.max_quads_per_request
        if limit is None and len(remove) + len(add) > _VIRTUOSO_QUADS:
            if not self.server:
                self.health(5000)
            if "virtuoso" in self.server.lower():
                limit = _VIRTUOSO_QUADS
        change_graph = self.change_graph if self.change_log else None
        if limit is not None and len(remove) + len(add) > limit:
            # A client that stages writes also clears what killed clients left staged
            # (at most every half idle time: two small queries).
            moment = time.monotonic()
            idle = self.staging_idle_ms / 1000.0
            if moment - self._abandoned_checked > idle / 2 or not self._abandoned_checked:
                self._abandoned_checked = moment
                if not self.server:
                    self.health(5000)
                virtuoso = "virtuoso" in self.server.lower()
                drop_abandoned(self, empty_graph_patterns=not virtuoso, idle_s=idle)
        for attempt in range(_GUARDED_ATTEMPTS):
            scratch, requests, guard = prepare(
                self, remove, add, limit=limit, change_graph=change_graph
            )
            try:
                self.leases.write(requests)
                return
            except BaseException as exc:
                drop(self, scratch)  # the write did not happen: leave no scratch graph behind
                if guard is None or not guard.named_in(exc):
                    raise
                drop_gate(self, guard)
                if scratch or attempt == _GUARDED_ATTEMPTS - 1:
                    raise refusal(guard) from exc
                # Blank nodes matching a pattern changed meanwhile: check them again.

    def changes_since(
        self,
        cursor: tuple[float, frozenset[str]] | None = None,
        *,
        slack_s: float = 60.0,
        retention_s: float = 3600.0,
    ) -> Changes:
        """What rdfmem writes changed since ``cursor`` (None: the first look), in one small
        query: every rdfmem write that returned before this call started is reported, once
        per cursor (``rdfmem.backends.sparql.changelog``); writes by other SPARQL clients
        are not (``cursor=None``: everything). Records older than ``retention_s`` are pruned
        now and then; a cursor older than that reads everything.

        Raises:
            BackingError: no change log here (``change_log=False``): writes would be missed.
            Unreachable, BackingError: the server did not answer, or answered badly.
        """
        if not self.change_log:
            raise BackingError(
                "changes_since needs the change log: connect with change_log=True (every "
                "client that writes must)"
            )
        return self._log.since(
            self,
            cursor,
            slack_s=slack_s,
            retention_s=retention_s,
            own_default=self.default_graph is None,
        )

    def exclusive(
        self, subjects: Sequence[NamedNode], within: str | None = None
    ) -> AbstractContextManager[Any]:
        """A lease on ``subjects`` held against every client of the server (or on the
        range ``within``: ``Leases``)."""
        return self.leases.exclusive(subjects, within)

    def health(self, timeout_ms: float) -> bool:
        """True when the server answers ``ASK {}`` right within ``timeout_ms``; never raises."""
        try:
            response = self.client.post(
                self.query_url,
                data={"query": "ASK {}"},
                headers={"Accept": RESULTS},
                timeout=max(timeout_ms, 1) / 1000.0,
            )
            self.server = response.headers.get("server", self.server)
            return response.status_code == 200 and results(response) is True
        except Exception:  # a health probe reports, it never raises
            return False

    def close(self) -> None:
        if not self._closed:
            self.leases.close()
            self._closed = True
            self.client.close()

    def __repr__(self) -> str:
        return f"SparqlBackend({self.query_url!r})"
