"""The in-memory store beyond the conformance suite: its URLs, verify() over tampered rows
(what the sql_only tests check through SQL), threads, and a differential test: any sequence
of operations gives the same answers, rows and hashes on memory:// as on SQLite."""
from __future__ import annotations

import asyncio
import shutil
import threading
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.store import (
    ConcurrencyConflict,
    ConsumedOffset,
    DeadLetter,
    EventStore,
    IdempotencyKeyTaken,
    IdempotencyRecord,
    MemoryEventStore,
    NewEvent,
    Snapshot,
    SqliteEventStore,
    open_store,
)
from service.store import recorded as recorded_module
from service.store.memory import discard_database
from service.store.migrate import schema_is_current, upgrade


def ev(i: int) -> NewEvent:
    return NewEvent("NodeUpserted", {"name": f"node-{i}", "i": i}, {"source": "test"})


async def test_memory_urls_private_and_named() -> None:
    private, other_private = open_store("memory://"), open_store("memory://")
    assert isinstance(private, MemoryEventStore)
    await private.append("c", 0, [ev(1)])
    assert await other_private.last_position("c") == 0  # memory:// is a database of its own
    try:
        a, b = open_store("memory://shared-test"), open_store("memory://shared-test")
        await a.append("c", 0, [ev(1), ev(2)])
        await a.close()
        assert await b.last_position("c") == 2  # one database per name, also after close()
        discard_database("shared-test")
        assert await open_store("memory://shared-test").last_position("c") == 0
        assert await b.last_position("c") == 2  # an open store keeps its copy
    finally:
        discard_database("shared-test")
    with pytest.raises(ValueError):
        MemoryEventStore("sqlite:///x.db")


async def test_migrations_are_a_no_op_for_memory() -> None:
    await upgrade("memory://")
    assert await schema_is_current("memory://x")
    assert await open_store("memory://").schema_is_current()


async def test_returned_values_are_copies() -> None:
    store = open_store("memory://")
    appended = await store.append("c", 0, [NewEvent("T", {"a": [1]}, {"m": 1})],
                                  idempotency=[IdempotencyRecord("k", "f", 201, {"b": [2]}, "c", 1)])
    appended[0].data["a"].append(99)
    (await store.read("c"))[0].metadata["m"] = 2
    (await store.get_idempotency("k")).body["b"].append(3)  # type: ignore[union-attr]
    assert (await store.read("c"))[0].data == {"a": [1]}
    assert (await store.read("c"))[0].metadata == {"m": 1}
    assert (await store.get_idempotency("k")).body == {"b": [2]}  # type: ignore[union-attr]


# ----------------------------------------------------------------------------- verify over tampered rows

async def _filled(n: int) -> MemoryEventStore:
    store = MemoryEventStore()
    for i in range(n):
        await store.append("prod", i, [ev(i + 1)])
    return store


def _rows(store: MemoryEventStore) -> list[Any]:
    return store._db.events["prod"]  # the store's own rows: what an UPDATE would change in SQL


@pytest.mark.parametrize("field,value", [("data", '{"i":3,"name":"node-evil"}'), ("metadata", '{"source":"cli"}'),
                                         ("recorded_at", "2020-01-01T00:00:00.000000Z"), ("hash", "f" * 64),
                                         ("prev_hash", "e" * 64), ("schema_version", 7), ("data", "not json")])
async def test_verify_detects_a_tampered_row(field: str, value: Any) -> None:
    store = await _filled(6)
    rows = _rows(store)
    rows[3] = rows[3]._replace(**{field: value})
    result = await store.verify("prod")
    assert (result.ok, result.first_bad_position, result.events) == (False, 4, 3)
    assert result.head == rows[2].hash


async def test_verify_accepts_reformatted_but_equal_json() -> None:
    store = await _filled(2)
    rows = _rows(store)
    rows[0] = rows[0]._replace(data='{ "name": "node-1", "i": 1 }')
    assert (await store.verify("prod")).ok


@pytest.mark.parametrize("deleted", [0, 2, 5])
async def test_verify_detects_a_deleted_row(deleted: int) -> None:
    store = await _filled(6)
    del _rows(store)[deleted]
    result = await store.verify("prod")
    assert (result.ok, result.first_bad_position, result.events) == (False, deleted + 1, deleted)


async def test_verify_detects_a_head_that_is_not_the_chain() -> None:
    store = await _filled(3)
    store._db.heads["prod"] = (3, "a" * 64)
    assert (await store.verify("prod")).first_bad_position == 3


# ----------------------------------------------------------------------------- threads

def test_writers_in_several_threads_keep_the_stream_gapless() -> None:
    """Each thread runs its own event loop on the same named database."""
    name = "threads-test"
    errors: list[BaseException] = []

    async def writer(tag: int) -> None:
        store = open_store(f"memory://{name}")
        done = 0
        while done < 200:
            try:
                await store.append("prod", await store.last_position("prod"), [ev(tag), ev(tag)],
                                   idempotency=[IdempotencyRecord(f"{tag}-{done}", "f", 201, {})])
                done += 1
            except ConcurrencyConflict:
                pass

    def run(tag: int) -> None:
        try:
            asyncio.run(writer(tag))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(t,)) for t in range(4)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        store = open_store(f"memory://{name}")
        result = asyncio.run(store.verify("prod"))
        assert (result.ok, result.events) == (True, 1600)
        assert isinstance(store, MemoryEventStore)
        assert store.row_counts()["idempotency"] == 800
    finally:
        discard_database(name)


# ----------------------------------------------------------------------------- memory == SQLite

CLUSTERS = ("a", "b")
KEYS = ("k1", "k2", "k3", "k4")

append_op = st.tuples(
    st.just("append"), st.sampled_from(CLUSTERS), st.sampled_from([-1, 0, 0, 0, 1]), st.integers(0, 3),
    st.lists(st.sampled_from(KEYS), max_size=2), st.lists(st.tuples(st.integers(0, 1), st.integers(0, 50)), max_size=2),
    st.integers(0, 1), st.booleans(), st.booleans())
record_op = st.tuples(st.just("record"), st.lists(st.sampled_from(KEYS), max_size=2),
                      st.lists(st.tuples(st.integers(0, 1), st.integers(0, 50)), max_size=2), st.integers(0, 1))
snapshot_op = st.tuples(st.just("snapshot"), st.sampled_from(CLUSTERS), st.integers(0, 6), st.sampled_from(["v1", "v2"]))
done_op = st.tuples(st.just("outbox_done"), st.integers(0, 3))
operations = st.lists(st.one_of(append_op, append_op, record_op, snapshot_op, done_op), min_size=1, max_size=12)


async def _apply(store: EventStore, op: tuple[Any, ...], step: int) -> Any:
    """One operation; its answer (or the exception's type and fields) as plain data."""
    try:
        if op[0] == "append":
            _, cluster, delta, n, keys, offs, dead, outbox, echo = op
            expected = max(0, await store.last_position(cluster) + delta)
            stored = await store.append(
                cluster, expected, [NewEvent("T", {"step": step, "j": j, "s": "é"}, {"n": n}) for j in range(n)],
                idempotency=[IdempotencyRecord(k, f"f{step}", 201, {"step": step}, cluster, expected + n) for k in keys],
                offsets=[ConsumedOffset("g", "in", p, o) for p, o in offs],
                dead_letters=[DeadLetter("dlq", None, b"x%d" % step, [("h", b"v")])] * dead,
                outbox_topic="out" if outbox else None, echo=echo)
            return [e.envelope() for e in stored]
        if op[0] == "record":
            _, keys, offs, dead = op
            await store.record_without_events(
                idempotency=[IdempotencyRecord(k, f"f{step}", 409, {}) for k in keys],
                offsets=[ConsumedOffset("g", "in", p, o) for p, o in offs],
                dead_letters=[DeadLetter("dlq", b"k", b"y%d" % step)] * dead)
            return None
        if op[0] == "snapshot":
            _, cluster, position, version = op
            await store.save_snapshot(Snapshot(cluster, position, version, b"s%d" % step))
            return None
        batch = await store.outbox_batch(limit=op[1])
        await store.outbox_done([i.id for i in batch])
        return len(batch)
    except ConcurrencyConflict as exc:
        return ("conflict", exc.cluster, exc.expected, exc.actual)
    except IdempotencyKeyTaken:
        return ("key taken",)


async def _state(store: EventStore) -> Any:
    return {
        "clusters": await store.clusters(),
        "events": {c: [e.envelope() for e in await store.read(c)] for c in CLUSTERS},
        "verify": {c: await store.verify(c) for c in CLUSTERS},
        "keys": {k: await store.get_idempotency(k) for k in KEYS},
        "head_and_keys": await store.head_and_idempotency("a", list(KEYS)),
        # ids differ (SQLite may reuse the highest id after a delete); order and content may not
        "outbox": [(i.topic, i.key, i.value, i.headers, i.cluster, i.position) for i in await store.outbox_batch(1000)],
        "offsets": await store.stored_offsets("g", "in"),
        "snapshots": {(c, v, at): await store.latest_snapshot(c, v, at_or_before=at)
                      for c in CLUSTERS for v in ("v1", ("v2", "v1")) for at in (None, 3)},
    }


@pytest.fixture(scope="module")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "template.db"
    asyncio.run(upgrade(f"sqlite+aiosqlite:///{path}"))
    return path


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
def test_memory_answers_as_sqlite_does(ops: list[tuple[Any, ...]], migrated_sqlite: Path, tmp_path: Path) -> None:
    db = tmp_path / f"diff-{threading.get_ident()}-{id(ops)}.db"
    shutil.copy(migrated_sqlite, db)

    async def run() -> None:
        sqlite_store, memory_store = SqliteEventStore(f"sqlite+aiosqlite:///{db}"), MemoryEventStore()
        try:
            for step, op in enumerate(ops):
                assert await _apply(memory_store, op, step) == await _apply(sqlite_store, op, step), (step, op)
            assert await _state(memory_store) == await _state(sqlite_store)
        finally:
            await sqlite_store.close()

    clock = "2026-11-30T10:00:00.000001Z"  # one recordedAt on both: the hashes must agree too
    with mock.patch.object(recorded_module, "utc_now", lambda: clock):
        asyncio.run(run())
    db.unlink()
