"""The command consumer: `gangplank.commands` in, through the application service.

Effectively once: a record's effect (its input event, decisions, outbox rows, idempotency
record or dead letter) and the partition's next offset commit in ONE database transaction.
The offsets stored in the database are the truth: on every assignment, and after every
failure, a partition is paused, seeked to its stored offset, and resumed. Kafka commits are
only a hint for lag tools.

Per poll (getmany), each partition's records are cut into units, in offset order:
- a run of consecutive valid records of one cluster (at most `max_run`, no id twice) is one
  unit of work (`commands.execute_unit`), one transaction, whose stored offset is the run's
  last offset + 1;
- a malformed record is one dead-letter transaction.
Partitions are processed concurrently (each partition's units one after another).
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.structs import ConsumerRecord

from service import metrics
from service.api.answers import answer
from service.app.commands import Policy
from service.app.service import Gangplank
from service.kafka.messages import Malformed, Parsed, dead_letter, key_conflict_error, parse_values
from service.store.base import ConsumedOffset, DeadLetter, IdempotencyRecord, StoreUnavailable

log = structlog.get_logger("gangplank.kafka.consumer")


@dataclass
class Backoff:
    """Exponential backoff with a ceiling: 0.1 s, 0.2 s, ... 5 s."""
    initial: float = 0.1
    ceiling: float = 5.0
    attempts: int = 0

    def next(self) -> float:
        delay: float = min(self.ceiling, self.initial * (2 ** self.attempts))
        self.attempts += 1
        return delay

    def reset(self) -> None:
        self.attempts = 0


@dataclass
class Run:
    """Consecutive valid records of one cluster: one unit of work, one transaction."""
    cluster: str
    records: list[ConsumerRecord] = field(default_factory=list)
    parsed: list[Parsed] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)


@dataclass
class Dead:
    record: ConsumerRecord
    error: str


Unit = Run | Dead
Parser = Callable[[list[Any], str], Awaitable[list[Parsed | Malformed]]]


@dataclass
class Poll:
    """One getmany: its records, each partition's epoch when fetched, and the parsed values
    (by a parser; empty when parsing is left to `plan`)."""
    batch: dict[TopicPartition, list[ConsumerRecord]]
    epochs: dict[TopicPartition, int]
    parsed: dict[TopicPartition, list[Parsed | Malformed]]


def plan(records: Sequence[ConsumerRecord], *, topic: str, max_run: int,
         parsed_values: Sequence[Parsed | Malformed] | None = None) -> list[Unit]:
    """Cut one partition's records (offset order) into units, keeping their order.

    A run ends at a record of another cluster, a malformed record, a message id already in
    the run (so the application service sees each id once per call and answers the second
    from the first's stored record, or dead-letters it when it differs), or `max_run`.
    `parsed_values`: the records' values parsed already (messages.parse_values)."""
    if parsed_values is None:
        parsed_values = parse_values([r.value for r in records], topic)
    units: list[Unit] = []
    run: Run | None = None
    for record, parsed in zip(records, parsed_values):
        if isinstance(parsed, Malformed):
            run = None
            units.append(Dead(record, parsed.error))
            continue
        if run is None or run.cluster != parsed.cluster or parsed.key in run.keys or len(run.records) >= max_run:
            run = Run(parsed.cluster)
            units.append(run)
        run.records.append(record)
        run.parsed.append(parsed)
        run.keys.add(parsed.key)
    return units


def kafka_policy(key_reused_letter: Callable[[int, IdempotencyRecord], DeadLetter] | None = None) -> Policy:
    """Kafka's Policy: every message's fate is in the stream (a state rejection is a
    CommandRejected event), answers are only positions (nobody reads them but a retry), and a
    reused key is dead-lettered with `key_reused_letter`."""
    return Policy(record_rejections=True, views=False, stored_answer=answer, key_reused_letter=key_reused_letter,
                  outside_ownership=True)


class CommandConsumer:
    """Runs the consume loop on an AIOKafkaConsumer that the caller created and started."""

    def __init__(self, service: Gangplank, consumer: AIOKafkaConsumer, *, group: str, topic: str,
                 dlq_topic: str, max_records: int = 2000, max_run: int = 500,
                 commit_interval: float = 1.0, parser: Parser | None = None) -> None:
        self.service = service
        self.consumer = consumer
        self.group = group
        self.topic = topic
        self.dlq_topic = dlq_topic
        self.max_records = max_records
        self.max_run = max_run
        self.commit_interval = commit_interval
        # Partitions synchronised with the database: the next offset to process.
        self.positions: dict[TopicPartition, int] = {}
        # Paused partitions waiting to be seeked to their stored offset: (due time, backoff).
        self.unsynced: dict[TopicPartition, tuple[float, Backoff]] = {}
        self.lock = asyncio.Lock()  # held while processing; a revocation waits for it
        self.stopping = asyncio.Event()
        self.processed = 0  # records whose effect committed (for tests and logs)
        self._committed_hint: dict[TopicPartition, int] = {}
        self._last_hint = 0.0
        self._backoffs: dict[TopicPartition, Backoff] = {}
        self.listener = _Listener(self)
        self.parser = parser
        # Bumped whenever a partition's position is set other than by processing (a seek, a failure,
        # a (re)assignment): a poll fetched before that is not processed for it (it is fetched again).
        self._epochs: dict[TopicPartition, int] = {}

    # -- assignment and synchronisation with the database ----------------------------------------
    def owns_partition_zero(self) -> bool:
        return TopicPartition(self.topic, 0) in self.positions or TopicPartition(self.topic, 0) in self.unsynced

    async def on_assigned(self, assigned: set[TopicPartition]) -> None:
        async with self.lock:
            for tp in assigned:
                self._bump(tp)
                self.positions.pop(tp, None)
                self.consumer.pause(tp)
                self.unsynced[tp] = (0.0, Backoff())
            await self._sync_due()
        log.info("kafka.assigned", partitions=sorted(tp.partition for tp in assigned),
                 synced={tp.partition: self.positions.get(tp) for tp in assigned})

    async def on_revoked(self, revoked: set[TopicPartition]) -> None:
        async with self.lock:  # in-flight processing finishes before the partitions move
            for tp in revoked:
                self._bump(tp)
                self.positions.pop(tp, None)
                self.unsynced.pop(tp, None)
                self._committed_hint.pop(tp, None)
                try:
                    metrics.KAFKA_LAG.remove(tp.topic, str(tp.partition))
                except KeyError:
                    pass
        if revoked:
            log.info("kafka.revoked", partitions=sorted(tp.partition for tp in revoked))

    async def _sync_due(self) -> None:
        """Seek every due unsynced partition to its offset in the database and resume it."""
        now = time.monotonic()
        assignment = self.consumer.assignment()
        for tp in [tp for tp in self.unsynced if tp not in assignment]:
            del self.unsynced[tp]
        due = [tp for tp, (at, _) in self.unsynced.items() if at <= now]
        if not due:
            return
        try:
            stored = await self.service.store.stored_offsets(self.group, self.topic)
            ends = await self.consumer.end_offsets(due)
            # beyond the partition's end: the topic was created again (or lost its records) under
            # a kept database, and its offsets start over: read it from its beginning (the
            # message ids, idempotency keys, keep what was applied from being applied again)
            beyond = {tp for tp in due if stored.get(tp.partition, 0) > ends[tp]}
            missing = [tp for tp in due if tp.partition not in stored or tp in beyond]
            beginnings = await self.consumer.beginning_offsets(missing) if missing else {}
        except Exception as exc:  # database or broker unavailable: try again later
            for tp in due:
                _, backoff = self.unsynced[tp]
                delay = backoff.next()
                self.unsynced[tp] = (time.monotonic() + delay, backoff)
            log.warning("kafka.sync_failed", partitions=sorted(tp.partition for tp in due),
                        error=f"{type(exc).__name__}: {exc}", retry_in=round(delay, 2))
            return
        for tp in due:
            offset = stored.get(tp.partition)
            if tp in beyond:
                log.warning("kafka.stored_offset_beyond_end", partition=tp.partition, stored=offset, end=ends[tp],
                            note="the topic was created again: reading it from its beginning")
            if offset is None or tp in beyond:
                offset = beginnings[tp]
            self.consumer.seek(tp, offset)
            self._bump(tp)
            self.positions[tp] = offset
            del self.unsynced[tp]
            self.consumer.resume(tp)

    def _fail(self, tp: TopicPartition, exc: BaseException) -> None:
        """Pause the partition; it is seeked to its stored offset again after a backoff."""
        previous = self.unsynced.get(tp)
        backoff = previous[1] if previous else self._backoffs.setdefault(tp, Backoff())
        delay = backoff.next()
        self._bump(tp)
        self.positions.pop(tp, None)
        self.consumer.pause(tp)
        self.unsynced[tp] = (time.monotonic() + delay, backoff)
        log.warning("kafka.partition_paused", partition=tp.partition, error=f"{type(exc).__name__}: {exc}",
                    retry_in=round(delay, 2))

    def _bump(self, tp: TopicPartition) -> None:
        self._epochs[tp] = self._epochs.get(tp, 0) + 1

    # -- the loop -----------------------------------------------------------------------------
    async def run(self) -> None:
        """Poll, parse, decide. With a parser (worker processes), the next poll is fetched and
        parsed while this one is decided and committed: parsing leaves the deciding process."""
        ahead: asyncio.Future[Poll] | None = None
        try:
            while not self.stopping.is_set():
                if self.unsynced:
                    async with self.lock:
                        await self._sync_due()
                poll = await (ahead or self._poll())
                ahead = None
                if poll.batch:
                    if self.parser is not None:
                        ahead = asyncio.ensure_future(self._poll())
                    async with self.lock:
                        work = {tp: records for tp, records in poll.batch.items()
                                if tp in self.positions and self._epochs.get(tp, 0) == poll.epochs[tp]}
                        if work:
                            await asyncio.gather(*(self._partition(tp, records, poll.parsed.get(tp))
                                                   for tp, records in work.items()))
                self._update_lag()
                await self._commit_hint()
        finally:
            if ahead is not None:
                ahead.cancel()
                with contextlib.suppress(BaseException):
                    await ahead

    async def _poll(self) -> Poll:
        batch = await self.consumer.getmany(timeout_ms=100, max_records=self.max_records)
        epochs = {tp: self._epochs.get(tp, 0) for tp in batch}  # as fetched: before any await
        parsed: dict[TopicPartition, list[Parsed | Malformed]] = {}
        if batch and self.parser is not None:
            partitions = list(batch)
            values = [r.value for tp in partitions for r in batch[tp]]
            try:
                flat = await self.parser(values, self.topic)
            except Exception as exc:  # a worker died: parse here instead
                log.warning("kafka.parser_failed", error=f"{type(exc).__name__}: {exc}")
                flat = parse_values(values, self.topic)
            i = 0
            for tp in partitions:
                parsed[tp] = flat[i:i + len(batch[tp])]
                i += len(batch[tp])
        return Poll(batch, epochs, parsed)

    async def _partition(self, tp: TopicPartition, records: list[ConsumerRecord],
                         parsed: list[Parsed | Malformed] | None = None) -> None:
        start = self.positions[tp]
        if records[0].offset < start:
            # The fetcher went back below what the database holds: its position was reset (the
            # broker lost the partition's records, or the topic was created again). Settle it
            # with the database and the partition's end (see _sync_due), as after an assignment.
            log.warning("kafka.records_below_stored_offset", partition=tp.partition, first=records[0].offset,
                        stored=start, note="synchronising the partition with the database again")
            self._bump(tp)
            self.positions.pop(tp, None)
            self.consumer.pause(tp)
            self.unsynced[tp] = (0.0, Backoff())
            return
        try:
            for unit in plan(records, topic=tp.topic, max_run=self.max_run, parsed_values=parsed):
                if isinstance(unit, Run):
                    await self._run(tp, unit)
                    last = unit.records[-1].offset
                else:
                    await self._dead(tp, unit)
                    last = unit.record.offset
                self.positions[tp] = last + 1
                self.processed += len(unit.records) if isinstance(unit, Run) else 1
            backoff = self._backoffs.get(tp)
            if backoff is not None:
                backoff.reset()
        except Exception as exc:  # StoreUnavailable above all; anything else is retried the same way
            if not isinstance(exc, StoreUnavailable):
                log.exception("kafka.unexpected_error", partition=tp.partition)
            self._fail(tp, exc)

    async def _run(self, tp: TopicPartition, run: Run) -> None:
        offset = ConsumedOffset(self.group, tp.topic, tp.partition, run.records[-1].offset + 1)

        def conflict(index: int, prior: IdempotencyRecord) -> DeadLetter:
            record = run.records[index]
            return dead_letter(self.dlq_topic, key=record.key, value=record.value,
                               error=key_conflict_error(prior.fingerprint), topic=tp.topic,
                               partition=tp.partition, offset=record.offset)

        await self.service.commands.execute_unit(run.cluster, [p.item for p in run.parsed], kafka_policy(conflict),
                                                 offsets=[offset])

    async def _dead(self, tp: TopicPartition, dead: Dead) -> None:
        record = dead.record
        letter = dead_letter(self.dlq_topic, key=record.key, value=record.value, error=dead.error,
                             topic=tp.topic, partition=tp.partition, offset=record.offset)
        await self.service.commands.dead_letter(letter, ConsumedOffset(self.group, tp.topic, tp.partition,
                                                              record.offset + 1))
        log.info("kafka.dead_letter", partition=tp.partition, offset=record.offset, error=dead.error[:200])

    # -- hints and metrics --------------------------------------------------------------------
    def _update_lag(self) -> None:
        for tp, position in self.positions.items():
            high = self.consumer.highwater(tp)
            if high is not None:
                metrics.KAFKA_LAG.labels(topic=tp.topic, partition=str(tp.partition)).set(max(0, high - position))

    async def _commit_hint(self, force: bool = False) -> None:
        """Commit the processed offsets to Kafka now and then: a hint for lag tools only."""
        now = time.monotonic()
        if not force and now - self._last_hint < self.commit_interval:
            return
        self._last_hint = now
        offsets = {tp: pos for tp, pos in self.positions.items() if self._committed_hint.get(tp) != pos}
        if not offsets:
            return
        try:
            await asyncio.wait_for(self.consumer.commit(offsets), timeout=5)
            self._committed_hint.update(offsets)
        except Exception as exc:  # a rebalance in progress, the broker away: it is only a hint
            log.debug("kafka.commit_hint_failed", error=f"{type(exc).__name__}: {exc}")


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]  # aiokafka ships no type information
    def __init__(self, owner: CommandConsumer) -> None:
        self.owner = owner

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.owner.on_revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self.owner.on_assigned(set(assigned))
