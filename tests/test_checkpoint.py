"""Checkpoint: round trips over several stores (on disk too), and every failure mode."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from rdfmem import (
    BackingError,
    CheckpointError,
    IncompatibleSnapshot,
    RdflibBackend,
    RdfStore,
    TypedStore,
)
from rdfmem.checkpoint import CHECKPOINT_TYPE, Checkpoint

StoreFactory = Callable[..., RdfStore]


def contents(store: RdfStore) -> dict[str, Any]:
    return {entry["key"]: entry["value"] for entry in store.snapshot()["entries"]}


def fill(store: RdfStore, **entries: Any) -> RdfStore:
    for key, value in entries.items():
        store.set(key, value)
    return store


def valid_data(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "type": CHECKPOINT_TYPE,
        "version": 1,
        "name": "run",
        "created_at": "2025-01-02T03:04:05Z",
        "state": {"step": 1},
        "stores": {"memory": {"version": 1, "type": "rdfmem-store-v1", "entries": []}},
    }
    data.update(changes)
    return data


# -- round trips ---------------------------------------------------------------------------


def test_round_trip_with_several_stores_on_memory_disk_and_rdflib(tmp_path: Path) -> None:
    with RdfStore.open(tmp_path / "disk") as disk:
        memory = fill(RdfStore(), facts=["sky is blue"], budget=4096)
        fill(disk, notes={"a": [1, 2]})
        disk.set("odd key <>\"{}'\n", "é")
        graph = fill(RdfStore(RdflibBackend()), seen=True)
        ckpt = Checkpoint.capture(
            "triage",
            {"step": 3, "cursor": ["a", "b"]},
            stores={"memory": memory, "disk": disk, "graph": graph},
        )
        expected = {"memory": contents(memory), "disk": contents(disk), "graph": contents(graph)}
    path = ckpt.save(tmp_path / "run.ckpt.json")

    loaded = Checkpoint.open(path)
    assert loaded == ckpt
    assert loaded.name == "triage"
    assert loaded.state == {"step": 3, "cursor": ["a", "b"]}
    assert loaded.store_names == ["memory", "disk", "graph"]
    # Each snapshot goes into a store of another kind: disk into memory and the other way.
    with RdfStore.open(tmp_path / "restored") as restored_disk:
        targets = {
            "memory": restored_disk,
            "disk": RdfStore(),
            "graph": RdfStore(namespace="g"),
        }
        loaded.restore_stores(targets)
        assert {name: contents(s) for name, s in targets.items()} == expected
    with RdfStore.open(tmp_path / "restored") as reopened:  # it outlives the process
        assert contents(reopened) == expected["memory"]


def test_round_trip_through_json_on_every_backend(make_store: StoreFactory) -> None:
    a = fill(make_store(namespace="a"), x=1, log=["one", "two"])
    b = fill(make_store(namespace="b"), y={"deep": {"er": None}})
    ckpt = Checkpoint.capture("flow", None, stores={"a": a, "b": b})
    fresh_a = fill(make_store(namespace="fresh-a"), stale="gone after restore")
    fresh_b = make_store(namespace="fresh-b")
    Checkpoint.load(ckpt.to_json()).restore_stores({"a": fresh_a, "b": fresh_b})
    assert contents(fresh_a) == {"x": 1, "log": ["one", "two"]}
    assert contents(fresh_b) == {"y": {"deep": {"er": None}}}
    assert contents(a) == {"x": 1, "log": ["one", "two"]}  # the sources are untouched


def test_load_accepts_the_parsed_json_and_bytes() -> None:
    ckpt = Checkpoint.capture("run", {"n": 1}, stores={"m": fill(RdfStore(), k="v")})
    assert Checkpoint.load(json.loads(ckpt.to_json())) == ckpt
    assert Checkpoint.load(ckpt.to_json().encode()) == ckpt
    assert Checkpoint.load(ckpt.to_dict()) == ckpt


def test_typed_stores_and_store_free_checkpoints() -> None:
    class Pipeline(BaseModel):
        budget: int

    typed = TypedStore(RdfStore(), Pipeline)
    typed.set("budget", 7)
    ckpt = Checkpoint.load(Checkpoint.capture("typed", [1], stores={"p": typed}).to_json())
    target = TypedStore(RdfStore(), Pipeline)
    ckpt.restore_stores({"p": target})
    assert target.get("budget") == 7
    bare = Checkpoint.load(Checkpoint.capture("bare", "just state").to_json())
    assert (bare.state, bare.store_names) == ("just state", [])
    bare.restore_stores({})


def test_the_json_form_names_its_format_version_and_time() -> None:
    before = datetime.now(timezone.utc)
    ckpt = Checkpoint.capture("run", {"a": 1}, stores={"m": RdfStore()})
    form = json.loads(ckpt.to_json())
    assert form["type"] == "rdfmem-checkpoint-v1"
    assert form["version"] == 1
    assert form["name"] == "run"
    assert form["stores"]["m"] == {"version": 1, "type": "rdfmem-store-v1", "entries": []}
    created = datetime.fromisoformat(form["created_at"].replace("Z", "+00:00"))
    assert before - timedelta(seconds=1) <= created <= datetime.now(timezone.utc)
    assert ckpt.created_at == created


def test_state_is_a_copy_in_and_out() -> None:
    state: dict[str, Any] = {"todo": ["a"]}
    ckpt = Checkpoint.capture("run", state)
    state["todo"].append("changed after capture")
    ckpt.state["todo"].append("changed on a read")
    assert ckpt.state == {"todo": ["a"]}
    data = valid_data()
    loaded = Checkpoint.load(data)
    data["state"]["step"] = 99
    assert loaded.state == {"step": 1}


def test_async_twins_round_trip(tmp_path: Path) -> None:
    source = fill(RdfStore(), a=1)
    other = fill(RdfStore(RdflibBackend()), b=[2])
    target_a, target_b = RdfStore(), RdfStore(RdflibBackend())

    async def main() -> None:
        ckpt = await Checkpoint.acapture("run", {"s": 1}, stores={"a": source, "b": other})
        await ckpt.asave(tmp_path / "c.json")
        loaded = await Checkpoint.aopen(tmp_path / "c.json")
        await loaded.arestore_stores({"a": target_a, "b": target_b})

    asyncio.run(main())
    assert (contents(target_a), contents(target_b)) == ({"a": 1}, {"b": [2]})


# -- restore failures ----------------------------------------------------------------------


def test_missing_stores_raise_naming_every_one_and_touch_nothing() -> None:
    stores = {name: fill(RdfStore(), **{name: 1}) for name in ("memory", "audit", "plan")}
    ckpt = Checkpoint.capture("run", None, stores=stores)
    given = fill(RdfStore(), untouched=True)
    with pytest.raises(CheckpointError, match="'memory', 'plan'") as caught:
        ckpt.restore_stores({"audit": given})
    assert caught.value.missing == ["memory", "plan"]
    assert contents(given) == {"untouched": True}


def test_extra_stores_in_the_map_are_left_alone() -> None:
    ckpt = Checkpoint.capture("run", None, stores={"memory": fill(RdfStore(), a=1)})
    memory, extra = RdfStore(), fill(RdfStore(), mine=True)
    ckpt.restore_stores({"memory": memory, "extra": extra})
    assert contents(memory) == {"a": 1}
    assert contents(extra) == {"mine": True}


def test_an_incompatible_snapshot_raises_and_undoes_earlier_restores() -> None:
    data = valid_data(
        stores={
            "good": {
                "version": 1,
                "type": "rdfmem-store-v1",
                "entries": [{"key": "k", "value": 2}],
            },
            "bad": {"version": 9, "type": "rdfmem-store-v1", "entries": []},
        }
    )
    ckpt = Checkpoint.load(data)  # the store, not the checkpoint, judges its snapshot
    good, bad = fill(RdfStore(), k=1, other="x"), fill(RdfStore(), b=True)
    with pytest.raises(IncompatibleSnapshot) as caught:
        ckpt.restore_stores({"good": good, "bad": bad})
    assert caught.value.fields["actual_version"] == 9
    assert contents(good) == {"k": 1, "other": "x"}
    assert contents(bad) == {"b": True}


def test_a_store_without_restore_is_refused_before_anything_changes() -> None:
    ckpt = Checkpoint.capture("run", None, stores={"a": RdfStore(), "b": RdfStore()})
    a = fill(RdfStore(), kept=1)
    with pytest.raises(CheckpointError, match="store 'b' has no snapshot"):
        ckpt.restore_stores({"a": a, "b": {"not": "a store"}})  # type: ignore[dict-item]
    assert contents(a) == {"kept": 1}


# -- malformed checkpoints -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("{not json", "must be JSON"),
        ('{"state": NaN}', "NaN is not JSON"),
        ("[1, 2]", "JSON object, not list"),
        (valid_data(type="dagonizer-checkpoint"), "not an rdfmem checkpoint"),
        (valid_data(version=2), "version 2 cannot be read"),
        (valid_data(version=True), "version True cannot be read"),
        (valid_data(version="1"), "version '1' cannot be read"),
        ({k: v for k, v in valid_data().items() if k != "stores"}, "stores: Field required"),
        ({k: v for k, v in valid_data().items() if k != "state"}, "state: Field required"),
        (valid_data(stores=[]), "stores: Input should be a valid dictionary"),
        (valid_data(stores={"m": [1]}), "stores.m: Input should be a valid dictionary"),
        (valid_data(stores={"": {}}), "String should have at least 1 character"),
        (valid_data(name=""), "name: String should have at least 1 character"),
        (valid_data(name=5), "name: Input should be a valid string"),
        (valid_data(created_at="2025-01-02T03:04:05"), "created_at: Input should have timezone"),
        (valid_data(created_at="yesterday"), "created_at"),
        (valid_data(cursor=3), "cursor: Extra inputs are not permitted"),
        (valid_data(state={"s": {1, 2}}), "state"),
        (valid_data(state=float("inf")), "JSON cannot hold"),
    ],
)
def test_malformed_checkpoints_are_clear_errors(data: Any, message: str) -> None:
    with pytest.raises(CheckpointError, match=message.replace("(", r"\(")):
        Checkpoint.load(data)


@pytest.mark.parametrize(
    ("name", "state", "stores", "message"),
    [
        ("", None, None, "non-empty str"),
        ("run", {"when": datetime.now()}, None, "state.*datetime"),
        ("run", None, {"": RdfStore()}, "store name"),
        ("run", None, {"m": object()}, "store 'm' has no snapshot"),
    ],
)
def test_capture_refuses_what_it_could_not_save(
    name: str, state: Any, stores: Any, message: str
) -> None:
    with pytest.raises(CheckpointError, match=message):
        Checkpoint.capture(name, state, stores=stores)


# -- files ---------------------------------------------------------------------------------


def test_open_reports_missing_and_corrupt_files(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="cannot read a checkpoint"):
        Checkpoint.open(tmp_path / "missing.json")
    text = Checkpoint.capture("run", {"a": 1}).to_json()
    (tmp_path / "cut.json").write_text(text[: len(text) // 2])
    with pytest.raises(CheckpointError, match=r"cut\.json: a checkpoint must be JSON"):
        Checkpoint.open(tmp_path / "cut.json")


def test_save_never_leaves_a_half_written_file(tmp_path: Path) -> None:
    path = tmp_path / "ckpt.json"
    big = {"blob": ["x" * 1000] * 500}  # ~0.5 MB, so a plain write would be seen mid-way
    versions = [Checkpoint.capture(f"v{i}", {"i": i, **big}) for i in range(2)]
    versions[0].save(path)
    stop = threading.Event()
    seen: set[str] = set()
    errors: list[Exception] = []

    def read() -> None:
        while not stop.is_set():
            try:
                seen.add(Checkpoint.open(path).name)
            except Exception as exc:  # a torn read is exactly what must not happen
                errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(30):
            versions[i % 2].save(path)
    finally:
        stop.set()
        reader.join()
    assert errors == []
    assert seen <= {"v0", "v1"} and seen
    assert sorted(os.listdir(tmp_path)) == ["ckpt.json"]  # no temp files left behind


def test_a_failed_save_raises_and_leaves_no_temp_file(tmp_path: Path) -> None:
    (tmp_path / "a-folder").mkdir()
    ckpt = Checkpoint.capture("run", {"a": 1})
    with pytest.raises(BackingError, match="cannot write a checkpoint"):
        ckpt.save(tmp_path / "a-folder")  # the rename onto a folder fails after the write
    with pytest.raises(BackingError, match="cannot write a checkpoint"):
        ckpt.save(tmp_path / "no-such-folder" / "c.json")
    assert os.listdir(tmp_path) == ["a-folder"]
    assert os.listdir(tmp_path / "a-folder") == []


def test_save_keeps_the_permissions_of_the_file_it_replaces(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text("old")
    path.chmod(0o640)
    Checkpoint.capture("run", 1).save(path)
    assert (path.stat().st_mode & 0o777) == 0o640
    assert Checkpoint.open(path).state == 1
