"""Schema migrations: Alembic, run programmatically (what `gangplank migrate` calls).

    await upgrade(url)            # bring the schema to head (idempotent)
    upgrade_sync(url)             # same, for code without a running event loop
    await schema_is_current(url)  # is the database at the script head?

An in-memory store (memory://) has no schema: upgrade() does nothing, schema_is_current() is True.
"""
from __future__ import annotations

import asyncio
import os
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection

from .engine import make_engine, normalize_url
from .memory import is_memory_url

#: the migrations ship inside the package (service/store/migrations/, package data), so `gangplank
#: migrate` works from any folder after `pip install`; GANGPLANK_MIGRATIONS_DIR overrides it.
MIGRATIONS_DIR = Path(os.environ.get("GANGPLANK_MIGRATIONS_DIR") or Path(__file__).resolve().parent / "migrations")

# Serialises concurrent `upgrade()` calls from several replicas on PostgreSQL.
_PG_MIGRATION_LOCK = 0x6770_6D69_6772  # "gpmigr"


def alembic_config() -> Config:
    ini = MIGRATIONS_DIR / "alembic.ini"
    cfg = Config(str(ini)) if ini.exists() else Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


def head_revisions() -> set[str]:
    return set(ScriptDirectory.from_config(alembic_config()).get_heads())


def _current_revisions(connection: Connection) -> set[str]:
    return set(MigrationContext.configure(connection).get_current_heads())


async def current_revisions(conn: AsyncConnection) -> set[str]:
    """The revisions recorded in the database (empty when never migrated)."""
    return await conn.run_sync(_current_revisions)


async def is_current(conn: AsyncConnection) -> bool:
    return await current_revisions(conn) == head_revisions()


def _run_upgrade(connection: Connection, cfg: Config, revision: str) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
    cfg.attributes["connection"] = connection
    command.upgrade(cfg, revision)


async def upgrade(url: str, revision: str = "head") -> None:
    """Apply pending migrations (all of them by default) in one transaction. A database that
    cannot be used is a StoreError (StoreUnavailable when it cannot be reached)."""
    if is_memory_url(url):
        return  # no schema
    from .sql_errors import translate

    try:
        await _upgrade(normalize_url(url), revision)
    except Exception as exc:
        translated = translate(exc)
        if translated is exc:
            raise
        raise translated from exc


async def _upgrade(url: str, revision: str) -> None:
    if url.startswith("sqlite"):
        # concurrent upgrades queue on BEGIN IMMEDIATE, but one that finds the file busy in a
        # step the busy timeout does not cover (switching it to WAL) answers "database is
        # locked": wait and retry
        for attempt in range(20):
            try:
                return await _upgrade_once(url, revision)
            except OperationalError as exc:
                if "locked" not in str(exc) or attempt == 19:
                    raise
                await asyncio.sleep(0.1 * (attempt + 1))
    await _upgrade_once(url, revision)


async def _upgrade_once(url: str, revision: str) -> None:
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            # SQLite: BEGIN IMMEDIATE, so that concurrent upgrades queue instead of failing.
            await conn.execution_options(gp_write=True)
            async with conn.begin():
                await conn.run_sync(_run_upgrade, alembic_config(), revision)
    finally:
        await engine.dispose()


def upgrade_sync(url: str, revision: str = "head") -> None:
    """upgrade() for callers without a running event loop (e.g. a CLI command)."""
    asyncio.run(upgrade(url, revision))


async def schema_is_current(url: str) -> bool:
    if is_memory_url(url):
        return True
    engine = make_engine(normalize_url(url))
    try:
        async with engine.connect() as conn:
            return await is_current(conn)
    finally:
        await engine.dispose()
