"""The fence in the append's own transaction (docs/replicas.md, *Fencing*), on PostgreSQL in one
process: two memberships, one store per replica. A turn with a stale epoch is refused whole; an owner
frozen inside its turn holds the cluster no longer than its lease; assignments spread by load."""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
import pytest_asyncio

from service.store.base import UNFENCED, Fenced, IdempotencyRecord, NewEvent, NotOwner, StoreUnavailable
from service.store.membership import DuplicateReplica, Membership
from service.store.postgres import PostgresEventStore

LEASE_MS = 600


@dataclass
class Fence:
    """The Fencing of a replica: the epochs it believes it holds."""
    membership: Membership
    epochs: dict[str, int] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)

    def fence(self, cluster: str) -> tuple[str, str, int] | None:
        epoch = self.epochs.get(cluster)
        return None if epoch is None else (self.membership.id, self.membership.incarnation, epoch)

    def fenced(self, cluster: str) -> None:
        self.refused.append(cluster)


@pytest_asyncio.fixture
async def two(pg_url: str) -> AsyncIterator[tuple[Membership, Membership]]:
    suffix = str(time.monotonic_ns())[-6:]
    members = (Membership(pg_url, f"fa-{suffix}", "http://a", LEASE_MS),
               Membership(pg_url, f"fb-{suffix}", "http://b", LEASE_MS))
    for m in members:
        await m.join()

    async def renewing(m: Membership) -> None:
        while True:
            await m.renew()
            await asyncio.sleep(LEASE_MS / 4000)

    RENEWERS.update({m.id: asyncio.ensure_future(renewing(m)) for m in members})
    yield members
    for m in members:
        freeze(m)
        await m.close()


RENEWERS: dict[str, asyncio.Future[None]] = {}


def freeze(m: Membership) -> None:
    """The membership stops renewing, as a frozen process does."""
    renewer = RENEWERS.pop(m.id, None)
    if renewer is not None:
        renewer.cancel()


def store_of(pg_url: str, fence: Fence) -> PostgresEventStore:
    store = PostgresEventStore(pg_url)
    store.fencing = fence
    store.fence_idle_ms = LEASE_MS
    return store


def event(i: int) -> NewEvent:
    return NewEvent("NodeUpserted", {"name": f"n{i}"}, {"commandId": None})


async def test_a_stale_epoch_records_nothing(pg_url: str, two: tuple[Membership, Membership]) -> None:
    a, b = two
    cluster = f"fence-{a.id}"
    change = await a.assign(cluster)
    assert change.owner.replica == a.id and change.owner.epoch == 1 and change.reason == "new"
    fence_a = Fence(a, {cluster: 1})
    store = store_of(pg_url, fence_a)
    try:
        async with store.exclusive(cluster) as turn:
            await turn.append(0, [event(1)])
        handed = await a.hand_over(cluster, 1, to=b.id)
        assert handed is not None and handed.owner.replica == b.id and handed.owner.epoch == 2
        with pytest.raises(Fenced):  # a still believes it holds epoch 1
            async with store.exclusive(cluster) as turn:
                await turn.append(1, [event(2)], idempotency=[IdempotencyRecord("fence-k", "f", 201, {})])
        assert fence_a.refused == [cluster]
        assert await store.last_position(cluster) == 1 and await store.get_idempotency("fence-k") is None
        fence_a.epochs.pop(cluster)
        with pytest.raises(NotOwner):  # not believed owned: refused before the database
            async with store.exclusive(cluster):
                pass
        token = UNFENCED.set(True)  # a writer outside ownership still goes through the writer lock
        try:
            async with store.exclusive(cluster) as turn:
                await turn.append(1, [event(3)])
        finally:
            UNFENCED.reset(token)
        assert await store.last_position(cluster) == 2
    finally:
        await store.close()


async def test_an_owner_frozen_in_its_turn_holds_nothing_past_its_lease(
        pg_url: str, two: tuple[Membership, Membership]) -> None:
    a, b = two
    cluster = f"frozen-{a.id}"
    await a.assign(cluster)
    store = store_of(pg_url, Fence(a, {cluster: 1}))
    try:
        entered, resume = asyncio.Event(), asyncio.Event()

        async def frozen_owner() -> None:  # a's turn holds the owner row, then a "freezes": no renewal
            async with store.exclusive(cluster) as turn:
                await turn.start([], 0, 10)
                entered.set()
                await resume.wait()
                await turn.append(0, [event(1)])

        owner = asyncio.ensure_future(frozen_owner())
        await entered.wait()
        freeze(a)
        frozen = time.monotonic()
        while a.lease_running():
            await asyncio.sleep(0.02)
        change = await b.assign(cluster)  # waits for the frozen turn's session to end, not longer
        waited = time.monotonic() - frozen
        assert change.owner.replica == b.id and change.reason == "failover" and change.owner.epoch == 2
        assert waited < LEASE_MS / 1000 + 2.0, waited
        resume.set()
        with pytest.raises(StoreUnavailable):  # the frozen turn's session is gone: nothing commits
            await owner
        assert await store.last_position(cluster) == 0
    finally:
        await store.close()


async def test_assignments_go_to_the_least_loaded(pg_url: str, two: tuple[Membership, Membership]) -> None:
    a, b = two
    given = [(await a.assign(f"load-{a.id}-{i}")).owner.replica for i in range(4)]
    assert given.count(a.id) == given.count(b.id) == 2  # a first among equals, then b, ...
    assert given[0] == a.id
    listed = {item["id"]: item for item in await a.directory()}
    assert len(listed[a.id]["clusters"]) == 2 and listed[b.id]["live"]


async def test_an_id_held_by_a_live_replica_is_refused(pg_url: str, two: tuple[Membership, Membership]) -> None:
    a, _ = two
    same = Membership(pg_url, a.id, "http://elsewhere", LEASE_MS)
    try:
        started = time.monotonic()
        with pytest.raises(DuplicateReplica, match=f"{a.id}.*http://a"):
            await same.join(wait=1.0)
        assert time.monotonic() - started >= 1.0
    finally:
        freeze(a)
        await same.close()
    await asyncio.sleep(LEASE_MS / 1000)  # a stopped renewing: dead once its lease ran out
    await same.join(wait=0)
    assert await a.renew() is False and a.evicted  # the new incarnation took the id
    await same.close()
