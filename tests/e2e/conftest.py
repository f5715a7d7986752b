"""End-to-end tests: the real app (service.bootstrap.build_app) on a real PostgreSQL database.

- `pg_url`: one database per test session, uniquely named (gp_e2e_<pid>_<hex>), created and
  dropped with service.store.testing.temporary_postgres_database, migrated with upgrade().
- `client`: a litestar TestClient over build_app(Settings(database_url=pg_url)), entered as a
  context manager, so the app's lifespan (migrations at start, store closed at shutdown) runs.
  The app runs in the client's portal thread with its own event loop; tests are plain functions
  and use threads when they need concurrent requests (the portal serves them concurrently).
- `cluster`: a cluster name of its own for each test, so tests share the database but never
  a stream.
Work that must touch the database directly (tampering with a row, deleting snapshots) goes
through helpers.run_sql (asyncpg, in a worker thread).
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from litestar.testing import TestClient

from service.bootstrap import build_app
from service.config import Settings
from service.store.migrate import upgrade
from service.store.testing import temporary_postgres_database


@pytest_asyncio.fixture(scope="session")
async def pg_url() -> AsyncIterator[str]:
    async with temporary_postgres_database("gp_e2e") as url:
        await upgrade(url)
        yield url


def open_client(url: str, **settings: object) -> TestClient:
    """A TestClient over a freshly built app; use it as a context manager (runs the lifespan)."""
    return TestClient(build_app(Settings(database_url=url, **settings)))  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def client(pg_url: str) -> Iterator[TestClient]:
    with open_client(pg_url) as c:
        yield c


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> str:
    """A cluster name unique to this test (a valid cluster name: [a-z0-9-], at most 63)."""
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    return f"{slug}-{hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:8]}"
