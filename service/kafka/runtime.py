"""The Kafka side of a Gangplank process: topics, the command consumer, the outbox relay.

    runtime = await start_kafka(service, settings)   # service/bootstrap.py
    ...
    await runtime.stop()

`start_kafka` creates the three topics when missing (partitions = settings.kafka_partitions,
replication 1) and starts a supervisor task that connects, runs the consumer and the relay,
and reconnects with backoff when either fails. It waits up to `connect_timeout` (2 s from
`start_kafka`) for the first connection; when the broker is not reachable by then the process
still starts (readiness says `kafka: false`) and the supervisor keeps trying.
`service.queries.kafka_running` is True while the consumer runs (readiness reports it).

Only one replica relays at a time: the one whose consumer holds partition 0 of the command
topic (a replica alone holds them all). Order and completeness never depend on that choice;
it only keeps replicas from publishing every row twice. A process started with
`relay="always"` relays regardless.

Command records are validated in `settings.kafka_parse_workers` worker processes (ParsePool),
a poll ahead of the one being decided, so that validation does not take the deciding process's
CPU; 0 validates them inline.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import concurrent.futures.process
import contextlib
import multiprocessing
import os
from typing import Any, Literal

import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from service.app.service import Gangplank
from service.config import Settings
from service.kafka.consumer import Backoff, CommandConsumer
from service.kafka.messages import parse_values
from service.kafka.relay import OutboxRelay
from service.process import exit_with_parent

log = structlog.get_logger("gangplank.kafka")

TOPIC_EXISTS = 36  # Kafka error code TOPIC_ALREADY_EXISTS
MAX_REQUEST_SIZE = 4 * 1024 * 1024  # an event of a 10,000-pod gang stays below it
MAX_BATCH_SIZE = 1024 * 1024


async def ensure_topics(settings: Settings, *, timeout: float = 30.0) -> list[str]:
    """Create the command, dead-letter and decision topics when missing; the ones created."""
    assert settings.kafka_bootstrap
    names = [settings.commands_topic, settings.dlq_topic, settings.decisions_topic]
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap, client_id="gangplank-admin",
                                request_timeout_ms=int(timeout * 1000))
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [name for name in names if name not in existing]
        if not missing:
            return []
        try:
            response = await admin.create_topics(
                [NewTopic(name, num_partitions=settings.kafka_partitions, replication_factor=1) for name in missing])
        except TopicAlreadyExistsError:  # another replica created them first
            return []
        created = []
        for error in getattr(response, "topic_errors", []):
            name, code = error[0], error[1]
            if code == 0:
                created.append(name)
            elif code != TOPIC_EXISTS:
                raise RuntimeError(f"creating topic {name!r} failed: error code {code} ({error[2] if len(error) > 2 else ''})")
        if created:
            log.info("kafka.topics_created", topics=created, partitions=settings.kafka_partitions)
        return created
    finally:
        await admin.close()


class ParsePool:
    """Worker processes that validate command records (messages.parse_values) for the consumer,
    so that parsing a poll overlaps deciding the previous one in this process. A broken pool
    (a worker killed) is replaced on the next call; the consumer parses inline meanwhile."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None

    def _executor(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=exit_with_parent, initargs=(os.getpid(),))
        return self._pool

    async def __call__(self, values: list[Any], topic: str) -> list[Any]:
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor(), parse_values, values, topic)
        except concurrent.futures.process.BrokenProcessPool:
            self.close()
            raise

    async def warm_up(self) -> None:
        """Start the workers and import what they need before the first poll."""
        with contextlib.suppress(Exception):
            await self([], "warm-up")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


class KafkaRuntime:
    def __init__(self, service: Gangplank, settings: Settings, *,
                 relay: Literal["leader", "always", "never"] = "leader",
                 max_records: int = 2000, max_run: int = 500, session_timeout_ms: int | None = None) -> None:
        assert settings.kafka_bootstrap, "Kafka is not configured"
        self.service = service
        self.settings = settings
        self.relay_mode = relay
        self.max_records = max_records
        self.max_run = max_run
        self.session_timeout_ms = session_timeout_ms or settings.kafka_session_timeout_ms
        self.consumer: CommandConsumer | None = None
        self.relay: OutboxRelay | None = None
        self.connected = asyncio.Event()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.processed = 0  # records processed by earlier consumers of this runtime
        self.published = 0
        self.parse_pool = ParsePool(settings.kafka_parse_workers) if settings.kafka_parse_workers > 0 else None
        self._warm_up: asyncio.Task[None] | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self, connect_timeout: float = 15.0) -> KafkaRuntime:
        self.service.queries.kafka_running = False
        if self.parse_pool is not None:  # the workers start meanwhile; the first poll waits for them
            self._warm_up = asyncio.create_task(self.parse_pool.warm_up(), name="gangplank-parse-pool")
        self._task = asyncio.create_task(self._supervise(), name="gangplank-kafka")
        try:
            await asyncio.wait_for(self.connected.wait(), timeout=connect_timeout)
        except TimeoutError:
            log.warning("kafka.not_connected_yet", bootstrap=self.settings.kafka_bootstrap,
                        note="the service runs; the consumer starts when the broker answers")
        return self

    async def stop(self, timeout: float = 15.0) -> None:
        self._stopping.set()
        for part in (self.consumer, self.relay):
            if part is not None:
                part.stopping.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout=timeout)
            except (TimeoutError, Exception):
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task
        self.service.queries.kafka_running = False
        if self.parse_pool is not None:
            self.parse_pool.close()

    @property
    def total_processed(self) -> int:
        return self.processed + (self.consumer.processed if self.consumer else 0)

    @property
    def total_published(self) -> int:
        return self.published + (self.relay.published if self.relay else 0)

    # -- supervision ---------------------------------------------------------------------------
    async def _supervise(self) -> None:
        backoff = Backoff(initial=0.5, ceiling=10.0)
        while not self._stopping.is_set():
            try:
                await self._run_once()
                backoff.reset()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.service.queries.kafka_running = False
                delay = backoff.next()
                log.warning("kafka.restart", error=f"{type(exc).__name__}: {exc}", retry_in=delay)
                try:
                    await asyncio.wait_for(self._stopping.wait(), timeout=delay)
                except TimeoutError:
                    pass

    def _relay_active(self) -> bool:
        if self.relay_mode == "always":
            return True
        if self.relay_mode == "never" or self.consumer is None:
            return False
        return self.consumer.owns_partition_zero()

    async def _run_once(self) -> None:
        s = self.settings
        await ensure_topics(s)
        producer = AIOKafkaProducer(
            bootstrap_servers=s.kafka_bootstrap, client_id="gangplank-relay", acks="all",
            enable_idempotence=s.kafka_idempotence, max_request_size=MAX_REQUEST_SIZE,
            max_batch_size=MAX_BATCH_SIZE, linger_ms=0, request_timeout_ms=30_000)
        kafka_consumer = AIOKafkaConsumer(
            bootstrap_servers=s.kafka_bootstrap, client_id="gangplank-consumer", group_id=s.consumer_group,
            enable_auto_commit=False, auto_offset_reset="earliest", isolation_level="read_committed",
            session_timeout_ms=self.session_timeout_ms, heartbeat_interval_ms=max(500, self.session_timeout_ms // 5),
            max_partition_fetch_bytes=4 * 1024 * 1024, fetch_max_wait_ms=s.kafka_fetch_max_wait_ms)
        consumer: CommandConsumer | None = None
        relay: OutboxRelay | None = None
        tasks: list[asyncio.Task[None]] = []
        try:
            await producer.start()
            await kafka_consumer.start()
            consumer = CommandConsumer(self.service, kafka_consumer, group=s.consumer_group, topic=s.commands_topic,
                                       dlq_topic=s.dlq_topic, max_records=self.max_records, max_run=self.max_run,
                                       parser=self.parse_pool)
            relay = OutboxRelay(self.service, producer, active=self._relay_active)
            self.consumer, self.relay = consumer, relay
            kafka_consumer.subscribe([s.commands_topic], listener=consumer.listener)
            if self._stopping.is_set():
                return
            tasks = [asyncio.create_task(consumer.run(), name="gangplank-consumer"),
                     asyncio.create_task(relay.run(), name="gangplank-relay")]
            self.service.queries.kafka_running = True
            self.connected.set()
            log.info("kafka.running", bootstrap=s.kafka_bootstrap, group=s.consumer_group, commands=s.commands_topic,
                     decisions=s.decisions_topic, dlq=s.dlq_topic, idempotence=s.kafka_idempotence)
            stop_waiter = asyncio.create_task(self._stopping.wait())
            done, _ = await asyncio.wait([*tasks, stop_waiter], return_when=asyncio.FIRST_COMPLETED)
            stop_waiter.cancel()
            for task in done:
                failure = task.exception() if task is not stop_waiter else None
                if failure is not None:
                    raise failure
        finally:
            self.service.queries.kafka_running = False
            if consumer is not None:
                consumer.stopping.set()
            if relay is not None:
                relay.stopping.set()
            for task in tasks:  # each finishes the unit or round it is in
                try:
                    await asyncio.wait_for(asyncio.shield(task), timeout=10)
                except BaseException:
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task
            if consumer is not None:
                self.processed += consumer.processed
            if relay is not None:
                self.published += relay.published
            self.consumer, self.relay = None, None
            with contextlib.suppress(Exception):
                await kafka_consumer.stop()
            with contextlib.suppress(Exception):
                await producer.stop()


async def start_kafka(service: Gangplank, settings: Settings, connect_timeout: float = 2.0) -> KafkaRuntime:
    """Start the consumer and the relay for `service` (see the module docstring). The HTTP API
    waits for this: a broker that is down holds `/healthz` back only `connect_timeout` seconds
    (readiness then says `kafka: false` until the supervisor connects)."""
    return await KafkaRuntime(service, settings).start(connect_timeout)
