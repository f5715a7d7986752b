"""Fixtures for the event store conformance suite.

`store` is parametrized: every test runs against PostgreSQL, SQLite and the in-memory store
(the same suite for every backend, as the eventsourcing library tests its recorders).
- PostgreSQL: one database per test session, uniquely named (gp_test_<pid>_<hex>), created on
  127.0.0.1:5432 (see service.store.testing), migrated with upgrade(), dropped at the end;
  its tables are truncated before each test.
- SQLite: a fresh migrated file under tmp_path per test.
- memory: a fresh named in-process database per test (memory://store-test-<hex>), discarded after.

Tests marked `sql_only` check what only a SQL backend has (rows tampered with through SQL,
the head-hash cache, migrations): they run on PostgreSQL and SQLite and are deselected for
the in-memory store.
"""
from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
import sqlalchemy as sa

from service.store import EventStore, PostgresEventStore, open_store
from service.store.memory import discard_database
from service.store.migrate import upgrade
from service.store.schema import ALL_TABLES
from service.store.testing import temporary_postgres_database

BACKENDS = ["postgresql", "sqlite", "memory"]
SQL_ONLY = "sql_only"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{SQL_ONLY}: a store test of SQL-specific behaviour (not run on memory://)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, drop = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_memory = callspec is not None and callspec.params.get("backend_url") == "memory"
        (drop if on_memory and item.get_closest_marker(SQL_ONLY) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest_asyncio.fixture(scope="session")
async def pg_database_url() -> AsyncIterator[str]:
    async with temporary_postgres_database() as url:
        await upgrade(url)
        yield url


@pytest.fixture(params=BACKENDS)
def backend_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[tuple[str, str]]:
    # A sync fixture, so that the session database is only created when a PostgreSQL
    # variant runs (getfixturevalue of an async fixture needs no running loop).
    if request.param == "postgresql":
        yield "postgresql", request.getfixturevalue("pg_database_url")
    elif request.param == "sqlite":
        yield "sqlite", f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    else:
        name = f"store-test-{secrets.token_hex(4)}"
        yield "memory", f"memory://{name}"
        discard_database(name)


@pytest_asyncio.fixture
async def store_url(backend_url: tuple[str, str]) -> str:
    backend, url = backend_url
    if backend != "postgresql":
        await upgrade(url)  # nothing to do for memory://
        return url
    store = PostgresEventStore(url)
    try:
        async with store.engine.begin() as conn:
            await conn.execute(sa.text(f"TRUNCATE {', '.join(ALL_TABLES)} RESTART IDENTITY"))
    finally:
        await store.close()
    return url


@pytest_asyncio.fixture
async def store(store_url: str) -> AsyncIterator[EventStore]:
    s = open_store(store_url)
    yield s
    await s.close()


@pytest_asyncio.fixture
async def other_store(store_url: str) -> AsyncIterator[EventStore]:
    """A second store on the same database: its own engine and connections (memory: the same
    named database)."""
    s = open_store(store_url)
    yield s
    await s.close()

