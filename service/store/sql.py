"""The SQL event store's shared base (`SqlEventStore`): what PostgreSQL (service/store/postgres.py)
and SQLite (service/store/sqlite.py) do alike through SQLAlchemy Core.

Concurrency model
-----------------
The cluster's row in `clusters` (last_position, head_hash) is each append's lock and sequence.
An append checks that the row is still at the expected position (and, for a planned append, at
the hash it was chained to), then inserts the events, moves the row, and writes the idempotency
records, consumed offsets, dead letters and outbox rows, all in one transaction. A position
mismatch raises ConcurrencyConflict and an existing idempotency key raises
IdempotencyKeyTaken; in both cases nothing at all is written. How each backend takes the row's
lock, and its hot paths, are in its own module.
"""
from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from service.clock import utc_now

from .base import (
    GENESIS_HASH,
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
)
from .codec import decode_headers, encode_headers
from .engine import make_engine, normalize_url
from .recorded import (
    AppendPlan,
    ChainCheck,
    ChainRow,
    Prepared,
    RecordingStore,
    check_keys_once,
    outbox_value,
    plan,
    prepare,
)
from .schema import clusters as t_clusters
from .schema import consumer_offsets as t_offsets
from .schema import events as t_events
from .schema import idempotency as t_idem
from .schema import outbox as t_outbox
from .schema import snapshots as t_snapshots
from .sql_checkpoints import SqlCheckpoints
from .sql_errors import finishes_when_cancelled, translating

VERIFY_CHUNK = 5_000
_IN_CHUNK = 1_000  # ids per DELETE ... WHERE id IN (...)

EVENT_COLS = (t_events.c.cluster, t_events.c.position, t_events.c.type, t_events.c.schema_version,
              t_events.c.data, t_events.c.metadata, t_events.c.recorded_at, t_events.c.prev_hash,
              t_events.c.hash)


def select_events(cluster: str, after: int, until: int | None, limit: int | None,
                  columns: Sequence[Any] = EVENT_COLS) -> sa.Select[Any]:
    stmt = (sa.select(*columns)
            .where(t_events.c.cluster == cluster, t_events.c.position > after)
            .order_by(t_events.c.position))
    if until is not None:
        stmt = stmt.where(t_events.c.position <= until)
    if limit is not None:
        stmt = stmt.limit(limit)
    return stmt


def idempotency_rows(records: Sequence[IdempotencyRecord]) -> list[dict[str, Any]]:
    rows = [{"key": r.key, "fingerprint": r.fingerprint, "status": int(r.status),
             "body": canonical_record_json(r.body), "cluster": r.cluster, "position": r.position}
            for r in sorted(records, key=lambda r: r.key)]  # sorted: a fixed lock order
    if len({r["key"] for r in rows}) != len(rows):
        raise IdempotencyKeyTaken("the same idempotency key twice in one append")
    return rows


def offset_rows(offsets: Sequence[ConsumedOffset]) -> list[dict[str, Any]]:
    latest: dict[tuple[str, str, int], int] = {}
    for o in offsets:
        latest[(o.group, o.topic, int(o.partition))] = int(o.offset)
    return [{"group": g, "topic": t, "partition": p, "offset": off} for (g, t, p), off in sorted(latest.items())]


def dead_letter_rows(dead_letters: Sequence[DeadLetter]) -> list[dict[str, Any]]:
    return [{"topic": d.topic, "key": d.key, "value": d.value, "headers": encode_headers(d.headers),
             "cluster": None, "position": None} for d in dead_letters]


def outbox_item(row: Any) -> OutboxItem:
    """An outbox row read back: (id, topic, key, value, headers, cluster, position)."""
    return OutboxItem(id=int(row[0]), topic=row[1], key=None if row[2] is None else bytes(row[2]),
                      value=bytes(row[3]), headers=decode_headers(row[4]), cluster=row[5],
                      position=None if row[6] is None else int(row[6]))


def event_rows(cluster: str, rows: Sequence[ChainRow]) -> list[dict[str, Any]]:
    return [{"cluster": cluster, "position": r.position, "type": r.type, "schema_version": r.schema_version,
             "data": r.data, "metadata": r.metadata, "recorded_at": r.recorded_at, "prev_hash": r.prev_hash,
             "hash": r.hash} for r in rows]


def outbox_event_rows(cluster: str, rows: Sequence[ChainRow], topic: str | None) -> list[dict[str, Any]]:
    """One outbox row per event: key = cluster, value = canonical JSON of the envelope."""
    if topic is None:
        return []
    key = cluster.encode("utf-8")
    return [{"topic": topic, "key": key, "value": outbox_value(cluster, r), "headers": "[]", "cluster": cluster,
             "position": r.position} for r in rows]


class SqlEventStore(RecordingStore, SqlCheckpoints):
    """EventStore (service.store.base) on a SQL database: the shared base of the PostgreSQL and
    SQLite stores (open_store gives the one for a URL). See the module docstring."""

    # the isolation level of verify()'s transaction: one consistent snapshot of the chain
    verify_isolation: str | None = None

    def __init__(self, url: str):
        self.url = normalize_url(url)
        self._engine = make_engine(self.url)
        self.dialect = self._engine.dialect.name
        self._reader: AsyncEngine = self._engine

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    # ------------------------------------------------------------------ backend hooks

    def _write_tx(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A write transaction (committed at its end, rolled back on an exception)."""
        raise NotImplementedError

    def _insert(self, table: sa.Table) -> Any:
        """The dialect's INSERT with ON CONFLICT."""
        raise NotImplementedError

    async def _append_prepared(self, cluster: str, expected: int, prepared: list[Prepared],
                               idempotency: Sequence[IdempotencyRecord], offsets: Sequence[ConsumedOffset],
                               dead_letters: Sequence[DeadLetter], outbox_topic: str | None,
                               echo: bool) -> list[StoredEvent]:
        """The transactional path (a backend may have a faster one for appends with events)."""
        async with self._write_tx() as conn:
            last, prev = await self._lock_cluster(conn, cluster, expected, create=bool(prepared))
            if last != expected:
                raise ConcurrencyConflict(cluster, expected, last)
            planned = plan(cluster, expected, prev, prepared, idempotency=idempotency, offsets=offsets,
                           dead_letters=dead_letters, outbox_topic=outbox_topic)
            await self._write_plan(conn, planned)
        return planned.stored(echo)

    # ------------------------------------------------------------------ writes

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
        check_keys_once(idempotency)  # the same key twice: refused before any round trip
        return await self._append_prepared(cluster, expected_position, prepare(events), idempotency, offsets,
                                           dead_letters, outbox_topic, echo)

    async def _write_plan(self, conn: AsyncConnection, planned: AppendPlan) -> None:
        """In a write transaction that holds the cluster's row (or the database's write lock)."""
        outbox_rows = dead_letter_rows(planned.dead_letters)
        if planned.rows:
            try:
                await conn.execute(t_events.insert(), event_rows(planned.cluster, planned.rows))
            except IntegrityError as exc:  # cannot happen under the lock; never fork
                raise ConcurrencyConflict(planned.cluster, planned.expected, None) from exc
            await conn.execute(
                sa.update(t_clusters).where(t_clusters.c.name == planned.cluster)
                .values(last_position=planned.rows[-1].position, head_hash=planned.rows[-1].hash))
            outbox_rows += outbox_event_rows(planned.cluster, planned.rows, planned.outbox_topic)
        await self._write_extras(conn, idempotency_rows(planned.idempotency), offset_rows(planned.offsets),
                                 outbox_rows)

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
        idem_rows = idempotency_rows(idempotency)
        async with self._write_tx() as conn:
            await self._write_extras(conn, idem_rows, offset_rows(offsets), dead_letter_rows(dead_letters))

    # ------------------------------------------------------------------ reads

    @translating
    async def clusters(self) -> list[tuple[str, int]]:
        async with self._reader.connect() as conn:
            rows = (await conn.execute(sa.select(t_clusters.c.name, t_clusters.c.last_position)
                                       .order_by(t_clusters.c.name))).all()
        return [(name, int(last)) for name, last in rows]

    # ------------------------------------------------------------------ audit

    @translating
    async def verify(self, cluster: str, until: int | None = None) -> VerifyResult:
        """Recompute the hash chain from genesis over the stored rows (ChainCheck), in chunks,
        in one consistent snapshot. `events` counts the events verified good; `head` is the
        hash of the last of them; `first_bad_position` is the first position whose prevHash is
        not the previous hash, whose hash does not recompute, or which is missing (also at the
        tail: fewer events than the cluster's recorded last position)."""
        check = ChainCheck(cluster, until)
        async with self._engine.connect() as conn:
            if self.verify_isolation is not None:
                await conn.execution_options(isolation_level=self.verify_isolation)
            async with conn.begin():
                head_row = (await conn.execute(sa.select(t_clusters.c.last_position, t_clusters.c.head_hash)
                                               .where(t_clusters.c.name == cluster))).first()
                after = 0
                while True:
                    # the range is bounded too (positions are gapless in a good chain): without
                    # table statistics PostgreSQL would otherwise scan and sort the rest per chunk
                    hi = after + VERIFY_CHUNK if until is None else min(until, after + VERIFY_CHUNK)
                    rows = (await conn.execute(select_events(cluster, after, hi, VERIFY_CHUNK))).all()
                    if not check.feed(ChainRow(*r[1:]) for r in rows) or len(rows) < VERIFY_CHUNK:
                        break
                    after = rows[-1][1]
        return check.result(int(head_row[0]) if head_row else 0, None if head_row is None else head_row[1])

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
