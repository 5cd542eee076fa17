"""Hostile change-log records, as any SPARQL client of a shared server could write them
(issue 22, item 6): a seeded generator of SPARQL updates, and a raw client that sends them.

The change log (``rdfmem.backends.sparql.changelog``) is input from every tenant of the
server. ``records(seed, count, ...)`` gives ``count`` updates, each writing one record that
no rdfmem client writes: malformed dates (not dates, huge numbers, wrong datatypes, IRIs,
blank nodes, language-tagged and KB-long strings), far-future and far-past stamps, records
naming thousands of graphs or subjects, literals where IRIs go and IRIs where literals go,
duplicates and contradictions (one record id with two dates, or with graphs and subjects
that rdfmem never pairs), records in the wrong graph, graphs that do not exist, and a
horizon (``prunedBefore``) that is not one. ``send`` posts them with httpx to the server's
update URL, fifty records per request (one by one when a server refuses a batch: Virtuoso
refuses literals it cannot parse), and counts the refused ones.

Used by ``tests/test_changelog_hostile.py`` and ``benchmarks/bench_changelog_hostile.py``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

LOG_GRAPH = "urn:rdfmem:graph:changes"
_RM = "https://w3id.org/rdfmem#"
AT, GRAPH, SUBJECT, UNKNOWN = (
    f"<{_RM}{p}>" for p in ("changedAt", "changedGraph", "changedSubject", "changedUnknown")
)
PRUNED = f"<{_RM}prunedBefore>"
_XSD = "http://www.w3.org/2001/XMLSchema#"
LOG_NODE = "<urn:rdfmem:changes>"


def _stamp(seconds: float) -> str:
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f'"{whole}.{int(seconds % 1 * 1000):03d}Z"^^<{_XSD}dateTime>'


@dataclass
class Target:
    """What the hostile records may name: the graphs and subjects a follower holds."""

    graphs: Sequence[str]
    subjects: Sequence[str]


class Generator:
    """Seeded hostile records; ``now`` is the server's time in seconds (the records that
    look current are dated around it)."""

    def __init__(self, seed: int, target: Target, now: float) -> None:
        self.rnd = random.Random(seed)
        self.target = target
        self.now = now
        self.ids: list[str] = []  # record ids already used (for duplicates, contradictions)
        self.written: list[str] = []

    # -- terms -------------------------------------------------------------------------

    def _id(self) -> str:
        r = self.rnd.random()
        if self.ids and r < 0.15:
            return self.rnd.choice(self.ids)  # a contradiction: one record id, two records
        if r < 0.22:
            return f"_:b{self.rnd.randrange(10**6)}"  # a blank node for a record
        if r < 0.27:
            return LOG_NODE  # the log's own node
        if r < 0.32:
            return f"<urn:x:{self.rnd.randrange(10**9)}>"  # not a change IRI
        made = f"<urn:rdfmem:change:{self.rnd.getrandbits(128):032x}>"
        self.ids.append(made)
        return made

    def date(self) -> str:
        """A value for ``changedAt``: sometimes a real current date, mostly not."""
        rnd = self.rnd
        choices: list[Callable[[], str]] = [
            lambda: _stamp(self.now + rnd.uniform(-30, 5)),  # looks current
            lambda: _stamp(self.now + rnd.uniform(3600, 10**10)),  # far future
            lambda: f'"9999-12-31T23:59:59Z"^^<{_XSD}dateTime>',
            lambda: _stamp(rnd.uniform(0, 10**9)),  # far past
            lambda: f'"0001-01-01T00:00:00Z"^^<{_XSD}dateTime>',
            lambda: f'"-0044-03-15T12:00:00Z"^^<{_XSD}dateTime>',  # a negative year
            lambda: f'"tomorrow"^^<{_XSD}dateTime>',
            lambda: '"soon"',
            lambda: '"2026-01-01T00:00:00Z"',  # a date as a plain string
            lambda: f'"2026-01-01"^^<{_XSD}date>',
            lambda: f'"{10 ** rnd.randrange(20, 400)}"^^<{_XSD}integer>',  # huge number
            lambda: f'"1e{rnd.randrange(300, 99999)}"^^<{_XSD}double>',
            lambda: f'"NaN"^^<{_XSD}double>',
            lambda: str(rnd.randrange(-(10**30), 10**30)),  # a bare integer
            lambda: '"now"@en',
            lambda: f'"{"x" * rnd.randrange(1000, 8000)}"',  # KBs
            lambda: f'"{"9" * rnd.randrange(1000, 4000)}-01-01T00:00:00Z"^^<{_XSD}dateTime>',
            lambda: f'"2026-13-45T99:99:99Z"^^<{_XSD}dateTime>',
            lambda: f'"2026-06-30T23:59:60Z"^^<{_XSD}dateTime>',  # a leap second
            lambda: "<urn:x:date>",  # an IRI where a literal goes
            lambda: f"_:d{rnd.randrange(10**6)}",  # a blank node
            lambda: "true",
        ]
        return rnd.choice(choices)()

    def graph(self, long: bool = True) -> str:
        rnd = self.rnd
        choices: list[Callable[[], str]] = [
            lambda: f"<{rnd.choice(self.target.graphs)}>",  # a graph the follower holds
            lambda: f"<urn:missing:{rnd.randrange(10**9)}>",  # a graph that does not exist
            lambda: "<urn:rdfmem:graph:default>",
            lambda: f"<{LOG_GRAPH}>",
            lambda: f'"{rnd.choice(self.target.graphs)}"',  # a literal where an IRI goes
            lambda: f"_:g{rnd.randrange(10**6)}",
            lambda: str(rnd.randrange(10**6)),
        ]
        if long:
            choices.append(lambda: f"<urn:long:{'g' * rnd.randrange(1000, 6000)}>")  # KBs
        return rnd.choice(choices)()

    def subject(self, long: bool = True) -> str:
        rnd = self.rnd
        choices: list[Callable[[], str]] = [
            lambda: f"<{rnd.choice(self.target.subjects)}>",  # a subject the follower holds
            lambda: f"<urn:nobody:{rnd.randrange(10**9)}>",
            lambda: f'"{rnd.choice(self.target.subjects)}"',
            lambda: f"_:s{rnd.randrange(10**6)}",
        ]
        if long:
            choices.append(lambda: f'"{"s" * rnd.randrange(1000, 6000)}"')  # KBs
        return rnd.choice(choices)()

    # -- records -----------------------------------------------------------------------

    def record(self) -> str:
        """One update writing one hostile record (or one hostile horizon)."""
        rnd = self.rnd
        if self.written and rnd.random() < 0.05:
            return rnd.choice(self.written)  # a duplicate, word for word
        r = rnd.random()
        if r < 0.06:  # a horizon that is not one, or one of many
            return self._insert(f"{LOG_NODE} {PRUNED} {self.date()} .")
        node = self._id()
        parts = [f"{AT} {self.date()}"] if rnd.random() < 0.9 else []
        if rnd.random() < 0.15:
            parts.append(f"{AT} {self.date()}")  # two dates for one record
        many = rnd.random()
        graphs = rnd.randrange(1000, 3000) if many < 0.02 else rnd.randrange(0, 4)
        subjects = rnd.randrange(1000, 3000) if 0.02 <= many < 0.04 else rnd.randrange(0, 6)
        # thousands of names are short ones (a record stays under about 200 KB)
        parts += [f"{GRAPH} {self.graph(graphs < 10)}" for _ in range(graphs)]
        parts += [f"{SUBJECT} {self.subject(subjects < 10)}" for _ in range(subjects)]
        if rnd.random() < 0.1:
            value = rnd.choice(
                ["true", "false", '"yes"', "0", "<urn:x:u>", f"_:u{rnd.randrange(99)}"]
            )
            parts.append(f"{UNKNOWN} {value}")
        if not parts:
            parts.append(f"{SUBJECT} {self.subject()}")
        return self._insert(f"{node} {' ; '.join(parts)} .", wrong_graph=rnd.random() < 0.08)

    def _insert(self, triples: str, wrong_graph: bool = False) -> str:
        graph = f"<{LOG_GRAPH}>"
        if wrong_graph:  # a record in a graph that is not the log
            graph = self.rnd.choice(
                [f"<{self.rnd.choice(self.target.graphs)}>", "<urn:missing:log>"]
            )
            if self.rnd.random() < 0.3:
                update = f"INSERT DATA {{ {triples} }}"  # the default graph
                self.written.append(update)
                return update
        update = f"INSERT DATA {{ GRAPH {graph} {{ {triples} }} }}"
        self.written.append(update)
        return update


def records(seed: int, count: int, target: Target, now: float | None = None) -> list[str]:
    """``count`` updates, each writing one hostile record; the same for the same seed."""
    generator = Generator(seed, target, time.time() if now is None else now)
    return [generator.record() for _ in range(count)]


def send(update_url: str, updates: Sequence[str], batch: int = 50) -> tuple[int, int]:
    """Post the updates with a plain httpx client (no rdfmem), ``batch`` to a request (one
    by one again when a server refuses a batch); ``(accepted, refused)`` records."""
    accepted = refused = 0
    with httpx.Client(timeout=120) as client:
        for start in range(0, len(updates), batch):
            chunk = updates[start : start + batch]
            if client.post(update_url, data={"update": " ;\n".join(chunk)}).status_code < 300:
                accepted += len(chunk)
                continue
            for update in chunk:
                if client.post(update_url, data={"update": update}).status_code < 300:
                    accepted += 1
                else:
                    refused += 1
    return accepted, refused
