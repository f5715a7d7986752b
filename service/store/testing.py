"""Throw-away PostgreSQL databases for tests and benchmarks.

    async with temporary_postgres_database() as url:   # postgresql+asyncpg://.../gp_test_<pid>_<hex>
        await upgrade(url)
        ...

The server is GANGPLANK_TEST_PG_ADMIN_URL (a libpq URL of a role that may CREATE DATABASE,
connected to an existing database), else postgres@127.0.0.1:5432, else root@127.0.0.1:5432.
"""
from __future__ import annotations

import os
import re
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

DEFAULT_ADMIN_URLS = ("postgresql://postgres@127.0.0.1:5432/postgres",
                      "postgresql://root@127.0.0.1:5432/postgres")


async def _admin_connection() -> tuple[asyncpg.Connection, str]:
    candidates = [os.environ["GANGPLANK_TEST_PG_ADMIN_URL"]] if os.environ.get("GANGPLANK_TEST_PG_ADMIN_URL") \
        else list(DEFAULT_ADMIN_URLS)
    errors = []
    for url in candidates:
        try:
            conn = await asyncpg.connect(url, timeout=5)
        except Exception as exc:  # noqa: BLE001 - try the next candidate
            errors.append(f"{url}: {exc!r}")
            continue
        can_create = await conn.fetchval(
            "SELECT rolsuper OR rolcreatedb FROM pg_roles WHERE rolname = current_user")
        if can_create:
            return conn, url
        errors.append(f"{url}: role may not create databases")
        await conn.close()
    raise RuntimeError("no PostgreSQL server for tests (start it with "
                       "`pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`): "
                       + "; ".join(errors))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def _drop_stale(admin: asyncpg.Connection, prefix: str) -> None:
    """Drop databases this helper made for processes that are gone (a killed test run)."""
    pattern = re.compile(rf"^{re.escape(prefix)}_(\d+)_[0-9a-f]{{8}}$")
    for (name,) in await admin.fetch("SELECT datname FROM pg_database WHERE datname LIKE $1", prefix + "\\_%"):
        match = pattern.match(name)
        if match and not _pid_alive(int(match.group(1))):
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _replace_database(url: str, name: str) -> str:
    base = url.rsplit("/", 1)[0]
    return base.replace("postgresql://", "postgresql+asyncpg://", 1) + "/" + name


@asynccontextmanager
async def temporary_postgres_database(prefix: str = "gp_test") -> AsyncIterator[str]:
    """Create a uniquely named database, yield its SQLAlchemy URL, drop it afterwards."""
    admin, admin_url = await _admin_connection()
    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(4)}"
    try:
        await _drop_stale(admin, prefix)
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield _replace_database(admin_url, name)
    finally:
        admin, _ = await _admin_connection()
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()
