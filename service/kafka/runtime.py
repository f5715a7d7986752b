"""The Kafka side of a Gangplank process: topics, the command consumer, the outbox relay.

    runtime = await start_kafka(service, settings)   # service/bootstrap.py
    ...
    await runtime.stop()

`start_kafka` starts three tasks that fail and recover apart:
- the consumer's supervisor: creates the topics when missing (ensure_topics: partitions and
  replication factor from settings, else the broker's defaults), runs the command consumer, and
  starts it again with backoff after any failure;
- the relay's supervisor: the same for the producer and the outbox relay. A broker that cannot
  serve the idempotent producer (no InitProducerId) while idempotence is on is reported once, as
  an error naming `--no-kafka-idempotence` / `GANGPLANK_KAFKA_IDEMPOTENCE`; the relay then retries
  quietly, and the consumer goes on meanwhile (its records' effects wait in the outbox);
- the broker watch: asks the broker for its metadata every second.

Readiness (`service.queries.kafka_running`) is True while the consumer runs, the relay's producer runs
and publishes, and the broker answers: false while the broker is unreachable, also after it
dies mid-run, and true again once it answers. `start_kafka` waits up to `connect_timeout` (2 s)
for the consumer; when the broker is not reachable by then the process still starts and the
supervisors keep trying.

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
import logging
import multiprocessing
import os
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    TopicAlreadyExistsError,
    UnknownError,
    UnsupportedVersionError,
)

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
WATCH_INTERVAL = 1.0  # seconds between two metadata requests of the broker watch
WATCH_TIMEOUT = 2.0
# What a broker answers InitProducerId with when it cannot serve the idempotent producer
# (Tansu: UnknownError; a broker refusing it by ACL: ClusterAuthorizationFailed).
IDEMPOTENCE_REFUSED = (UnknownError, UnsupportedVersionError, ClusterAuthorizationFailedError)


async def broker_defaults(admin: AIOKafkaAdminClient) -> tuple[int, int]:
    """The broker's num.partitions and default.replication.factor (DescribeConfigs); Kafka's own
    defaults (1, 1) for what the broker does not say."""
    found = {"num.partitions": 1, "default.replication.factor": 1}
    try:
        cluster = await admin.describe_cluster()
        broker = str(cluster.get("controller_id") if cluster.get("controller_id", -1) >= 0
                     else cluster["brokers"][0]["node_id"])
        responses = await admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, broker, list(found))])
        for response in responses:
            for resource in response.resources:
                for entry in resource[4]:  # (name, value, read_only, ...)
                    if entry[0] in found and entry[1] not in (None, ""):
                        found[entry[0]] = int(entry[1])
    except Exception as exc:  # noqa: BLE001 - a broker without DescribeConfigs: Kafka's defaults
        log.info("kafka.broker_defaults_unknown", error=f"{type(exc).__name__}: {exc}", using=found)
    return found["num.partitions"], found["default.replication.factor"]


async def ensure_topics(settings: Settings, *, timeout: float = 30.0) -> list[str]:
    """Create the command, dead-letter and decision topics when missing; the ones created.
    Partitions and replication factor: settings.kafka_partitions / kafka_replication_factor,
    each the broker's default when not set."""
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
        partitions, replication = settings.kafka_partitions, settings.kafka_replication_factor
        if partitions is None or replication is None:
            default_partitions, default_replication = await broker_defaults(admin)
            partitions = default_partitions if partitions is None else partitions
            replication = default_replication if replication is None else replication
        try:
            response = await admin.create_topics(
                [NewTopic(name, num_partitions=partitions, replication_factor=replication) for name in missing])
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
            log.info("kafka.topics_created", topics=created, partitions=partitions, replication_factor=replication)
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


class IdempotenceRefused(Exception):
    """The producer could not start because the broker refused InitProducerId."""


class _QuietInitProducerId(logging.Filter):
    """Once the refusal is reported, aiokafka's own line for each retry says nothing new."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "InitProducerId" not in record.getMessage()


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
        self.connected = asyncio.Event()  # set once the consumer ran (start waits for it)
        self._became_ready = asyncio.Event()
        self.broker_reachable = False
        self.idempotence_refused = False  # reported once (see _relay_failed)
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.processed = 0  # records processed by earlier consumers of this runtime
        self.published = 0
        self.parse_pool = ParsePool(settings.kafka_parse_workers) if settings.kafka_parse_workers > 0 else None
        self._warm_up: asyncio.Task[None] | None = None
        self._quiet = _QuietInitProducerId()

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self, connect_timeout: float = 15.0) -> KafkaRuntime:
        self.service.queries.kafka_running = False
        if self.parse_pool is not None:  # the workers start meanwhile; the first poll waits for them
            self._warm_up = asyncio.create_task(self.parse_pool.warm_up(), name="gangplank-parse-pool")
        self._tasks = [
            asyncio.create_task(self._supervise("consumer", self._run_consumer, self._consumer_failed),
                                name="gangplank-kafka-consumer"),
            asyncio.create_task(self._supervise("relay", self._run_relay, self._relay_failed),
                                name="gangplank-kafka-relay"),
            asyncio.create_task(self._watch(), name="gangplank-kafka-watch"),
        ]
        try:
            await asyncio.wait_for(self.connected.wait(), timeout=connect_timeout)
        except TimeoutError:
            log.warning("kafka.not_connected_yet", bootstrap=self.settings.kafka_bootstrap,
                        note="the service runs; the consumer starts when the broker answers")
            return self
        with contextlib.suppress(TimeoutError):  # the relay and the broker watch, a moment more
            await asyncio.wait_for(self._became_ready.wait(), timeout=min(2.0, connect_timeout))
        return self

    async def stop(self, timeout: float = 15.0) -> None:
        self._stopping.set()
        for part in (self.consumer, self.relay):
            if part is not None:
                part.stopping.set()
        for task in self._tasks:
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout=timeout)
            except (TimeoutError, Exception):
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        self.service.queries.kafka_running = False
        logging.getLogger("aiokafka.producer.sender").removeFilter(self._quiet)
        if self.parse_pool is not None:
            self.parse_pool.close()

    @property
    def total_processed(self) -> int:
        return self.processed + (self.consumer.processed if self.consumer else 0)

    @property
    def total_published(self) -> int:
        return self.published + (self.relay.published if self.relay else 0)

    # -- readiness -----------------------------------------------------------------------------
    def _ready(self) -> bool:
        relay_ok = self.relay is not None and self.relay.healthy
        return self.consumer is not None and relay_ok and self.broker_reachable

    def _update(self) -> None:
        ready = self._ready()
        self.service.queries.kafka_running = ready
        if ready:
            self._became_ready.set()

    async def _watch(self) -> None:
        """Ask the broker for its metadata every WATCH_INTERVAL: readiness follows the answers."""
        admin: AIOKafkaAdminClient | None = None
        while not self._stopping.is_set():
            try:
                if admin is None:
                    admin = AIOKafkaAdminClient(bootstrap_servers=self.settings.kafka_bootstrap,
                                                client_id="gangplank-watch",
                                                request_timeout_ms=int(WATCH_TIMEOUT * 1000))
                    await asyncio.wait_for(admin.start(), WATCH_TIMEOUT)
                await asyncio.wait_for(admin.describe_cluster(), WATCH_TIMEOUT)
                reachable = True
            except Exception as exc:  # noqa: BLE001 - any failure: not reachable now
                reachable = False
                if admin is not None:  # start again with a fresh client (bootstrap anew)
                    with contextlib.suppress(Exception):
                        await admin.close()
                    admin = None
                if self.broker_reachable:
                    log.warning("kafka.broker_unreachable", bootstrap=self.settings.kafka_bootstrap,
                                error=f"{type(exc).__name__}: {exc}")
            if reachable and not self.broker_reachable:
                log.info("kafka.broker_reachable", bootstrap=self.settings.kafka_bootstrap)
            self.broker_reachable = reachable
            self._update()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=WATCH_INTERVAL)
        if admin is not None:
            with contextlib.suppress(Exception):
                await admin.close()

    # -- supervision ---------------------------------------------------------------------------
    async def _supervise(self, part: str, run_once: Callable[[], Awaitable[None]],
                         failed: Callable[[Exception], float | None]) -> None:
        """Run `run_once` again after every failure, with backoff; `failed` logs the failure
        and may set the delay itself."""
        backoff = Backoff(initial=0.5, ceiling=10.0)
        while not self._stopping.is_set():
            try:
                await run_once()
                backoff.reset()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._update()
                delay = failed(exc) or backoff.next()
                log.debug("kafka.retry", part=part, retry_in=delay)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), timeout=delay)

    def _consumer_failed(self, exc: Exception) -> None:
        log.warning("kafka.consumer_restart", error=f"{type(exc).__name__}: {exc}")

    def _relay_failed(self, exc: Exception) -> float | None:
        if isinstance(exc, IdempotenceRefused):
            if not self.idempotence_refused:
                self.idempotence_refused = True
                log.error("kafka.idempotence_refused", error=f"{type(exc).__name__}: {exc}",
                          message="the broker does not serve the idempotent producer (InitProducerId): no "
                                  "decision is published. Start with --no-kafka-idempotence or set "
                                  "GANGPLANK_KAFKA_IDEMPOTENCE=false. Commands are still consumed; their events "
                                  "wait in the outbox. Retrying every 30 s without logging this again.")
                logging.getLogger("aiokafka.producer.sender").addFilter(self._quiet)
            return 30.0
        log.warning("kafka.relay_restart", error=f"{type(exc).__name__}: {exc}")
        return None

    def _relay_active(self) -> bool:
        if self.relay_mode == "always":
            return True
        if self.relay_mode == "never" or self.consumer is None:
            return False
        return self.consumer.owns_partition_zero()

    async def _until_stopped(self, task: asyncio.Task[None]) -> None:
        """Wait for `task` (raising what it raised) or for stop."""
        stop_waiter = asyncio.create_task(self._stopping.wait())
        try:
            done, _ = await asyncio.wait([task, stop_waiter], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop_waiter.cancel()
        failure = task.exception() if task in done else None
        if failure is not None:
            raise failure

    async def _finish(self, task: asyncio.Task[None] | None) -> None:
        if task is None:
            return
        try:  # it finishes the unit or round it is in
            await asyncio.wait_for(asyncio.shield(task), timeout=10)
        except BaseException:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def _run_consumer(self) -> None:
        s = self.settings
        await ensure_topics(s)
        kafka_consumer = AIOKafkaConsumer(
            bootstrap_servers=s.kafka_bootstrap, client_id="gangplank-consumer", group_id=s.consumer_group,
            enable_auto_commit=False, auto_offset_reset="earliest", isolation_level="read_committed",
            session_timeout_ms=self.session_timeout_ms, heartbeat_interval_ms=max(500, self.session_timeout_ms // 5),
            max_partition_fetch_bytes=4 * 1024 * 1024, fetch_max_wait_ms=s.kafka_fetch_max_wait_ms)
        consumer: CommandConsumer | None = None
        task: asyncio.Task[None] | None = None
        try:
            await kafka_consumer.start()
            consumer = CommandConsumer(self.service, kafka_consumer, group=s.consumer_group, topic=s.commands_topic,
                                       dlq_topic=s.dlq_topic, max_records=self.max_records, max_run=self.max_run,
                                       parser=self.parse_pool)
            kafka_consumer.subscribe([s.commands_topic], listener=consumer.listener)
            if self._stopping.is_set():
                return
            self.consumer = consumer
            task = asyncio.create_task(consumer.run(), name="gangplank-consumer")
            self.connected.set()
            self._update()
            log.info("kafka.consumer_running", bootstrap=s.kafka_bootstrap, group=s.consumer_group,
                     commands=s.commands_topic, dlq=s.dlq_topic)
            await self._until_stopped(task)
        finally:
            self.consumer = None
            self._update()
            if consumer is not None:
                consumer.stopping.set()
                await self._finish(task)
                self.processed += consumer.processed
            with contextlib.suppress(Exception):
                await kafka_consumer.stop()

    async def _run_relay(self) -> None:
        s = self.settings
        await ensure_topics(s)
        producer = AIOKafkaProducer(
            bootstrap_servers=s.kafka_bootstrap, client_id="gangplank-relay", acks="all",
            enable_idempotence=s.kafka_idempotence, max_request_size=MAX_REQUEST_SIZE,
            max_batch_size=MAX_BATCH_SIZE, linger_ms=0, request_timeout_ms=30_000)
        relay: OutboxRelay | None = None
        task: asyncio.Task[None] | None = None
        try:
            try:
                await producer.start()  # with idempotence: InitProducerId, which some brokers refuse
            except IDEMPOTENCE_REFUSED as exc:
                if s.kafka_idempotence:
                    raise IdempotenceRefused(f"{type(exc).__name__}: {exc}") from exc
                raise
            if self._stopping.is_set():
                return
            relay = OutboxRelay(self.service, producer, active=self._relay_active, on_health=self._update)
            self.relay = relay
            task = asyncio.create_task(relay.run(), name="gangplank-relay")
            self._update()
            log.info("kafka.relay_running", decisions=s.decisions_topic, idempotence=s.kafka_idempotence)
            await self._until_stopped(task)
        finally:
            self.relay = None
            self._update()
            if relay is not None:
                relay.stopping.set()
                await self._finish(task)
                self.published += relay.published
            with contextlib.suppress(Exception):
                await producer.stop()


async def start_kafka(service: Gangplank, settings: Settings, connect_timeout: float = 2.0) -> KafkaRuntime:
    """Start the consumer and the relay for `service` (see the module docstring). The HTTP API
    waits for this: a broker that is down holds `/healthz` back only `connect_timeout` seconds
    (readiness then says `kafka: false` until the supervisors connect)."""
    return await KafkaRuntime(service, settings).start(connect_timeout)
