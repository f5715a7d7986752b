"""The event store port: what the application service needs from any backend.

Three backends implement `EventStore`, each in a module of its own: PostgreSQL
(service/store/postgres.py), SQLite (service/store/sqlite.py) and the in-memory store
(service/store/memory.py), over a shared base (service/store/recorded.py; the SQL ones also
over service/store/sql.py); one conformance suite (tests/store/) runs against each.
"""
from __future__ import annotations

import contextvars
import hashlib
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec

GENESIS_HASH = "0" * 64

# StoredEvent.data and .metadata after append(echo=False): None (the caller holds them
# already). Typed Any so that StoredEvent keeps the dict type every reader gets.
NOT_ECHOED: Any = None


# One encoder for every call: json.dumps(value, sort_keys=True, separators=(",", ":"),
# ensure_ascii=True) builds a new JSONEncoder each time; the output is the same.
_CANONICAL_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def canonical_json(value: Any) -> str:
    """events.md: sorted keys, no insignificant whitespace, ASCII only (the same text as
    json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True))."""
    return _CANONICAL_ENCODER.encode(value)


_MSGSPEC_SORTED = msgspec.json.Encoder(order="sorted")


def canonical_record_json(value: Any) -> str:
    """canonical_json() of what Gangplank records (event data and metadata, stored answers), ~8x
    faster. For JSON values without floats msgspec writes the same text as json.dumps, except for
    non-ASCII and DEL (json escapes them): those take the json path, as does anything msgspec
    refuses. Floats never reach a record: validation rejects them everywhere (a 422) and the
    decider makes none. /audit/verify re-encodes stored data with canonical_json() itself, so a
    difference would show as a broken chain."""
    try:
        out = _MSGSPEC_SORTED.encode(value)
    except (TypeError, ValueError, OverflowError):
        return canonical_json(value)
    if out.isascii() and b"\x7f" not in out:
        return out.decode("ascii")
    return canonical_json(value)


def chain_hash(prev_hash: str, envelope_without_hashes: dict[str, Any]) -> str:
    return hashlib.sha256((prev_hash + canonical_json(envelope_without_hashes)).encode("utf-8")).hexdigest()


class ConcurrencyConflict(Exception):
    """The cluster's last position is not the one the append expected."""

    def __init__(self, cluster: str, expected: int, actual: int | None = None):
        super().__init__(f"cluster {cluster!r}: expected position {expected}, found {actual}")
        self.cluster, self.expected, self.actual = cluster, expected, actual


class IdempotencyKeyTaken(Exception):
    """An idempotency key was stored concurrently by another writer."""


class StoreError(Exception):
    """The store failed: its driver's error (SQLAlchemy, asyncpg, sqlite3), translated, so that
    nothing outside service/store/ knows the driver. The message keeps the driver's text."""


class StoreUnavailable(StoreError):
    """The database cannot be reached right now (down, restarting, connection lost, or
    SQLite locked past its busy timeout). Transient: retry with backoff. Whether a failed
    append was committed is unknown when the connection broke mid-statement; retrying with
    the same expected position is safe (it either appends or raises ConcurrencyConflict)."""


class NotOwner(Exception):
    """This replica does not own the cluster (or its lease has run out): the request goes to the
    owner (docs/replicas.md). Raised before anything of the turn is recorded."""

    def __init__(self, cluster: str) -> None:
        super().__init__(f"cluster {cluster!r} is not owned by this replica")
        self.cluster = cluster


class Fenced(NotOwner):
    """The append's own transaction found another owner or epoch: refused, nothing recorded."""


# A turn taken where this is True skips the owner's fence: a writer outside ownership (the Kafka
# consumer for a cluster another replica owns, until runs are handed to owners; docs/replicas.md).
UNFENCED: contextvars.ContextVar[bool] = contextvars.ContextVar("gangplank_unfenced", default=False)


class Fencing(Protocol):
    """What a writer's turn checks on PostgreSQL with replicas (service/ownership.py implements it)."""

    def fence(self, cluster: str) -> tuple[str, str, int] | None:
        """(replica id, incarnation, epoch) this replica holds the cluster with, None when it may not
        decide for it now (not its owner, handing it over, or its lease ran out)."""

    def fenced(self, cluster: str) -> None:
        """The database refused a turn: the cluster has another owner or epoch."""


@dataclass(frozen=True)
class NewEvent:
    type: str
    data: dict[str, Any]
    metadata: dict[str, Any]
    schema_version: int = 1


@dataclass(frozen=True)
class StoredEvent:
    cluster: str
    position: int
    type: str
    schema_version: int
    data: dict[str, Any]
    metadata: dict[str, Any]
    recorded_at: str  # RFC 3339, microseconds, "Z"
    prev_hash: str
    hash: str

    def envelope(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster, "position": self.position, "type": self.type,
            "schemaVersion": self.schema_version, "data": self.data, "metadata": self.metadata,
            "recordedAt": self.recorded_at, "prevHash": self.prev_hash, "hash": self.hash,
        }


@dataclass(frozen=True)
class IdempotencyRecord:
    """A stored answer: a retry with the same key and fingerprint gets it back."""
    key: str
    fingerprint: str  # sha256 of method, path and body (HTTP) or of the command (Kafka)
    status: int
    body: dict[str, Any]
    cluster: str | None = None
    position: int | None = None


@dataclass(frozen=True)
class ConsumedOffset:
    """The next offset to read, stored in the same transaction as the effect."""
    group: str
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class DeadLetter:
    topic: str
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]] = field(default_factory=list)


@dataclass(frozen=True)
class OutboxItem:
    id: int
    topic: str
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]
    cluster: str | None
    position: int | None


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    events: int
    head: str
    first_bad_position: int | None = None


@dataclass(frozen=True)
class Checkpoint:
    """A signed chain head (audit.md, *Signed checkpoints*): stored beside the stream, never an event."""
    cluster: str
    position: int
    hash: str
    signed_at: str
    key_id: str
    signature: str

    def as_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "position": self.position, "hash": self.hash,
                "signedAt": self.signed_at, "keyId": self.key_id, "signature": self.signature}

    def record_json(self) -> str:
        """The record on the decision topic and the line of an export: its fields and
        "type": "ChainCheckpoint", as canonical JSON."""
        return canonical_json({"type": "ChainCheckpoint", **self.as_json()})


@dataclass(frozen=True)
class Snapshot:
    cluster: str
    position: int
    version: str  # code version of the state format; a mismatch means "ignore"
    blob: bytes


@dataclass(frozen=True)
class TurnStart:
    """What a writer's turn reads first (ClusterTurn.start), in one round trip where it can."""
    last: int  # the cluster's last position
    records: dict[str, IdempotencyRecord]  # the stored records of the keys asked for
    missed: list[tuple[int, str, int, Any]]  # read_data() rows after `after`: at most `limit`, from after + 1


class ClusterTurn(Protocol):
    """One writer's turn on one cluster (EventStore.exclusive): what deciding a batch reads and
    writes, all inside the turn. The same on every backend: its appends (with events or
    without) are committed when the turn ends without an exception, and nothing of them is
    recorded when it ends with one."""

    async def start(self, keys: Sequence[str], after: int, limit: int) -> TurnStart:
        """The head, the keys' records, and the events after `after` (a writer's cached
        position): everything committed before the turn began."""

    async def read_data(self, after: int = 0, limit: int | None = None, until: int | None = None, *,
                        decode: bool = True) -> list[tuple[int, str, int, Any]]:
        """As EventStore.read_data, for the turn's cluster."""

    async def append(self, expected_position: int, events: Sequence[NewEvent], *,
                     idempotency: Sequence[IdempotencyRecord] = (), offsets: Sequence[ConsumedOffset] = (),
                     dead_letters: Sequence[DeadLetter] = (), outbox_topic: str | None = None,
                     echo: bool = True) -> list[StoredEvent]:
        """As EventStore.append, for the turn's cluster: committed when the turn ends."""


class EventStore(Protocol):
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
        """Append in ONE transaction: the events (positions expected+1..), their hash
        chain, the idempotency records, consumed offsets, dead letters, and (when
        outbox_topic is set) one outbox row per event. Raises ConcurrencyConflict when
        the cluster's last position != expected_position (nothing written), and
        IdempotencyKeyTaken when a key already exists (nothing written). echo=False: the
        returned events carry data and metadata None (the caller holds them already)."""

    async def record_without_events(
        self,
        *,
        idempotency: Sequence[IdempotencyRecord] = (),
        offsets: Sequence[ConsumedOffset] = (),
        dead_letters: Sequence[DeadLetter] = (),
    ) -> None:
        """One transaction with no events (a dead letter and its offset, say)."""

    def exclusive(self, cluster: str) -> AbstractAsyncContextManager[ClusterTurn]:
        """A writer's turn on the cluster: while one turn on it runs, no other turn on it does
        (PostgreSQL: across processes, through an advisory lock that a killed process's session
        releases; SQLite and memory: in the store, whose process is the one writer). start()
        reads what was committed before the turn; the appends commit when the block ends without
        an exception and are not recorded otherwise. Appends outside turns still go through,
        checked as always by the expected position: a turn's append, or its end, can then raise
        ConcurrencyConflict (and nothing of the turn is recorded)."""

    async def read(self, cluster: str, after: int = 0, limit: int | None = None,
                   until: int | None = None) -> list[StoredEvent]: ...

    def stream(self, cluster: str, after: int = 0, until: int | None = None,
               chunk: int = 5_000) -> AsyncIterator[list[StoredEvent]]:
        """read() in chunks, for replaying long streams without holding them in memory."""
        ...

    async def read_data(self, cluster: str, after: int = 0, limit: int | None = None,
                        until: int | None = None, *, decode: bool = True) -> list[tuple[int, str, int, Any]]:
        """(position, type, schema_version, data) of the events read() gives (for folding);
        decode=False: data is the stored canonical JSON text."""

    async def last_position(self, cluster: str) -> int: ...

    async def clusters(self) -> list[tuple[str, int]]: ...

    async def get_idempotency(self, key: str) -> IdempotencyRecord | None: ...

    async def head_and_idempotency(self, cluster: str, keys: Sequence[str]
                                   ) -> tuple[int, dict[str, IdempotencyRecord]]:
        """The cluster's last position and the stored records of these keys, read together
        (on PostgreSQL one statement, so one snapshot): a command batch's one read."""

    async def verify(self, cluster: str, until: int | None = None) -> VerifyResult: ...

    async def save_snapshot(self, snapshot: Snapshot) -> None: ...

    async def latest_snapshot(self, cluster: str, version: str | Sequence[str],
                              at_or_before: int | None = None) -> Snapshot | None:
        """The latest of these versions at or before the position (earlier-listed wins ties)."""

    async def delete_snapshots(self, cluster: str | None = None) -> None: ...

    async def save_checkpoint(self, checkpoint: Checkpoint, *, outbox_topic: str | None = None) -> None:
        """Store a checkpoint (one per cluster, position and key; saving it again changes nothing) and,
        with `outbox_topic`, its record (`Checkpoint.record_json`, key = cluster) in the outbox, in
        one transaction."""

    async def checkpoints(self, cluster: str, until: int | None = None) -> list[Checkpoint]:
        """The cluster's checkpoints at or before `until`, by position (then key id)."""

    async def outbox_batch(self, limit: int = 500) -> list[OutboxItem]: ...

    async def outbox_done(self, ids: Sequence[int]) -> None: ...

    async def stored_offsets(self, group: str, topic: str) -> dict[int, int]: ...

    async def ping(self) -> bool: ...

    async def schema_is_current(self) -> bool: ...

    async def close(self) -> None: ...
