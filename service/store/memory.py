"""The in-memory event store: `EventStore` without a database, for tests and quick runs.

    open_store("memory://")         # a private, empty store
    open_store("memory://name")     # the process-wide database `name`: every store opened on
                                    # it sees the same events (as two SQL stores on one database)

It keeps what the SQL tables keep (service/store/schema.py) and writes it the same way: the
canonical JSON texts, hashed and chained with the same functions (service/store/recorded.py), so
that hashes, outbox values and verify() agree with SQLite and PostgreSQL byte for byte. The
same conformance suite (tests/store/) runs against all three.

Atomicity: every write checks everything (position, idempotency keys) before it changes
anything, under one lock per database and with no await in between, so an append happens
whole or not at all, also when its task is cancelled or another thread writes. Every call
first yields to the event loop once, as a database round trip would, so that concurrent
writers interleave (and conflict) as they do on a real database, and no polling loop that
awaits only the store can starve the others. Nothing is durable: a named database lives until
the process ends or `discard_database(name)`.
"""
from __future__ import annotations

import asyncio
import itertools
import threading
import weakref
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from .base import (
    GENESIS_HASH,
    Checkpoint,
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
)
from .codec import loads
from .recorded import (
    AppendPlan,
    ChainCheck,
    ChainRow,
    RecordingStore,
    check_keys_once,
    outbox_value,
    plan,
    prepare,
    staged_turn,
)
from .recorded import stored_event as _stored

SCHEME = "memory://"
_Row = ChainRow  # an events row: the canonical texts that were hashed, as the SQL tables keep them


# key -> (fingerprint, status, canonical body, cluster, position)
_IdempotencyRow = tuple[str, int, str, str | None, int | None]
# outbox id -> (topic, key, value, headers, cluster, position)
_OutboxRow = tuple[str, bytes | None, bytes, tuple[tuple[str, bytes], ...], str | None, int | None]


class _Database:
    """The tables: what a SQL database on one URL holds."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: dict[str, list[_Row]] = {}
        self.heads: dict[str, tuple[int, str]] = {}  # the clusters table: last position, head hash
        self.idempotency: dict[str, _IdempotencyRow] = {}
        self.outbox: dict[int, _OutboxRow] = {}  # insertion order is id order
        self.outbox_ids = itertools.count(1)
        self.offsets: dict[tuple[str, str, int], int] = {}
        self.snapshots: dict[str, dict[tuple[int, str], bytes]] = {}
        self.checkpoints: dict[str, dict[tuple[int, str], Checkpoint]] = {}  # (position, key id)


_DATABASES: dict[str, _Database] = {}
_REGISTRY_LOCK = threading.Lock()


def discard_database(name: str) -> None:
    """Forget the named database (stores still open on it keep their copy)."""
    with _REGISTRY_LOCK:
        _DATABASES.pop(name, None)


def is_memory_url(url: str) -> bool:
    return url.startswith(SCHEME)


def _database(url: str) -> _Database:
    if not is_memory_url(url):
        raise ValueError(f"not an in-memory store URL: {url!r} (use memory:// or memory://name)")
    name = url[len(SCHEME):].strip("/")
    if not name:
        return _Database()
    with _REGISTRY_LOCK:
        return _DATABASES.setdefault(name, _Database())


def _idempotency_rows(records: Sequence[IdempotencyRecord]) -> dict[str, _IdempotencyRow]:
    check_keys_once(records)
    return {r.key: (r.fingerprint, int(r.status), canonical_record_json(r.body), r.cluster, r.position)
            for r in records}


def _dead_letter_rows(dead_letters: Sequence[DeadLetter]) -> list[_OutboxRow]:
    return [(d.topic, None if d.key is None else bytes(d.key), bytes(d.value),
             tuple((name, bytes(value)) for name, value in d.headers), None, None) for d in dead_letters]


def _idempotency_record(key: str, row: _IdempotencyRow) -> IdempotencyRecord:
    return IdempotencyRecord(key=key, fingerprint=row[0], status=row[1], body=loads(row[2]),
                             cluster=row[3], position=row[4])


class MemoryEventStore(RecordingStore):
    """EventStore (service.store.base) in this process's memory. See the module docstring."""

    def __init__(self, url: str = SCHEME):
        self.url = url
        self._db = _database(url)
        self._turns: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    # ------------------------------------------------------------------ writes

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
        """See EventStore.append."""
        if expected_position < 0:
            raise ValueError("expected_position must be >= 0")
        prepared = prepare(events)
        check_keys_once(idempotency)
        await asyncio.sleep(0)
        with self._db.lock:  # checks first, then changes that cannot fail: all or nothing
            last, prev = self._db.heads.get(cluster, (0, GENESIS_HASH))
            if last != expected_position:
                raise ConcurrencyConflict(cluster, expected_position, last)
            planned = plan(cluster, expected_position, prev, prepared, idempotency=idempotency,
                           offsets=offsets, dead_letters=dead_letters, outbox_topic=outbox_topic)
            self._write([planned])
        return planned.stored(echo)

    def exclusive(self, cluster: str) -> AbstractAsyncContextManager[ClusterTurn]:
        """EventStore.exclusive (service.store.recorded): turns of one cluster queue in this store."""
        lock = self._turns.get(cluster)
        if lock is None:
            lock = self._turns[cluster] = asyncio.Lock()
        return staged_turn(self, cluster, lock)

    async def head(self, cluster: str) -> tuple[int, str]:
        """The cluster's last position and head hash."""
        await asyncio.sleep(0)
        with self._db.lock:
            return self._db.heads.get(cluster, (0, GENESIS_HASH))

    async def write_plans(self, plans: Sequence[AppendPlan]) -> None:
        await asyncio.sleep(0)
        with self._db.lock:
            self._write(plans)

    def _write(self, plans: Sequence[AppendPlan]) -> None:
        """Under the lock: every check of every plan first, then the changes, which cannot fail."""
        db = self._db
        keys: dict[str, _IdempotencyRow] = {}
        for p in plans:
            if p.rows and db.heads.get(p.cluster, (0, GENESIS_HASH)) != (p.expected, p.prev):
                raise ConcurrencyConflict(p.cluster, p.expected, db.heads.get(p.cluster, (0,))[0])
            keys.update(_idempotency_rows(p.idempotency))
        self._check_keys(keys)
        for p in plans:
            outbox_rows = _dead_letter_rows(p.dead_letters)
            if p.rows:
                db.events.setdefault(p.cluster, []).extend(p.rows)
                db.heads[p.cluster] = (p.rows[-1].position, p.rows[-1].hash)
                if p.outbox_topic is not None:
                    key = p.cluster.encode("utf-8")
                    outbox_rows += [(p.outbox_topic, key, outbox_value(p.cluster, r), (), p.cluster, r.position)
                                    for r in p.rows]
            self._write_extras(_idempotency_rows(p.idempotency), p.offsets, outbox_rows)

    async def record_without_events(
        self,
        *,
        idempotency: Sequence[IdempotencyRecord] = (),
        offsets: Sequence[ConsumedOffset] = (),
        dead_letters: Sequence[DeadLetter] = (),
    ) -> None:
        idem_rows = _idempotency_rows(idempotency)
        dead_rows = _dead_letter_rows(dead_letters)
        await asyncio.sleep(0)
        with self._db.lock:
            self._check_keys(idem_rows)
            self._write_extras(idem_rows, offsets, dead_rows)

    def _check_keys(self, idem_rows: dict[str, _IdempotencyRow]) -> None:
        taken = [key for key in idem_rows if key in self._db.idempotency]
        if taken:
            raise IdempotencyKeyTaken(", ".join(sorted(taken)))

    def _write_extras(self, idem_rows: dict[str, _IdempotencyRow], offsets: Sequence[ConsumedOffset],
                      outbox_rows: list[_OutboxRow]) -> None:
        """Under the lock, after the checks."""
        db = self._db
        db.idempotency.update(idem_rows)
        for o in offsets:  # the last one of a partition wins, as in the SQL upsert
            db.offsets[(o.group, o.topic, int(o.partition))] = int(o.offset)
        for row in outbox_rows:
            db.outbox[next(db.outbox_ids)] = row

    # ------------------------------------------------------------------ reads

    def _rows(self, cluster: str, after: int, limit: int | None, until: int | None) -> list[_Row]:
        """Positions are gapless from 1, so the row at position p is rows[p - 1]."""
        if limit is not None and limit <= 0:
            return []
        start = max(after, 0)
        stop = None if until is None else max(until, start)
        if limit is not None:
            stop = start + limit if stop is None else min(stop, start + limit)
        with self._db.lock:
            return self._db.events.get(cluster, [])[start:stop]

    async def read(self, cluster: str, after: int = 0, limit: int | None = None,
                   until: int | None = None) -> list[StoredEvent]:
        """Events with after < position (<= until), in position order, at most `limit`."""
        await asyncio.sleep(0)
        return [_stored(cluster, r) for r in self._rows(cluster, after, limit, until)]

    async def read_data(self, cluster: str, after: int = 0, limit: int | None = None,
                        until: int | None = None, *, decode: bool = True) -> list[tuple[int, str, int, Any]]:
        """(position, type, schemaVersion, data) of the events read() gives; decode=False:
        data is the stored canonical JSON text."""
        await asyncio.sleep(0)
        rows = self._rows(cluster, after, limit, until)
        if not decode:
            return [(r.position, r.type, r.schema_version, r.data) for r in rows]
        return [(r.position, r.type, r.schema_version, loads(r.data)) for r in rows]

    async def last_position(self, cluster: str) -> int:
        await asyncio.sleep(0)
        with self._db.lock:
            return self._db.heads.get(cluster, (0, GENESIS_HASH))[0]

    async def clusters(self) -> list[tuple[str, int]]:
        await asyncio.sleep(0)
        with self._db.lock:
            return sorted((name, last) for name, (last, _) in self._db.heads.items())

    async def get_idempotency(self, key: str) -> IdempotencyRecord | None:
        await asyncio.sleep(0)
        with self._db.lock:
            row = self._db.idempotency.get(key)
        return None if row is None else _idempotency_record(key, row)

    async def head_and_idempotency(self, cluster: str, keys: Sequence[str]
                                   ) -> tuple[int, dict[str, IdempotencyRecord]]:
        last, _, found = await self.head_and_records(cluster, keys)
        return last, found

    async def head_and_records(self, cluster: str, keys: Sequence[str]
                               ) -> tuple[int, str, dict[str, IdempotencyRecord]]:
        await asyncio.sleep(0)
        db = self._db
        with db.lock:  # one consistent view, as the one statement on PostgreSQL
            last, head = db.heads.get(cluster, (0, GENESIS_HASH))
            found = {key: db.idempotency[key] for key in keys if key in db.idempotency}
        return last, head, {key: _idempotency_record(key, row) for key, row in found.items()}

    # ------------------------------------------------------------------ audit

    async def verify(self, cluster: str, until: int | None = None) -> VerifyResult:
        """Recompute the hash chain from genesis over the stored rows, with the checks and
        the answer of SqlEventStore.verify (the same functions)."""
        await asyncio.sleep(0)
        with self._db.lock:  # rows are immutable: a copy of the list is a consistent snapshot
            rows = list(self._db.events.get(cluster, ()))
            head = self._db.heads.get(cluster)
        check = ChainCheck(cluster, until)
        check.feed(rows)
        return check.result(0 if head is None else head[0], None if head is None else head[1])

    # ------------------------------------------------------------------ snapshots

    async def save_snapshot(self, snapshot: Snapshot) -> None:
        await asyncio.sleep(0)
        with self._db.lock:
            self._db.snapshots.setdefault(snapshot.cluster, {})[(snapshot.position, snapshot.version)] = \
                bytes(snapshot.blob)

    async def latest_snapshot(self, cluster: str, version: str | Sequence[str],
                              at_or_before: int | None = None) -> Snapshot | None:
        """The latest of these versions at or before the position (earlier-listed wins ties)."""
        versions = [version] if isinstance(version, str) else list(version)
        await asyncio.sleep(0)
        with self._db.lock:
            stored = dict(self._db.snapshots.get(cluster, {}))
        candidates = [(position, -versions.index(v), v) for position, v in stored
                      if v in versions and (at_or_before is None or position <= at_or_before)]
        if not candidates:
            return None
        position, _, chosen = max(candidates)
        return Snapshot(cluster=cluster, position=position, version=chosen, blob=stored[(position, chosen)])

    async def delete_snapshots(self, cluster: str | None = None) -> None:
        await asyncio.sleep(0)
        with self._db.lock:
            if cluster is None:
                self._db.snapshots.clear()
            else:
                self._db.snapshots.pop(cluster, None)

    # ------------------------------------------------------------------ checkpoints

    async def save_checkpoint(self, checkpoint: Checkpoint, *, outbox_topic: str | None = None) -> None:
        await asyncio.sleep(0)
        with self._db.lock:
            stored = self._db.checkpoints.setdefault(checkpoint.cluster, {})
            key = (checkpoint.position, checkpoint.key_id)
            if key in stored:
                return
            stored[key] = checkpoint
            if outbox_topic is not None:
                self._db.outbox[next(self._db.outbox_ids)] = (
                    outbox_topic, checkpoint.cluster.encode("utf-8"), checkpoint.record_json().encode("utf-8"),
                    (), checkpoint.cluster, None)

    async def checkpoints(self, cluster: str, until: int | None = None) -> list[Checkpoint]:
        await asyncio.sleep(0)
        with self._db.lock:
            stored = dict(self._db.checkpoints.get(cluster, {}))
        return [stored[k] for k in sorted(stored) if until is None or k[0] <= until]

    # ------------------------------------------------------------------ outbox and offsets

    async def outbox_batch(self, limit: int = 500) -> list[OutboxItem]:
        """Unsent rows in id order (a cluster's rows are in position order)."""
        await asyncio.sleep(0)
        with self._db.lock:
            rows = list(itertools.islice(self._db.outbox.items(), max(limit, 0)))
        return [OutboxItem(id=i, topic=topic, key=key, value=value, headers=list(headers),
                           cluster=cluster, position=position)
                for i, (topic, key, value, headers, cluster, position) in rows]

    async def outbox_done(self, ids: Sequence[int]) -> None:
        """Delete sent rows."""
        await asyncio.sleep(0)
        with self._db.lock:
            for i in ids:
                self._db.outbox.pop(i, None)

    async def stored_offsets(self, group: str, topic: str) -> dict[int, int]:
        await asyncio.sleep(0)
        with self._db.lock:
            return {p: o for (g, t, p), o in self._db.offsets.items() if g == group and t == topic}

    # ------------------------------------------------------------------ health

    async def ping(self) -> bool:
        return True

    async def schema_is_current(self) -> bool:
        return True  # no schema to migrate

    async def close(self) -> None:
        """Nothing to release; the data stays (a named database: for the next store on it)."""

    def row_counts(self) -> dict[str, int]:
        """Rows per table, named as the SQL tables (tests: "nothing was written")."""
        db = self._db
        with db.lock:
            return {"events": sum(len(rows) for rows in db.events.values()), "clusters": len(db.heads),
                    "idempotency": len(db.idempotency), "outbox": len(db.outbox),
                    "consumer_offsets": len(db.offsets),
                    "checkpoints": sum(len(c) for c in db.checkpoints.values())}
