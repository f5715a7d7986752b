"""The event store: `open_store(url)` gives the implementation of `EventStore` for a URL.

    from service.store import open_store
    from service.store.migrate import upgrade

    await upgrade(url)          # schema to head (Alembic; nothing to do for memory://)
    store = open_store(url)     # postgresql+asyncpg://..., sqlite+aiosqlite:///file.db,
                                # memory:// (private, empty) or memory://name (shared in-process)
"""
from __future__ import annotations

from .base import (
    GENESIS_HASH,
    ConcurrencyConflict,
    ConsumedOffset,
    DeadLetter,
    EventStore,
    IdempotencyKeyTaken,
    IdempotencyRecord,
    NewEvent,
    OutboxItem,
    Snapshot,
    StoredEvent,
    StoreError,
    StoreUnavailable,
    VerifyResult,
    canonical_json,
    chain_hash,
)
from .engine import make_engine, normalize_url
from .memory import MemoryEventStore, is_memory_url
from .postgres import PostgresEventStore
from .sql import SqlEventStore
from .sql_errors import translate
from .sqlite import SqliteEventStore


def open_store(url: str) -> EventStore:
    """The store for a URL: memory:// or memory://name (in-process, not durable, see
    service.store.memory), else a SQLAlchemy URL (driver-less postgresql:// and sqlite://
    are accepted); a URL that cannot be used is a StoreError."""
    if is_memory_url(url):
        return MemoryEventStore(url)
    try:
        if normalize_url(url).startswith("sqlite"):
            return SqliteEventStore(url)
        return PostgresEventStore(url)
    except Exception as exc:
        translated = translate(exc)
        if translated is exc:
            raise
        raise translated from exc


__all__ = [
    "GENESIS_HASH", "ConcurrencyConflict", "ConsumedOffset", "DeadLetter", "EventStore",
    "IdempotencyKeyTaken", "IdempotencyRecord", "MemoryEventStore", "NewEvent", "OutboxItem",
    "PostgresEventStore", "Snapshot", "SqlEventStore", "SqliteEventStore", "StoredEvent", "StoreError",
    "StoreUnavailable", "VerifyResult", "canonical_json", "chain_hash",
    "is_memory_url", "make_engine", "normalize_url", "open_store",
]
