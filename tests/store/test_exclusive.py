"""EventStore.exclusive: a writer's turn on a cluster (both backends), and on PostgreSQL the
cluster's writer lock: turns of one cluster queue across stores (processes), turns of other
clusters do not, and a holder whose session ends (a killed replica) releases it at once."""
from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from service.store import ConcurrencyConflict, IdempotencyRecord, NewEvent, SqlEventStore
from service.store.turn import WRITER_LOCKS, lock_key


def ev(i: int) -> NewEvent:
    return NewEvent(type="NodeUpserted", data={"name": f"node-{i}"}, metadata={"source": "http"})


async def test_a_turn_reads_appends_and_commits_at_its_end(store: SqlEventStore, other_store: SqlEventStore) -> None:
    await store.append("c", 0, [ev(1), ev(2)], idempotency=[IdempotencyRecord("k1", "f", 201, {"a": 1}, "c", 1)])
    async with store.exclusive("c") as turn:
        begun = await turn.start(["k1", "k2"], 1, 100)
        assert begun.last == 2 and list(begun.records) == ["k1"] and begun.records["k1"].body == {"a": 1}
        assert [r[0] for r in begun.missed] == [2] and begun.missed[0][3] == {"name": "node-2"}
        assert [r[0] for r in (await turn.start([], 0, 1)).missed] == [1]
        assert [r[0] for r in await turn.read_data(after=1)] == [2]
        stored = await turn.append(2, [ev(3)], idempotency=[IdempotencyRecord("k2", "f", 201, {}, "c", 3)])
        assert [e.position for e in stored] == [3]
    assert await other_store.last_position("c") == 3
    assert (await other_store.get_idempotency("k2")) is not None
    assert (await other_store.verify("c")).ok
    async with store.exclusive("new") as turn:  # a cluster with no events yet
        assert (await turn.start(["k1"], 0, 10)).last == 0
        await turn.append(0, [ev(1)])
    assert await other_store.last_position("new") == 1


async def test_a_turn_that_fails_writes_nothing(store: SqlEventStore, backend_url: tuple[str, str]) -> None:
    await store.append("c", 0, [ev(1)])
    with pytest.raises(RuntimeError):
        async with store.exclusive("c") as turn:
            await turn.start([], 0, 1)
            await turn.append(1, [ev(2)])
            raise RuntimeError("deciding failed after the append")
    assert await store.last_position("c") == 1  # on every backend: the turn's append was not recorded
    async with store.exclusive("c") as turn:  # and the turn was released
        assert (await turn.start([], 0, 1)).last == 1


async def test_a_record_without_events_commits_with_its_turn(store: SqlEventStore) -> None:
    record = IdempotencyRecord("k", "f", 400, {"x": 1})
    with pytest.raises(RuntimeError):
        async with store.exclusive("c") as turn:
            await turn.append(0, [], idempotency=[record])
            raise RuntimeError("the turn failed")
    assert await store.get_idempotency("k") is None
    async with store.exclusive("c") as turn:
        await turn.append(0, [], idempotency=[record])
    assert (await store.get_idempotency("k")) == record


async def test_turns_of_one_cluster_queue_in_one_store(store: SqlEventStore) -> None:
    """On every backend: a second turn on the cluster starts once the first has ended."""
    order: list[str] = []

    async def turn_of(name: str, hold: float) -> None:
        async with store.exclusive("c") as turn:
            order.append(f"{name} in")
            begun = await turn.start([], 0, 10)
            await asyncio.sleep(hold)
            await turn.append(begun.last, [ev(begun.last + 1)])
            order.append(f"{name} out")

    first = asyncio.create_task(turn_of("a", 0.2))
    await asyncio.sleep(0.05)
    await turn_of("b", 0)
    await first
    assert order == ["a in", "a out", "b in", "b out"]
    assert await store.last_position("c") == 2 and (await store.verify("c")).ok


async def test_an_append_outside_turns_makes_the_turn_conflict(store: SqlEventStore,
                                                               other_store: SqlEventStore) -> None:
    await store.append("c", 0, [ev(1)])
    with pytest.raises(ConcurrencyConflict):
        async with store.exclusive("c") as turn:
            assert (await turn.start([], 0, 1)).last == 1
            await other_store.append("c", 1, [ev(2)])  # a writer that takes no lock
            await turn.append(1, [ev(2)])
    assert await other_store.last_position("c") == 2
    assert (await store.verify("c")).ok


@pytest.fixture
def pg_only(backend_url: tuple[str, str]) -> None:
    if backend_url[0] != "postgresql":
        pytest.skip("the writer lock is PostgreSQL's")


async def test_turns_of_one_cluster_queue_across_stores(pg_only: None, store: SqlEventStore,
                                                        other_store: SqlEventStore) -> None:
    await store.append("c", 0, [ev(1)])
    order: list[str] = []
    first_in = asyncio.Event()

    async def first() -> None:
        async with store.exclusive("c") as turn:
            await turn.start([], 0, 1)
            first_in.set()
            order.append("first in")
            await asyncio.sleep(0.3)  # deciding
            await turn.append(1, [ev(2)])
            order.append("first out")

    async def second() -> None:
        await first_in.wait()
        async with other_store.exclusive("c") as turn:
            order.append("second in")
            last = (await turn.start([], 0, 1)).last
            assert last == 2  # the first turn's commit, seen under the lock
            await turn.append(last, [ev(3)])

    async def elsewhere() -> float:  # another cluster's turn does not wait
        await first_in.wait()
        t = time.monotonic()
        async with other_store.exclusive("d") as turn:
            await turn.append(0, [ev(1)])
        return time.monotonic() - t

    _, _, took = await asyncio.gather(first(), second(), elsewhere())
    assert order == ["first in", "first out", "second in"]
    assert took < 0.25
    assert await store.last_position("c") == 3 and (await store.verify("c")).ok


async def test_a_holder_whose_session_ends_releases_the_lock(pg_only: None, store: SqlEventStore,
                                                             other_store: SqlEventStore, store_url: str) -> None:
    """What a SIGKILL does to a replica's connections, done from outside: terminate the backend
    that holds the lock. The waiting turn goes on at once; the holder's append never committed."""
    await store.append("c", 0, [ev(1)])
    holding = asyncio.Event()
    release = asyncio.Event()

    async def holder() -> None:
        async with store.exclusive("c") as turn:
            await turn.start([], 0, 1)
            holding.set()
            await release.wait()
            await turn.append(1, [ev(2)])

    held = asyncio.ensure_future(holder())
    await holding.wait()
    admin = await asyncpg.connect(store_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        pids = [r[0] for r in await admin.fetch(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = $1 AND objid = $2",
            WRITER_LOCKS, lock_key("c") & 0xFFFFFFFF)]
        assert len(pids) == 1
        waiter = asyncio.ensure_future(_turn_appending(other_store, "c"))
        await asyncio.sleep(0.2)
        assert not waiter.done()  # queued behind the holder
        t = time.monotonic()
        await admin.execute("SELECT pg_terminate_backend($1)", pids[0])
        assert await asyncio.wait_for(waiter, 5) == 2  # the holder's append never committed
        assert time.monotonic() - t < 1.0
    finally:
        await admin.close()
    release.set()
    with pytest.raises(Exception):  # noqa: B017 - the holder's connection is gone: any store error
        await held
    assert await other_store.last_position("c") == 2 and (await other_store.verify("c")).ok


async def _turn_appending(store: SqlEventStore, cluster: str) -> int:
    async with store.exclusive(cluster) as turn:
        last = (await turn.start([], 0, 1)).last
        stored = await turn.append(last, [ev(last + 1)])
    return stored[-1].position
