"""What every backend of the event store does alike, written once: the canonical texts of an
append and their hash chain (an `AppendPlan`), the StoredEvents read back, the outbox envelope,
the verify loop (`ChainCheck`), `stream()`, and the writer's turn of the backends that have one
writer process (`staged_turn`: SQLite and memory; PostgreSQL's turn is service/store/turn.py).

A writer's turn means the same on every backend (EventStore.exclusive): while one turn on a
cluster runs, no other turn on it does; start() reads what was committed before the turn; the
turn's appends are committed when the block ends without an exception, and nothing of them is
recorded when it ends with one; a writer outside turns makes the turn's append, or its end,
raise ConcurrencyConflict.
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from service.clock import utc_now

from .base import (
    GENESIS_HASH,
    NOT_ECHOED,
    ConcurrencyConflict,
    ConsumedOffset,
    DeadLetter,
    IdempotencyKeyTaken,
    IdempotencyRecord,
    NewEvent,
    StoredEvent,
    TurnStart,
    VerifyResult,
    canonical_record_json,
)
from .codec import checked_hash, envelope_json, hash_input, loads, sha256_hex, tail_fault

# (type, schema_version, data JSON, metadata JSON): the canonical texts that are stored and hashed
Prepared = tuple[str, int, str, str]


class ChainRow(NamedTuple):
    """An events row: the canonical texts that were hashed, as every backend keeps them."""
    position: int
    type: str
    schema_version: int
    data: str
    metadata: str
    recorded_at: str
    prev_hash: str
    hash: str


def prepare(events: Sequence[NewEvent]) -> list[Prepared]:
    """Serialised before any lock: the canonical texts that are stored and hashed."""
    return [(e.type, int(e.schema_version), canonical_record_json(e.data), canonical_record_json(e.metadata))
            for e in events]


def chain(cluster: str, expected: int, prev: str, prepared: Sequence[Prepared], recorded_at: str) -> list[ChainRow]:
    """The rows of an append after position `expected` whose head hash is `prev`."""
    rows = []
    for position, (type_, version, data_json, meta_json) in enumerate(prepared, start=expected + 1):
        h = sha256_hex(prev, hash_input(cluster, position, type_, version, data_json, meta_json, recorded_at))
        rows.append(ChainRow(position, type_, version, data_json, meta_json, recorded_at, prev, h))
        prev = h
    return rows


def stored_event(cluster: str, row: ChainRow, echo: bool = True) -> StoredEvent:
    return StoredEvent(cluster, row.position, row.type, row.schema_version,
                       loads(row.data) if echo else NOT_ECHOED, loads(row.metadata) if echo else NOT_ECHOED,
                       row.recorded_at, row.prev_hash, row.hash)


def outbox_value(cluster: str, row: ChainRow) -> bytes:
    """An event's outbox row value: the canonical JSON of its envelope."""
    return envelope_json(cluster, row.position, row.type, row.schema_version, row.data, row.metadata,
                         row.recorded_at, row.prev_hash, row.hash).encode("utf-8")


def check_keys_once(records: Sequence[IdempotencyRecord]) -> None:
    if len({r.key for r in records}) != len(records):
        raise IdempotencyKeyTaken("the same idempotency key twice in one append")


@dataclass(frozen=True)
class AppendPlan:
    """Everything one append writes, decided before it is written: the backend checks that the
    cluster's head is still (expected, prev) and the keys are free, then writes it all."""
    cluster: str
    expected: int
    prev: str
    rows: list[ChainRow]
    idempotency: Sequence[IdempotencyRecord] = ()
    offsets: Sequence[ConsumedOffset] = ()
    dead_letters: Sequence[DeadLetter] = ()
    outbox_topic: str | None = None

    @property
    def last(self) -> int:
        return self.rows[-1].position if self.rows else self.expected

    def stored(self, echo: bool = True) -> list[StoredEvent]:
        return [stored_event(self.cluster, r, echo) for r in self.rows]


def plan(cluster: str, expected: int, prev: str, prepared: Sequence[Prepared], *,
         idempotency: Sequence[IdempotencyRecord] = (), offsets: Sequence[ConsumedOffset] = (),
         dead_letters: Sequence[DeadLetter] = (), outbox_topic: str | None = None) -> AppendPlan:
    rows = chain(cluster, expected, prev, prepared, utc_now()) if prepared else []
    return AppendPlan(cluster, expected, prev, rows, idempotency, offsets, dead_letters, outbox_topic)


class ChainCheck:
    """The verify loop: recompute the hash chain from genesis over rows fed in position order."""

    def __init__(self, cluster: str, until: int | None) -> None:
        self.cluster, self.until = cluster, until
        self.prev, self.count = GENESIS_HASH, 0
        self.bad: int | None = None

    def feed(self, rows: Iterable[ChainRow]) -> bool:
        """Check these rows; False once the check has stopped (a bad position, or past `until`)."""
        for r in rows:
            if self.until is not None and r.position > self.until:
                return False
            if r.position != self.count + 1 or r.prev_hash != self.prev:
                self.bad = self.count + 1
                return False
            h = checked_hash(self.prev, self.cluster, r.position, r.type, r.schema_version, r.data, r.metadata,
                             r.recorded_at, r.hash)
            if h is None:
                self.bad = r.position
                return False
            self.prev, self.count = h, self.count + 1
        return True

    def result(self, last_recorded: int, recorded_head: str | None) -> VerifyResult:
        """`last_recorded` and `recorded_head`: the cluster's row (its last position and hash)."""
        bad = self.bad
        if bad is None:
            bad = tail_fault(self.count, last_recorded, self.until, recorded_head, self.prev)
        return VerifyResult(ok=bad is None, events=self.count, head=self.prev, first_bad_position=bad)


class _Readable(Protocol):
    async def read(self, cluster: str, after: int = 0, limit: int | None = None,
                   until: int | None = None) -> list[StoredEvent]: ...


class RecordingStore:
    """The base of every backend's store: what they share beyond the port."""

    async def stream(self: _Readable, cluster: str, after: int = 0, until: int | None = None,
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


class StagingStore(Protocol):
    """What a staged turn needs from its store (SQLite, memory)."""

    async def head(self, cluster: str) -> tuple[int, str]: ...

    async def head_and_records(self, cluster: str, keys: Sequence[str]
                               ) -> tuple[int, str, dict[str, IdempotencyRecord]]:
        """The cluster's last position and head hash, and the stored records of these keys."""

    async def read_data(self, cluster: str, after: int = 0, limit: int | None = None,
                        until: int | None = None, *, decode: bool = True) -> list[tuple[int, str, int, Any]]: ...

    async def write_plans(self, plans: Sequence[AppendPlan]) -> None:
        """In one transaction: each plan, if the cluster's head is still its (expected, prev)
        and its keys are free (else ConcurrencyConflict or IdempotencyKeyTaken, nothing written)."""


class StagedTurn:
    """ClusterTurn of a backend with one writer process: appends are planned (checked and hashed)
    when made, and written together when the turn ends."""

    def __init__(self, store: StagingStore, cluster: str) -> None:
        self.store, self.cluster = store, cluster
        self.plans: list[AppendPlan] = []
        self.head: tuple[int, str] | None = None  # as start() read it: the first append chains to it

    async def start(self, keys: Sequence[str], after: int, limit: int) -> TurnStart:
        last, head_hash, records = await self.store.head_and_records(self.cluster, keys)
        self.head = (last, head_hash)
        missed = await self.store.read_data(self.cluster, after, limit) if last > after else []
        return TurnStart(last, records, missed)

    async def read_data(self, after: int = 0, limit: int | None = None, until: int | None = None, *,
                        decode: bool = True) -> list[tuple[int, str, int, Any]]:
        return await self.store.read_data(self.cluster, after, limit, until, decode=decode)

    async def append(self, expected_position: int, events: Sequence[NewEvent], *,
                     idempotency: Sequence[IdempotencyRecord] = (), offsets: Sequence[ConsumedOffset] = (),
                     dead_letters: Sequence[DeadLetter] = (), outbox_topic: str | None = None,
                     echo: bool = True) -> list[StoredEvent]:
        if expected_position < 0:
            raise ValueError("expected_position must be >= 0")
        prepared = prepare(events)
        check_keys_once(idempotency)
        staged = {r.key for p in self.plans for r in p.idempotency}
        if any(r.key in staged for r in idempotency):
            raise IdempotencyKeyTaken(", ".join(sorted(r.key for r in idempotency if r.key in staged)))
        if self.plans:
            last, prev = self.plans[-1].last, (self.plans[-1].rows[-1].hash if self.plans[-1].rows
                                               else self.plans[-1].prev)
        elif self.head is not None and self.head[0] == expected_position:
            last, prev = self.head  # re-checked when the turn writes
        else:
            last, prev = await self.store.head(self.cluster)
        if prepared and last != expected_position:
            raise ConcurrencyConflict(self.cluster, expected_position, last)
        planned = plan(self.cluster, expected_position if prepared else last, prev, prepared,
                       idempotency=idempotency, offsets=offsets, dead_letters=dead_letters,
                       outbox_topic=outbox_topic)
        self.plans.append(planned)
        return planned.stored(echo)


@asynccontextmanager
async def staged_turn(store: StagingStore, cluster: str, lock: asyncio.Lock) -> AsyncIterator[StagedTurn]:
    """EventStore.exclusive for a backend with one writer process: `lock` is the cluster's."""
    async with lock:
        turn = StagedTurn(store, cluster)
        yield turn
        if turn.plans:
            await store.write_plans(turn.plans)
