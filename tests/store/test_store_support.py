"""Store helpers, migrations and failure modes outside the conformance suite."""
from __future__ import annotations

import json

import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from service.store import (
    ConcurrencyConflict,
    IdempotencyRecord,
    NewEvent,
    PostgresEventStore,
    StoredEvent,
    canonical_json,
    normalize_url,
    open_store,
)
from service.store.base import StoreUnavailable, canonical_record_json, chain_hash
from service.store.codec import envelope_json, hash_input
from service.store.migrate import head_revisions, schema_is_current, upgrade
from service.store.schema import ALL_TABLES

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12)


@settings(max_examples=60, deadline=None)
@given(cluster=st.text(min_size=1, max_size=10), position=st.integers(1, 2**40), type_=st.text(max_size=12),
       version=st.integers(1, 5), data=st.dictionaries(st.text(max_size=8), json_values, max_size=5),
       metadata=st.dictionaries(st.text(max_size=8), json_values, max_size=3))
def test_spliced_hash_input_equals_canonical_json_of_the_envelope(cluster, position, type_, version, data, metadata):
    recorded_at = "2026-11-30T10:00:00.001234Z"
    envelope = {"cluster": cluster, "position": position, "type": type_, "schemaVersion": version,
                "data": data, "metadata": metadata, "recordedAt": recorded_at}
    spliced = hash_input(cluster, position, type_, version, canonical_json(data), canonical_json(metadata),
                         recorded_at)
    assert spliced == canonical_json(envelope)
    full = {**envelope, "prevHash": "0" * 64, "hash": "ab" * 32}
    assert envelope_json(cluster, position, type_, version, canonical_json(data), canonical_json(metadata),
                         recorded_at, "0" * 64, "ab" * 32) == canonical_json(full)
    assert chain_hash("0" * 64, envelope) == StoredEvent(
        cluster, position, type_, version, data, metadata, recorded_at, "0" * 64,
        chain_hash("0" * 64, envelope)).hash


def test_normalize_url() -> None:
    assert normalize_url("postgresql://u@h/db") == "postgresql+asyncpg://u@h/db"
    assert normalize_url("postgres://u@h/db") == "postgresql+asyncpg://u@h/db"
    assert normalize_url("sqlite:///x.db") == "sqlite+aiosqlite:///x.db"
    assert normalize_url("postgresql+asyncpg://u@h/db") == "postgresql+asyncpg://u@h/db"


async def test_migrations_create_the_schema_once(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    assert not await schema_is_current(url)
    await upgrade(url)
    await upgrade(url)  # idempotent
    assert await schema_is_current(url)
    assert len(head_revisions()) == 1  # one head: each migration follows the newest
    store = open_store(url)
    try:
        async with store.engine.connect() as conn:
            tables = await conn.run_sync(lambda c: set(sa.inspect(c).get_table_names()))
            journal = (await conn.execute(sa.text("PRAGMA journal_mode"))).scalar_one()
        assert tables == set(ALL_TABLES) | {"alembic_version"}
        assert journal == "wal"
    finally:
        await store.close()


async def test_migrations_on_postgresql(pg_database_url: str) -> None:
    assert await schema_is_current(pg_database_url)
    await upgrade(pg_database_url)  # a second replica starting: nothing to do
    store = open_store(pg_database_url)
    try:
        async with store.engine.connect() as conn:
            tables = await conn.run_sync(lambda c: set(sa.inspect(c).get_table_names()))
        assert tables == set(ALL_TABLES) | {"alembic_version"}
    finally:
        await store.close()


async def test_an_unreachable_database_raises_store_unavailable() -> None:
    store = PostgresEventStore("postgresql+asyncpg://postgres@127.0.0.1:1/nothing")
    try:
        assert not await store.ping()
        for call in (lambda: store.append("prod", 0, [NewEvent("T", {}, {})]),
                     lambda: store.append("prod", 0, [], idempotency=[IdempotencyRecord("k", "f", 200, {})]),
                     lambda: store.read("prod"),
                     lambda: store.verify("prod"),
                     lambda: store.outbox_batch()):
            try:
                await call()
            except StoreUnavailable:
                pass
            else:
                raise AssertionError("expected StoreUnavailable")
    finally:
        await store.close()


async def test_a_locked_sqlite_database_raises_store_unavailable(tmp_path, monkeypatch) -> None:
    from service.store import engine as engine_module

    url = f"sqlite+aiosqlite:///{tmp_path / 'locked.db'}"
    await upgrade(url)
    monkeypatch.setattr(engine_module, "SQLITE_BUSY_TIMEOUT_MS", 50)
    holder, store = open_store(url), open_store(url)
    try:
        async with holder.engine.connect() as conn:
            await conn.execution_options(gp_write=True)
            async with conn.begin():  # holds the write lock
                try:
                    await store.append("prod", 0, [NewEvent("T", {}, {})])
                except StoreUnavailable:
                    pass
                else:
                    raise AssertionError("expected StoreUnavailable")
        assert [e.position for e in await store.append("prod", 0, [NewEvent("T", {}, {})])] == [1]
    finally:
        await holder.close()
        await store.close()


async def test_empty_append_checks_position_and_records_extras(pg_database_url: str) -> None:
    """On PostgreSQL an append without events takes the transactional path."""
    store = open_store(pg_database_url)
    try:
        cluster = "empty-append"
        await store.append(cluster, 0, [NewEvent("T", {}, {})])
        assert await store.append(cluster, 1, [], idempotency=[IdempotencyRecord("empty-k", "f", 200, {})]) == []
        assert (await store.get_idempotency("empty-k")).status == 200
        try:
            await store.append(cluster, 0, [])
        except ConcurrencyConflict as exc:
            assert exc.actual == 1
        else:
            raise AssertionError("expected ConcurrencyConflict")
    finally:
        await store.close()


async def test_concurrent_upgrades_queue_instead_of_failing(tmp_path) -> None:
    """Several replicas may start at once, each applying migrations."""
    import asyncio

    from service.store.testing import temporary_postgres_database

    sqlite_url = f"sqlite+aiosqlite:///{tmp_path / 'race.db'}"
    await asyncio.gather(*(upgrade(sqlite_url) for _ in range(3)))
    assert await schema_is_current(sqlite_url)
    async with temporary_postgres_database() as pg_url:
        await asyncio.gather(*(upgrade(pg_url) for _ in range(3)))
        assert await schema_is_current(pg_url)


async def test_lost_connections_cost_one_failed_call(pg_database_url: str) -> None:
    """After the server drops every connection (a restart, say), a call may fail once with
    StoreUnavailable; the pool then replaces all its connections and the next call works."""
    import asyncio

    store, admin = open_store(pg_database_url), open_store(pg_database_url)
    cluster = "lost-connections"
    try:
        await store.append(cluster, 0, [NewEvent("T", {}, {})])
        await asyncio.gather(*(store.read(cluster) for _ in range(6)))  # several pooled connections
        for call in (lambda: store.append(cluster, 1, [NewEvent("T", {}, {})]),  # raw asyncpg path
                     lambda: store.clusters()):  # SQLAlchemy path
            async with admin.engine.connect() as conn:
                await conn.execute(sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    " AND application_name = 'gangplank'"))
            await asyncio.sleep(0.05)
            try:
                await call()
            except StoreUnavailable:
                await call()  # the retry works
            assert (await store.verify(cluster)).ok
        assert await store.last_position(cluster) >= 2
    finally:
        await store.close()
        await admin.close()


@settings(max_examples=100, deadline=None)
@given(value=json_values)
def test_canonical_json_is_the_text_events_md_specifies(value) -> None:
    assert canonical_json(value) == json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


# what Gangplank records: no floats (validation rejects them), any text (ASCII, control
# characters, DEL, non-ASCII, astral), big integers, nesting
record_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(-(2**80), 2**80) | st.text()
    | st.sampled_from(["\x7f", "a\x00b", "\u00e9", "\U0001f600", "\\\"", "\u2028"]),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(value=record_values)
def test_the_fast_record_encoder_writes_the_canonical_text(value) -> None:
    assert canonical_record_json(value) == canonical_json(value)
