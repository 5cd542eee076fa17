"""A process attached to an on-disk store that another process owns.

``RdfStore.open(path)`` in a process that finds the store's files held by another process
(``StoreAlreadyOpen``) attaches instead: its backend is rdfmem's SPARQL client, talking to
the owner over the Unix socket in the store's folder (``rdfmem.backends.owner``), and its
``exclusive`` sections are the record locks every process of the store shares
(``rdfmem.backends.filelocks``), not leases: sections of the owner and of every attached
process exclude each other, and a process killed inside one blocks nobody.

**What a request costs.** The wire is HTTP/1.1 written and read straight on the socket
(``rdfmem.backends.unixhttp``: httpx's own transport cost more than the owner's answer),
and this backend's requests are written there without an httpx client either (``_send``:
building an ``httpx.Request`` and passing it through the client's hooks, redirects and
auth took about 0.1 ms a request, a third of a small one). A query or an update is the
request's body itself, the protocol's direct POST, with its other parameters in the query
string (``_direct``: encoding a memory's 5 KB update as a form took 0.14 ms here, and
decoding it 0.13 ms in the owner); solutions come back as TSV (``owner.serialised``),
parsed in less than half JSON's time.
Indexes learn what changed from the notes this process holds
(``rdfmem.backends.attached_changes``): its writes' answers bring the owner's journal
notes and the triples of the subjects they name, and the owner's published mark tells
when another process wrote; so a process working alone sends its reads and writes, and no
request to learn what changed, and reads back a key/value entry or a decision node it wrote
without asking (``known_quads``). Once it has listed a graph's subjects (``GET /subjects``,
once per graph), a subject of it that is not listed and that no later note named has no
triples: the existence check of a new node, edge or memory sends no request either.
At its first look the process takes the owner's indexes in one request instead of reading
every vector, text and node (``_handed_over``: ``rdfmem.backends.owner_indexes``).

**Takeover.** When the owner goes away (closed, or killed), the next request of an
attached process finds no one at the socket; it then opens the store's files itself and
becomes the owner (serving the others), or, when another process got there first, waits
for that one's socket. A request is sent again only when it cannot have been run: the
connection was refused, or the closing owner answered ``503 closing``. An update whose
answer was lost with a killed owner raises ``Unreachable`` (it may have been applied).
The new owner runs the queries others send with a time limit as the first one did
(``guard_owned_reads``: in its query sandbox, reading the files it opened).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
from pyoxigraph import NamedNode, Quad

from rdfmem.backends.attached_changes import Replica, changes
from rdfmem.backends.attached_lists import Lister
from rdfmem.backends.base import Backend, Graph, Object, Subject
from rdfmem.backends.filelocks import SubjectFileLocks
from rdfmem.backends.journal import Declarations, declared_scope, scope_of_quads
from rdfmem.backends.journal_mark import MarkReader
from rdfmem.backends.owner import (
    CLOSING,
    OTHERS,
    SCOPE_PARAM,
    SINCE_PARAM,
    TSV,
    VALUES_PARAM,
    Guarded,
    reachable,
    socket_path,
)
from rdfmem.backends.owner_indexes import Seed, fetch_keys, fetch_shared
from rdfmem.backends.sparql.answers import RESULTS, RETRIES, retry_pause, unreachable
from rdfmem.backends.sparql.client import SparqlBackend
from rdfmem.backends.sparql.text import Changes
from rdfmem.backends.unixhttp import UnixHTTPTransport
from rdfmem.core.errors import BackingError, StoreAlreadyOpen

__all__ = ["AttachedBackend", "is_update", "open_shared"]

#: The URL of the owner's endpoint (the host name is never resolved: the socket is used).
OWNER_URL = "http://rdfmem-owner/sparql"
_HOST = b"rdfmem-owner"
_FORM = b"application/x-www-form-urlencoded"
_QUERY = b"application/sparql-query"
_UPDATE = b"application/sparql-update"
#: What a query accepts: the owner's solutions in TSV (parsed in less than half JSON's
#: time), a boolean as JSON.
_RESULTS_ACCEPT = f"{TSV}, {RESULTS};q=0.9"
#: The longest query string a request carries its parameters in (else: a form body).
_MAX_QUERY_STRING = 8192
_ORIGIN = "http://rdfmem-owner"


def not_served(path: Path, socket: Path) -> StoreAlreadyOpen:
    """The error for files held by a process that does not serve them."""
    return StoreAlreadyOpen(
        f"the store at {path} is held by a process that does not serve it at {socket} "
        "(another program, another user, or an rdfmem without sharing); close that "
        "process, or open the store there",
        cause=None,
    )


def open_shared(path: str | os.PathLike[str], wait_s: float = 5.0) -> Backend:
    """The backend of an on-disk store for this process: the store's files when nobody
    holds them (this process becomes the owner), else the owner's socket; tried in turn
    for up to ``wait_s`` while the holder starts or leaves.

    Raises:
        StoreAlreadyOpen: the files are held by a process that does not serve them.
    """
    from rdfmem.backends.oxigraph import OxigraphBackend

    socket = socket_path(path)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return OxigraphBackend(path)
        except StoreAlreadyOpen as exc:
            if reachable(socket):
                return AttachedBackend(path, wait_s=wait_s)
            if time.monotonic() >= deadline:
                raise not_served(Path(path), socket) from exc
        time.sleep(0.02)


class AttachedBackend(SparqlBackend):
    """The owner's store, reached through its socket.

    ``wait_s``: how long to wait for an owner's socket to answer (a process that just
    opened the store's files needs a moment to start serving).

    Raises:
        StoreAlreadyOpen: the files are held by a process that does not serve them (an
            rdfmem older than this one, another program, or another user's process).
    """

    def __init__(self, path: str | os.PathLike[str], *, wait_s: float = 5.0, **options: Any):
        self.path = Path(path)
        self.socket = socket_path(self.path)
        self.wait_s = wait_s
        self._owned: Any = None  # the OxigraphBackend this process opened on takeover
        self._takeover = threading.Lock()
        #: Makes the guard of the backend opened on takeover (``guard_owned_reads``).
        self._guard_of: Callable[[Backend], Guarded] | None = None
        self._declarations = Declarations()  # what this thread's updates change
        self._replica = Replica()  # the journal's notes this process holds
        self._applying = threading.local()  # ``applied_here`` blocks of each thread
        self._mark = MarkReader(self.path)  # the owner's last generation
        #: Requests sent to the owner, by every thread (a count for measurements: two
        #: threads counting at once may count one).
        self.requests_sent = 0
        #: Puts the indexes the owner hands over into this process's followers, at the
        #: first look (set by ``rdfmem.store.attached_indexes``; None: read everything).
        self.seed: Seed | None = None
        self.handed_over = 0  # indexes the owner handed over that ``seed`` put in place
        self._lister = Lister(self._listed, self._replica)  # lists off the request path
        self.reattach()
        self._wire = _Failover(self)
        super().__init__(
            OWNER_URL, transport=self._wire, snapshot_reads=True, lease_linger_ms=0, **options
        )
        self.persistent = True
        self._locks = SubjectFileLocks.of(self.path)

    #: Readers of this store follow what changed through the owner's journal
    #: (``changes_since``), as readers of a server keeping the change log do.
    journaled = True

    def scope(self, graph: NamedNode, subjects: Sequence[NamedNode]) -> AbstractContextManager[Any]:
        """This thread's updates inside the block change only ``subjects`` of ``graph``:
        sent with each update, for the owner's journal."""
        return self._declarations.declared(declared_scope(graph, subjects))

    @contextlib.contextmanager
    def applied_here(self) -> Iterator[None]:
        """This thread's updates inside the block are applied by their writer to this
        process's own index (the decision graph's): their answers need not carry the
        triples of the subjects they declare (the owner reads them from its store for
        each write, a hub node's hundreds of triples for each of its new edges). A read
        of those subjects later asks the owner."""
        before = getattr(self._applying, "on", False)
        self._applying.on = True
        try:
            yield
        finally:
            self._applying.on = before

    def apply(self, remove: Sequence[Quad], add: Sequence[Quad]) -> None:
        with self._declarations.declared(scope_of_quads([*remove, *add])):
            super().apply(remove, add)

    def send_update(self, sparql: str, extra: Mapping[str, str] | None = None) -> None:
        form = {"update": sparql, **(extra or {})}
        scope = self._declarations.current()
        if scope is not None:
            form[SCOPE_PARAM] = json.dumps([scope[0], scope[1]])
        asked = self._replica.since_param()
        form[SINCE_PARAM] = asked  # the journal's notes come back with the answer
        if getattr(self._applying, "on", False):
            form[VALUES_PARAM] = OTHERS
        response = self._post(self.update_url, form, "*/*", "update")
        if response.status_code == 200:
            with contextlib.suppress(ValueError):
                self._replica.adopt(response.json(), asked)

    def changes_since(
        self,
        cursor: tuple[float, frozenset[str]] | None = None,
        *,
        slack_s: float = 60.0,
        retention_s: float = 3600.0,
    ) -> Changes:
        """What changed since ``cursor`` (None: everything), from the owner's journal: from
        the notes this process holds when the owner's mark says they are the latest
        (``rdfmem.backends.attached_changes``), else one small request."""
        if cursor is None:  # everything, as of the latest notes held when they are current
            handed = self._handed_over()
            if handed is not None:
                return handed
            now = self._replica.current(self._mark.read())
            if now is not None:
                return Changes((float(now[1]), frozenset({now[0]})), frozenset(), True)
        else:
            epoch, since = next(iter(cursor[1]), ""), int(cursor[0])
            found = self._replica.answer(epoch, since, self._mark.read())
            if found is not None:
                return found
            asked = self._replica.stale(self._mark.read())
            if asked:  # bring the notes held up to date: what changed since their head
                head_epoch, _, head = asked.partition(" ")
                news = self._journal(head_epoch, int(head))
                self._replica.adopt(news, asked)
                latest = (str(news.get("epoch", "")), int(news.get("generation", -1)))
                found = self._replica.answer(epoch, since, latest)
                if found is not None:
                    return found
        epoch = next(iter(cursor[1]), "") if cursor is not None else ""
        since = int(cursor[0]) if cursor is not None else -1
        found_json = self._journal(epoch, since)
        if cursor is None and not self._replica.since_param():
            self._replica.adopt(found_json, "")
        mark = (
            float(found_json.get("generation", -1)),
            frozenset({str(found_json.get("epoch", ""))}),
        )
        if cursor is None or found_json.get("everything", True):
            return Changes(mark, frozenset(), True)
        whole = {str(g) for g in found_json.get("whole", [])}
        subjects = {(str(g), str(s)) for g, s in found_json.get("subjects", [])}
        return changes(mark, whole, subjects)

    def shared_index_keys(self) -> list[tuple[str, str]]:
        """The kind and predicate (or name) of each index the owner can hand over
        (``rdfmem.backends.owner_indexes``); one request."""
        if self._owned is not None:
            return []
        self.requests_sent += 1
        return fetch_keys(self.socket, self.client.timeout.read or 30.0)

    def _handed_over(self) -> Changes | None:
        """At the first look: the owner's indexes, put into this process's followers by
        ``seed`` (once), and what changed since the generation they are consistent with;
        None when nothing was handed over (everything is read, as before)."""
        seed, self.seed = self.seed, None
        if seed is None or self._owned is not None:
            return None
        self.requests_sent += 1
        found = fetch_shared(self.socket, self.client.timeout.read or 30.0)
        if found is None:
            return None
        header, indexes = found
        notes = header["notes"]
        try:
            epoch, now = str(notes["epoch"]), int(notes["generation"])
            if notes.get("everything", True) or epoch != header.get("epoch"):
                return None
            whole = {str(g) for g in notes.get("whole", [])}
            subjects = {(str(g), str(x)) for g, x in notes.get("subjects", [])}
        except (KeyError, TypeError, ValueError):
            return None
        placed = seed(indexes)
        if not placed:
            return None
        self.handed_over += placed
        if not self._replica.since_param():  # the notes held start there
            self._replica.adopt({"epoch": epoch, "generation": now, "everything": True}, "")
        return changes((float(now), frozenset({epoch})), whole, subjects)

    def known_quads(self, graph: NamedNode, subjects: Sequence[NamedNode]) -> list[Quad] | None:
        """Every triple of ``subjects`` in ``graph`` as the store holds them now, when this
        process knows them from the owner's journal answers (no write since named them);
        else None: read the store."""
        self.leases.flush()
        pairs = [(graph.value, s.value) for s in subjects]
        mark = self._mark.read()
        found = self._replica.known(pairs, mark)
        if found is None:
            # A subject never written since this process looked may be known absent once
            # its graph's subjects are listed: asked once, it spares every existence check
            # of a new node, edge or memory its request.
            listing = self._replica.to_list(pairs, mark)
            if listing is not None and self.handed_over:
                # Started from the owner's indexes: no answer waits for a whole graph's
                # subjects (tens of milliseconds of the owner's at 10,000): this one is
                # read from the store, the list comes off the request path.
                self._lister.later(listing)
            elif listing is not None:
                asked = self._replica.since_param()
                target = "/subjects?" + urlencode(
                    {"graph": listing, **dict(zip(("epoch", "since"), _cursor(asked), strict=True))}
                )
                response = self._send("GET", target, b"", b"application/json")
                if response.status_code == 200:
                    with contextlib.suppress(ValueError):
                        self._replica.adopt(response.json(), asked, listing)
                    found = self._replica.known(pairs, self._mark.read())
        return found

    def _listed(self, target: str) -> Any:
        """The owner's JSON answer to ``GET target`` (None unless 200)."""
        response = self._send("GET", target, b"", b"application/json")
        return response.json() if response.status_code == 200 else None

    def match(
        self,
        subject: Subject | None = None,
        predicate: NamedNode | None = None,
        object: Object | None = None,
        graph: Graph | None = None,
    ) -> Iterator[Quad]:
        """As any SPARQL client; a subject of a named graph whose triples this process
        knows (``known_quads``: a key/value entry or a node it wrote) is read here."""
        if isinstance(subject, NamedNode) and isinstance(graph, NamedNode):
            known = self.known_quads(graph, [subject])
            if known is not None:
                return iter(
                    [
                        q
                        for q in known
                        if (predicate is None or q.predicate == predicate)
                        and (object is None or q.object == object)
                    ]
                )
        return super().match(subject, predicate, object, graph)

    def _journal(self, epoch: str, since: int) -> dict[str, Any]:
        """The owner's answer to ``GET /changes`` (``everything`` when it had none)."""
        target = "/changes?" + urlencode({"epoch": epoch, "since": since})
        response = self._send("GET", target, b"", b"application/json")
        found: dict[str, Any] = response.json() if response.status_code == 200 else {}
        return found

    def _post(self, url: str, form: Mapping[str, Any], accept: str, what: str) -> httpx.Response:
        """As a SPARQL client's, written straight on the socket: httpx's client builds a
        request in about as long as the owner answers a small one. The query or update is
        the body itself (``_direct``: no form to encode here and to decode there)."""
        if accept.startswith(RESULTS):  # solutions as TSV (``owner.serialised``)
            accept = _RESULTS_ACCEPT
        target, body, media = _direct(
            url[len(_ORIGIN) :] if url.startswith(_ORIGIN + "/") else url, form
        )
        for attempt in range(RETRIES + 1):
            response = self._send("POST", target, body, accept.encode("latin-1"), media)
            if self.answered(response, attempt):
                return response
            time.sleep(retry_pause(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    def _send(
        self, method: str, target: str, body: bytes, accept: bytes, media: bytes = _FORM
    ) -> httpx.Response:
        """One request to the owner (sent again to the next owner when it was not run);
        ``media``: the body's type.

        Raises:
            Unreachable: no owner answered it.
            BackingError: this store is closed.
        """
        if self._closed:
            raise BackingError("this remote store is closed", cause=None)
        headers = [(b"Host", _HOST), (b"Accept", accept)]
        headers += [(k, v) for k, v in self.client.headers.raw if k.lower() not in _SET_HERE]
        if method == "POST":
            headers += [(b"Content-Type", media), (b"Content-Length", b"%d" % len(body))]
        self.requests_sent += 1
        hooks = self.client.event_hooks["request"]
        if hooks:  # someone watches the requests (a test, a benchmark): shown as httpx's
            typed = {"Content-Type": media.decode()} if method == "POST" else None
            shown = httpx.Request(method, _ORIGIN + target, content=body, headers=typed)
            for hook in hooks:
                hook(shown)
        timeout = self.client.timeout.read
        try:
            status, answer, content = self._wire.exchange(method, target, headers, body, timeout)
        except httpx.TransportError as exc:
            raise unreachable(OWNER_URL, exc) from exc
        response = httpx.Response(status, headers=answer, content=content)
        if not 200 <= status < 300:  # its error names the request (``answers.answered``)
            response.request = httpx.Request(
                method, _ORIGIN + target, content=_as_form(body, media)
            )
        return response

    @property
    def owner(self) -> bool:
        """True once this process took the store over (its requests then go to itself)."""
        return self._owned is not None

    def exclusive(
        self, subjects: Sequence[NamedNode], within: str | None = None
    ) -> AbstractContextManager[Any]:
        """The subjects' record locks, shared with the owner and every attached process."""
        return self._locks.exclusive(subjects)

    def guard_owned_reads(self, guard_of: Callable[[Backend], Guarded]) -> None:
        """Once this process owns the store (now, or when it takes it over), queries other
        processes send with a time limit run through ``guard_of(owned)``, ``owned`` being
        the backend it opened (``OxigraphBackend.guard_reads``). ``guard_of`` must read
        ``owned`` itself: this backend's requests go to the socket its guard serves."""
        with self._takeover:
            self._guard_of = guard_of
            if self._owned is not None:
                self._owned.guard_reads(guard_of(self._owned))

    def reattach(self) -> None:
        """Make sure someone serves the store: become its owner when nobody holds its files,
        else wait for the holder's socket.

        Raises:
            StoreAlreadyOpen: the holder does not serve within ``wait_s``.
        """
        from rdfmem.backends.oxigraph import OxigraphBackend  # only on takeover

        with self._takeover:
            # The owner that left may hold the files a moment longer than its socket: try
            # both, in turn, until one answers.
            deadline = time.monotonic() + self.wait_s
            while not reachable(self.socket):
                try:
                    owned = OxigraphBackend(self.path)
                except StoreAlreadyOpen:
                    if time.monotonic() >= deadline:
                        raise self._not_served() from None
                else:
                    if self._guard_of is not None:
                        owned.guard_reads(self._guard_of(owned))
                    self._owned = owned
                    return
                time.sleep(0.02)

    def _await_owner(self) -> None:
        deadline = time.monotonic() + self.wait_s
        while not reachable(self.socket):
            if time.monotonic() >= deadline:
                raise self._not_served()
            time.sleep(0.02)

    def _not_served(self) -> StoreAlreadyOpen:
        return not_served(self.path, self.socket)

    def close(self) -> None:
        if self.closed:
            return
        super().close()
        self._locks.close()
        self._mark.close()
        owned, self._owned = self._owned, None
        if owned is not None:
            owned.close()

    def __repr__(self) -> str:
        return f"AttachedBackend({str(self.path)!r})"


def _cursor(asked: str) -> tuple[str, str]:
    """``epoch`` and ``since`` of a ``since_param`` value (``""``: none yet, everything)."""
    epoch, _, since = asked.partition(" ")
    return (epoch, since) if since else ("", "-1")


#: Headers ``_send`` writes itself (the client's others, as a time limit, are sent too).
_SET_HERE = frozenset({b"host", b"accept", b"content-type", b"content-length"})


def _reads_only(method: str, headers: Sequence[tuple[bytes, bytes]], body: bytes) -> bool:
    """True for a request that changes nothing (a query, the journal): safe to send again."""
    if method == "GET":
        return True
    media = next((v for k, v in headers if k.lower() == b"content-type"), b"")
    media = media.split(b";")[0].strip().lower()
    return media == _QUERY or (media == _FORM and body.startswith(b"query="))


def is_update(request: httpx.Request) -> bool:
    """True for a request (as a watcher of ``client.event_hooks`` sees it) that is an
    update: a direct one, or a form's."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return media == _UPDATE.decode() or bytes(request.content).startswith(b"update=")


def _as_form(body: bytes, media: bytes) -> bytes:
    """A direct body as the protocol's form (what a failed request's error looks at)."""
    for key, kind in (("update", _UPDATE), ("query", _QUERY)):
        if media == kind:
            return urlencode({key: body.decode("utf-8")}).encode("ascii")
    return body


def _direct(target: str, form: Mapping[str, Any]) -> tuple[str, bytes, bytes]:
    """The request of a protocol form for ``target``: its target, body and media type.
    A query or an update is the body itself (``application/sparql-query`` or
    ``-update``), its other parameters in the target's query string, as the SPARQL
    protocol allows: a form of a few kilobytes costs about 0.15 ms to encode here and as
    much to decode in the owner. Sent as a form when those parameters are long (a scope
    of many subjects), or when there is neither."""
    for key, media in (("update", _UPDATE), ("query", _QUERY)):
        text = form.get(key)
        if isinstance(text, str) and ("update" if key == "query" else "query") not in form:
            rest = urlencode({k: v for k, v in form.items() if k != key}, doseq=True)
            if len(rest) > _MAX_QUERY_STRING:
                break
            joined = (target + ("&" if "?" in target else "?") + rest) if rest else target
            return joined, text.encode("utf-8"), media
    return target, urlencode(form, doseq=True).encode("ascii"), _FORM


class _Failover(httpx.BaseTransport):
    """HTTP over the owner's socket; a request that was not run is sent again to the next
    owner (``AttachedBackend.reattach``)."""

    def __init__(self, backend: AttachedBackend) -> None:
        self._backend = backend
        self._inner = UnixHTTPTransport(str(backend.socket))

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout", {})
        timeout = timeouts.get("read") if isinstance(timeouts, dict) else None
        self._backend.requests_sent += 1
        status, headers, content = self.exchange(
            request.method,
            request.url.raw_path.decode("ascii"),
            request.headers.raw,
            request.read(),
            timeout,
        )
        return httpx.Response(status, headers=headers, content=content, request=request)

    def exchange(
        self,
        method: str,
        target: str,
        headers: Sequence[tuple[bytes, bytes]],
        body: bytes,
        timeout: float | None,
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """``UnixHTTPTransport.exchange`` with the owner, whoever it is now."""
        for _ in range(20):
            try:
                status, answer, content = self._inner.exchange(
                    method, target, headers, body, timeout
                )
            except httpx.ConnectError:
                self._backend.reattach()
                continue
            except (httpx.RemoteProtocolError, httpx.ReadError):
                # The owner went away with the answer: a read is sent to the next owner;
                # a write may have been applied (``KeyValue`` settles its own by reading).
                if not _reads_only(method, headers, body):
                    raise
                self._backend.reattach()
                continue
            if status == 503 and content == CLOSING:
                time.sleep(0.01)
                self._backend.reattach()
                continue
            return status, answer, content
        raise httpx.ConnectError("no owner of the store answered after 20 takeovers")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._inner.close()
