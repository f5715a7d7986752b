"""The application layer (service/app/) over the in-memory event store (service/store/memory.py,
which passes the same conformance suite as SQLite and PostgreSQL).

`store_url`: a fresh named in-memory database per test (`memory://<name>`: every store opened on
it sees the same events, as two writers on one database do); `app`: a Gangplank on it, whose store
is a `CountingStore`, which counts and may intercept appends.
"""
from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import pytest_asyncio

from service.api.answers import HTTP_POLICY
from service.app.commands import Command, Origin, Policy, Result, Submission
from service.app.service import Gangplank
from service.store import open_store
from service.store.memory import discard_database

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

    @asynccontextmanager
    async def exclusive(self, cluster: str) -> AsyncIterator[Any]:
        """The store's own turn, whose appends with events are counted and intercepted too."""
        async with self._store.exclusive(cluster) as turn:
            yield _CountedTurn(self, turn)

    async def append(self, cluster: str, expected: int, events: Any, **kwargs: Any) -> Any:
        if self.before_append is not None:
            await self.before_append((cluster, expected, events))
        self.appends.append(len(events))
        return await self._store.append(cluster, expected, events, **kwargs)


class _CountedTurn:
    def __init__(self, counting: CountingStore, turn: Any) -> None:
        self._counting, self._turn = counting, turn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._turn, name)

    async def append(self, expected: int, events: Any, **kwargs: Any) -> Any:
        if events:
            if self._counting.before_append is not None:
                await self._counting.before_append((self._turn.cluster, expected, events))
            self._counting.appends.append(len(events))
        return await self._turn.append(expected, events, **kwargs)


@pytest.fixture
def store_url() -> Iterator[str]:
    name = f"app-{uuid.uuid4().hex}"
    yield f"memory://{name}"
    discard_database(name)


@pytest_asyncio.fixture
async def app(store_url: str) -> AsyncIterator[Gangplank]:
    """A Gangplank over a CountingStore (its `store` attribute), snapshots every 1,000 events."""
    application = Gangplank(CountingStore(open_store(store_url)))
    yield application
    await application.close()
