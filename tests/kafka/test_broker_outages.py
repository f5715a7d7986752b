"""The broker going away (issue 16, point 4): readiness follows it, the service resumes after a
restart with nothing lost or doubled, and a broker that refuses the idempotent producer is
reported once while the consumer goes on."""
from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
import structlog
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from service.kafka.testing import broker_binary, free_port
from service.store import open_store
from tests.kafka.conftest import command, make_settings, node_body, produce, wait_for, workload_body
from tests.kafka.helpers import all_events, consumed, running

pytestmark = pytest.mark.kafka


class Broker:
    """A Tansu broker (memory storage) on a fixed port, to be killed and started again."""

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        url = f"tcp://127.0.0.1:{self.port}"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([broker_binary(), "broker", "--listener-url", url,
                                          "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"],
                                         stdout=log, stderr=subprocess.STDOUT)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path / "tansu.log")
    b.start()
    yield b
    b.kill()


async def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    """What an operator does for a broker that lost its topics (kafka-topics.sh --create)."""
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            await admin.start()
            existing = set(await admin.list_topics())
            missing = [n for n in names if n not in existing]
            if missing:
                await admin.create_topics([NewTopic(n, num_partitions=partitions, replication_factor=1)
                                           for n in missing])
            return
        except Exception:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.3)
        finally:
            with contextlib.suppress(Exception):
                await admin.close()


def messages_for(clusters: list[str], workloads: int) -> list[dict]:
    out: list[dict] = []
    for cluster in clusters:
        out += [command(cluster, "UpsertNode", f"n{i}", body=node_body(cpu="64")) for i in range(4)]
    for i in range(workloads):
        cluster = clusters[i % len(clusters)]
        out.append(command(cluster, "SubmitWorkload", f"w{i:04d}", namespace="team",
                           body=workload_body(f"w{i:04d}", pods=1, cpu="1")))
    return out


async def kafka_ready(service) -> bool:  # noqa: ANN001
    return (await service.queries.readiness())[1].get("kafka") is True


async def kafka_not_ready(service) -> bool:  # noqa: ANN001
    return (await service.queries.readiness())[1].get("kafka") is False


async def test_broker_restart_mid_stream_resumes_with_nothing_lost_or_doubled(broker: Broker, db_url: str) -> None:
    s = make_settings(broker.bootstrap, db_url, "restart")
    clusters = ["east", "west"]
    messages = messages_for(clusters, 400)
    first, second = messages[:250], messages[250:]
    topics = [s.commands_topic, s.dlq_topic, s.decisions_topic]
    await create_topics(broker.bootstrap, topics, 3)
    store = open_store(db_url)
    try:
        async with running(s) as (service, runtime):
            await wait_for(lambda: kafka_ready(service), timeout=20, what="kafka: true")
            await produce(broker.bootstrap, s.commands_topic, first)
            await wait_for(lambda: _at_least(store, s, 100), timeout=30, what="100 commands consumed")
            broker.kill()  # mid-stream: some of `first` are still unconsumed, and lost with the broker
            await wait_for(lambda: kafka_not_ready(service), timeout=10, what="kafka: false after the broker died")
            broker.start()
            # the operator: the broker lost its topics (memory storage): create them again, and, as
            # docs/kafka.md says, forget the offsets the database kept for the old command topic
            async with store.engine.begin() as conn:
                await conn.execute(sa.text('DELETE FROM consumer_offsets WHERE "group" = :g'), {"g": s.consumer_group})
            await create_topics(broker.bootstrap, topics, 3)
            await wait_for(lambda: kafka_ready(service), timeout=30, what="kafka: true once the broker is back")
            # the producer does not know what was applied: it sends everything again, then the rest
            await produce(broker.bootstrap, s.commands_topic, first + second)
            await wait_for(lambda: _applied(store, clusters, len(messages)), timeout=90,
                           what="every command applied")
            assert runtime.consumer is not None
        ids = []
        for cluster in clusters:
            events = await all_events(store, cluster)
            assert [e.position for e in events] == list(range(1, len(events) + 1))
            assert (await store.verify(cluster)).ok
            ids += [e.metadata["commandId"] for e in events if e.metadata["causationPosition"] is None]
        assert sorted(ids) == sorted(m["id"] for m in messages)  # nothing lost, nothing applied twice
    finally:
        await store.close()


async def _at_least(store, settings, n: int) -> bool:  # noqa: ANN001
    return await consumed(store, settings) >= n


async def _applied(store, clusters: list[str], n: int) -> bool:  # noqa: ANN001
    total = 0
    for cluster in clusters:
        total += sum(1 for e in await all_events(store, cluster) if e.metadata["causationPosition"] is None)
    return total >= n


async def test_a_broker_without_init_producer_id_is_reported_once_and_commands_still_flow(
        kafka_bootstrap: str, db_url: str) -> None:
    """Tansu has no InitProducerId: with idempotence on, the relay cannot start. That is said once,
    naming the setting, and the consumer goes on (the events wait in the outbox)."""
    s = make_settings(kafka_bootstrap, db_url, "idempotence")
    s.kafka_idempotence = True
    messages = messages_for(["solo"], 20)
    store = open_store(db_url)
    try:
        with structlog.testing.capture_logs() as logs:
            async with running(s) as (service, _):
                await produce(kafka_bootstrap, s.commands_topic, messages)
                await wait_for(lambda: _applied(store, ["solo"], len(messages)), timeout=30,
                               what="commands applied while the relay cannot produce")
                await asyncio.sleep(2)
                assert (await service.queries.readiness())[1]["kafka"] is False  # nothing is published
                assert await store.outbox_batch(1)  # the events wait for a relay
        refused = [e for e in logs if e["event"] == "kafka.idempotence_refused"]
        assert len(refused) == 1, [e["event"] for e in logs]
        assert "--no-kafka-idempotence" in refused[0]["message"]
        assert "GANGPLANK_KAFKA_IDEMPOTENCE" in refused[0]["message"]
        assert not [e for e in logs if e["event"] in ("kafka.relay_restart", "kafka.restart")]
    finally:
        await store.close()
