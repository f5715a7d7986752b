"""The SQL event store: one implementation for PostgreSQL (asyncpg) and SQLite (aiosqlite).

Concurrency model
-----------------
The cluster's row in `clusters` (last_position, head_hash) is each append's lock and sequence.

- PostgreSQL: an append with events is ONE statement in autocommit (one round trip): a
  data-modifying CTE whose guard is
      UPDATE clusters SET last_position = new, head_hash = new_head
       WHERE name = :c AND last_position = :expected AND head_hash = :prev
  (for expected 0: INSERT INTO clusters ... ON CONFLICT DO NOTHING), and whose inserts
  (events, idempotency, outbox, consumer offsets) only happen when the guard matched a row.
  The guard's row lock serialises appends to one cluster, so positions commit in order and
  readers never see a gap; a loser matches no row and writes nothing. The previous head hash
  comes from a small per-store cache of (cluster, position) -> hash (facts that never change),
  else from one SELECT on `clusters`; the guard re-checks it, so the cache is never trusted.
  Appends without events use a transaction with SELECT ... FOR UPDATE on the cluster row.
- SQLite: writes run in `BEGIN IMMEDIATE` transactions (one writer per database file, other
  writers wait up to the busy timeout, also across processes) and, inside one store, behind
  an asyncio lock so that the store's own writers queue without polling. Readers are not
  blocked (WAL).

A position mismatch raises ConcurrencyConflict and an existing idempotency key raises
IdempotencyKeyTaken; in both cases nothing at all is written.
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import asyncpg
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.util import greenlet_spawn

from service.clock import utc_now
from service.gcpause import gc_paused

from .base import (
    GENESIS_HASH,
    NOT_ECHOED,
    ClusterTurn,
    ConcurrencyConflict,
    ConsumedOffset,
    DeadLetter,
    IdempotencyKeyTaken,
    IdempotencyRecord,
    NewEvent,
    OutboxItem,
    Snapshot,
    StoredEvent,
    VerifyResult,
    canonical_record_json,
    shared_turn,
)
from .codec import (
    checked_hash,
    decode_headers,
    encode_headers,
    envelope_json,
    hash_input,
    idempotency_record,
    loads,
    sha256_hex,
    tail_fault,
)
from .engine import make_engine, normalize_url
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
)
from .schema import clusters as t_clusters
from .schema import consumer_offsets as t_offsets
from .schema import events as t_events
from .schema import idempotency as t_idem
from .schema import outbox as t_outbox
from .schema import snapshots as t_snapshots
from .sql_checkpoints import SqlCheckpoints
from .sql_errors import DRIVER_UNAVAILABLE, constraint_name, finishes_when_cancelled, translating
from .turn import TURN_CONNECTION, pg_turn

VERIFY_CHUNK = 5_000
_IN_CHUNK = 1_000  # ids per DELETE ... WHERE id IN (...)


# --------------------------------------------------------------------------- helpers

def _stored(row: Any) -> StoredEvent:
    return StoredEvent(cluster=row[0], position=row[1], type=row[2], schema_version=row[3],
                       data=loads(row[4]), metadata=loads(row[5]), recorded_at=row[6],
                       prev_hash=row[7], hash=row[8])


_EVENT_COLS = (t_events.c.cluster, t_events.c.position, t_events.c.type, t_events.c.schema_version,
               t_events.c.data, t_events.c.metadata, t_events.c.recorded_at, t_events.c.prev_hash,
               t_events.c.hash)


_HEAD_CACHE_MAX = 10_000
_MAX_POSITION = 2**63 - 1


def _convert(rows: Sequence[Any]) -> list[StoredEvent]:
    """Rows to StoredEvents. Decoding builds many small containers at once; pausing the
    cyclic GC meanwhile (no references cycles are created) halves the cost."""
    with gc_paused(len(rows) >= 256):
        return [_stored(r) for r in rows]


# --------------------------------------------------------------------------- the store

class SqlEventStore(SqlCheckpoints):
    """EventStore (service.store.base) on PostgreSQL or SQLite. See the module docstring."""

    def __init__(self, url: str):
        self.url = normalize_url(url)
        self._engine = make_engine(self.url)
        self.dialect = self._engine.dialect.name
        self._is_sqlite = self.dialect == "sqlite"
        # Single-statement reads: on PostgreSQL without BEGIN/ROLLBACK round trips (same pool).
        self._reader = self._engine if self._is_sqlite else \
            self._engine.execution_options(isolation_level="AUTOCOMMIT")
        self._insert = sqlite.insert if self._is_sqlite else postgresql.insert
        # In-process queue for SQLite writers (BEGIN IMMEDIATE serialises across processes).
        self._write_lock: asyncio.Lock | None = asyncio.Lock() if self._is_sqlite else None
        # cluster -> (position, hash) of the highest event this store has seen; only a hint.
        self._heads: dict[str, tuple[int, str]] = {}

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    # ------------------------------------------------------------------ head cache

    def _remember_head(self, cluster: str, position: int, hash_: str) -> None:
        known = self._heads.get(cluster)
        if known is None or known[0] < position:
            if known is None and len(self._heads) >= _HEAD_CACHE_MAX:
                self._heads.clear()
            self._heads[cluster] = (position, hash_)

    def _forget_head(self, cluster: str) -> None:
        self._heads.pop(cluster, None)

    async def _read_head(self, cluster: str) -> tuple[int, str]:
        if not self._is_sqlite:
            row = await self._pg("fetchrow", PG_HEAD, cluster)
        else:
            async with self._reader.connect() as conn:
                row = (await conn.execute(sa.select(t_clusters.c.last_position, t_clusters.c.head_hash)
                                          .where(t_clusters.c.name == cluster))).first()
        return (0, GENESIS_HASH) if row is None else (int(row[0]), row[1])

    # ------------------------------------------------------------------ transactions

    @asynccontextmanager
    async def _write_tx(self) -> AsyncIterator[AsyncConnection]:
        if self._write_lock is None:
            async with self._engine.begin() as conn:
                yield conn
            return
        async with self._write_lock:
            async with self._engine.connect() as conn:
                await conn.execution_options(gp_write=True)
                async with conn.begin():
                    yield conn

    # ------------------------------------------------------------------ row building

    @staticmethod
    def _idempotency_rows(records: Sequence[IdempotencyRecord]) -> list[dict[str, Any]]:
        rows = [{"key": r.key, "fingerprint": r.fingerprint, "status": int(r.status),
                 "body": canonical_record_json(r.body), "cluster": r.cluster, "position": r.position}
                for r in sorted(records, key=lambda r: r.key)]  # sorted: a fixed lock order
        if len({r["key"] for r in rows}) != len(rows):
            raise IdempotencyKeyTaken("the same idempotency key twice in one append")
        return rows

    @staticmethod
    def _offset_rows(offsets: Sequence[ConsumedOffset]) -> list[dict[str, Any]]:
        latest: dict[tuple[str, str, int], int] = {}
        for o in offsets:
            latest[(o.group, o.topic, int(o.partition))] = int(o.offset)
        return [{"group": g, "topic": t, "partition": p, "offset": off} for (g, t, p), off in sorted(latest.items())]

    @staticmethod
    def _dead_letter_rows(dead_letters: Sequence[DeadLetter]) -> list[dict[str, Any]]:
        return [{"topic": d.topic, "key": d.key, "value": d.value, "headers": encode_headers(d.headers),
                 "cluster": None, "position": None} for d in dead_letters]

    @staticmethod
    def _chain(cluster: str, expected: int, prev: str, prepared: list[tuple[str, int, str, str]],
               recorded_at: str, echo: bool = True) -> tuple[list[dict[str, Any]], list[StoredEvent]]:
        """The event rows (canonical JSON texts) and the StoredEvents they read back as."""
        rows, stored = [], []
        for i, (type_, version, data_json, meta_json) in enumerate(prepared):
            position = expected + 1 + i
            h = sha256_hex(prev, hash_input(cluster, position, type_, version, data_json, meta_json, recorded_at))
            rows.append({"cluster": cluster, "position": position, "type": type_, "schema_version": version,
                         "data": data_json, "metadata": meta_json, "recorded_at": recorded_at,
                         "prev_hash": prev, "hash": h})
            stored.append(StoredEvent(cluster, position, type_, version,
                                      loads(data_json) if echo else NOT_ECHOED,
                                      loads(meta_json) if echo else NOT_ECHOED, recorded_at, prev, h))
            prev = h
        return rows, stored

    @staticmethod
    def _outbox_event_rows(rows: list[dict[str, Any]], topic: str | None) -> list[dict[str, Any]]:
        """One outbox row per event: key = cluster, value = canonical JSON of the envelope."""
        if topic is None:
            return []
        return [{"topic": topic, "key": r["cluster"].encode("utf-8"),
                 "value": envelope_json(r["cluster"], r["position"], r["type"], r["schema_version"], r["data"],
                                        r["metadata"], r["recorded_at"], r["prev_hash"], r["hash"]).encode("utf-8"),
                 "headers": "[]", "cluster": r["cluster"], "position": r["position"]} for r in rows]

    # ------------------------------------------------------------------ writes

    def exclusive(self, cluster: str) -> AbstractAsyncContextManager[ClusterTurn]:
        """EventStore.exclusive (turn.py); SQLite needs no lock (BEGIN IMMEDIATE queues writes)."""
        return shared_turn(self, cluster) if self._is_sqlite else pg_turn(self, cluster)

    @translating
    @finishes_when_cancelled
    async def append(
        self,
        cluster: str,
        expected_position: int,
        events: Sequence[NewEvent],
        *,
        idempotency: Sequence[IdempotencyRecord] = (),
        offsets: Sequence[ConsumedOffset] = (),
        dead_letters: Sequence[DeadLetter] = (),
        outbox_topic: str | None = None,
        echo: bool = True,
    ) -> list[StoredEvent]:
        """See EventStore.append. The returned events carry data/metadata parsed back from
        the stored canonical JSON, exactly as read() will return them; with echo=False they
        carry None instead (a writer that holds the events already skips the parsing)."""
        if expected_position < 0:
            raise ValueError("expected_position must be >= 0")
        # Serialise outside any lock: the canonical texts that are stored and hashed.
        prepared = [(e.type, int(e.schema_version), canonical_record_json(e.data),
                     canonical_record_json(e.metadata)) for e in events]
        idem_rows = self._idempotency_rows(idempotency)
        offset_rows = self._offset_rows(offsets)
        dead_rows = self._dead_letter_rows(dead_letters)
        if prepared and not self._is_sqlite:
            raw = await self._append_pg(cluster, expected_position, prepared, idem_rows, offset_rows,
                                        dead_rows, outbox_topic, echo)
        else:
            raw = await self._append_tx(cluster, expected_position, prepared, idem_rows, offset_rows,
                                        dead_rows, outbox_topic, echo)
        if raw:
            self._remember_head(cluster, raw[-1].position, raw[-1].hash)
        return raw

    async def _append_pg(self, cluster: str, expected: int, prepared: list[tuple[str, int, str, str]],
                         idem_rows: list[dict[str, Any]], offset_rows: list[dict[str, Any]],
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
            rows, stored = self._chain(cluster, expected, prev, prepared, recorded_at, echo)
            outbox_rows = dead_rows + self._outbox_event_rows(rows, outbox_topic)
            params = {
                "cluster": cluster, "expected": expected, "prev_head": prev, "recorded_at": recorded_at,
                "new_last": stored[-1].position, "new_head": stored[-1].hash,
                "e_position": [r["position"] for r in rows], "e_type": [r["type"] for r in rows],
                "e_version": [r["schema_version"] for r in rows], "e_data": [r["data"] for r in rows],
                "e_metadata": [r["metadata"] for r in rows], "e_prev": [r["prev_hash"] for r in rows],
                "e_hash": [r["hash"] for r in rows],
                "i_key": [r["key"] for r in idem_rows], "i_fingerprint": [r["fingerprint"] for r in idem_rows],
                "i_status": [r["status"] for r in idem_rows], "i_body": [r["body"] for r in idem_rows],
                "i_cluster": [r["cluster"] for r in idem_rows], "i_position": [r["position"] for r in idem_rows],
                "o_topic": [r["topic"] for r in outbox_rows], "o_key": [r["key"] for r in outbox_rows],
                "o_value": [r["value"] for r in outbox_rows], "o_headers": [r["headers"] for r in outbox_rows],
                "o_cluster": [r["cluster"] for r in outbox_rows], "o_position": [r["position"] for r in outbox_rows],
                "f_group": [r["group"] for r in offset_rows], "f_topic": [r["topic"] for r in offset_rows],
                "f_partition": [r["partition"] for r in offset_rows], "f_offset": [r["offset"] for r in offset_rows],
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
                return stored
            # The guard matched no row: another writer got there first, or the cached head
            # hash was stale (the position matched but the chain is not the one we knew).
            self._forget_head(cluster)
            last, head = await self._read_head(cluster)
            if last != expected:
                raise ConcurrencyConflict(cluster, expected, last)
            self._remember_head(cluster, last, head)
        raise ConcurrencyConflict(cluster, expected, None)

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
            healthy = isinstance(exc, asyncpg.PostgresError) and not isinstance(exc, DRIVER_UNAVAILABLE)
            raise
        finally:
            if healthy:
                await greenlet_spawn(raw_conn.close)
            elif isinstance(outcome, DRIVER_UNAVAILABLE):
                await greenlet_spawn(self._engine.sync_engine.pool._invalidate, raw_conn, outcome)
            else:
                await greenlet_spawn(raw_conn.invalidate)

    async def _append_tx(self, cluster: str, expected: int, prepared: list[tuple[str, int, str, str]],
                         idem_rows: list[dict[str, Any]], offset_rows: list[dict[str, Any]],
                         dead_rows: list[dict[str, Any]], outbox_topic: str | None,
                         echo: bool = True) -> list[StoredEvent]:
        """The transactional path: SQLite always, PostgreSQL for appends without events."""
        async with self._write_tx() as conn:
            last, prev = await self._lock_cluster(conn, cluster, expected, create=bool(prepared))
            if last != expected:
                raise ConcurrencyConflict(cluster, expected, last)
            stored: list[StoredEvent] = []
            outbox_rows = list(dead_rows)
            if prepared:
                rows, stored = self._chain(cluster, expected, prev, prepared, utc_now(), echo)
                try:
                    await conn.execute(t_events.insert(), rows)
                except IntegrityError as exc:  # cannot happen under the lock; never fork
                    raise ConcurrencyConflict(cluster, expected, None) from exc
                await conn.execute(
                    sa.update(t_clusters).where(t_clusters.c.name == cluster)
                    .values(last_position=stored[-1].position, head_hash=stored[-1].hash))
                outbox_rows += self._outbox_event_rows(rows, outbox_topic)
            await self._write_extras(conn, idem_rows, offset_rows, outbox_rows)
        return stored

    async def _lock_cluster(self, conn: AsyncConnection, cluster: str, expected: int,
                            create: bool) -> tuple[int, str]:
        """Lock the cluster's row (creating it when expected == 0) and return (last, head).
        On SQLite the BEGIN IMMEDIATE transaction already holds the database's write lock."""
        row = None
        if expected == 0 and create:
            row = (await conn.execute(
                self._insert(t_clusters)
                .values(name=cluster, last_position=0, head_hash=GENESIS_HASH)
                .on_conflict_do_nothing(index_elements=[t_clusters.c.name])
                .returning(t_clusters.c.last_position, t_clusters.c.head_hash))).first()
        if row is None:
            row = (await conn.execute(
                sa.select(t_clusters.c.last_position, t_clusters.c.head_hash)
                .where(t_clusters.c.name == cluster).with_for_update())).first()
        if row is None:
            return 0, GENESIS_HASH
        return int(row[0]), row[1]

    async def _write_extras(self, conn: AsyncConnection, idem_rows: list[dict[str, Any]],
                            offset_rows: list[dict[str, Any]], outbox_rows: list[dict[str, Any]]) -> None:
        if idem_rows:
            now = utc_now()
            try:
                await conn.execute(t_idem.insert(), [{**r, "created_at": now} for r in idem_rows])
            except IntegrityError as exc:
                raise IdempotencyKeyTaken(", ".join(r["key"] for r in idem_rows)) from exc
        if offset_rows:
            stmt = self._insert(t_offsets)
            stmt = stmt.on_conflict_do_update(
                index_elements=[t_offsets.c.group, t_offsets.c.topic, t_offsets.c.partition],
                set_={"offset": stmt.excluded.offset})
            await conn.execute(stmt, offset_rows)
        if outbox_rows:
            await conn.execute(t_outbox.insert(), outbox_rows)

    @translating
    @finishes_when_cancelled
    async def record_without_events(
        self,
        *,
        idempotency: Sequence[IdempotencyRecord] = (),
        offsets: Sequence[ConsumedOffset] = (),
        dead_letters: Sequence[DeadLetter] = (),
    ) -> None:
        if not (idempotency or offsets or dead_letters):
            return
        idem_rows = self._idempotency_rows(idempotency)
        async with self._write_tx() as conn:
            await self._write_extras(conn, idem_rows, self._offset_rows(offsets),
                                     self._dead_letter_rows(dead_letters))

    # ------------------------------------------------------------------ reads

    def _select_events(self, cluster: str, after: int, until: int | None, limit: int | None,
                       columns: Sequence[Any] = _EVENT_COLS) -> sa.Select[Any]:
        stmt = (sa.select(*columns)
                .where(t_events.c.cluster == cluster, t_events.c.position > after)
                .order_by(t_events.c.position))
        if until is not None:
            stmt = stmt.where(t_events.c.position <= until)
        if limit is not None:
            stmt = stmt.limit(limit)
        return stmt

    @translating
    async def read(self, cluster: str, after: int = 0, limit: int | None = None,
                   until: int | None = None) -> list[StoredEvent]:
        """Events with after < position (<= until), in position order, at most `limit`."""
        if limit is not None and limit <= 0:
            return []
        if not self._is_sqlite:
            if until is None:
                rows = await self._pg("fetch", PG_READ, cluster, after, limit)
            else:
                rows = await self._pg("fetch", PG_READ_UNTIL, cluster, after, limit, until)
        else:
            async with self._reader.connect() as conn:
                rows = (await conn.execute(self._select_events(cluster, after, until, limit))).all()
        events = _convert(rows)
        if events:
            self._remember_head(cluster, events[-1].position, events[-1].hash)
        return events

    async def stream(self, cluster: str, after: int = 0, until: int | None = None,
                     chunk: int = 5_000) -> AsyncIterator[list[StoredEvent]]:
        """read() in chunks, for replaying long streams without holding them in memory."""
        while True:
            batch = await self.read(cluster, after=after, limit=chunk, until=until)
            if not batch:
                return
            yield batch
            after = batch[-1].position
            if len(batch) < chunk:
                return

    @translating
    async def read_data(self, cluster: str, after: int = 0, limit: int | None = None,
                        until: int | None = None, *, decode: bool = True) -> list[tuple[int, str, int, Any]]:
        """(position, type, schemaVersion, data) of the events read() gives: what folding
        needs, without the metadata and hashes (half the rows' bytes and JSON to decode).
        decode=False: data is the stored canonical JSON text, for a reader that decodes only
        what it needs (service.domain.replay); rows are then sequences of those four, not
        tuples (PostgreSQL: the driver's records), and the head hash is not remembered."""
        if limit is not None and limit <= 0:
            return []
        if not self._is_sqlite and not decode:  # the driver's records as they come (they unpack as 4-tuples)
            records: list[tuple[int, str, int, Any]] = await self._pg(
                "fetch", PG_READ_TEXT, cluster, after, limit, _MAX_POSITION if until is None else until)
            return records
        if not self._is_sqlite:
            rows = await self._pg("fetch", PG_READ_DATA, cluster, after, limit,
                                  _MAX_POSITION if until is None else until)
        else:
            stmt = self._select_events(cluster, after, until, limit,
                                       (t_events.c.position, t_events.c.type, t_events.c.schema_version,
                                        t_events.c.data, t_events.c.hash))
            async with self._reader.connect() as conn:
                rows = (await conn.execute(stmt)).all()
        if rows:  # as read() does: the next append after a catch-up needs no head lookup
            self._remember_head(cluster, rows[-1][0], rows[-1][4])
        if not decode:
            return [(r[0], r[1], r[2], r[3]) for r in rows]
        with gc_paused(len(rows) >= 256):  # as in _convert
            return [(r[0], r[1], r[2], loads(r[3])) for r in rows]

    @translating
    async def last_position(self, cluster: str) -> int:
        return (await self._read_head(cluster))[0]

    @translating
    async def clusters(self) -> list[tuple[str, int]]:
        async with self._reader.connect() as conn:
            rows = (await conn.execute(sa.select(t_clusters.c.name, t_clusters.c.last_position)
                                       .order_by(t_clusters.c.name))).all()
        return [(name, int(last)) for name, last in rows]

    @translating
    async def head_and_idempotency(self, cluster: str, keys: Sequence[str]
                                   ) -> tuple[int, dict[str, IdempotencyRecord]]:
        keys = list(dict.fromkeys(keys))
        if not self._is_sqlite:
            rows = await self._pg("fetch", PG_HEAD_AND_IDEMPOTENCY, cluster, keys)
            last = rows[0][0] if rows else None
            records = [r[1:] for r in rows if r[1] is not None]
        else:
            async with self._reader.connect() as conn:
                head = (await conn.execute(sa.select(t_clusters.c.last_position)
                                           .where(t_clusters.c.name == cluster))).first()
                last = None if head is None else head[0]
                records = []
                for start in range(0, len(keys), 500):  # SQLite's bound-parameter limit
                    records += (await conn.execute(
                        sa.select(t_idem.c.key, t_idem.c.fingerprint, t_idem.c.status, t_idem.c.body,
                                  t_idem.c.cluster, t_idem.c.position)
                        .where(t_idem.c.key.in_(keys[start:start + 500])))).all()
        found = {r[0]: idempotency_record(r) for r in records}
        return (0 if last is None else int(last)), found

    @translating
    async def get_idempotency(self, key: str) -> IdempotencyRecord | None:
        if not self._is_sqlite:
            row = await self._pg("fetchrow", PG_IDEMPOTENCY, key)
        else:
            async with self._reader.connect() as conn:
                row = (await conn.execute(
                    sa.select(t_idem.c.key, t_idem.c.fingerprint, t_idem.c.status, t_idem.c.body,
                              t_idem.c.cluster, t_idem.c.position).where(t_idem.c.key == key))).first()
        return None if row is None else idempotency_record(row)

    # ------------------------------------------------------------------ audit

    @translating
    async def verify(self, cluster: str, until: int | None = None) -> VerifyResult:
        """Recompute the hash chain from genesis over the stored rows, in chunks, in one
        consistent snapshot. `events` counts the events verified good; `head` is the hash of
        the last of them; `first_bad_position` is the first position whose prevHash is not
        the previous hash, whose hash does not recompute, or which is missing (also at the
        tail: fewer events than the cluster's recorded last position).

        The hash is first recomputed over the stored canonical texts (the exact bytes that
        were hashed); only when that differs are data/metadata parsed and re-canonicalised,
        which is what an auditor holding an export computes."""
        prev, count, bad = GENESIS_HASH, 0, None
        async with self._engine.connect() as conn:
            if not self._is_sqlite:
                await conn.execution_options(isolation_level="REPEATABLE READ")
            async with conn.begin():
                head_row = (await conn.execute(sa.select(t_clusters.c.last_position, t_clusters.c.head_hash)
                                               .where(t_clusters.c.name == cluster))).first()
                last_recorded = int(head_row[0]) if head_row else 0
                after = 0
                while bad is None:
                    # the range is bounded too (positions are gapless in a good chain): without
                    # table statistics PostgreSQL would otherwise scan and sort the rest per chunk
                    hi = after + VERIFY_CHUNK if until is None else min(until, after + VERIFY_CHUNK)
                    rows = (await conn.execute(self._select_events(cluster, after, hi, VERIFY_CHUNK))).all()
                    for (_c, position, type_, version, data_json, meta_json, recorded_at, prev_hash,
                         stored_hash) in rows:
                        if position != count + 1 or prev_hash != prev:
                            bad = count + 1
                            break
                        h = checked_hash(prev, cluster, position, type_, version, data_json, meta_json,
                                         recorded_at, stored_hash)
                        if h is None:
                            bad = position
                            break
                        prev, count = h, count + 1
                    if len(rows) < VERIFY_CHUNK:
                        break
                    after = rows[-1][1]
                if bad is None:
                    bad = tail_fault(count, last_recorded, until, None if head_row is None else head_row[1], prev)
        return VerifyResult(ok=bad is None, events=count, head=prev, first_bad_position=bad)

    # ------------------------------------------------------------------ snapshots

    @translating
    @finishes_when_cancelled
    async def save_snapshot(self, snapshot: Snapshot) -> None:
        stmt = self._insert(t_snapshots).values(cluster=snapshot.cluster, position=snapshot.position,
                                                version=snapshot.version, blob=snapshot.blob)
        stmt = stmt.on_conflict_do_update(
            index_elements=[t_snapshots.c.cluster, t_snapshots.c.position, t_snapshots.c.version],
            set_={"blob": stmt.excluded.blob})
        async with self._write_tx() as conn:
            await conn.execute(stmt)

    @translating
    async def latest_snapshot(self, cluster: str, version: str | Sequence[str],
                              at_or_before: int | None = None) -> Snapshot | None:
        """The latest snapshot of `version` at or before the position; with several versions,
        the latest of any of them, the earlier-listed version at equal positions (only the
        chosen blob is fetched: a full snapshot of a long stream may be large)."""
        versions = [version] if isinstance(version, str) else list(version)
        stmt = (sa.select(t_snapshots.c.position, t_snapshots.c.version)
                .where(t_snapshots.c.cluster == cluster, t_snapshots.c.version.in_(versions)))
        if at_or_before is not None:
            stmt = stmt.where(t_snapshots.c.position <= at_or_before)
        stmt = stmt.order_by(t_snapshots.c.position.desc()).limit(len(versions))
        async with self._reader.connect() as conn:
            heads = (await conn.execute(stmt)).all()
            if not heads:
                return None
            top = heads[0][0]
            chosen = min((versions.index(v) for p, v in heads if p == top))
            row = (await conn.execute(
                sa.select(t_snapshots.c.blob).where(t_snapshots.c.cluster == cluster,
                                                    t_snapshots.c.version == versions[chosen],
                                                    t_snapshots.c.position == top))).first()
        if row is None:
            return None
        return Snapshot(cluster=cluster, position=int(top), version=versions[chosen], blob=bytes(row[0]))

    @translating
    @finishes_when_cancelled
    async def delete_snapshots(self, cluster: str | None = None) -> None:
        stmt = sa.delete(t_snapshots)
        if cluster is not None:
            stmt = stmt.where(t_snapshots.c.cluster == cluster)
        async with self._write_tx() as conn:
            await conn.execute(stmt)

    # ------------------------------------------------------------------ outbox and offsets

    @translating
    async def outbox_batch(self, limit: int = 500) -> list[OutboxItem]:
        """Unsent rows in id order (a cluster's rows are in position order)."""
        if not self._is_sqlite:  # the relay's hot path: asyncpg directly
            rows = await self._pg("fetch", PG_OUTBOX_BATCH, limit)
        else:
            async with self._reader.connect() as conn:
                rows = (await conn.execute(
                    sa.select(t_outbox.c.id, t_outbox.c.topic, t_outbox.c.key, t_outbox.c.value,
                              t_outbox.c.headers, t_outbox.c.cluster, t_outbox.c.position)
                    .order_by(t_outbox.c.id).limit(limit))).all()
        return [OutboxItem(id=int(r[0]), topic=r[1], key=None if r[2] is None else bytes(r[2]),
                           value=bytes(r[3]), headers=decode_headers(r[4]), cluster=r[5],
                           position=None if r[6] is None else int(r[6])) for r in rows]

    @translating
    @finishes_when_cancelled
    async def outbox_done(self, ids: Sequence[int]) -> None:
        """Delete sent rows."""
        ids = list(ids)
        if not ids:
            return
        async with self._write_tx() as conn:
            for i in range(0, len(ids), _IN_CHUNK):
                await conn.execute(sa.delete(t_outbox).where(t_outbox.c.id.in_(ids[i:i + _IN_CHUNK])))

    @translating
    async def stored_offsets(self, group: str, topic: str) -> dict[int, int]:
        async with self._reader.connect() as conn:
            rows = (await conn.execute(
                sa.select(t_offsets.c.partition, t_offsets.c.offset)
                .where(t_offsets.c.group == group, t_offsets.c.topic == topic))).all()
        return {int(p): int(o) for p, o in rows}

    # ------------------------------------------------------------------ health

    async def ping(self) -> bool:
        try:
            async with self._reader.connect() as conn:
                await conn.execute(sa.text("SELECT 1"))
            return True
        except Exception:  # noqa: BLE001 - health check: any failure means "down"
            return False

    @translating
    async def schema_is_current(self) -> bool:
        from .migrate import is_current

        async with self._engine.connect() as conn:
            return await is_current(conn)

    async def close(self) -> None:
        await self._engine.dispose()
