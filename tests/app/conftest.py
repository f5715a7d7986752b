"""The application layer (service/app/) over a real event store.

`store_url`: a fresh migrated SQLite file per test (the in-memory store, once merged, serves the
same purpose: these tests only need an EventStore). `make_app(url)` builds a Gangplank as
service/bootstrap.py does; `CountingStore` wraps a store to count and intercept its appends.
"""
from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest_asyncio

from service.api.answers import HTTP_POLICY
from service.app.commands import Command, Origin, Policy, Result, Submission
from service.app.service import Gangplank
from service.store import open_store
from service.store.migrate import upgrade

C = "prod"
ORIGIN = Origin(source="cli", actor="test", received_at="2026-12-01T00:00:00.000000Z")


def node(name: str, cpu: str = "4") -> Command:
    return Command(C, "UpsertNode", name, body={"allocatable": {"cpu": cpu, "pods": "110"}})


def workload(name: str, cpu: str = "1", count: int = 1, namespace: str = "ns") -> Command:
    return Command(C, "SubmitWorkload", name, namespace, {
        "name": name, "podGroups": [{"name": "g", "pods": [{"name": "p", "count": count, "requests": {"cpu": cpu}}]}]})


def submission(command: Command, key: str | None = None, fingerprint: str | None = None) -> Submission:
    return Submission(command, ORIGIN, key, fingerprint if fingerprint is not None else (key and f"fp-{key}"))


async def execute(app: Gangplank, command: Command, policy: Policy = HTTP_POLICY, **kwargs: Any) -> Result:
    return await app.commands.execute(submission(command, **kwargs), policy)


class CountingStore:
    """A store whose appends are counted, and may be intercepted: `before_append(args)` runs
    before each append reaches the store (to fail it, or to let another writer in first)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.appends: list[int] = []  # events per append
        self.before_append: Callable[[tuple[Any, ...]], Awaitable[None]] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def append(self, cluster: str, expected: int, events: Any, **kwargs: Any) -> Any:
        if self.before_append is not None:
            await self.before_append((cluster, expected, events))
        self.appends.append(len(events))
        return await self._store.append(cluster, expected, events, **kwargs)


@pytest_asyncio.fixture
async def store_url(tmp_path: Any) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path / 'app.db'}"
    await upgrade(url)
    return url


@pytest_asyncio.fixture
async def app(store_url: str) -> AsyncIterator[Gangplank]:
    """A Gangplank over a CountingStore (its `store` attribute), snapshots every 1,000 events."""
    application = Gangplank(CountingStore(open_store(store_url)))
    yield application
    await application.close()
