"""The application service: one unit of work shared by HTTP, Kafka and the CLI.

For each command: load the cluster's state (cached in memory, caught up from the
store), let the decider accept it and run its pass, then append the input, its
decisions, the idempotency record, outbox rows and consumed offsets in ONE
transaction with the expected position. A conflict (another writer got there
first) drops the cached state, reloads and retries, so a stream never forks.
"""
from __future__ import annotations

import asyncio
import collections
import copy
import functools
import gc
import pickle
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from service import metrics
from service.app.commands import Command, Origin, Outcome
from service.clock import utc_now
from service.domain import ClusterState, Event, Rejection, accept, evolve, handle, rejection_event, views
from service.domain import events as ev
from service.domain.replay import Replay, ReplayError
from service.domain.upcasting import upcast
from service.gcpause import gc_paused
from service.store.base import (
    ConcurrencyConflict,
    ConsumedOffset,
    DeadLetter,
    EventStore,
    IdempotencyKeyTaken,
    IdempotencyRecord,
    NewEvent,
    Snapshot,
    StoredEvent,
)

SNAPSHOT_VERSION = "state-v2"  # the whole state: restarts rebuild from it
LIGHT_SNAPSHOT_VERSION = "state-light-v2"  # without finished workloads: /state?at=N starts from it
LIGHT_PER_FULL = 50  # a light snapshot every snapshot_every events, a full one too every 50th
SNAPSHOT_DEFER = 10  # under load, a snapshot waits for a pause up to this many intervals
MAX_RETRIES = 20
log = structlog.get_logger("gangplank.app")
CATCH_UP_BATCH = 5000  # events per read when folding
REPLAY_SLICE = 500  # rows folded between event loop turns while a read is in flight
REPLAY_AHEAD = 3  # batches a rebuild reads ahead of the one it folds (workloads deleted within are cheap)
GROUP_COMMIT_MAX = 64  # commands decided and committed in one transaction at most


def problem(status: int, title: str, detail: str, errors: list[dict[str, Any]] | None = None,
            type_: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"type": type_ or f"https://gangplank.dev/problems/{title.lower().replace(' ', '-')}",
                            "title": title, "status": status, "detail": detail}
    if errors is not None:
        body["errors"] = errors
    return body


def domain_event(stored: StoredEvent) -> Event:
    return Event(stored.position, stored.type, upcast(stored.type, stored.schema_version, stored.data))


def event_json(stored: StoredEvent) -> dict[str, Any]:
    return stored.envelope()


@dataclass
class BatchItem:
    command: Command
    origin: Origin
    idempotency_key: str | None = None
    fingerprint: str | None = None


@dataclass
class _Cluster:
    state: ClusterState
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    since_snapshot: int = 0
    snapshots: int = 0


class Gangplank:
    def __init__(self, store: EventStore, *, outbox_topic: str | None = None,
                 snapshot_every: int = 1000) -> None:
        self.store = store
        self.outbox_topic = outbox_topic
        self.snapshot_every = snapshot_every
        self._clusters: dict[str, _Cluster] = {}
        self._clusters_lock = asyncio.Lock()
        self._waiting: dict[str, list[tuple[BatchItem, asyncio.Future[Outcome]]]] = {}
        self._thawed = False  # a cached state was dropped since the last gc.freeze()
        self._drainers: dict[str, asyncio.Task[None]] = {}
        self._appended = asyncio.Condition()
        self.kafka_running: bool | None = None  # None: Kafka not configured

    # -- state ------------------------------------------------------------------------
    async def _cluster(self, cluster: str) -> _Cluster:
        entry = self._clusters.get(cluster)
        if entry is None:
            async with self._clusters_lock:
                entry = self._clusters.get(cluster)
                if entry is None:
                    entry = _Cluster(await self.rebuild(cluster))
                    self._clusters[cluster] = entry
                    # a loaded cluster lives as long as the process: keep its objects out of the
                    # collector's generations (a full collection over a 1,000,000-event cluster
                    # takes a second, and would stall every request behind it). A state dropped
                    # since the last freeze is garbage with reference cycles: collect it first.
                    if self._thawed:
                        gc.collect()
                        self._thawed = False
                    gc.freeze()
        return entry

    async def rebuild(self, cluster: str, until: int | None = None, *, light: bool = False) -> ClusterState:
        """State from the latest snapshot (a cache) plus the events after it.

        light: start from a snapshot without finished workloads when it is nearer (for views
        that only list active workloads); the result then lacks finished workloads before it."""
        versions = (LIGHT_SNAPSHOT_VERSION, SNAPSHOT_VERSION) if light else SNAPSHOT_VERSION
        snap = await self.store.latest_snapshot(cluster, versions, at_or_before=until)

        def start() -> ClusterState:
            if snap is not None:
                try:
                    return pickle.loads(zlib.decompress(snap.blob))
                except Exception:  # a stale or damaged cache: rebuild from events
                    pass
            return ClusterState(cluster)

        state = start()
        try:
            await self._catch_up(state, until, fast=True)
        except ReplayError as exc:  # a stream the fast fold cannot mirror: fold every event
            log.warning("rebuild.fast_replay_refused", cluster=cluster, error=str(exc))
            state = start()
            await self._catch_up(state, until)
        return state

    async def _catch_up(self, state: ClusterState, until: int | None = None, *, fast: bool = False) -> None:
        """Fold the events after state.position (up to `until`). Long catch-ups (a rebuild)
        read the next batch while folding this one, and fold with the cyclic GC paused: the
        fold allocates much and frees little, so collections would rescan the growing state
        again and again (they cost as much as the fold itself on a large cluster).

        fast: fold a long catch-up with `replay.Replay` (the same state, without the work
        that cancels out for workloads submitted and deleted within it), announcing
        REPLAY_AHEAD batches before folding each; it raises ReplayError, state half folded,
        on a stream it cannot mirror (the caller starts over without `fast`)."""
        if fast:
            await self._replay_long(state, until)
            return
        read = self.store.read_data
        batch = await read(state.cluster, after=state.position, limit=CATCH_UP_BATCH, until=until)
        while batch:
            following = None
            if len(batch) == CATCH_UP_BATCH and (until is None or batch[-1][0] < until):
                following = asyncio.ensure_future(read(state.cluster, after=batch[-1][0], limit=CATCH_UP_BATCH,
                                                       until=until))
            try:
                with gc_paused(len(batch) >= 256):
                    for position, type_, version, data in batch:
                        evolve(state, Event(position, type_, upcast(type_, version, data)))
            except BaseException:
                if following is not None:
                    following.cancel()
                raise
            batch = await following if following is not None else []

    async def _replay_long(self, state: ClusterState, until: int | None,
                           observe: Callable[[list[Any]], None] | None = None) -> None:
        """_catch_up's fast fold: batches are announced (Replay.ahead) REPLAY_AHEAD batches
        before they are folded, and the next read runs while a batch is folded. `observe`
        sees each batch of rows once folded (the CLI counts and shows progress)."""
        read = functools.partial(self.store.read_data, decode=False)  # Replay decodes what it needs
        replay = Replay(state)
        pending: collections.deque[list[Any]] = collections.deque()
        after = state.position
        more = until is None or after < until
        following: asyncio.Future[list[Any]] | None = None
        with gc_paused():
            try:
                while True:
                    while more and len(pending) <= REPLAY_AHEAD:  # the batch to fold and those ahead
                        got = await (following or read(state.cluster, after=after, limit=CATCH_UP_BATCH,
                                                       until=until))
                        following = None
                        if got:
                            pending.append(got)
                            replay.ahead(got)
                            after = got[-1][0]
                        more = len(got) == CATCH_UP_BATCH and (until is None or after < until)
                    if not pending:
                        break
                    if more:  # read the next batch while folding this one
                        following = asyncio.ensure_future(read(state.cluster, after=after, limit=CATCH_UP_BATCH,
                                                               until=until))
                    batch = pending.popleft()
                    if following is None:
                        replay.fold(batch)
                    else:  # give the event loop a turn now and then: the read streams in meanwhile
                        for start in range(0, len(batch), REPLAY_SLICE):
                            replay.fold(batch[start:start + REPLAY_SLICE])
                            await asyncio.sleep(0)
                    if observe is not None:
                        observe(batch)
                replay.finish()
            except BaseException:
                if following is not None:
                    following.cancel()
                raise

    async def _fresh(self, cluster: str) -> _Cluster:
        """The cached state, caught up with what other writers appended, holding committed
        events only: a writer holds the entry's lock from deciding to committing, so this
        returns between writers. Read the state before the caller's next await."""
        while True:
            entry = await self._cluster(cluster)
            last = await self.store.last_position(cluster)
            async with entry.lock:
                if not self._current(cluster, entry):
                    continue
                if last > entry.state.position:
                    await self._catch_up(entry.state)
                return entry

    def _drop(self, cluster: str) -> None:
        if self._clusters.pop(cluster, None) is not None:
            gc.unfreeze()  # the dropped state must become collectable (see _cluster)
            self._thawed = True

    def _current(self, cluster: str, entry: _Cluster) -> bool:
        """Is `entry` still the cached one? A writer that failed after deciding drops its entry
        (its state holds decisions that were never committed); whoever waited on that entry's
        lock must not use its state, nor catch it up (its positions are not the stream's)."""
        return self._clusters.get(cluster) is entry

    # -- commands ---------------------------------------------------------------------
    async def execute(self, command: Command, origin: Origin, *, idempotency_key: str | None = None,
                      fingerprint: str | None = None, dry_run: bool = False) -> Outcome:
        if dry_run:
            return await self._dry_run(command)
        item = BatchItem(command, origin, idempotency_key, fingerprint)
        return await self._group_commit(command.cluster, item)

    async def _group_commit(self, cluster: str, item: BatchItem) -> Outcome:
        """Group commit: requests for one cluster that arrive while a commit is in flight are
        decided in order and committed together in the next transaction, so durable throughput
        is not bounded by one fsync per request. A drainer task per cluster does the work, so a
        caller that goes away does not abandon the others' commit."""
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(cluster, []).append((item, future))
        if cluster not in self._drainers:
            self._drainers[cluster] = asyncio.create_task(self._drain(cluster))
        return await asyncio.shield(future)

    async def _drain(self, cluster: str) -> None:
        queue = self._waiting[cluster]
        batch: list[tuple[BatchItem, asyncio.Future[Outcome]]] = []
        try:
            while queue:
                batch = queue[:GROUP_COMMIT_MAX]
                del queue[:GROUP_COMMIT_MAX]
                try:
                    outcomes = await self.execute_batch(cluster, [i for i, _ in batch], record_rejections=False)
                    for (_, fut), out in zip(batch, outcomes):
                        if not fut.done():
                            fut.set_result(out)
                except Exception:
                    # one bad command must not fail the others: decide them one by one
                    for it, fut in batch:
                        try:
                            out = (await self.execute_batch(cluster, [it], record_rejections=False))[0]
                        except Exception as exc:
                            if not fut.done():
                                fut.set_exception(exc)
                        else:
                            if not fut.done():
                                fut.set_result(out)
                batch = []
        except BaseException:  # cancelled (shutdown): nobody is left waiting forever
            for _, fut in [*batch, *queue]:
                if not fut.done():
                    fut.set_exception(RuntimeError("the service is shutting down"))
            queue.clear()
            raise
        finally:
            # no await between the empty check above and this: nothing can slip in unseen
            self._drainers.pop(cluster, None)

    async def execute_batch(self, cluster: str, items: Sequence[BatchItem], *,
                            offsets: Sequence[ConsumedOffset] = (),
                            record_rejections: bool = True,
                            answers: bool = True,
                            key_conflict: Callable[[int, IdempotencyRecord], DeadLetter] | None = None,
                            backlog: bool = False,
                            ) -> list[Outcome]:
        """Decide several commands for one cluster and commit them in one transaction.

        backlog: more commands for this cluster are waiting (a snapshot may wait for a pause).
        answers: build each answer's view (HTTP); without, an accepted command's answer, kept
        with its idempotency key, is only {"position", "decisions"} (Kafka: nobody reads it).
        record_rejections: state rejections become CommandRejected events (Kafka);
        otherwise they are answered and nothing is recorded (HTTP).
        key_conflict: when given, an item whose idempotency key is already stored with a
        different fingerprint (answered 409, nothing recorded for it) is also dead-lettered:
        key_conflict(index, stored record) is the letter, written in the same transaction (Kafka).
        """
        for attempt in range(MAX_RETRIES):
            try:
                return await self._execute_once(cluster, items, offsets, record_rejections, key_conflict,
                                                answers, backlog)
            except ConcurrencyConflict:
                self._drop(cluster)
                await asyncio.sleep(min(0.001 * (2 ** attempt), 0.2))
            except IdempotencyKeyTaken:
                self._drop(cluster)  # a concurrent duplicate: answer from the stored record
        raise RuntimeError(f"cluster {cluster}: too many concurrent writers")

    async def _execute_once(self, cluster: str, items: Sequence[BatchItem],
                            offsets: Sequence[ConsumedOffset], record_rejections: bool,
                            key_conflict: Callable[[int, IdempotencyRecord], DeadLetter] | None = None,
                            answers: bool = True, backlog: bool = False) -> list[Outcome]:
        outcomes: list[Outcome | None] = [None] * len(items)
        seen_keys: dict[str, int] = {}
        dead_letters: list[DeadLetter] = []
        entry = await self._cluster(cluster)
        async with entry.lock:
            if not self._current(cluster, entry):
                raise ConcurrencyConflict(cluster, entry.state.position, None)
            # The keys are read with the head, in one snapshot, once the state is fixed at
            # `last`: every key committed up to `last` is seen (a retry racing its first
            # attempt on another replica gets the first answer, not a 409 "exists"), and one
            # committed later makes the append below fail, and this batch retry.
            keys = [item.idempotency_key for item in items]
            last, found = await self.store.head_and_idempotency(cluster, [k for k in keys if k is not None])
            if last != entry.state.position:
                await self._catch_up(entry.state)
                if entry.state.position != last:
                    self._drop(cluster)
                    raise ConcurrencyConflict(cluster, entry.state.position, last)
            priors = [None if k is None else found.get(k) for k in keys]
            for i, prior in enumerate(priors):
                if prior is not None:
                    outcomes[i] = self._replay(prior, items[i].fingerprint)
                    if key_conflict is not None and prior.fingerprint != (items[i].fingerprint or ""):
                        dead_letters.append(key_conflict(i, prior))
            state = entry.state
            expected = state.position
            new_events: list[NewEvent] = []
            records: list[IdempotencyRecord] = []
            try:
                for i, item in enumerate(items):
                    if outcomes[i] is not None:
                        continue
                    key = item.idempotency_key
                    if key is not None and key in seen_keys:
                        outcomes[i] = ("dup", seen_keys[key])  # type: ignore[assignment]
                        continue
                    cmd = item.command
                    accepted = accept(state, cmd.type, cmd.name, cmd.namespace, cmd.body)
                    if isinstance(accepted, Rejection):
                        outcomes[i] = Outcome(accepted.status, self._rejection_problem(accepted))
                        if not record_rejections:
                            continue
                        etype, data = rejection_event(cmd.type, cmd.name, cmd.namespace, accepted)
                    else:
                        etype, data = accepted
                    received = item.origin.received_at or utc_now()
                    meta = {"commandId": item.origin.command_id or key, "source": item.origin.source,
                            "actor": item.origin.actor, "causationPosition": None, "receivedAt": received}
                    inp = Event(state.position + 1, etype, data)
                    decided = time.perf_counter()
                    decisions = handle(state, inp)
                    metrics.DECISION_LATENCY.observe(time.perf_counter() - decided)
                    new_events.append(NewEvent(etype, data, meta, ev.SCHEMA_VERSIONS[etype]))
                    for d in decisions:
                        new_events.append(NewEvent(d.type, d.data, {**meta, "causationPosition": inp.position},
                                                   ev.SCHEMA_VERSIONS[d.type]))
                        metrics.DECISIONS.labels(type=d.type).inc()
                    if outcomes[i] is None:
                        outcomes[i] = self._answer(state, cmd, inp, decisions) if answers \
                            else self._short_answer(cmd, inp, decisions)
                    if key is not None:
                        seen_keys[key] = i
                        out = outcomes[i]
                        assert isinstance(out, Outcome)
                        records.append(IdempotencyRecord(key, item.fingerprint or "", out.status, out.body,
                                                         cluster, inp.position))
                if new_events or records or offsets or dead_letters:
                    stored = await self.store.append(cluster, expected, new_events, idempotency=records,
                                                     offsets=offsets, dead_letters=dead_letters,
                                                     outbox_topic=self.outbox_topic, echo=False) \
                        if new_events else []
                    if not new_events and (records or offsets or dead_letters):
                        await self.store.record_without_events(idempotency=records, offsets=offsets,
                                                               dead_letters=dead_letters)
                    metrics.EVENTS_APPENDED.inc(len(stored))
            except BaseException:
                self._drop(cluster)  # the cached state holds uncommitted decisions
                raise
            metrics.QUEUE_LENGTH.labels(cluster=cluster).set(len(state.queue))
            entry.since_snapshot += len(new_events)
            # A snapshot costs ~0.1-0.2 s of CPU on a 5,000-node cluster: while commands for this
            # cluster are waiting it is put off, up to SNAPSHOT_DEFER times the interval.
            busy = backlog or bool(self._waiting.get(cluster))
            if entry.since_snapshot >= self.snapshot_every * (SNAPSHOT_DEFER if busy else 1):
                entry.since_snapshot = 0
                entry.snapshots += 1
                try:
                    await self.snapshot(cluster, state, light=True)
                    if entry.snapshots % LIGHT_PER_FULL == 0:
                        await self.snapshot(cluster, state)
                except Exception as exc:  # a snapshot is a cache: the commit above stands
                    log.warning("snapshot.failed", cluster=cluster, position=state.position, error=repr(exc))
        if new_events:
            async with self._appended:
                self._appended.notify_all()
        result: list[Outcome] = []
        for out in outcomes:
            if isinstance(out, tuple):  # the same key twice in one batch: the first answer
                first = result[out[1]]
                out = Outcome(first.status, first.body, [], replayed=True)
            assert out is not None
            result.append(out)
        return result

    def _replay(self, prior: IdempotencyRecord, fingerprint: str | None) -> Outcome:
        if prior.fingerprint != (fingerprint or ""):
            return Outcome(409, problem(409, "Idempotency key reused",
                                        "this Idempotency-Key was used for a different request"))
        return Outcome(prior.status, prior.body, [], replayed=True)

    @staticmethod
    def _rejection_problem(r: Rejection) -> dict[str, Any]:
        titles = {404: "Not Found", 409: "Conflict", 422: "Unprocessable Content"}
        errors = [{"loc": list(r.loc), "msg": r.detail}] if r.loc else None
        return problem(r.status, titles.get(r.status, r.reason), r.detail, errors)

    def _answer(self, state: ClusterState, cmd: Command, inp: Event, decisions: list[Event]) -> Outcome:
        body = self._view_for(state, cmd, inp, decisions)
        body["decisions"] = [{"position": d.position, "type": d.type, "data": d.data} for d in decisions]
        status = 201 if cmd.type == "SubmitWorkload" else 200
        return Outcome(status, body, [inp.position] + [d.position for d in decisions])

    @staticmethod
    def _short_answer(cmd: Command, inp: Event, decisions: list[Event]) -> Outcome:
        positions = [inp.position] + [d.position for d in decisions]
        return Outcome(201 if cmd.type == "SubmitWorkload" else 200,
                       {"position": inp.position, "decisions": positions[1:]}, positions)

    @staticmethod
    def _view_for(state: ClusterState, cmd: Command, inp: Event, decisions: list[Event]) -> dict[str, Any]:
        kind = cmd.type
        if kind in ("SubmitWorkload", "DeleteWorkload"):
            wl = state.workloads[(cmd.namespace or "", cmd.name)]
            return views.workload_view(state, wl)
        if kind == "UpsertNode":
            return views.node_view(state, cmd.name) or {}
        if kind == "RemoveNode":
            # every pod the loss released, with the node it was on (a gang left below minCount
            # goes back whole: its pods on other nodes are released too)
            released = [{"namespace": d.data["namespace"], "workload": d.data["workload"],
                         "podGroup": d.data["podGroup"], "pod": x["pod"], "node": x["node"]}
                        for d in decisions if d.type == ev.PODS_LOST for x in d.data["pods"]]
            return {"name": cmd.name, "released": released}
        kind_map = {"UpsertDeviceClass": "deviceclasses", "RemoveDeviceClass": "deviceclasses",
                    "UpsertResourceSlice": "resourceslices", "RemoveResourceSlice": "resourceslices",
                    "UpsertPriorityClass": "priorityclasses"}
        coll = kind_map[kind]
        found = [o for o in views.object_views(state, coll) if o["name"] == cmd.name]
        return found[0] if found else {"name": cmd.name, "removed": True}

    async def _dry_run(self, command: Command) -> Outcome:
        entry = await self._fresh(command.cluster)
        live = entry.state  # copied before any await (see _fresh)
        # finished workloads are never changed by deciding: shared, not copied (a long-lived
        # cluster holds hundreds of thousands of them)
        memo: dict[int, Any] = {id(w): w for w in live.by_position.values() if w.deleted_at is not None}
        state = copy.deepcopy(live, memo)
        accepted = accept(state, command.type, command.name, command.namespace, command.body)
        if isinstance(accepted, Rejection):
            return Outcome(accepted.status, self._rejection_problem(accepted))
        etype, data = accepted
        inp = Event(state.position + 1, etype, data)
        decisions = handle(state, inp)
        out = self._answer(state, command, inp, decisions)
        out.status, out.positions = 200, []
        out.body["dryRun"] = True
        return out

    async def dead_letter(self, letter: DeadLetter, offset: ConsumedOffset) -> None:
        """A malformed message: its dead letter and the moved offset, in one transaction."""
        await self.store.record_without_events(dead_letters=[letter], offsets=[offset])

    async def snapshot(self, cluster: str, state: ClusterState | None = None, *, light: bool = False) -> None:
        """Save the state as a snapshot (a cache). A light one leaves finished workloads out."""
        if state is None:
            state = (await self._fresh(cluster)).state
        if light:
            lite = copy.copy(state)
            # the active workloads are those with a group queued or running: O(active), not O(all
            # ever submitted); listed in submission order, as in the full dicts
            active = {g.workload.position: g.workload for g in (*state.queue.values(), *state.running.values())
                      if g.workload.deleted_at is None}
            ordered = [active[p] for p in sorted(active)]
            lite.workloads = {w.key: w for w in ordered}
            lite.by_position = {w.position: w for w in ordered}
            lite.finished_before = state.finished_before + len(state.by_position) - len(lite.by_position)
            blob = zlib.compress(pickle.dumps(lite, protocol=pickle.HIGHEST_PROTOCOL), 1)
            version = LIGHT_SNAPSHOT_VERSION
        else:
            blob = zlib.compress(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL), 1)
            version = SNAPSHOT_VERSION
        await self.store.save_snapshot(Snapshot(cluster, state.position, version, blob))

    # -- reads ------------------------------------------------------------------------
    async def list_nodes(self, cluster: str) -> list[dict[str, Any]]:
        return views.node_views((await self._fresh(cluster)).state)

    async def get_node(self, cluster: str, name: str) -> dict[str, Any] | None:
        return views.node_view((await self._fresh(cluster)).state, name)

    async def list_objects(self, cluster: str, kind: str) -> list[dict[str, Any]]:
        return views.object_views((await self._fresh(cluster)).state, kind)

    async def get_object(self, cluster: str, kind: str, name: str) -> dict[str, Any] | None:
        for obj in await self.list_objects(cluster, kind):
            if obj["name"] == name:
                return obj
        return None

    async def get_workload(self, cluster: str, namespace: str, name: str) -> dict[str, Any] | None:
        state = (await self._fresh(cluster)).state
        wl = state.workloads.get((namespace, name))
        return views.workload_view(state, wl) if wl is not None else None

    async def list_workloads(self, cluster: str, *, namespace: str | None, phase: str | None,
                             limit: int, after: int) -> dict[str, Any]:
        state = (await self._fresh(cluster)).state
        items: list[dict[str, Any]] = []
        more = False
        for pos in sorted(p for p in state.by_position if p > after):
            wl = state.by_position[pos]
            if namespace is not None and wl.spec.namespace != namespace:
                continue
            if phase is not None and views.workload_phase(wl) != phase:
                continue
            if len(items) == limit:
                more = True
                break
            items.append(views.workload_view(state, wl))
        return {"items": items, "next": items[-1]["position"] if more and items else None}

    async def events(self, cluster: str, *, after: int, limit: int, wait: float) -> dict[str, Any]:
        deadline = time.monotonic() + max(0.0, wait)
        while True:
            batch = await self.store.read(cluster, after=after, limit=limit)
            if batch or time.monotonic() >= deadline:
                last = await self.store.last_position(cluster)
                return {"events": [event_json(e) for e in batch], "lastPosition": last}
            async with self._appended:
                try:
                    await asyncio.wait_for(self._appended.wait(),
                                           timeout=min(0.25, max(0.0, deadline - time.monotonic())))
                except TimeoutError:
                    pass

    async def history(self, cluster: str, namespace: str, name: str) -> dict[str, Any] | None:
        state = (await self._fresh(cluster)).state
        wl = state.workloads.get((namespace, name))
        if wl is None:
            return None
        out = []
        for pos in list(wl.events):  # as committed now, before awaiting
            found = await self.store.read(cluster, after=pos - 1, limit=1)
            if found:
                out.append(event_json(found[0]))
        return {"events": out}

    async def state_at(self, cluster: str, at: int | None, *, include_finished: bool = False) -> dict[str, Any]:
        """The cluster after event `at`: the nearest snapshot plus a short replay (never the
        whole stream). Finished workloads are counted, and listed with include_finished."""
        entry = await self._fresh(cluster)
        if at is None or at >= entry.state.position:
            return self._state_view(entry.state, entry.state.position, include_finished)
        state = await self.rebuild(cluster, until=at, light=not include_finished)
        return self._state_view(state, at, include_finished)

    @staticmethod
    def _state_view(state: ClusterState, at: int, include_finished: bool) -> dict[str, Any]:
        listed = [wl for wl in state.by_position.values() if include_finished or wl.deleted_at is None]
        listed.sort(key=lambda w: w.position)
        return {"position": at, "nodes": views.node_views(state),
                "workloads": [views.workload_view(state, wl) for wl in listed],
                "finishedWorkloads": state.finished_before
                + sum(1 for wl in state.by_position.values() if wl.deleted_at is not None)}

    async def verify(self, cluster: str) -> dict[str, Any]:
        result = await self.store.verify(cluster)
        out: dict[str, Any] = {"ok": result.ok, "events": result.events, "head": result.head}
        if not result.ok:
            out["firstBadPosition"] = result.first_bad_position
        return out

    async def clusters(self) -> list[dict[str, Any]]:
        return [{"name": name, "lastPosition": last} for name, last in await self.store.clusters()]

    async def readiness(self) -> tuple[bool, dict[str, Any]]:
        checks: dict[str, Any] = {}
        try:
            checks["database"] = await self.store.ping()
            checks["schema"] = await self.store.schema_is_current()
        except Exception as exc:  # readiness reports, never raises
            checks["database"] = False
            checks["error"] = str(exc)
        if self.kafka_running is not None:
            checks["kafka"] = self.kafka_running
        return all(v for k, v in checks.items() if k != "error"), checks
