"""History beyond key/value entries (issue 24): a domain write versions its resources in
the same SPARQL request, the named queries read a TriG export, and processes sharing one
on-disk store keep one version per acknowledged write."""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyoxigraph as ox
import pytest
from conftest import StoreFactory

from rdfmem import RdfStore
from rdfmem.backends.oxigraph import OxigraphBackend
from rdfmem.core.results import SelectResult
from rdfmem.server.named import load_named_query
from rdfmem.store.indexes import versions

UTC = dt.timezone.utc
ROOT = Path(__file__).resolve().parents[1]
G = "urn:rdfmem:graph:decisions"
S = "urn:rdfmem:graph:decisions/node/ship"
RM = "https://w3id.org/rdfmem#"
LABEL = "http://www.w3.org/2000/01/rdf-schema#label"


def now() -> dt.datetime:
    return dt.datetime.now(UTC)


def label_update(old: str | None, new: str | None) -> str:
    ops = []
    if old is not None:
        ops.append(f'DELETE DATA {{ GRAPH <{G}> {{ <{S}> <{LABEL}> "{old}" }} }}')
    if new is not None:
        ops.append(f'INSERT DATA {{ GRAPH <{G}> {{ <{S}> a <{RM}Goal> ; <{LABEL}> "{new}" }} }}')
    else:
        ops.append(f"DELETE WHERE {{ GRAPH <{G}> {{ <{S}> ?p ?o }} }}")
    return " ;\n".join(ops)


@pytest.mark.kv_contract  # also on Virtuoso (tests/servers.py runs only marked tests there)
def test_a_domain_write_versions_its_resource_in_the_same_request(
    make_store: StoreFactory,
) -> None:
    store = make_store(history=True, agent="urn:agent:domain")
    store.sparql_update(label_update(None, "Ship v1") + " ;\n" + store.versioning_update(G, [S]))
    first = now()
    with store.attributed(by="urn:agent:planner", why="renamed by the user"):
        store.sparql_update(
            label_update("Ship v1", "Ship v2") + " ;\n" + store.versioning_update(G, [S])
        )
    second = now()
    store.sparql_update(label_update("Ship v2", None) + " ;\n" + store.versioning_update(G, [S]))
    versions = store.history_of(G, S)
    assert [v.deleted for v in versions] == [False, False, True]
    assert [(v.by, v.why) for v in versions] == [
        ("urn:agent:domain", None),
        ("urn:agent:planner", "renamed by the user"),
        ("urn:agent:domain", None),
    ]
    for before, after in itertools.pairwise(versions):
        assert after.revision_of == before.iri and before.invalidated_at == after.at
    then = store.as_of_quads(G, S, first)
    assert then is not None
    assert sorted((q.predicate.value, q.object.value) for q in then) == [
        ("http://www.w3.org/1999/02/22-rdf-syntax-ns#type", RM + "Goal"),
        (LABEL, "Ship v1"),
    ]
    assert all(q.graph_name == ox.NamedNode(G) for q in then)
    assert {q.object.value for q in store.as_of_quads(G, S, second) or []} >= {"Ship v2"}
    assert store.as_of_quads(G, S, now()) == []  # deleted
    assert store.as_of_quads(G, S, first - dt.timedelta(hours=1)) is None  # before any
    # No current-state query sees a version: instances of a class are the data's only.
    rows = store.query(f"SELECT ?x WHERE {{ GRAPH ?g {{ ?x a <{RM}Goal> }} }}")
    assert isinstance(rows, SelectResult) and len(rows) == 0
    assert [c.subject for c in store.changes_since(first, graph=G)] == [S, S]


def test_the_named_queries_read_a_trig_export(make_store: StoreFactory) -> None:
    store = make_store(history=True, agent="urn:agent:x")
    store.set("a", 1)
    middle = now()
    with store.attributed(why="second"):
        store.set("a", 2)
    store.set("b", True)
    store.delete("b")
    plain = ox.Store()
    plain.load(store.export("trig").encode(), ox.RdfFormat.TRIG)

    def run(name: str, **given: str) -> list[dict[str, str]]:
        text, bindings = load_named_query(name).prepare(given)
        solutions = plain.query(
            text, substitutions={ox.Variable(k): v for k, v in bindings.items()}
        )
        assert isinstance(solutions, ox.QuerySolutions)
        names = [v.value for v in solutions.variables]
        return [
            {n: getattr(s[n], "value", "") for n in names if s[n] is not None} for s in solutions
        ]

    history = run("history", resource="urn:rdfmem:store:a")
    assert [(r["value"], r.get("why"), r["by"]) for r in history] == [
        ("1", None, "urn:agent:x"),
        ("2", "second", "urn:agent:x"),
    ]
    stamp = middle.isoformat().replace("+00:00", "Z")
    past = run("as_of", moment=stamp)
    assert [(r["resource"], r["value"]) for r in past] == [("urn:rdfmem:store:a", "1")]
    present = run("as_of")
    assert [(r["resource"], r["value"]) for r in present] == [("urn:rdfmem:store:a", "2")]
    hours = sorted({middle.strftime("%Y-%m-%dT%H"), now().strftime("%Y-%m-%dT%H")})
    changed = [r for h in hours for r in run("changes_since", hour=h, since=stamp)]
    assert [(r["resource"], r["deleted"]) for r in changed] == [
        ("urn:rdfmem:store:a", "false"),
        ("urn:rdfmem:store:b", "false"),
        ("urn:rdfmem:store:b", "true"),
    ]


WRITER = textwrap.dedent(
    """
    import sys
    from rdfmem import RdfStore
    path, n, who = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    store = RdfStore.open(path, history=True, agent=who, attach_wait_s=30)
    print(type(store.backend).__name__, flush=True)
    sys.stdin.readline()  # both are open: go
    for _ in range(n):
        store.update("counter", lambda v: (v or 0) + 1)
    store.close()
    """
)


def test_two_processes_on_one_disk_store_keep_every_version(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.Popen(
        [sys.executable, "-c", WRITER, path, "100", "urn:agent:p0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert first.stdout is not None and first.stdin is not None
    kinds = [first.stdout.readline().strip()]  # the owner, before the other starts
    second = subprocess.Popen(
        [sys.executable, "-c", WRITER, path, "100", "urn:agent:p1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert second.stdout is not None
    kinds.append(second.stdout.readline().strip())
    assert kinds == ["OxigraphBackend", "AttachedBackend"]  # really shared
    outputs = [p.communicate("go\n", timeout=180)[0] for p in (first, second)]
    assert [first.returncode, second.returncode] == [0, 0], outputs
    with RdfStore.open(path, history=True) as store:
        versions = store.history("counter")
        assert store.get("counter") == 200
        assert [v.value for v in versions] == list(range(1, 201))
        assert {v.by for v in versions} == {"urn:agent:p0", "urn:agent:p1"}
        for before, after in itertools.pairwise(versions):
            assert after.revision_of == before.iri and before.at < after.at


def test_as_of_finds_the_version_in_effect_at_every_moment(make_store: StoreFactory) -> None:
    store = make_store(history=True)
    moments = []
    for i in range(70):
        store.set("hot", i)
        if i % 7 == 3:
            store.set("cold", i)
        moments.append(now())
    versions = store.history("hot")
    assert [v.value for v in versions] == list(range(70))
    for i, moment in enumerate(moments):
        assert store.get("hot", as_of=moment) == i
    for v in versions:
        assert store.get("hot", as_of=v.at) == v.value
        assert store.get("hot", as_of=v.at - dt.timedelta(microseconds=1)) == (
            None if v.value == 0 else v.value - 1
        )
    assert store.compact_history(before=versions[40].at) == 40 + 5  # and 5 of "cold"
    assert store.get("hot", as_of=moments[55]) == 55
    assert store.get("hot", as_of=versions[40].at) == 40
    assert store.get("hot", as_of=versions[39].at) is None  # forgotten


def test_an_export_without_history_holds_the_data_alone(make_store: StoreFactory) -> None:
    store = make_store(history=True)
    store.set("a", 1)
    store.set("a", 2)
    plain = store.export("trig", history=False)
    assert "urn:rdfmem:history:" not in plain and "urn:rdfmem:store:a" in plain
    assert "urn:rdfmem:history:" in store.export("trig")


def test_retention_by_age_forgets_what_was_replaced_long_enough_ago(
    make_store: StoreFactory,
) -> None:
    store = make_store(history=True, history_retention=dt.timedelta(milliseconds=300))
    store.set("k", 1)
    store.set("k", 2)
    assert [v.value for v in store.history("k")] == [1, 2]
    time.sleep(0.4)
    store.set("k", 3)  # 1 was replaced over 300 ms ago; 2 only now
    assert [v.value for v in store.history("k")] == [2, 3]


def test_reads_of_the_past_stay_right_when_the_history_is_written_around_the_store(
    make_store: StoreFactory,
) -> None:
    # An embedded store answers as_of from the version chains it keeps in process: every
    # way of writing the history without telling it must show in its next answer.
    store = make_store(history=True, agent="urn:agent:a")
    for i in range(3):
        store.set("k", i)
    assert store.get("k", as_of=now()) == 2 and store.keys(as_of=now()) == ["k"]
    other = RdfStore(store.backend, history=True, agent="urn:agent:b")  # its own indexes
    other.set("k", 3)
    other.set("new", True)
    assert store.get("k", as_of=now()) == 3
    assert store.keys(as_of=now()) == ["k", "new"]
    assert [v.by for v in store.history("k")][-1] == "urn:agent:b"
    store.set("k", 4)  # the chain read again, the new version after the other's
    assert [v.value for v in store.history("k")] == [0, 1, 2, 3, 4]
    assert store.history("k")[-1].revision_of == store.history("k")[-2].iri
    middle = now()
    other.delete("new")
    assert store.keys(as_of=now()) == ["k"] and store.keys(as_of=middle) == ["k", "new"]
    assert store.compact_history(keep=1) == 5  # k's 0-3 and new's set
    assert store.get("k", as_of=middle) == 4 and store.get("k", as_of=now()) == 4
    assert store.get("new", "forgotten", as_of=middle) == "forgotten"
    # A domain write names its data graph to the store's indexes, not the history graph.
    hub = store.indexes
    before = now()
    store.sparql_update(label_update(None, "Ship v1") + " ;\n" + store.versioning_update(G, [S]))
    assert store.as_of_quads(G, S, now()) and store.as_of_quads(G, S, before) is None
    with hub.writing([G]) if hub is not None else contextlib.nullcontext():
        store.sparql_update(
            label_update("Ship v1", None) + " ;\n" + store.versioning_update(G, [S])
        )
    assert store.as_of_quads(G, S, now()) == []


def test_retention_and_as_of_agree_on_what_is_kept(make_store: StoreFactory) -> None:
    store = make_store(history=True, history_retention=2)
    moments = []
    for i in range(5):
        store.set("k", i)
        moments.append(now())
    assert [store.get("k", "forgotten", as_of=m) for m in moments] == [
        "forgotten",
        "forgotten",
        "forgotten",
        3,
        4,
    ]
    store.set("k", 5)
    assert store.get("k", "forgotten", as_of=moments[3]) == "forgotten"
    assert store.get("k", as_of=now()) == 5 and store.keys(as_of=moments[4]) == ["k"]


def test_a_store_over_a_pyoxigraph_store_it_was_handed_reads_the_past_from_it() -> None:
    # Storage handed in may be written around rdfmem: no index, reads go to the store.
    raw = ox.Store()
    store = RdfStore(OxigraphBackend(store=raw), history=True)
    assert store.indexes is None
    store.set("k", 1)
    middle = now()
    store.set("k", 2)
    store.delete("k")
    assert store.get("k", as_of=middle) == 1 and store.get("k", as_of=now()) is None
    assert store.keys(as_of=middle) == ["k"] and store.keys(as_of=now()) == []
    assert [v.value for v in store.history("k")] == [1, 2, None]


def test_a_version_index_past_its_size_forgets_and_reads_again(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(versions, "MAX_VERSIONS", 4)
    store = make_store(history=True)
    moments = []
    for i in range(10):
        store.set(f"k{i % 3}", i)
        moments.append(now())
    assert [store.get("k0", as_of=m) for m in moments] == [0, 0, 0, 3, 3, 3, 6, 6, 6, 9]
    assert store.keys(as_of=moments[1]) == ["k0", "k1"]
    store.set("k1", "after")
    assert store.get("k1", as_of=now()) == "after" and store.get("k1", as_of=moments[9]) == 7
