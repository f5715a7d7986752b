"""SQLAlchemy engines for the SQL store and migrations: the URL forms accepted, and the
connection set-up each database needs."""
from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

SQLITE_BUSY_TIMEOUT_MS = 30_000


def normalize_url(url: str) -> str:
    """Accept driver-less URLs too: postgresql:// -> postgresql+asyncpg://, sqlite:// -> sqlite+aiosqlite://."""
    for prefix, replacement in (("postgresql://", "postgresql+asyncpg://"),
                                ("postgres://", "postgresql+asyncpg://"),
                                ("sqlite://", "sqlite+aiosqlite://")):
        if url.startswith(prefix):
            return replacement + url[len(prefix):]
    return url


def make_engine(url: str) -> AsyncEngine:
    """An async engine set up for the store: SQLite gets WAL, a busy timeout, FULL sync, and
    explicit BEGIN handling (BEGIN IMMEDIATE for connections with execution option
    `gp_write=True`)."""
    url = normalize_url(url)
    if url.startswith("sqlite"):
        engine = create_async_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})

        @event.listens_for(engine.sync_engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            # Take BEGIN away from the sqlite3 module; the "begin" hook below emits it.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.close()

        @event.listens_for(engine.sync_engine, "begin")
        def _on_begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("gp_write") else "BEGIN")

        return engine
    if url.startswith("postgresql"):
        return create_async_engine(url, pool_size=10, max_overflow=20,
                                   connect_args={"server_settings": {"application_name": "gangplank"}})
    raise ValueError(f"unsupported database URL {url!r}: use postgresql+asyncpg:// or sqlite+aiosqlite://")
