"""The outbox relay: committed outbox rows out to Kafka, in id order, at least once.

Each round reads the oldest rows (`store.outbox_batch`, id order = position order per
cluster), publishes them, waits for every acknowledgement, and only then deletes them
(`store.outbox_done`); a crash before the delete sends them again (consumers dedupe events on
(cluster, position), dead letters on their source-* headers). Nothing is skipped: a row is
deleted only after its acknowledgement.

Order never depends on the idempotent producer: rows are grouped by (topic, partition),
keeping id order, and each partition's rows go out as explicit record batches, one at a
time: batch k+1 is handed to the producer only after batch k was acknowledged. A failed batch
stops its partition's chain; the whole round is then sent again from its first row, so a
consumer may see repeats but never an event before an earlier one of its cluster.
"""
from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Sequence

import structlog
from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner

from service.app.service import Gangplank
from service.kafka.consumer import Backoff
from service.store.base import OutboxItem

log = structlog.get_logger("gangplank.kafka.relay")


class OutboxRelay:
    def __init__(self, service: Gangplank, producer: AIOKafkaProducer, *, batch_size: int = 1000,
                 idle_wait: float = 0.05, active: Callable[[], bool] = lambda: True,
                 on_health: Callable[[], None] = lambda: None) -> None:
        self.service = service
        self.store = service.store
        self.producer = producer
        self.batch_size = batch_size
        self.idle_wait = idle_wait
        self.active = active  # only one replica relays at a time (see runtime.py); order never depends on it
        self.stopping = asyncio.Event()
        self.published = 0  # rows acknowledged and deleted
        self.healthy = True  # False from a failed publish until the next one succeeds (readiness)
        self.on_health = on_health  # called when `healthy` changes
        self._partitioner = DefaultPartitioner()
        self._partitions: dict[str, list[int]] = {}
        self._chosen: dict[tuple[str, bytes | None], int] = {}

    async def run(self) -> None:
        backoff = Backoff()
        while not self.stopping.is_set():
            if not self.active():
                await self._sleep(0.1)
                continue
            try:
                rows = await self.store.outbox_batch(self.batch_size)
            except Exception as exc:  # database away: wait and read again
                delay = backoff.next()
                log.warning("relay.read_failed", error=f"{type(exc).__name__}: {exc}", retry_in=delay)
                await self._sleep(delay)
                continue
            if not rows:
                await self._idle()
                continue
            if not await self._publish(rows):
                continue  # stopping, or failed: the rows stay and are read again
            if not await self._done(rows):
                continue
            backoff.reset()

    async def _sleep(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self.stopping.wait(), timeout=seconds)
        except TimeoutError:
            pass

    async def _idle(self) -> None:
        """Wait for this process's next commit (or a short poll, for other writers)."""
        await self.service.commands.appended.wait(self.idle_wait)

    async def _partition_of(self, topic: str, key: bytes | None) -> int:
        """The partition Kafka's default partitioner gives the key (murmur2, computed in Python:
        remembered per key, which is the cluster's name, until the partitions are read again)."""
        known = self._chosen.get((topic, key))
        if known is not None:
            return known
        partitions = self._partitions.get(topic)
        if partitions is None:
            partitions = sorted(await self.producer.partitions_for(topic))
            self._partitions[topic] = partitions
        chosen = int(self._partitioner(key, partitions, partitions))
        if key is not None:  # a null key's partition is random: not remembered
            if len(self._chosen) >= 100_000:
                self._chosen.clear()
            self._chosen[(topic, key)] = chosen
        return chosen

    async def _publish(self, rows: Sequence[OutboxItem]) -> bool:
        """Send every row, waiting for each partition's batches in turn; retry until all are acked."""
        backoff = Backoff()
        while not self.stopping.is_set():
            try:
                chains: dict[tuple[str, int], list[OutboxItem]] = defaultdict(list)
                for row in rows:
                    chains[(row.topic, await self._partition_of(row.topic, row.key))].append(row)
                async with asyncio.TaskGroup() as group:  # one chain fails: the others stop too
                    for (topic, partition), chain in chains.items():
                        group.create_task(self._send_chain(topic, partition, chain))
                self._health(True)
                return True
            except Exception as exc:  # broker away, timeout, unknown partition: send the round again
                self._health(False)
                self._partitions.clear()
                self._chosen.clear()
                delay = backoff.next()
                if isinstance(exc, ExceptionGroup):
                    exc = exc.exceptions[0]
                log.warning("relay.publish_failed", error=f"{type(exc).__name__}: {exc}", rows=len(rows),
                            retry_in=delay)
                await self._sleep(delay)
        return False

    def _health(self, healthy: bool) -> None:
        if healthy != self.healthy:
            self.healthy = healthy
            self.on_health()

    async def _send_chain(self, topic: str, partition: int, rows: list[OutboxItem]) -> None:
        i = 0
        while i < len(rows):
            batch = self.producer.create_batch()
            while i < len(rows):
                row = rows[i]
                if batch.append(key=row.key, value=row.value, timestamp=None, headers=list(row.headers)) is None:
                    break  # full: send what it holds (the first record always fits)
                i += 1
            batch.close()
            future = await self.producer.send_batch(batch, topic, partition=partition)
            await future  # the next batch of this partition only after this one is acknowledged

    async def _done(self, rows: Sequence[OutboxItem]) -> bool:
        backoff = Backoff()
        ids = [row.id for row in rows]
        while True:
            try:
                await self.store.outbox_done(ids)
                self.published += len(ids)
                return True
            except Exception as exc:  # database away: the rows were sent; delete them when it is back
                if self.stopping.is_set():
                    return False
                delay = backoff.next()
                log.warning("relay.done_failed", error=f"{type(exc).__name__}: {exc}", retry_in=delay)
                await self._sleep(delay)
