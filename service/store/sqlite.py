"""The SQLite event store (aiosqlite): the embedded default, one writer process per file.

Writes run in `BEGIN IMMEDIATE` transactions (one writer per database file, other writers wait
up to the busy timeout, also across processes) and, inside one store, behind an asyncio lock so
that the store's own writers queue without polling. Readers are not blocked (WAL). A writer's
turn (service.store.recorded.staged_turn) queues the turns of one cluster in this store and
writes its appends in one transaction when it ends.
"""
from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from service.gcpause import gc_paused

from .base import (
    GENESIS_HASH,
    ClusterTurn,
    ConcurrencyConflict,
    IdempotencyRecord,
    OutboxItem,
    StoredEvent,
)
from .codec import idempotency_record, loads
from .recorded import AppendPlan, staged_turn
from .schema import clusters as t_clusters
from .schema import events as t_events
from .schema import idempotency as t_idem
from .schema import outbox as t_outbox
from .sql import SqlEventStore, outbox_item, select_events
from .sql_errors import finishes_when_cancelled, translating


def _stored(row: Any) -> StoredEvent:
    return StoredEvent(cluster=row[0], position=row[1], type=row[2], schema_version=row[3],
                       data=loads(row[4]), metadata=loads(row[5]), recorded_at=row[6],
                       prev_hash=row[7], hash=row[8])


class SqliteEventStore(SqlEventStore):
    """EventStore on SQLite. See the module docstring."""

    def __init__(self, url: str):
        super().__init__(url)
        self._write_lock = asyncio.Lock()  # in-process queue (BEGIN IMMEDIATE serialises across processes)
        self._turns: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def _insert(self, table: sa.Table) -> Any:
        return sqlite.insert(table)

    @asynccontextmanager
    async def _write_tx(self) -> AsyncIterator[AsyncConnection]:
        async with self._write_lock:
            async with self._engine.connect() as conn:
                await conn.execution_options(gp_write=True)
                async with conn.begin():
                    yield conn

    # ------------------------------------------------------------------ the writer's turn

    def exclusive(self, cluster: str) -> AbstractAsyncContextManager[ClusterTurn]:
        """EventStore.exclusive (service.store.recorded): turns of one cluster queue in this store."""
        lock = self._turns.get(cluster)
        if lock is None:
            lock = self._turns[cluster] = asyncio.Lock()
        return staged_turn(self, cluster, lock)

    @translating
    @finishes_when_cancelled
    async def write_plans(self, plans: Sequence[AppendPlan]) -> None:
        async with self._write_tx() as conn:
            for p in plans:
                if p.rows:
                    last, head = await self._lock_cluster(conn, p.cluster, p.expected, create=True)
                    if (last, head) != (p.expected, p.prev):
                        raise ConcurrencyConflict(p.cluster, p.expected, last)
                await self._write_plan(conn, p)

    # ------------------------------------------------------------------ reads

    @translating
    async def head(self, cluster: str) -> tuple[int, str]:
        """The cluster's last position and head hash."""
        async with self._reader.connect() as conn:
            row = (await conn.execute(sa.select(t_clusters.c.last_position, t_clusters.c.head_hash)
                                      .where(t_clusters.c.name == cluster))).first()
        return (0, GENESIS_HASH) if row is None else (int(row[0]), row[1])

    @translating
    async def read(self, cluster: str, after: int = 0, limit: int | None = None,
                   until: int | None = None) -> list[StoredEvent]:
        """Events with after < position (<= until), in position order, at most `limit`."""
        if limit is not None and limit <= 0:
            return []
        async with self._reader.connect() as conn:
            rows = (await conn.execute(select_events(cluster, after, until, limit))).all()
        with gc_paused(len(rows) >= 256):  # many small containers at once; no cycles are made
            return [_stored(r) for r in rows]

    @translating
    async def read_data(self, cluster: str, after: int = 0, limit: int | None = None,
                        until: int | None = None, *, decode: bool = True) -> list[tuple[int, str, int, Any]]:
        """(position, type, schemaVersion, data) of the events read() gives: what folding
        needs, without the metadata and hashes; decode=False: data is the stored canonical
        JSON text."""
        if limit is not None and limit <= 0:
            return []
        stmt = select_events(cluster, after, until, limit,
                             (t_events.c.position, t_events.c.type, t_events.c.schema_version, t_events.c.data))
        async with self._reader.connect() as conn:
            rows = (await conn.execute(stmt)).all()
        if not decode:
            return [(r[0], r[1], r[2], r[3]) for r in rows]
        with gc_paused(len(rows) >= 256):
            return [(r[0], r[1], r[2], loads(r[3])) for r in rows]

    async def last_position(self, cluster: str) -> int:
        return (await self.head(cluster))[0]

    async def head_and_idempotency(self, cluster: str, keys: Sequence[str]
                                   ) -> tuple[int, dict[str, IdempotencyRecord]]:
        last, _, found = await self.head_and_records(cluster, keys)
        return last, found

    @translating
    async def head_and_records(self, cluster: str, keys: Sequence[str]
                               ) -> tuple[int, str, dict[str, IdempotencyRecord]]:
        keys = list(dict.fromkeys(keys))
        async with self._reader.connect() as conn:
            head = (await conn.execute(sa.select(t_clusters.c.last_position, t_clusters.c.head_hash)
                                       .where(t_clusters.c.name == cluster))).first()
            records: list[Any] = []
            for start in range(0, len(keys), 500):  # SQLite's bound-parameter limit
                records += (await conn.execute(
                    sa.select(t_idem.c.key, t_idem.c.fingerprint, t_idem.c.status, t_idem.c.body,
                              t_idem.c.cluster, t_idem.c.position)
                    .where(t_idem.c.key.in_(keys[start:start + 500])))).all()
        found = {r[0]: idempotency_record(r) for r in records}
        return (0, GENESIS_HASH, found) if head is None else (int(head[0]), head[1], found)

    @translating
    async def get_idempotency(self, key: str) -> IdempotencyRecord | None:
        async with self._reader.connect() as conn:
            row = (await conn.execute(
                sa.select(t_idem.c.key, t_idem.c.fingerprint, t_idem.c.status, t_idem.c.body,
                          t_idem.c.cluster, t_idem.c.position).where(t_idem.c.key == key))).first()
        return None if row is None else idempotency_record(row)

    @translating
    async def outbox_batch(self, limit: int = 500) -> list[OutboxItem]:
        """Unsent rows in id order (a cluster's rows are in position order)."""
        async with self._reader.connect() as conn:
            rows = (await conn.execute(
                sa.select(t_outbox.c.id, t_outbox.c.topic, t_outbox.c.key, t_outbox.c.value,
                          t_outbox.c.headers, t_outbox.c.cluster, t_outbox.c.position)
                .order_by(t_outbox.c.id).limit(limit))).all()
        return [outbox_item(r) for r in rows]
