"""The outbox relay with a scripted producer: order per partition, acks before deletes, resends."""
from __future__ import annotations

import asyncio
from typing import Any

from service.app.handler import AppendSignal
from service.kafka.relay import OutboxRelay
from service.store.base import OutboxItem


class FakeStore:
    def __init__(self, rows: list[OutboxItem]) -> None:
        self.rows = list(rows)
        self.done_calls: list[list[int]] = []
        self.fail_done = 0

    async def outbox_batch(self, limit: int = 500) -> list[OutboxItem]:
        return sorted(self.rows, key=lambda r: r.id)[:limit]

    async def outbox_done(self, ids: list[int]) -> None:
        if self.fail_done:
            self.fail_done -= 1
            raise ConnectionError("database away (test)")
        self.done_calls.append(list(ids))
        self.rows = [r for r in self.rows if r.id not in set(ids)]


class FakeBatch:
    def __init__(self, capacity: int) -> None:
        self.records: list[tuple[bytes | None, bytes, list]] = []
        self.capacity = capacity

    def append(self, *, key: Any, value: Any, timestamp: Any, headers: Any) -> Any:
        if len(self.records) >= self.capacity:
            return None
        self.records.append((key, value, headers))
        return object()

    def close(self) -> None:
        pass


class FakeProducer:
    """Records what reaches each partition; fails the sends listed in `fail_sends` (by number)."""

    def __init__(self, partitions: int = 3, batch_capacity: int = 2, fail_sends: set[int] = frozenset()) -> None:
        self.partitions = partitions
        self.batch_capacity = batch_capacity
        self.fail_sends = set(fail_sends)
        self.sends = 0
        self.log: dict[tuple[str, int], list[bytes]] = {}
        self.in_flight: dict[tuple[str, int], int] = {}
        self.max_in_flight = 0
        self.acked_ids: list[bytes] = []

    async def partitions_for(self, topic: str) -> set[int]:
        return set(range(self.partitions))

    def create_batch(self) -> FakeBatch:
        return FakeBatch(self.batch_capacity)

    async def send_batch(self, batch: FakeBatch, topic: str, *, partition: int) -> asyncio.Future:
        self.sends += 1
        number = self.sends
        tp = (topic, partition)
        self.in_flight[tp] = self.in_flight.get(tp, 0) + 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight[tp])
        future: asyncio.Future = asyncio.get_running_loop().create_future()

        async def complete() -> None:
            await asyncio.sleep(0.001)
            self.in_flight[tp] -= 1
            if number in self.fail_sends:
                future.set_exception(TimeoutError(f"send {number} timed out (test)"))
                return
            self.log.setdefault(tp, []).extend(value for _, value, _ in batch.records)
            self.acked_ids.extend(value for _, value, _ in batch.records)
            future.set_result(None)

        asyncio.get_running_loop().create_task(complete())
        return future


class FakeService:
    """The application as the relay sees it: the store, and the signal of this process's commits."""

    def __init__(self, store: FakeStore) -> None:
        self.store = store
        self.commands = self
        self.appended = AppendSignal()  # never notified here: the relay polls every idle_wait


def rows(n: int, clusters: tuple[str, ...] = ("a", "b", "c", "d")) -> list[OutboxItem]:
    out = []
    positions = {c: 0 for c in clusters}
    for i in range(1, n + 1):
        cluster = clusters[i % len(clusters)]
        positions[cluster] += 1
        out.append(OutboxItem(i, "dec", cluster.encode(), f"{cluster}:{positions[cluster]}".encode(), [], cluster,
                              positions[cluster]))
    return out


async def run_until_empty(relay: OutboxRelay, store: FakeStore) -> None:
    task = asyncio.create_task(relay.run())
    for _ in range(2000):
        if not store.rows:
            break
        await asyncio.sleep(0.005)
    relay.stopping.set()
    await asyncio.wait_for(task, 5)
    assert not store.rows


def first_seen_in_order(producer: FakeProducer) -> None:
    """Per cluster, dedupe on position: the first occurrences come 1, 2, 3, ... with no gap."""
    for values in producer.log.values():
        seen: dict[str, int] = {}
        for value in values:
            cluster, position = value.decode().split(":")
            last = seen.get(cluster, 0)
            if int(position) <= last:
                continue  # a repeat
            assert int(position) == last + 1, f"{cluster}: {position} after {last}"
            seen[cluster] = int(position)


async def test_rows_go_out_in_order_one_batch_per_partition_at_a_time_then_are_deleted():
    store = FakeStore(rows(40))
    producer = FakeProducer(batch_capacity=3)
    relay = OutboxRelay(FakeService(store), producer, batch_size=16, idle_wait=0.001)  # type: ignore[arg-type]
    await run_until_empty(relay, store)
    assert producer.max_in_flight == 1
    assert sorted(producer.acked_ids) == sorted(r.value for r in rows(40))  # each once: no failure, no repeat
    first_seen_in_order(producer)
    assert [i for call in store.done_calls for i in call] == list(range(1, 41))
    assert relay.published == 40


async def test_a_failed_batch_resends_the_round_in_order_and_nothing_is_deleted_before_its_ack():
    store = FakeStore(rows(30))
    producer = FakeProducer(batch_capacity=2, fail_sends={2, 5, 9})
    relay = OutboxRelay(FakeService(store), producer, batch_size=12, idle_wait=0.001)  # type: ignore[arg-type]
    await run_until_empty(relay, store)
    first_seen_in_order(producer)
    assert set(producer.acked_ids) == {r.value for r in rows(30)}
    assert len(producer.acked_ids) > 30  # the failed rounds were sent again


async def test_a_failed_delete_is_retried_without_sending_again():
    store = FakeStore(rows(6))
    store.fail_done = 2
    producer = FakeProducer(batch_capacity=10)
    relay = OutboxRelay(FakeService(store), producer, batch_size=10, idle_wait=0.001)  # type: ignore[arg-type]
    await run_until_empty(relay, store)
    assert sorted(producer.acked_ids) == sorted(r.value for r in rows(6))
