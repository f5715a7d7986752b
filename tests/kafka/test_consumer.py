"""The Kafka adapter against a real broker (Tansu) and PostgreSQL: kafka.md end to end."""
from __future__ import annotations

import asyncio
import contextlib
import json

import pytest
from aiokafka import TopicPartition

from service.kafka.messages import KEY_REUSED
from service.kafka.runtime import ensure_topics
from service.store import open_store
from service.store.base import StoreUnavailable
from tests.kafka.conftest import command, node_body, produce, read_topic, wait_for, workload_body
from tests.kafka.helpers import all_events, check_feed, consumed, outbox_empty, running

pytestmark = pytest.mark.kafka


def inventory(cluster: str, nodes: int = 3) -> list[dict]:
    return [command(cluster, "UpsertNode", f"n{i}", body=node_body(cpu="8")) for i in range(nodes)]


async def test_happy_path_commands_to_events_to_the_decision_feed(kafka_bootstrap, kafka_settings, db_url):
    s = kafka_settings
    clusters = ["alpha", "beta"]
    messages = []
    for cluster in clusters:
        messages += inventory(cluster)
        messages += [command(cluster, "SubmitWorkload", f"job-{i}", namespace="team-a",
                             body=workload_body(f"job-{i}", pods=2, cpu="4")) for i in range(8)]
        messages += [command(cluster, "DeleteWorkload", f"job-{i}", namespace="team-a") for i in range(3)]
    created = await ensure_topics(s)
    assert sorted(created) == sorted([s.commands_topic, s.dlq_topic, s.decisions_topic])
    assert await ensure_topics(s) == []  # existing topics are fine
    await produce(kafka_bootstrap, s.commands_topic, messages)
    store = open_store(db_url)
    try:
        async with running(s) as (service, runtime):
            assert service.queries.kafka_running is True
            await wait_for(lambda: _done(store, s, len(messages)), what="all commands consumed")
            await wait_for(lambda: outbox_empty(store), what="outbox relayed")
            assert (await service.queries.readiness())[1]["kafka"] is True
        assert service.queries.kafka_running is False
        for cluster in clusters:
            events = await all_events(store, cluster)
            inputs = [e for e in events if e.metadata["causationPosition"] is None]
            mine = [m for m in messages if m["cluster"] == cluster]
            assert [e.metadata["commandId"] for e in inputs] == [m["id"] for m in mine]
            assert all(e.metadata["source"] == "kafka" for e in events)
            assert [e.type for e in inputs] == ["NodeUpserted"] * 3 + ["WorkloadSubmitted"] * 8 + ["WorkloadDeleted"] * 3
            assert any(e.type == "PodGroupScheduled" for e in events)
            assert (await store.verify(cluster)).ok
        counts = await check_feed(kafka_bootstrap, s, store, clusters)
        assert all(n > 14 for n in counts.values())
        assert await read_topic(kafka_bootstrap, s.dlq_topic) == []
    finally:
        await store.close()


async def _done(store, settings, n: int) -> bool:
    return await consumed(store, settings) >= n


async def test_same_id_twice_and_a_redelivered_message_apply_once(kafka_bootstrap, kafka_settings, db_url):
    s = kafka_settings
    await ensure_topics(s)
    submit = command("gamma", "SubmitWorkload", "once", namespace="ns", body=workload_body("once"), id="same-id-1")
    messages = inventory("gamma", 2) + [submit, submit]  # the same message twice on the topic
    await produce(kafka_bootstrap, s.commands_topic, messages)
    store = open_store(db_url)
    try:
        async with running(s) as (service, runtime):
            await wait_for(lambda: _done(store, s, len(messages)), what="consumed")
            first = [e.type for e in await all_events(store, "gamma")]
            assert first.count("WorkloadSubmitted") == 1 and "CommandRejected" not in first
            # the same id again in a later poll (a producer retry)
            await produce(kafka_bootstrap, s.commands_topic, [submit])
            await wait_for(lambda: _done(store, s, len(messages) + 1), what="the retry consumed")
            # a redelivery: seek back to 0 as after a lost Kafka commit, and make the consumer take it
            consumer = runtime.consumer
            assert consumer is not None
            tp = next(tp for tp in consumer.positions)
            partition_of_gamma = [tp for tp in consumer.positions]
            async with consumer.lock:
                for tp in partition_of_gamma:
                    consumer.consumer.seek(tp, 0)
                    consumer.positions[tp] = 0
            processed = consumer.processed
            await wait_for(lambda: _processed_more(consumer, processed, len(messages) + 1), what="redelivered")
            await wait_for(lambda: outbox_empty(store), what="outbox relayed")
        assert [e.type for e in await all_events(store, "gamma")] == first
        await check_feed(kafka_bootstrap, s, store, ["gamma"])
    finally:
        await store.close()


async def _processed_more(consumer, before: int, n: int) -> bool:
    return consumer.processed >= before + n


async def test_malformed_messages_go_to_the_dlq_with_their_headers(kafka_bootstrap, kafka_settings, db_url):
    s = kafka_settings
    await ensure_topics(s)
    good = command("delta", "UpsertNode", "n0", body=node_body(), id="k-1")
    bad = [
        b"not json at all",
        json.dumps({"id": "x1", "cluster": "delta", "type": "LaunchRocket", "name": "a"}).encode(),
        json.dumps(command("delta", "UpsertNode", "n1", body={"allocatable": {"cpu": "-1"}})).encode(),
        json.dumps(command("delta", "SubmitWorkload", "w", body=workload_body("w"))).encode(),  # no namespace
        json.dumps(command("delta", "RemoveNode", "n0", id="k-1")).encode(),  # k-1 again, another command
    ]
    messages = [good, *bad]
    await produce(kafka_bootstrap, s.commands_topic, messages, key=lambda m: b"delta")
    store = open_store(db_url)
    try:
        async with running(s):
            await wait_for(lambda: _done(store, s, len(messages)), what="consumed")
            await wait_for(lambda: outbox_empty(store), what="outbox relayed")
        events = await all_events(store, "delta")
        assert [e.type for e in events] == ["NodeUpserted"]
        letters = await read_topic(kafka_bootstrap, s.dlq_topic)
        assert len(letters) == len(bad)
        partition = next(iter((await store.stored_offsets(s.consumer_group, s.commands_topic)).keys()))
        source = sorted(await read_topic(kafka_bootstrap, s.commands_topic), key=lambda r: r.offset)
        by_offset = {r.offset: r for r in source}
        for letter, original in zip(sorted(letters, key=lambda r: int(dict(r.headers)["source-offset"])), bad):
            headers = dict(letter.headers)
            assert set(headers) == {"error", "source-topic", "source-partition", "source-offset"}
            assert headers["source-topic"] == s.commands_topic.encode()
            assert int(headers["source-partition"]) == partition
            assert letter.value == original == by_offset[int(headers["source-offset"])].value
            assert letter.key == b"delta"
        errors = [dict(r.headers)["error"].decode() for r in sorted(
            letters, key=lambda r: int(dict(r.headers)["source-offset"]))]
        assert errors[0].startswith("(root): Invalid JSON")
        assert "type" in errors[1]
        assert errors[2].startswith("body.allocatable.cpu")
        assert "namespace: Required for SubmitWorkload" in errors[3]
        assert errors[4] == KEY_REUSED
        assert await store.stored_offsets(s.consumer_group, s.commands_topic) == {partition: len(messages)}
    finally:
        await store.close()


async def test_state_rejections_become_command_rejected_events(kafka_bootstrap, kafka_settings, db_url):
    s = kafka_settings
    await ensure_topics(s)
    messages = inventory("eps", 1) + [
        command("eps", "SubmitWorkload", "dup", namespace="ns", body=workload_body("dup")),
        command("eps", "SubmitWorkload", "dup", namespace="ns", body=workload_body("dup")),  # name taken
        command("eps", "DeleteWorkload", "ghost", namespace="ns"),  # unknown
        command("eps", "RemoveNode", "nowhere"),
    ]
    await produce(kafka_bootstrap, s.commands_topic, messages)
    store = open_store(db_url)
    try:
        async with running(s):
            await wait_for(lambda: _done(store, s, len(messages)), what="consumed")
            await wait_for(lambda: outbox_empty(store), what="outbox relayed")
        inputs = [e for e in await all_events(store, "eps") if e.metadata["causationPosition"] is None]
        assert [e.type for e in inputs] == ["NodeUpserted", "WorkloadSubmitted", "CommandRejected",
                                            "CommandRejected", "CommandRejected"]
        assert [e.metadata["commandId"] for e in inputs] == [m["id"] for m in messages]
        assert await read_topic(kafka_bootstrap, s.dlq_topic) == []
        await check_feed(kafka_bootstrap, s, store, ["eps"])
    finally:
        await store.close()


async def test_a_deleted_name_submitted_again_is_a_new_incarnation(kafka_bootstrap, kafka_settings, db_url):
    """Names used again (lifecycle.md), over Kafka: after a deletion the name makes a new workload; a
    live name is still rejected, naming the live incarnation's position."""
    s = kafka_settings
    await ensure_topics(s)
    messages = inventory("rerun", 1) + [
        command("rerun", "SubmitWorkload", "job", namespace="ns", body=workload_body("job")),
        command("rerun", "DeleteWorkload", "job", namespace="ns"),
        command("rerun", "SubmitWorkload", "job", namespace="ns", body=workload_body("job")),  # a new incarnation
        command("rerun", "SubmitWorkload", "job", namespace="ns", body=workload_body("job")),  # the name lives
    ]
    await produce(kafka_bootstrap, s.commands_topic, messages)
    store = open_store(db_url)
    try:
        async with running(s):
            await wait_for(lambda: _done(store, s, len(messages)), what="consumed")
        inputs = [e for e in await all_events(store, "rerun") if e.metadata["causationPosition"] is None]
        assert [e.type for e in inputs] == ["NodeUpserted", "WorkloadSubmitted", "WorkloadDeleted",
                                            "WorkloadSubmitted", "CommandRejected"]
        assert f"position {inputs[3].position}" in inputs[4].data["message"]
    finally:
        await store.close()


class FlakyStore:
    """The real store, with a switch that makes every call raise StoreUnavailable."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.down = False
        self.refused = 0

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if name == "exclusive":  # a context manager: refused when entered
            return self._exclusive
        if not callable(attr) or name.startswith("_"):
            return attr

        async def call(*args, **kwargs):
            if self.down:
                self.refused += 1
                raise StoreUnavailable("the database is down (test)")
            return await attr(*args, **kwargs)
        return call


    @contextlib.asynccontextmanager
    async def _exclusive(self, cluster):
        if self.down:
            self.refused += 1
            raise StoreUnavailable("the database is down (test)")
        async with self.inner.exclusive(cluster) as turn:
            yield turn


async def test_a_database_outage_pauses_and_resumes_without_loss(kafka_bootstrap, kafka_settings, db_url):
    s = kafka_settings
    await ensure_topics(s)
    before = inventory("zeta", 2)
    during = [command("zeta", "SubmitWorkload", f"w{i}", namespace="ns", body=workload_body(f"w{i}", pods=1))
              for i in range(20)]
    await produce(kafka_bootstrap, s.commands_topic, before)
    real = open_store(db_url)
    flaky = FlakyStore(real)
    try:
        async with running(s, store=flaky) as (service, runtime):
            await wait_for(lambda: _done(real, s, len(before)), what="first commands")
            flaky.down = True
            await produce(kafka_bootstrap, s.commands_topic, during)
            await wait_for(lambda: _refused(flaky, 5), what="the consumer to hit the outage")
            await asyncio.sleep(1.0)
            consumer = runtime.consumer
            assert consumer is not None and consumer.unsynced, "the partition is paused"
            paused = set(consumer.consumer.paused())
            assert paused & set(consumer.unsynced)
            assert await consumed(real, s) == len(before)  # the offset did not move
            flaky.down = False
            await wait_for(lambda: _done(real, s, len(before) + len(during)), timeout=30, what="resumed")
            await wait_for(lambda: outbox_empty(real), what="outbox relayed")
        inputs = [e for e in await all_events(real, "zeta") if e.metadata["causationPosition"] is None]
        assert [e.metadata["commandId"] for e in inputs] == [m["id"] for m in before + during]
        await check_feed(kafka_bootstrap, s, real, ["zeta"])
    finally:
        await real.close()


async def _refused(flaky: FlakyStore, n: int) -> bool:
    return flaky.refused >= n


async def test_kafka_commit_is_only_a_hint(kafka_bootstrap, kafka_settings, db_url):
    """The consumer starts from the offsets in the database, whatever Kafka has committed."""
    s = kafka_settings
    await ensure_topics(s)
    messages = inventory("eta", 3)
    await produce(kafka_bootstrap, s.commands_topic, messages)
    store = open_store(db_url)
    try:
        async with running(s) as (service, runtime):
            await wait_for(lambda: _done(store, s, 3), what="consumed")
            consumer = runtime.consumer
            tp = next(iter(consumer.positions))
            await consumer.consumer.commit({tp: 1})  # Kafka believes only one record was processed
        async with running(s) as (service, runtime):
            await produce(kafka_bootstrap, s.commands_topic, [command("eta", "RemoveNode", "n0")])
            await wait_for(lambda: _done(store, s, 4), what="consumed")
        assert [e.type for e in await all_events(store, "eta") if e.metadata["causationPosition"] is None] == \
            ["NodeUpserted"] * 3 + ["NodeRemoved"]
        assert TopicPartition(s.commands_topic, tp.partition) == tp
    finally:
        await store.close()
