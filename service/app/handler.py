"""The command handler: one unit of work for HTTP, Kafka and the CLI.

For each batch of units (service/app/batcher.py): take the cluster's cached state (caught up
with the store), let the decider accept each command and run its pass, then append the inputs,
their decisions, the idempotency records, outbox rows, dead letters and consumed offsets in ONE
transaction with the expected position. The batch is decided inside the cluster's turn
(EventStore.exclusive: on PostgreSQL the cluster's writer lock, shared by every replica): the
head, the keys and the events this replica missed are read under the lock, the missed events
folded, and no other writer can change the stream before the commit (docs/design.md,
*Replicas*). A conflict can then only come from a writer that takes no turn; it drops the cached
state (deciding mutated it), reloads and retries, so a stream never forks. What differs between
adapters is their Policy (service/app/commands.py).
"""
from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from service import metrics
from service.app.batcher import GroupCommit, Unit
from service.app.cache import CATCH_UP_BATCH, CachedCluster, ClusterCache
from service.app.checkpoints import Checkpointer
from service.app.commands import Accepted, Command, KeyReused, Policy, Rejected, Replayed, Result, Submission
from service.app.registry import COMMANDS
from service.app.snapshots import Snapshotter
from service.clock import utc_now
from service.domain import ClusterState, Event, Rejection, accept, handle, rejection_event
from service.domain.model import events as ev
from service.store.base import (
    UNFENCED,
    ClusterTurn,
    ConcurrencyConflict,
    ConsumedOffset,
    DeadLetter,
    EventStore,
    Fencing,
    IdempotencyKeyTaken,
    IdempotencyRecord,
    NewEvent,
    NotOwner,
)

MAX_RETRIES = 20


class _FarBehind(Exception):
    """The cached state misses more events than a turn should fold while holding the lock."""


class AppendSignal:
    """Wakes whoever waits for this process's next commit (long polls, the outbox relay)."""

    def __init__(self) -> None:
        self._condition = asyncio.Condition()

    async def notify(self) -> None:
        async with self._condition:
            self._condition.notify_all()

    async def wait(self, timeout: float) -> None:
        """Until the next commit, or `timeout` seconds."""
        async with self._condition:
            try:
                await asyncio.wait_for(self._condition.wait(), timeout=timeout)
            except TimeoutError:
                pass


@dataclass
class _Pass:
    """One transaction's work: the submissions of its units, flattened, and what they produce."""
    units: list[Unit]
    flat: list[tuple[Submission, Policy, int]] = field(default_factory=list)  # (submission, policy, index in unit)
    results: list[Result | None] = field(default_factory=list)
    events: list[NewEvent] = field(default_factory=list)
    records: list[IdempotencyRecord] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    seen: dict[str, tuple[int, IdempotencyRecord]] = field(default_factory=dict)  # key -> (index, record)
    head: tuple[int, str] | None = None  # (position, hash) of the last event appended

    def __post_init__(self) -> None:
        self.flat = [(s, unit.policy, i) for unit in self.units for i, s in enumerate(unit.submissions)]
        self.results = [None] * len(self.flat)

    @property
    def offsets(self) -> list[ConsumedOffset]:
        return [o for unit in self.units for o in unit.offsets]

    def key_reused(self, i: int, stored: IdempotencyRecord) -> None:
        _, policy, index = self.flat[i]
        self.results[i] = KeyReused(stored.fingerprint)
        if policy.key_reused_letter is not None:
            self.dead_letters.append(policy.key_reused_letter(index, stored))

    def by_unit(self) -> list[list[Result]]:
        out: list[list[Result]] = []
        i = 0
        for unit in self.units:
            chunk = self.results[i:i + len(unit.submissions)]
            out.append([r for r in chunk if r is not None])
            i += len(unit.submissions)
        return out


class CommandHandler:
    def __init__(self, store: EventStore, cache: ClusterCache, snapshots: Snapshotter, *,
                 outbox_topic: str | None = None, checkpoints: Checkpointer | None = None) -> None:
        self.store = store
        self.cache = cache
        self.snapshots = snapshots
        self.checkpoints = checkpoints or Checkpointer(store, None)
        self.outbox_topic = outbox_topic
        self.appended = AppendSignal()
        # per cluster, the commits whose after-commit work is still to do: (entry, events appended,
        # (position, hash) of the head or None, whether more commands are coming: see _commit_once)
        self._after: dict[str, list[tuple[CachedCluster, int, tuple[int, str] | None, bool]]] = {}
        self.batcher: GroupCommit[list[Result]] = GroupCommit(self._commit, after=self._after_commit)
        # replicas (docs/replicas.md): only the owner decides; others get NotOwner before any state is loaded
        self.fencing: Fencing | None = None

    # -- entry points ---------------------------------------------------------------------------
    async def execute(self, submission: Submission, policy: Policy, *, dry_run: bool = False) -> Result:
        """One command, group-committed with whatever else is waiting for its cluster. A dry run
        decides on a copy of the state and records nothing (its idempotency key is not used)."""
        if dry_run:
            return await self._dry_run(submission.command)
        return (await self.batcher.submit(submission.command.cluster, Unit([submission], policy, caller=True)))[0]

    async def execute_unit(self, cluster: str, submissions: Sequence[Submission], policy: Policy, *,
                           offsets: Sequence[ConsumedOffset] = ()) -> list[Result]:
        """Several commands for one cluster, committed together (with `offsets`) or not at all."""
        return await self.batcher.submit(cluster, Unit(submissions, policy, offsets))

    async def dead_letter(self, letter: DeadLetter, offset: ConsumedOffset) -> None:
        """A malformed message: its dead letter and the moved offset, in one transaction."""
        await self.store.record_without_events(dead_letters=[letter], offsets=[offset])

    # -- the unit of work -----------------------------------------------------------------------
    async def _commit(self, cluster: str, units: list[Unit]) -> list[list[Result]]:
        token = UNFENCED.set(True) if self._outside_ownership(cluster, units) else None
        try:
            for attempt in range(MAX_RETRIES):
                try:
                    return await self._commit_once(cluster, _Pass(units))
                except ConcurrencyConflict:
                    self.cache.drop(cluster)
                    await asyncio.sleep(min(0.001 * (2 ** attempt), 0.2))
                except IdempotencyKeyTaken:
                    self.cache.drop(cluster)  # a concurrent duplicate: answer from the stored record
        finally:
            if token is not None:
                UNFENCED.reset(token)
        raise RuntimeError(f"cluster {cluster}: too many concurrent writers")

    def _outside_ownership(self, cluster: str, units: list[Unit]) -> bool:
        """Among replicas, only the owner decides: NotOwner (before any state is loaded) unless every
        unit may be decided outside ownership (Policy.outside_ownership)."""
        if self.fencing is None or self.fencing.fence(cluster) is not None:
            return False
        if all(unit.policy.outside_ownership for unit in units):
            return True
        raise NotOwner(cluster)

    async def _commit_once(self, cluster: str, work: _Pass) -> list[list[Result]]:
        entry = await self.cache.entry(cluster)
        async with entry.lock:
            if not self.cache.is_current(cluster, entry):
                raise ConcurrencyConflict(cluster, entry.state.position, None)
            decided = False
            while True:
                try:
                    async with self.store.exclusive(cluster) as turn:
                        await self._answer_stored_keys(turn, cluster, entry, work)
                        expected = entry.state.position
                        self._decide_all(cluster, entry.state, work)
                        await self._append(turn, cluster, expected, work)
                        decided = True
                    break  # committed
                except _FarBehind:  # catch up without holding the lock, then take a turn again
                    await self.cache.catch_up(entry.state)
                except BaseException:
                    if decided:  # the commit failed: the cached state holds decisions never committed
                        self.cache.drop(cluster)
                    raise
            metrics.QUEUE_LENGTH.labels(cluster=cluster).set(len(entry.state.queue))
            # more to come: a unit of several submissions (a Kafka run), or several callers answered
            # now, who send their next requests on the answer (the batcher waits for them)
            more = any(len(u.submissions) > 1 for u in work.units) or sum(u.caller for u in work.units) > 1
            self._after.setdefault(cluster, []).append((entry, len(work.events), work.head, more))
        if work.events:
            await self.appended.notify()
        return work.by_unit()

    async def _after_commit(self, cluster: str) -> None:
        """Snapshots and checkpoints of the batches just committed, run by the batcher once their
        callers have their answers (a snapshot costs ~0.1-0.2 s on a large cluster: no answer
        waits for it) and before the cluster's next batch is decided."""
        for entry, appended, head, more in self._after.pop(cluster, []):
            async with entry.lock:
                if self.cache.is_current(cluster, entry):
                    busy = self.batcher.waiting(cluster) or more
                    await self.snapshots.after_commit(entry, appended, busy=busy)
            if head is not None:
                await self.checkpoints.after_commit(cluster, appended, *head)

    async def _answer_stored_keys(self, turn: ClusterTurn, cluster: str, entry: CachedCluster,
                                  work: _Pass) -> None:
        """Answer the submissions whose key is stored already, after folding the events this
        replica missed: head, keys and missed events are read in the turn, under the lock, so
        every key committed before is seen (a retry racing its first attempt on another replica
        gets the first answer, not a 409 "exists")."""
        keys = [s.idempotency_key for s, _, _ in work.flat]
        begun = await turn.start([k for k in keys if k is not None], entry.state.position, CATCH_UP_BATCH)
        last, found = begun.last, begun.records
        if last != entry.state.position:
            if last - entry.state.position > CATCH_UP_BATCH:
                raise _FarBehind()
            self.cache.fold(entry.state, begun.missed)
            if entry.state.position != last:
                self.cache.drop(cluster)
                raise ConcurrencyConflict(cluster, entry.state.position, last)
        for i, key in enumerate(keys):
            prior = found.get(key) if key is not None else None
            if prior is None:
                continue
            if prior.fingerprint != (work.flat[i][0].fingerprint or ""):
                work.key_reused(i, prior)
            else:
                work.results[i] = Replayed(prior.status, prior.body)

    def _decide(self, state: ClusterState, work: _Pass, i: int) -> None:
        """Accept and decide one submission, adding its events and idempotency record to `work`."""
        submission, policy, _ = work.flat[i]
        key, fingerprint = submission.idempotency_key, submission.fingerprint or ""
        if key is not None and key in work.seen:  # the same key twice in one transaction
            first, record = work.seen[key]
            if record.fingerprint != fingerprint:
                work.key_reused(i, record)
            else:
                work.results[i] = Replayed(record.status, record.body)
            return
        cmd = submission.command
        accepted = accept(state, cmd.type, cmd.name, cmd.namespace, cmd.body)
        if isinstance(accepted, Rejection):
            work.results[i] = Rejected(accepted)
            if not policy.record_rejections:
                return
            etype, data = rejection_event(cmd.type, cmd.name, cmd.namespace, accepted)
        else:
            etype, data = accepted
        inp, decisions = self._record(state, work, submission, etype, data)
        positions = [inp.position] + [d.position for d in decisions]
        result = work.results[i]
        if isinstance(result, Rejected):
            result.positions = positions
        else:
            body = _answer_view(state, cmd, decisions) if policy.views else \
                {"position": inp.position, "decisions": positions[1:]}
            result = work.results[i] = Accepted(cmd.type, body, positions)
        if key is not None:
            status, answer = policy.stored_answer(result)
            record = IdempotencyRecord(key, fingerprint, status, answer, state.cluster, inp.position)
            work.records.append(record)
            work.seen[key] = (i, record)

    @staticmethod
    def _record(state: ClusterState, work: _Pass, submission: Submission, etype: str,
                data: dict[str, Any]) -> tuple[Event, list[Event]]:
        """Fold the input and its pass into `state`; their events go into `work`."""
        origin = submission.origin
        meta = {"commandId": origin.command_id or submission.idempotency_key, "source": origin.source,
                "actor": origin.actor, "causationPosition": None, "receivedAt": origin.received_at or utc_now()}
        inp = Event(state.position + 1, etype, data)
        decided = time.perf_counter()
        decisions = handle(state, inp)
        metrics.DECISION_LATENCY.observe(time.perf_counter() - decided)
        work.events.append(NewEvent(etype, data, meta, ev.SCHEMA_VERSIONS[etype]))
        for d in decisions:
            work.events.append(NewEvent(d.type, d.data, {**meta, "causationPosition": inp.position},
                                        ev.SCHEMA_VERSIONS[d.type]))
            metrics.DECISIONS.labels(type=d.type).inc()
        return inp, decisions

    def _decide_all(self, cluster: str, state: ClusterState, work: _Pass) -> None:
        """Decide every submission not answered yet; a failure drops the cached state (it holds
        decisions that will not be committed)."""
        try:
            for i in range(len(work.flat)):
                if work.results[i] is None:
                    self._decide(state, work, i)
        except BaseException:
            self.cache.drop(cluster)
            raise

    async def _append(self, turn: ClusterTurn, cluster: str, expected: int, work: _Pass) -> None:
        """Append in the turn (committed when it ends); a failure drops the cached state."""
        offsets = work.offsets
        try:
            if work.events:
                stored = await turn.append(expected, work.events, idempotency=work.records, offsets=offsets,
                                           dead_letters=work.dead_letters, outbox_topic=self.outbox_topic,
                                           echo=False)
                metrics.EVENTS_APPENDED.inc(len(stored))
                work.head = (stored[-1].position, stored[-1].hash) if stored else None
            elif work.records or offsets or work.dead_letters:
                await turn.append(expected, [], idempotency=work.records, offsets=offsets,
                                  dead_letters=work.dead_letters)
        except BaseException:
            self.cache.drop(cluster)
            raise

    # -- dry runs -------------------------------------------------------------------------------
    async def _dry_run(self, command: Command) -> Result:
        entry = await self.cache.fresh(command.cluster)
        live = entry.state  # copied before any await (see ClusterCache.fresh)
        # finished workloads are never changed by deciding: shared, not copied (a long-lived
        # cluster holds hundreds of thousands of them)
        memo: dict[int, Any] = {id(w): w for w in live.by_position.values() if w.deleted_at is not None}
        state = copy.deepcopy(live, memo)
        accepted = accept(state, command.type, command.name, command.namespace, command.body)
        if isinstance(accepted, Rejection):
            return Rejected(accepted)
        etype, data = accepted
        decisions = handle(state, Event(state.position + 1, etype, data))
        body = _answer_view(state, command, decisions)
        body["dryRun"] = True
        return Accepted(command.type, body, [], dry_run=True)


def _answer_view(state: ClusterState, cmd: Command, decisions: list[Event]) -> dict[str, Any]:
    """The answer to an accepted command: the registry's view of what it addressed, and the
    decisions of its pass."""
    body = COMMANDS[cmd.type].view(state, cmd.name, cmd.namespace, decisions)
    body["decisions"] = [{"position": d.position, "type": d.type, "data": d.data} for d in decisions]
    return body
