"""The PostgreSQL event store (asyncpg): several processes (replicas) on one database.

- An append with events is ONE statement in autocommit (one round trip): a data-modifying CTE
  whose guard is
      UPDATE clusters SET last_position = new, head_hash = new_head
       WHERE name = :c AND last_position = :expected AND head_hash = :prev
  (for expected 0: INSERT INTO clusters ... ON CONFLICT DO NOTHING), and whose inserts
  (events, idempotency, outbox, consumer offsets) only happen when the guard matched a row.
  The guard's row lock serialises appends to one cluster, so positions commit in order and
  readers never see a gap; a loser matches no row and writes nothing. The previous head hash
  comes from a small per-store cache of (cluster, position) -> hash (facts that never change),
  else from one SELECT on `clusters`; the guard re-checks it, so the cache is never trusted.
  Appends without events use a transaction with SELECT ... FOR UPDATE on the cluster row.
- The hot paths run on the pool's asyncpg connections directly (service/store/pg_statements.py);
  the rest goes through SQLAlchemy (service/store/sql.py).
- A writer's turn (exclusive) is one transaction behind the cluster's advisory lock
  (service/store/turn.py): the store's statements then run on the turn's connection.
"""
from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import asyncpg
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.util import greenlet_spawn

from service.clock import utc_now
from service.gcpause import gc_paused

from .base import (
    GENESIS_HASH,
    ClusterTurn,
    ConcurrencyConflict,
    ConsumedOffset,
    DeadLetter,
    Fencing,
    IdempotencyKeyTaken,
    IdempotencyRecord,
    OutboxItem,
    StoredEvent,
)
from .codec import idempotency_record, loads
from .pg_statements import (
    PG_APPEND_CREATE,
    PG_APPEND_UPDATE,
    PG_HEAD,
    PG_HEAD_AND_IDEMPOTENCY,
    PG_IDEMPOTENCY,
    PG_OUTBOX_BATCH,
    PG_READ,
    PG_READ_DATA,
    PG_READ_TEXT,
    PG_READ_UNTIL,
    PG_RECORD,
)
from .recorded import Prepared, chain, stored_event
from .sql import (
    SqlEventStore,
    dead_letter_rows,
    event_rows,
    idempotency_rows,
    offset_rows,
    outbox_event_rows,
    outbox_item,
)
from .sql_errors import (
    DRIVER_UNAVAILABLE,
    constraint_name,
    finishes_when_cancelled,
    translating,
    unavailable_when_closed,
)
from .turn import TURN_CONNECTION, pg_turn

_HEAD_CACHE_MAX = 10_000
_MAX_POSITION = 2**63 - 1


def _stored(row: Any) -> StoredEvent:
    return StoredEvent(cluster=row[0], position=row[1], type=row[2], schema_version=row[3],
                       data=loads(row[4]), metadata=loads(row[5]), recorded_at=row[6],
                       prev_hash=row[7], hash=row[8])


def _columns(rows: list[dict[str, Any]], prefix: str, names: Sequence[str]) -> dict[str, list[Any]]:
    return {f"{prefix}_{name}": [r[name] for r in rows] for name in names}


def _extras_params(idem_rows: list[dict[str, Any]], outbox_rows: list[dict[str, Any]],
                   offsets: list[dict[str, Any]]) -> dict[str, Any]:
    return {**_columns(idem_rows, "i", ("key", "fingerprint", "status", "body", "cluster", "position")),
            **_columns(outbox_rows, "o", ("topic", "key", "value", "headers", "cluster", "position")),
            "f_group": [r["group"] for r in offsets], "f_topic": [r["topic"] for r in offsets],
            "f_partition": [r["partition"] for r in offsets], "f_offset": [r["offset"] for r in offsets]}


class PostgresEventStore(SqlEventStore):
    """EventStore on PostgreSQL. See the module docstring."""

    verify_isolation = "REPEATABLE READ"

    def __init__(self, url: str):
        super().__init__(url)
        # Single-statement reads without BEGIN/ROLLBACK round trips (same pool).
        self._reader = self._engine.execution_options(isolation_level="AUTOCOMMIT")
        # cluster -> (position, hash) of the highest event this store has seen; only a hint.
        self._heads: dict[str, tuple[int, str]] = {}
        # replicas (docs/replicas.md): with a fencing, every turn checks the owner and epoch
        self.fencing: Fencing | None = None
        self.fence_idle_ms = 2000  # an owner's turn idle longer (a frozen owner) ends: its lease

    def _insert(self, table: Any) -> Any:
        return postgresql.insert(table)

    @asynccontextmanager
    async def _write_tx(self) -> AsyncIterator[AsyncConnection]:
        async with self._engine.begin() as conn:
            yield conn

    def exclusive(self, cluster: str) -> AbstractAsyncContextManager[ClusterTurn]:
        """EventStore.exclusive: one transaction behind the cluster's advisory lock (turn.py)."""
        return pg_turn(self, cluster)

    # ------------------------------------------------------------------ head cache

    def _remember_head(self, cluster: str, position: int, hash_: str) -> None:
        known = self._heads.get(cluster)
        if known is None or known[0] < position:
            if known is None and len(self._heads) >= _HEAD_CACHE_MAX:
                self._heads.clear()
            self._heads[cluster] = (position, hash_)

    def note_head(self, cluster: str, position: int, hash_: str) -> None:
        """The cluster's head as read under its writer lock: it replaces the cached one."""
        self._heads.pop(cluster, None)
        self._remember_head(cluster, position, hash_)

    async def _read_head(self, cluster: str) -> tuple[int, str]:
        row = await self._pg("fetchrow", PG_HEAD, cluster)
        return (0, GENESIS_HASH) if row is None else (int(row[0]), row[1])

    # ------------------------------------------------------------------ writes

    async def _append_prepared(self, cluster: str, expected: int, prepared: list[Prepared],
                               idempotency: Sequence[IdempotencyRecord], offsets: Sequence[ConsumedOffset],
                               dead_letters: Sequence[DeadLetter], outbox_topic: str | None,
                               echo: bool) -> list[StoredEvent]:
        if not prepared:
            return await super()._append_prepared(cluster, expected, prepared, idempotency, offsets,
                                                  dead_letters, outbox_topic, echo)
        raw = await self._append_pg(cluster, expected, prepared, idempotency_rows(idempotency),
                                    offset_rows(offsets), dead_letter_rows(dead_letters), outbox_topic, echo)
        self._remember_head(cluster, raw[-1].position, raw[-1].hash)
        return raw

    async def _append_pg(self, cluster: str, expected: int, prepared: list[Prepared],
                         idem_rows: list[dict[str, Any]], offsets: list[dict[str, Any]],
                         dead_rows: list[dict[str, Any]], outbox_topic: str | None,
                         echo: bool = True) -> list[StoredEvent]:
        for _attempt in range(3):
            known = self._heads.get(cluster)
            if known is not None and known[0] == expected:
                prev = known[1]
            elif expected == 0:
                prev = GENESIS_HASH
            else:
                last, prev = await self._read_head(cluster)
                if last != expected:
                    raise ConcurrencyConflict(cluster, expected, last)
            recorded_at = utc_now()
            chained = chain(cluster, expected, prev, prepared, recorded_at)
            rows = event_rows(cluster, chained)
            params = {
                "cluster": cluster, "expected": expected, "prev_head": prev, "recorded_at": recorded_at,
                "new_last": chained[-1].position, "new_head": chained[-1].hash,
                **_columns(rows, "e", ("position", "type", "data", "metadata", "hash")),
                "e_version": [r["schema_version"] for r in rows], "e_prev": [r["prev_hash"] for r in rows],
                **_extras_params(idem_rows, dead_rows + outbox_event_rows(cluster, chained, outbox_topic), offsets),
            }
            sql, names = PG_APPEND_CREATE if expected == 0 else PG_APPEND_UPDATE
            try:
                matched = await self._pg("fetchval", sql, *(params[n] for n in names))
            except asyncpg.UniqueViolationError as exc:
                constraint = constraint_name(exc)
                if constraint == "idempotency_pkey":
                    raise IdempotencyKeyTaken(", ".join(r["key"] for r in idem_rows)) from exc
                if constraint == "events_pkey":  # cannot happen behind the guard; never fork
                    raise ConcurrencyConflict(cluster, expected, None) from exc
                raise
            if matched == 1:
                return [stored_event(cluster, r, echo) for r in chained]
            # The guard matched no row: another writer got there first, or the cached head
            # hash was stale (the position matched but the chain is not the one we knew).
            self._heads.pop(cluster, None)
            last, head = await self._read_head(cluster)
            if last != expected:
                raise ConcurrencyConflict(cluster, expected, last)
            self._remember_head(cluster, last, head)
        raise ConcurrencyConflict(cluster, expected, None)

    @translating
    @finishes_when_cancelled
    async def record_without_events(
        self,
        *,
        idempotency: Sequence[IdempotencyRecord] = (),
        offsets: Sequence[ConsumedOffset] = (),
        dead_letters: Sequence[DeadLetter] = (),
    ) -> None:
        """Inside a writer's turn: on the turn's connection, committed with the turn."""
        on_turn = TURN_CONNECTION.get()
        if on_turn is None or on_turn[0] is not self:
            return await super().record_without_events(idempotency=idempotency, offsets=offsets,
                                                       dead_letters=dead_letters)
        if not (idempotency or offsets or dead_letters):
            return None
        idem_rows = idempotency_rows(idempotency)
        params = {"recorded_at": utc_now(), "cluster": "",
                  **{f"e_{name}": [] for name in ("position", "type", "version", "data", "metadata", "prev", "hash")},
                  **_extras_params(idem_rows, dead_letter_rows(dead_letters), offset_rows(offsets))}
        sql, names = PG_RECORD
        try:
            await self._pg("execute", sql, *(params[n] for n in names))
        except asyncpg.UniqueViolationError as exc:
            if constraint_name(exc) == "idempotency_pkey":
                raise IdempotencyKeyTaken(", ".join(r["key"] for r in idem_rows)) from exc
            raise
        return None

    async def _pg(self, method: str, sql: str, *args: Any) -> Any:
        """Run one statement with asyncpg's `method` (fetch, fetchrow, fetchval) on a pooled
        connection, outside any transaction (a write commits on its own): the hot paths skip
        SQLAlchemy's per-statement overhead. A connection that failed other than with a
        server-side error (lost, cancelled mid-statement) is discarded, never pooled again;
        a lost connection also retires every connection opened before it (as SQLAlchemy does
        on a disconnect), so that a database restart costs one failed call, not one per
        pooled connection. Inside a writer's turn (see exclusive): the turn's connection."""
        on_turn = TURN_CONNECTION.get()
        if on_turn is not None and on_turn[0] is self:
            return await getattr(on_turn[1], method)(sql, *args)
        raw_conn = await self._engine.raw_connection()
        # the server closed it while it was pooled
        if raw_conn.driver_connection is None or raw_conn.driver_connection.is_closed():
            await greenlet_spawn(self._engine.sync_engine.pool._invalidate, raw_conn, None)
            raw_conn = await self._engine.raw_connection()  # opened after the invalidation: fresh
        outcome: BaseException | None = None
        healthy = False
        try:
            result = await getattr(raw_conn.driver_connection, method)(sql, *args)
            healthy = True
            return result
        except BaseException as exc:
            outcome = exc
            conn = raw_conn.driver_connection
            closed = conn is None or conn.is_closed()
            healthy = isinstance(exc, asyncpg.PostgresError) and not isinstance(exc, DRIVER_UNAVAILABLE) \
                and not closed
            lost = unavailable_when_closed(exc, closed)  # e.g. InternalClientError on a closing connection
            if lost is not exc:
                raise lost from exc
            raise
        finally:
            if healthy:
                await greenlet_spawn(raw_conn.close)
            elif isinstance(outcome, DRIVER_UNAVAILABLE):
                await greenlet_spawn(self._engine.sync_engine.pool._invalidate, raw_conn, outcome)
            else:
                await greenlet_spawn(raw_conn.invalidate)

    # ------------------------------------------------------------------ reads

    @translating
    async def read(self, cluster: str, after: int = 0, limit: int | None = None,
                   until: int | None = None) -> list[StoredEvent]:
        """Events with after < position (<= until), in position order, at most `limit`."""
        if limit is not None and limit <= 0:
            return []
        if until is None:
            rows = await self._pg("fetch", PG_READ, cluster, after, limit)
        else:
            rows = await self._pg("fetch", PG_READ_UNTIL, cluster, after, limit, until)
        with gc_paused(len(rows) >= 256):  # many small containers at once; no cycles are made
            events = [_stored(r) for r in rows]
        if events:
            self._remember_head(cluster, events[-1].position, events[-1].hash)
        return events

    @translating
    async def read_data(self, cluster: str, after: int = 0, limit: int | None = None,
                        until: int | None = None, *, decode: bool = True) -> list[tuple[int, str, int, Any]]:
        """(position, type, schemaVersion, data) of the events read() gives: what folding
        needs, without the metadata and hashes (half the rows' bytes and JSON to decode).
        decode=False: data is the stored canonical JSON text, for a reader that decodes only
        what it needs (service.domain.fold.fast); rows are then the driver's records (they unpack
        as 4-tuples), and the head hash is not remembered."""
        if limit is not None and limit <= 0:
            return []
        bound = _MAX_POSITION if until is None else until
        if not decode:
            records: list[tuple[int, str, int, Any]] = await self._pg("fetch", PG_READ_TEXT, cluster, after,
                                                                      limit, bound)
            return records
        rows = await self._pg("fetch", PG_READ_DATA, cluster, after, limit, bound)
        if rows:  # as read() does: the next append after a catch-up needs no head lookup
            self._remember_head(cluster, rows[-1][0], rows[-1][4])
        with gc_paused(len(rows) >= 256):
            return [(r[0], r[1], r[2], loads(r[3])) for r in rows]

    @translating
    async def last_position(self, cluster: str) -> int:
        return (await self._read_head(cluster))[0]

    @translating
    async def head_and_idempotency(self, cluster: str, keys: Sequence[str]
                                   ) -> tuple[int, dict[str, IdempotencyRecord]]:
        rows = await self._pg("fetch", PG_HEAD_AND_IDEMPOTENCY, cluster, list(dict.fromkeys(keys)))
        last = rows[0][0] if rows else None
        found = {r[1]: idempotency_record(r[1:]) for r in rows if r[1] is not None}
        return (0 if last is None else int(last)), found

    @translating
    async def get_idempotency(self, key: str) -> IdempotencyRecord | None:
        row = await self._pg("fetchrow", PG_IDEMPOTENCY, key)
        return None if row is None else idempotency_record(row)

    @translating
    async def outbox_batch(self, limit: int = 500) -> list[OutboxItem]:
        """Unsent rows in id order (a cluster's rows are in position order): the relay's hot path."""
        rows = await self._pg("fetch", PG_OUTBOX_BATCH, limit)
        return [outbox_item(r) for r in rows]
