"""Conformance suite of the event store: every test runs on PostgreSQL, SQLite and the
in-memory store; those marked sql_only (rows changed through SQL, the head cache) on the SQL
backends only (tests/store/conftest.py). tests/store/test_memory_store.py checks verify() of
the in-memory store against tampered rows."""
from __future__ import annotations

import asyncio
import hashlib
import json
import re

import pytest
import sqlalchemy as sa

from service.store import (
    ConcurrencyConflict,
    ConsumedOffset,
    DeadLetter,
    EventStore,
    IdempotencyKeyTaken,
    IdempotencyRecord,
    MemoryEventStore,
    NewEvent,
    PostgresEventStore,
    Snapshot,
    SqlEventStore,
    SqliteEventStore,
)
from service.store import sql as sql_module

ZEROS = "0" * 64
RECORDED_AT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")


def ev(i: int, **extra) -> NewEvent:
    return NewEvent(type="NodeUpserted", data={"name": f"node-{i}", "i": i, **extra},
                    metadata={"source": "http", "commandId": f"c{i}"})


async def fill(store: EventStore, cluster: str, n: int, per_append: int = 3) -> None:
    position = await store.last_position(cluster)
    while n > 0:
        k = min(per_append, n)
        await store.append(cluster, position, [ev(position + j) for j in range(k)])
        position += k
        n -= k


async def sql(store: EventStore, statement: str, **params) -> None:
    assert isinstance(store, SqlEventStore)
    async with store.engine.begin() as conn:
        await conn.execute(sa.text(statement), params)


async def counts(store: EventStore) -> dict[str, int]:
    """Rows per table: SELECT count(*) on SQL, the same counts from the in-memory store."""
    if isinstance(store, MemoryEventStore):
        return store.row_counts()
    assert isinstance(store, SqlEventStore)
    async with store.engine.connect() as conn:
        return {t: (await conn.execute(sa.text(f"SELECT count(*) FROM {t}"))).scalar_one()
                for t in ("events", "clusters", "idempotency", "outbox", "consumer_offsets")}


# ----------------------------------------------------------------------------- positions

async def test_positions_are_gapless_from_one(store: EventStore) -> None:
    first = await store.append("prod", 0, [ev(1), ev(2)])
    assert [e.position for e in first] == [1, 2]
    second = await store.append("prod", 2, [ev(3)])
    assert [e.position for e in second] == [3]
    await store.append("dev", 0, [ev(1)])
    events = await store.read("prod")
    assert [e.position for e in events] == [1, 2, 3]
    assert events == first + second  # append returns exactly what read returns
    assert await store.last_position("prod") == 3
    assert await store.last_position("nope") == 0
    assert await store.clusters() == [("dev", 1), ("prod", 3)]
    assert [e.position for e in await store.read("prod", after=1)] == [2, 3]
    assert [e.position for e in await store.read("prod", limit=2)] == [1, 2]
    assert [e.position for e in await store.read("prod", until=2)] == [1, 2]
    assert [e.position for e in await store.read("prod", after=1, until=2)] == [2]
    assert await store.read("prod", after=3) == []
    assert await store.read("nope") == []
    chunks = [[e.position for e in chunk] async for chunk in store.stream("prod", chunk=2)]
    assert chunks == [[1, 2], [3]]


async def test_expected_position_conflict_writes_nothing(store: EventStore) -> None:
    await store.append("prod", 0, [ev(1), ev(2)])
    before = await counts(store)
    extras = dict(idempotency=[IdempotencyRecord("k", "f", 201, {"x": 1}, "prod", 3)],
                  offsets=[ConsumedOffset("g", "in", 0, 10)],
                  dead_letters=[DeadLetter("dlq", b"k", b"v")], outbox_topic="out")
    for expected in (0, 1, 3):
        with pytest.raises(ConcurrencyConflict) as info:
            await store.append("prod", expected, [ev(9)], **extras)
        assert (info.value.cluster, info.value.expected, info.value.actual) == ("prod", expected, 2)
    with pytest.raises(ConcurrencyConflict) as info:
        await store.append("new", 5, [ev(1)], **extras)
    assert info.value.actual == 0
    with pytest.raises(ConcurrencyConflict):  # an append without events still checks
        await store.append("prod", 1, [], **extras)
    assert await counts(store) == before
    assert [e.position for e in await store.read("prod")] == [1, 2]
    assert await store.get_idempotency("k") is None
    assert await store.outbox_batch() == []
    assert await store.stored_offsets("g", "in") == {}
    assert (await store.verify("prod")).ok


# ----------------------------------------------------------------------------- hash chain

def independent_hash(prev: str, e: dict) -> str:
    body = {k: e[k] for k in ("cluster", "position", "type", "schemaVersion", "data", "metadata", "recordedAt")}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(prev.encode("utf-8") + text.encode("utf-8")).hexdigest()


async def test_hash_chain_matches_an_independent_recomputation(store: EventStore) -> None:
    await store.append("prod", 0, [
        NewEvent("WorkloadSubmitted", {"zeta": [3, 1.5, None, True], "alpha": {"b": 2, "a": "ü ✓ \"q\""}},
                 {"source": "kafka", "causationPosition": None}, schema_version=2),
        NewEvent("PodGroupScheduled", {}, {}),
    ])
    await store.append("prod", 2, [ev(3), ev(4)])
    events = await store.read("prod")
    prev = ZEROS
    for e in events:
        envelope = e.envelope()
        assert envelope["prevHash"] == prev
        assert RECORDED_AT.match(envelope["recordedAt"])
        assert envelope["hash"] == independent_hash(prev, envelope)
        prev = envelope["hash"]
    assert events[0].schema_version == 2
    assert events[0].data["alpha"]["a"] == "ü ✓ \"q\""
    result = await store.verify("prod")
    assert (result.ok, result.events, result.head, result.first_bad_position) == (True, 4, prev, None)
    # the stored text is the canonical JSON that was hashed, byte for byte
    data = (await store.read_data("prod", until=1, decode=False))[0][3]
    assert data == '{"alpha":{"a":"\\u00fc \\u2713 \\"q\\"","b":2},"zeta":[3,1.5,null,true]}'


async def test_verify_of_an_unknown_cluster_is_an_empty_good_chain(store: EventStore) -> None:
    result = await store.verify("nope")
    assert (result.ok, result.events, result.head, result.first_bad_position) == (True, 0, ZEROS, None)


async def test_verify_honours_until(store: EventStore) -> None:
    await fill(store, "prod", 13, per_append=5)
    events = await store.read("prod")
    full = await store.verify("prod")
    assert (full.ok, full.events, full.head, full.first_bad_position) == (True, 13, events[-1].hash, None)
    for until in (0, 1, 6, 13, 20):
        part = await store.verify("prod", until=until)
        head = events[min(until, 13) - 1].hash if until else ZEROS
        assert (part.ok, part.events, part.head) == (True, min(until, 13), head), until


@pytest.mark.sql_only
async def test_verify_streams_in_chunks_and_honours_until(store: EventStore, monkeypatch) -> None:
    monkeypatch.setattr(sql_module, "VERIFY_CHUNK", 4)
    await fill(store, "prod", 13, per_append=5)
    full = await store.verify("prod")
    assert (full.ok, full.events) == (True, 13)
    assert full.head == (await store.read("prod"))[-1].hash
    part = await store.verify("prod", until=6)
    assert (part.ok, part.events, part.head) == (True, 6, (await store.read("prod", until=6))[-1].hash)
    await sql(store, "UPDATE events SET type = 'Forged' WHERE position = 9")
    assert (await store.verify("prod", until=8)).ok
    bad = await store.verify("prod")
    assert (bad.ok, bad.events, bad.first_bad_position) == (False, 8, 9)


@pytest.mark.sql_only
async def test_tampering_with_a_row_is_detected(store: EventStore) -> None:
    await fill(store, "prod", 6)
    await fill(store, "other", 3)
    await sql(store, "UPDATE events SET data = :d WHERE cluster = 'prod' AND position = 4",
              d='{"i":3,"name":"node-evil"}')
    result = await store.verify("prod")
    assert (result.ok, result.first_bad_position, result.events) == (False, 4, 3)
    assert result.head == (await store.read("prod", until=3))[-1].hash
    assert (await store.verify("other")).ok


@pytest.mark.sql_only
@pytest.mark.parametrize("column,value", [("metadata", '{"source":"cli"}'), ("recorded_at", "2020-01-01T00:00:00.000000Z"),
                                          ("hash", "f" * 64), ("prev_hash", "e" * 64), ("schema_version", 7)])
async def test_tampering_with_any_column_is_detected(store: EventStore, column: str, value) -> None:
    await fill(store, "prod", 5)
    await sql(store, f"UPDATE events SET {column} = :v WHERE position = 2", v=value)
    result = await store.verify("prod")
    assert (result.ok, result.first_bad_position) == (False, 2)


@pytest.mark.sql_only
async def test_equivalent_but_reformatted_json_still_verifies(store: EventStore) -> None:
    """verify() checks what an auditor holding an export can check: the event's JSON value."""
    await store.append("prod", 0, [NewEvent("T", {"b": 1, "a": [1, 2]}, {})])
    await sql(store, "UPDATE events SET data = :d WHERE position = 1", d='{ "a": [1, 2], "b": 1 }')
    assert (await store.verify("prod")).ok
    await sql(store, "UPDATE events SET data = :d WHERE position = 1", d='{"a": [1, 2], "b": 2}')
    assert (await store.verify("prod")).first_bad_position == 1
    await sql(store, "UPDATE events SET data = :d WHERE position = 1", d='not json')
    assert (await store.verify("prod")).first_bad_position == 1


@pytest.mark.sql_only
@pytest.mark.parametrize("deleted,first_bad", [(1, 1), (3, 3), (6, 6)])
async def test_a_deleted_row_is_detected(store: EventStore, deleted: int, first_bad: int) -> None:
    await fill(store, "prod", 6)
    await sql(store, "DELETE FROM events WHERE cluster = 'prod' AND position = :p", p=deleted)
    result = await store.verify("prod")
    assert (result.ok, result.first_bad_position, result.events) == (False, first_bad, first_bad - 1)


@pytest.mark.sql_only
async def test_swapped_rows_are_detected(store: EventStore) -> None:
    await fill(store, "prod", 4)
    async with store.engine.begin() as conn:
        rows = (await conn.execute(sa.text(
            "SELECT position, data FROM events WHERE position IN (2, 3) ORDER BY position"))).all()
        await conn.execute(sa.text("UPDATE events SET data = :d WHERE position = 2"), {"d": rows[1][1]})
        await conn.execute(sa.text("UPDATE events SET data = :d WHERE position = 3"), {"d": rows[0][1]})
    assert (await store.verify("prod")).first_bad_position == 2


# ----------------------------------------------------------------------------- idempotency

async def test_idempotency_record_round_trip(store: EventStore) -> None:
    record = IdempotencyRecord("key-1", "a" * 64, 201, {"position": 2, "name": "é"}, "prod", 2)
    await store.append("prod", 0, [ev(1), ev(2)], idempotency=[record])
    assert await store.get_idempotency("key-1") == record
    assert await store.get_idempotency("key-2") is None
    bare = IdempotencyRecord("key-2", "b" * 64, 409, {"title": "Conflict"})
    await store.record_without_events(idempotency=[bare])
    assert await store.get_idempotency("key-2") == bare


async def test_append_without_echo_returns_the_same_positions_and_hashes(store: EventStore) -> None:
    quiet = await store.append("prod", 0, [ev(1), ev(2)], echo=False)
    assert [(e.position, e.data, e.metadata) for e in quiet] == [(1, None, None), (2, None, None)]
    assert [(e.position, e.hash, e.prev_hash) for e in quiet] == \
        [(e.position, e.hash, e.prev_hash) for e in await store.read("prod")]
    assert (await store.verify("prod")).ok


async def test_head_and_idempotency_reads_both_together(store: EventStore) -> None:
    assert await store.head_and_idempotency("prod", []) == (0, {})
    assert await store.head_and_idempotency("prod", ["nope"]) == (0, {})
    one = IdempotencyRecord("k-1", "f" * 64, 201, {"n": 1}, "prod", 1)
    two = IdempotencyRecord("k-2", "g" * 64, 200, {"n": 2}, "prod", 3)
    await store.append("prod", 0, [ev(1), ev(2)], idempotency=[one])
    await store.append("prod", 2, [ev(3)], idempotency=[two])
    await store.record_without_events(idempotency=[IdempotencyRecord("k-3", "h" * 64, 409, {})])
    last, found = await store.head_and_idempotency("prod", ["k-2", "missing", "k-1", "k-1"])
    assert last == 3
    assert found == {"k-1": one, "k-2": two}
    # keys are one space across clusters: a key stored without a cluster is found too
    assert (await store.head_and_idempotency("other", ["k-3"]))[1]["k-3"].status == 409
    assert (await store.head_and_idempotency("other", ["k-3"]))[0] == 0


async def test_a_taken_idempotency_key_raises_and_writes_nothing(store: EventStore) -> None:
    await store.append("prod", 0, [ev(1)], idempotency=[IdempotencyRecord("k", "f1", 201, {"a": 1}, "prod", 1)])
    before = await counts(store)
    extras = dict(offsets=[ConsumedOffset("g", "in", 0, 10)], dead_letters=[DeadLetter("dlq", None, b"v")],
                  outbox_topic="out")
    duplicate = IdempotencyRecord("k", "f2", 201, {"a": 2}, "prod", 2)
    fresh = IdempotencyRecord("z", "f3", 201, {"a": 3}, "prod", 2)
    with pytest.raises(IdempotencyKeyTaken):
        await store.append("prod", 1, [ev(2)], idempotency=[fresh, duplicate], **extras)
    with pytest.raises(IdempotencyKeyTaken):  # on a new cluster too
        await store.append("new", 0, [ev(1)], idempotency=[duplicate], **extras)
    with pytest.raises(IdempotencyKeyTaken):
        await store.record_without_events(idempotency=[duplicate], offsets=extras["offsets"])
    with pytest.raises(IdempotencyKeyTaken):  # the same key twice in one append
        await store.append("prod", 1, [ev(2)], idempotency=[fresh, fresh])
    assert await counts(store) == before
    assert await store.get_idempotency("k") == IdempotencyRecord("k", "f1", 201, {"a": 1}, "prod", 1)
    assert await store.get_idempotency("z") is None
    assert await store.last_position("prod") == 1
    assert await store.last_position("new") == 0
    assert (await store.verify("prod")).ok
    # and the cluster carries on normally afterwards
    assert [e.position for e in await store.append("prod", 1, [ev(2)], idempotency=[fresh])] == [2]


# ----------------------------------------------------------------------------- outbox, offsets

async def test_outbox_rows_in_order_and_done_removes_them(store: EventStore) -> None:
    a = await store.append("a", 0, [ev(1), ev(2)], outbox_topic="gangplank.decisions")
    await store.record_without_events(dead_letters=[
        DeadLetter("gangplank.commands.dlq", None, b"\xff not json",
                   [("error", b"invalid JSON"), ("source-offset", b"17")])])
    b = await store.append("b", 0, [ev(1)], outbox_topic="gangplank.decisions",
                           dead_letters=[DeadLetter("gangplank.commands.dlq", b"b", b"{}")])
    a2 = await store.append("a", 2, [ev(3)], outbox_topic="gangplank.decisions")
    await store.append("a", 3, [ev(4)])  # no outbox topic: no outbox rows
    items = await store.outbox_batch()
    assert [i.id for i in items] == sorted(i.id for i in items)
    assert [(i.topic, i.cluster, i.position) for i in items] == [
        ("gangplank.decisions", "a", 1), ("gangplank.decisions", "a", 2),
        ("gangplank.commands.dlq", None, None),
        ("gangplank.commands.dlq", None, None), ("gangplank.decisions", "b", 1),
        ("gangplank.decisions", "a", 3)]
    dlq = items[2]
    assert (dlq.key, dlq.value, dlq.headers) == (None, b"\xff not json",
                                                  [("error", b"invalid JSON"), ("source-offset", b"17")])
    published = [e for e in items if e.topic == "gangplank.decisions"]
    for item, event in zip(published, a + b + a2):
        assert item.key == event.cluster.encode("utf-8")
        assert item.value == json.dumps(event.envelope(), sort_keys=True, separators=(",", ":"),
                                        ensure_ascii=True).encode("utf-8")
        assert item.headers == []
    assert [i.id for i in await store.outbox_batch(limit=2)] == [i.id for i in items[:2]]
    await store.outbox_done([i.id for i in items[:3]])
    rest = await store.outbox_batch()
    assert [i.id for i in rest] == [i.id for i in items[3:]]
    await store.outbox_done([i.id for i in rest])
    assert await store.outbox_batch() == []
    await store.outbox_done([])


async def test_consumed_offsets_upsert(store: EventStore) -> None:
    await store.append("prod", 0, [ev(1)], offsets=[ConsumedOffset("g", "in", 0, 5), ConsumedOffset("g", "in", 1, 2)])
    assert await store.stored_offsets("g", "in") == {0: 5, 1: 2}
    await store.append("prod", 1, [ev(2)], offsets=[ConsumedOffset("g", "in", 0, 6)])
    await store.record_without_events(offsets=[ConsumedOffset("g", "in", 1, 3), ConsumedOffset("g", "in", 1, 4)],
                                      dead_letters=[DeadLetter("dlq", None, b"x")])
    await store.record_without_events(offsets=[ConsumedOffset("other", "in", 0, 99)])
    assert await store.stored_offsets("g", "in") == {0: 6, 1: 4}
    assert await store.stored_offsets("other", "in") == {0: 99}
    assert await store.stored_offsets("g", "nope") == {}
    await store.record_without_events()  # nothing to do


# ----------------------------------------------------------------------------- snapshots

async def test_snapshots(store: EventStore) -> None:
    assert await store.latest_snapshot("prod", "v1") is None
    for position in (10, 20, 30):
        await store.save_snapshot(Snapshot("prod", position, "v1", b"state@%d" % position))
    await store.save_snapshot(Snapshot("prod", 40, "v2", b"\x00\xffnew format"))
    await store.save_snapshot(Snapshot("dev", 5, "v1", b"dev"))
    assert await store.latest_snapshot("prod", "v1") == Snapshot("prod", 30, "v1", b"state@30")
    assert await store.latest_snapshot("prod", "v2") == Snapshot("prod", 40, "v2", b"\x00\xffnew format")
    assert await store.latest_snapshot("prod", "v3") is None
    assert (await store.latest_snapshot("prod", "v1", at_or_before=25)).position == 20
    assert (await store.latest_snapshot("prod", "v1", at_or_before=20)).position == 20
    assert await store.latest_snapshot("prod", "v1", at_or_before=9) is None
    # several versions: the latest of any; at equal positions the one listed first
    assert (await store.latest_snapshot("prod", ("v1", "v2"))).version == "v2"
    assert (await store.latest_snapshot("prod", ("v2", "v1"), at_or_before=35)) == \
        Snapshot("prod", 30, "v1", b"state@30")
    await store.save_snapshot(Snapshot("prod", 30, "v2", b"v2@30"))
    assert (await store.latest_snapshot("prod", ("v2", "v1"), at_or_before=35)).blob == b"v2@30"
    assert (await store.latest_snapshot("prod", ("v1", "v2"), at_or_before=35)).blob == b"state@30"
    assert await store.latest_snapshot("prod", ("v3", "v4")) is None
    await store.save_snapshot(Snapshot("prod", 30, "v1", b"rewritten"))
    assert (await store.latest_snapshot("prod", "v1")).blob == b"rewritten"
    await store.delete_snapshots("prod")
    assert await store.latest_snapshot("prod", "v1") is None
    assert await store.latest_snapshot("dev", "v1") is not None
    await store.delete_snapshots()
    assert await store.latest_snapshot("dev", "v1") is None


# ----------------------------------------------------------------------------- concurrency

async def test_two_writers_race_one_wins_no_gap_no_fork(store: EventStore, other_store: EventStore) -> None:
    await store.append("prod", 0, [ev(0)])
    await other_store.read("prod")  # both stores know the head
    position = 1
    for round_ in range(8):
        results = await asyncio.gather(
            store.append("prod", position, [ev(100 + round_), ev(200 + round_)],
                         idempotency=[IdempotencyRecord(f"a{round_}", "f", 201, {})], outbox_topic="out"),
            other_store.append("prod", position, [ev(300 + round_)],
                               idempotency=[IdempotencyRecord(f"b{round_}", "f", 201, {})], outbox_topic="out"),
            return_exceptions=True)
        winners = [r for r in results if isinstance(r, list)]
        losers = [r for r in results if isinstance(r, ConcurrencyConflict)]
        assert len(winners) == 1 and len(losers) == 1, results
        assert losers[0].actual == winners[0][-1].position
        position = winners[0][-1].position
    events = await store.read("prod")
    assert [e.position for e in events] == list(range(1, position + 1))
    assert await other_store.read("prod") == events
    result = await other_store.verify("prod")
    assert (result.ok, result.events, result.head) == (True, position, events[-1].hash)
    # exactly the winners' side effects were written
    keys = [k for r in range(8) for k in (f"a{r}", f"b{r}") if await store.get_idempotency(k) is not None]
    assert len(keys) == 8
    assert [i.position for i in await store.outbox_batch(limit=1000)] == list(range(2, position + 1))


async def test_many_writers_with_retries_keep_the_stream_gapless(store: EventStore,
                                                                 other_store: EventStore) -> None:
    async def writer(s: EventStore, name: str, appends: int) -> int:
        conflicts = 0
        done = 0
        while done < appends:
            position = await s.last_position("prod")
            try:
                await s.append("prod", position, [ev(done, writer=name)] * 2)
                done += 1
            except ConcurrencyConflict:
                conflicts += 1
        return conflicts

    seen_gaps: list[list[int]] = []

    async def reader(stop: asyncio.Event) -> None:
        while not stop.is_set():
            positions = [e.position for e in await store.read("prod")]
            if positions != list(range(1, len(positions) + 1)):
                seen_gaps.append(positions)
            await asyncio.sleep(0)

    stop = asyncio.Event()
    reading = asyncio.create_task(reader(stop))
    await asyncio.gather(writer(store, "a", 10), writer(other_store, "b", 10),
                         writer(store, "c", 10), writer(other_store, "d", 10))
    stop.set()
    await reading
    assert seen_gaps == []
    assert await store.last_position("prod") == 80
    result = await store.verify("prod")
    assert (result.ok, result.events) == (True, 80)


@pytest.mark.sql_only
async def test_a_stale_cached_head_is_never_trusted(store: EventStore) -> None:
    await store.append("prod", 0, [ev(1), ev(2)])
    if not isinstance(store, PostgresEventStore):
        return  # only PostgreSQL's append trusts a cached head (and re-checks it)
    store._heads["prod"] = (2, "f" * 64)  # as if the database had been replaced behind our back
    assert [e.position for e in await store.append("prod", 2, [ev(3)])] == [3]
    assert (await store.verify("prod")).ok


# ----------------------------------------------------------------------------- health, schema

async def test_ping_and_schema(store: EventStore) -> None:
    assert await store.ping()
    assert await store.schema_is_current()


async def test_a_never_migrated_database_is_not_current(tmp_path) -> None:
    bare = SqliteEventStore(f"sqlite+aiosqlite:///{tmp_path / 'never-migrated.db'}")
    try:
        assert not await bare.schema_is_current()
    finally:
        await bare.close()


async def test_cancelled_appends_leave_a_consistent_stream(store: EventStore) -> None:
    """A request cancelled mid-append (client gone, shutdown) commits all of it or nothing,
    and the store stays usable."""
    await store.append("prod", 0, [ev(0)])
    for i in range(12):
        position = await store.last_position("prod")
        task = asyncio.create_task(store.append("prod", position, [ev(i), ev(i)], outbox_topic="out"))
        await asyncio.sleep(0.0005 * (i % 4))
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
    position = await store.last_position("prod")
    assert [e.position for e in await store.append("prod", position, [ev(99)])] == [position + 1]
    result = await store.verify("prod")
    assert (result.ok, result.events) == (True, position + 1)
    assert [i.position for i in await store.outbox_batch(limit=100)] == list(range(2, position + 1))
