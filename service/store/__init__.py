"""The event store: `open_store(url)` gives the SQL implementation of `EventStore`.

    from service.store import open_store
    from service.store.migrate import upgrade

    await upgrade(url)          # schema to head (Alembic)
    store = open_store(url)     # postgresql+asyncpg://... or sqlite+aiosqlite:///file.db
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
    StoreUnavailable,
    VerifyResult,
    canonical_json,
    chain_hash,
)
from .sql import SqlEventStore, make_engine, normalize_url


def open_store(url: str) -> SqlEventStore:
    """The store for a SQLAlchemy URL (driver-less postgresql:// and sqlite:// are accepted)."""
    return SqlEventStore(url)


__all__ = [
    "GENESIS_HASH", "ConcurrencyConflict", "ConsumedOffset", "DeadLetter", "EventStore",
    "IdempotencyKeyTaken", "IdempotencyRecord", "NewEvent", "OutboxItem", "Snapshot",
    "SqlEventStore", "StoredEvent", "StoreUnavailable", "VerifyResult", "canonical_json", "chain_hash",
    "make_engine", "normalize_url", "open_store",
]
