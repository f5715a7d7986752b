"""One writer at a time per cluster on PostgreSQL: PostgresEventStore.exclusive(cluster).

Replicas sharing a database serve every cluster (docs/design.md, *Replicas*). A replica decides a
batch inside a turn: one transaction that first takes the cluster's writer lock,

    BEGIN; SET LOCAL ...; SELECT pg_advisory_xact_lock(WRITER_LOCKS, <crc32 of the cluster>)

then reads the head and the batch's idempotency keys, the events it missed, and appends on the
same connection; COMMIT releases the lock (so does ROLLBACK, and so does the end of the session:
a replica killed with SIGKILL loses its connections, and PostgreSQL releases their locks at once).
Writers of one cluster queue on the lock instead of racing to the append and losing, so a
replica never decides on a state that another one is about to change.

Two timeouts bound the damage of a stuck holder: a turn idle for IDLE_TIMEOUT_MS between
statements (a frozen process) has its session ended by the server, which releases the lock; a
writer waits at most LOCK_TIMEOUT_MS for the lock (then StoreUnavailable, retried like any
transient failure). A crc32 collision of two cluster names only makes their writers queue on
one lock.
"""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
import zlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import asyncpg
from sqlalchemy.util import greenlet_spawn

from .base import (
    UNFENCED,
    ConsumedOffset,
    DeadLetter,
    Fenced,
    IdempotencyRecord,
    NewEvent,
    NotOwner,
    StoredEvent,
    StoreUnavailable,
    TurnStart,
)
from .codec import idempotency_record, loads
from .sql_errors import is_unavailable, unavailable_when_closed

if TYPE_CHECKING:
    from .postgres import PostgresEventStore

WRITER_LOCKS = 0x67706B  # the first key of Gangplank's two-key advisory locks: cluster writers ("gpk")
IDLE_TIMEOUT_MS = 10_000  # longer than any batch's deciding; a frozen holder's lock goes after this
LOCK_TIMEOUT_MS = 30_000
# The store and connection of the turn the current task is in: that store's _pg runs its
# statements on the connection, so its own appends and reads join the turn's transaction.
FENCED_SQLSTATE = "GP409"  # raised by gangplank_fence (migration 0003)
TURN_CONNECTION: contextvars.ContextVar[tuple[PostgresEventStore, asyncpg.Connection] | None] = contextvars.ContextVar(
    "gangplank_turn_connection", default=None)


# A turn's first read, in one round trip: the head and the keys' records (kind 0), then the
# events the writer missed (kind 1), their range bounded as in sql._PG_READ_DATA.
_START = """
SELECT 0 AS kind, c.last_position, c.head_hash, NULL::text, NULL::integer, NULL::text,
       i.key, i.fingerprint, i.status, i.body, i.cluster, i.position
  FROM (SELECT 1) AS one LEFT JOIN clusters AS c ON c.name = $1
  LEFT JOIN idempotency AS i ON i.key = ANY($2::text[])
UNION ALL
(SELECT 1, position, hash, type, schema_version, data, NULL, NULL, NULL, NULL, NULL, NULL
   FROM events WHERE cluster = $1 AND position > $3 AND position <= $3 + $4 ORDER BY position LIMIT $4)
"""


def lock_key(cluster: str) -> int:
    """The second key of the cluster's writer lock: crc32 of its name as a signed 32-bit integer."""
    value = zlib.crc32(cluster.encode("utf-8"))
    return value - (1 << 32) if value >= 1 << 31 else value


class PgTurn:
    """ClusterTurn inside the turn's transaction: the store's own methods, run on the turn's
    connection (TURN_CONNECTION), plus the first read in one statement."""

    def __init__(self, store: PostgresEventStore, conn: asyncpg.Connection, cluster: str) -> None:
        self.store, self.conn, self.cluster = store, conn, cluster

    async def start(self, keys: Sequence[str], after: int, limit: int) -> TurnStart:
        """Kind 0 rows are the head with a key's record (or none), kind 1 rows the events after `after`."""
        try:
            rows = await self.conn.fetch(_START, self.cluster, list(dict.fromkeys(keys)), after, limit)
        except Exception as exc:
            raise _translated(exc) from exc
        head = [r for r in rows if r[0] == 0]
        last = 0 if head[0][1] is None else int(head[0][1])
        if last:  # the append needs the head's hash: read under the lock, it is the stream's
            self.store.note_head(self.cluster, last, head[0][2])
        records = {r[6]: idempotency_record(r[6:]) for r in head if r[6] is not None}
        missed = [(r[1], r[3], r[4], loads(r[5])) for r in rows if r[0] == 1]
        return TurnStart(last, records, missed)

    async def read_data(self, after: int = 0, limit: int | None = None, until: int | None = None, *,
                        decode: bool = True) -> list[tuple[int, str, int, Any]]:
        return await self.store.read_data(self.cluster, after, limit, until, decode=decode)

    async def append(self, expected_position: int, events: Sequence[NewEvent], *,
                     idempotency: Sequence[IdempotencyRecord] = (), offsets: Sequence[ConsumedOffset] = (),
                     dead_letters: Sequence[DeadLetter] = (), outbox_topic: str | None = None,
                     echo: bool = True) -> list[StoredEvent]:
        """Through the store's own methods, which run on the turn's connection: committed
        with the turn."""
        if not events:
            await self.store.record_without_events(idempotency=idempotency, offsets=offsets,
                                                   dead_letters=dead_letters)
            return []
        return await self.store.append(self.cluster, expected_position, events, idempotency=idempotency,
                                       offsets=offsets, dead_letters=dead_letters, outbox_topic=outbox_topic,
                                       echo=echo)


def _translated(exc: BaseException) -> BaseException:
    """StoreUnavailable for connection-level failures, as the store's methods raise (sql_errors)."""

    if isinstance(exc, asyncpg.LockNotAvailableError):
        return StoreUnavailable(f"a cluster's writer lock was not free within {LOCK_TIMEOUT_MS} ms")
    if isinstance(exc, Exception) and is_unavailable(exc):
        return StoreUnavailable(f"{type(exc).__name__}: {exc}")
    return exc


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _begin(store: PostgresEventStore, cluster: str) -> str:
    """The turn's first round trip: BEGIN, its timeouts, the writer lock and, for an owner among
    replicas, the fence (raises NotOwner when this replica may not decide for the cluster now). An
    owner's turn is idle at most its lease: a frozen owner's session ends by then, with its locks."""
    fencing = store.fencing
    fence = None
    idle = IDLE_TIMEOUT_MS
    if fencing is not None and not UNFENCED.get():
        fence = fencing.fence(cluster)
        if fence is None:
            raise NotOwner(cluster)
        idle = store.fence_idle_ms
    sql = (f"BEGIN; SET LOCAL idle_in_transaction_session_timeout = {idle};"
           f" SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS};"
           f" SELECT pg_advisory_xact_lock({WRITER_LOCKS}, {lock_key(cluster)})")
    if fence is not None:
        replica, incarnation, epoch = fence
        sql += f"; SELECT gangplank_fence({_quoted(cluster)}, {_quoted(replica)}, {_quoted(incarnation)}, {int(epoch)})"
    return sql


@asynccontextmanager
async def pg_turn(store: PostgresEventStore, cluster: str) -> AsyncIterator[PgTurn]:
    """The turn's transaction on a pooled connection (see the module docstring). A connection
    whose transaction did not end cleanly is discarded, never pooled again: closing it ends the
    transaction and its lock on the server."""
    begin = _begin(store, cluster)
    try:
        raw = await store.engine.raw_connection()
        if raw.driver_connection is None or raw.driver_connection.is_closed():  # closed while pooled
            await greenlet_spawn(raw.invalidate)
            raw = await store.engine.raw_connection()
    except Exception as exc:
        raise _translated(exc) from exc
    conn: asyncpg.Connection = raw.driver_connection
    clean = False
    token = TURN_CONNECTION.set((store, conn))
    try:
        try:
            try:
                await conn.execute(begin)
            except asyncpg.PostgresError as exc:
                if getattr(exc, "sqlstate", None) != FENCED_SQLSTATE or store.fencing is None:
                    raise
                store.fencing.fenced(cluster)
                await conn.execute("ROLLBACK")
                clean = True
                raise Fenced(cluster) from exc
            try:
                yield PgTurn(store, conn, cluster)
            except BaseException:
                with contextlib.suppress(Exception):  # else the connection is discarded, which rolls back too
                    if not conn.is_closed() and conn.is_in_transaction():
                        await asyncio.wait_for(conn.execute("ROLLBACK"), 5)
                        clean = True
                raise
            await conn.execute("COMMIT")
            clean = True
        except Exception as exc:
            translated = _translated(exc)
            if translated is exc:  # a driver's failure on a connection closed since: the database went away
                translated = unavailable_when_closed(exc, conn.is_closed())
            if translated is exc:
                raise
            raise translated from exc
    finally:
        TURN_CONNECTION.reset(token)
        if clean and not conn.is_closed() and not conn.is_in_transaction():
            await greenlet_spawn(raw.close)
        else:
            await greenlet_spawn(raw.invalidate)
