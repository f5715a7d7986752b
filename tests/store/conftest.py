"""Fixtures for the event store conformance suite.

`store` is parametrized: every test runs against PostgreSQL and SQLite.
- PostgreSQL: one database per test session, uniquely named (gp_test_<pid>_<hex>), created on
  127.0.0.1:5432 (see service.store.testing), migrated with upgrade(), dropped at the end;
  its tables are truncated before each test.
- SQLite: a fresh migrated file under tmp_path per test.
"""
from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
import sqlalchemy as sa

from service.store import SqlEventStore, open_store
from service.store.migrate import upgrade
from service.store.schema import ALL_TABLES
from service.store.testing import temporary_postgres_database


@pytest_asyncio.fixture(scope="session")
async def pg_database_url() -> AsyncIterator[str]:
    async with temporary_postgres_database() as url:
        await upgrade(url)
        yield url


@pytest.fixture(params=["postgresql", "sqlite"])
def backend_url(request: pytest.FixtureRequest, tmp_path) -> tuple[str, str]:
    # A sync fixture, so that the session database is only created when a PostgreSQL
    # variant runs (getfixturevalue of an async fixture needs no running loop).
    if request.param == "postgresql":
        return "postgresql", request.getfixturevalue("pg_database_url")
    return "sqlite", f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"


@pytest_asyncio.fixture
async def store_url(backend_url: tuple[str, str]) -> str:
    backend, url = backend_url
    if backend == "sqlite":
        await upgrade(url)
        return url
    store = open_store(url)
    try:
        async with store.engine.begin() as conn:
            await conn.execute(sa.text(f"TRUNCATE {', '.join(ALL_TABLES)} RESTART IDENTITY"))
    finally:
        await store.close()
    return url


@pytest_asyncio.fixture
async def store(store_url: str) -> AsyncIterator[SqlEventStore]:
    s = open_store(store_url)
    yield s
    await s.close()


@pytest_asyncio.fixture
async def other_store(store_url: str) -> AsyncIterator[SqlEventStore]:
    """A second store on the same database: its own engine and connections."""
    s = open_store(store_url)
    yield s
    await s.close()
