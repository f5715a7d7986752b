"""The consumer parses a poll ahead (in worker processes) while it decides the previous one: a
poll fetched before a partition was seeked again is never processed for it."""
from __future__ import annotations

import asyncio
import json

from aiokafka import TopicPartition
from aiokafka.structs import ConsumerRecord

from service.kafka.consumer import Backoff, CommandConsumer
from service.kafka.messages import Parsed, parse_values
from service.kafka.runtime import ParsePool
from service.store.base import StoreUnavailable
from tests.kafka.conftest import command, node_body

TOPIC = "cmds"
TP = TopicPartition(TOPIC, 0)


def record(offset: int, value: bytes) -> ConsumerRecord:
    return ConsumerRecord(TOPIC, 0, offset, 0, 0, b"c", value, None, len(value), len(value), ())


class FakeKafka:
    """The part of AIOKafkaConsumer the command consumer uses; records served from `log`
    in polls of `per_poll`, from the position `seek` sets."""

    def __init__(self, log: list[ConsumerRecord], per_poll: int) -> None:
        self.log, self.per_poll, self.position, self.paused = log, per_poll, 0, False
        self.seeks: list[int] = []

    def assignment(self) -> set[TopicPartition]:
        return {TP}

    def pause(self, tp: TopicPartition) -> None:
        self.paused = True

    def resume(self, tp: TopicPartition) -> None:
        self.paused = False

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.position = offset
        self.seeks.append(offset)

    async def beginning_offsets(self, tps):  # noqa: ANN001, ANN201
        return {tp: 0 for tp in tps}

    async def end_offsets(self, tps):  # noqa: ANN001, ANN201
        return {tp: len(self.log) for tp in tps}

    async def getmany(self, timeout_ms: int, max_records: int):  # noqa: ANN201
        await asyncio.sleep(0)
        if self.paused or self.position >= len(self.log):
            await asyncio.sleep(timeout_ms / 1000)
            return {}
        out = self.log[self.position:self.position + self.per_poll]
        self.position += len(out)
        return {TP: out}

    def highwater(self, tp: TopicPartition) -> int:
        return len(self.log)

    async def commit(self, offsets) -> None:  # noqa: ANN001
        pass


class FakeService:
    """Commits runs in memory; the first commit that reaches offset `fail_at` fails once."""

    def __init__(self, fail_at: int) -> None:
        self.applied: list[str] = []
        self.stored = 0
        self.fail_at = fail_at
        self.store = self.commands = self

    async def stored_offsets(self, group: str, topic: str) -> dict[int, int]:
        return {0: self.stored}

    async def execute_unit(self, cluster, items, policy, *, offsets):  # noqa: ANN001, ANN201
        await asyncio.sleep(0.01)  # the commit's round trip: the next poll is fetched and parsed meanwhile
        if self.fail_at is not None and offsets[0].offset > self.fail_at:
            self.fail_at = None
            raise StoreUnavailable("the database went away")
        self.applied.extend(item.command.name for item in items)
        self.stored = offsets[0].offset
        return []


async def test_a_poll_fetched_before_a_failure_is_fetched_again_not_processed():
    names = [f"n{i}" for i in range(40)]
    log = [record(i, json.dumps(command("c", "UpsertNode", name, body=node_body())).encode())
           for i, name in enumerate(names)]
    kafka, service = FakeKafka(log, per_poll=7), FakeService(fail_at=10)

    async def parser(values, topic):  # noqa: ANN001, ANN202 - parses as the worker processes do
        await asyncio.sleep(0.01)
        return parse_values(values, topic)

    consumer = CommandConsumer(service, kafka, group="g", topic=TOPIC, dlq_topic="dlq", max_run=3,  # type: ignore[arg-type]
                               parser=parser)
    # resynchronised at once after the failure, before the poll fetched meanwhile is looked at
    consumer._backoffs[TP] = Backoff(initial=0.0)
    await consumer.on_assigned({TP})
    task = asyncio.create_task(consumer.run())
    for _ in range(1000):
        if len(service.applied) >= len(names) or task.done():
            break
        await asyncio.sleep(0.02)
    consumer.stopping.set()
    await asyncio.wait_for(task, 5)
    assert service.applied == names  # every command once, in offset order, none skipped
    assert len(kafka.seeks) >= 2  # the assignment, then the failed partition's resynchronisation


async def test_the_parse_pool_parses_as_the_consumer_would():
    values = [json.dumps(command("c", "UpsertNode", f"n{i}", body=node_body())).encode() for i in range(5)]
    values.insert(2, b"not json")
    pool = ParsePool(1)
    try:
        pooled = await pool(values, TOPIC)
    finally:
        pool.close()
    inline = parse_values(values, TOPIC)
    assert [type(p) for p in pooled] == [type(p) for p in inline]
    assert [p.item.command for p in pooled if isinstance(p, Parsed)] == \
        [p.item.command for p in inline if isinstance(p, Parsed)]
    assert [p.item.fingerprint for p in pooled if isinstance(p, Parsed)] == \
        [p.item.fingerprint for p in inline if isinstance(p, Parsed)]
