"""Group commit: one batcher for every adapter.

Units of work for one cluster that arrive while a commit is in flight are decided in order and
committed together in the next transaction, so durable throughput is not bounded by one fsync
per request. A unit (one HTTP request; one Kafka run, committed with its consumed offsets) is
never split. A drainer task per cluster does the work, so a caller that goes away does not
abandon the others' commit.

Filling the batches: the callers of one request at a time (HTTP clients, job controllers) send
their next request as soon as they have their answer. Without waiting for them, N such callers
split into two groups that take turns (one group's commit in flight while the other's requests
queue), so each transaction carries half of them. So, when the last commit answered such callers
and others are already queued for the next, the drainer waits for the answered ones to come back
before it starts: until as many new requests have arrived, at most FILL_WAIT_MAX and at most
FILL_FRACTION of the last commit's duration (a caller that does not come back costs every batch
that little). Kafka runs are never waited for (a consumer's run is not a caller's next request),
and nothing is waited for when the queue is empty (a lone caller's request starts at once).
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import structlog

from service.app.commands import Policy, Submission
from service.store.base import ConsumedOffset

GROUP_COMMIT_MAX = 64  # submissions decided and committed in one transaction at most (a unit may be larger)
FILL_WAIT_MAX = 0.002  # seconds a batch waits at most for the callers the last commit answered
FILL_FRACTION = 0.25  # ... and at most this share of the last commit's duration
R = TypeVar("R")
log = structlog.get_logger("gangplank.app")


@dataclass(frozen=True)
class Unit:
    """Submissions committed together or not at all, with the adapter's policy and the
    consumed offsets (Kafka) that commit with them."""
    submissions: Sequence[Submission]
    policy: Policy
    offsets: Sequence[ConsumedOffset] = field(default=())
    caller: bool = False  # one request of a caller that sends its next one on the answer (HTTP, CLI)


@dataclass
class _Fill:
    """Per cluster: what the drainer knows to fill its next batch."""
    arrived: int = 0  # caller units submitted so far
    answered: int = 0  # caller units the last commit answered
    mark: int = 0  # `arrived` when that commit ended
    last_commit_s: float = 0.0
    woken: asyncio.Event = field(default_factory=asyncio.Event)


class GroupCommit(Generic[R]):
    """`commit(cluster, units)` decides and commits units in one transaction, returning each
    unit's results; if it fails for several units, each is committed again on its own, so
    that one bad command does not fail the others. `after(cluster)`, when given, runs once the
    batch's callers have their answers, before the next batch (a commit's snapshots)."""

    def __init__(self, commit: Callable[[str, list[Unit]], Awaitable[list[R]]],
                 max_submissions: int = GROUP_COMMIT_MAX, *,
                 after: Callable[[str], Awaitable[None]] | None = None) -> None:
        self._commit = commit
        self._after = after
        self.max_submissions = max_submissions
        self._waiting: dict[str, list[tuple[Unit, asyncio.Future[R]]]] = {}
        self._drainers: dict[str, asyncio.Task[None]] = {}
        self._fill: dict[str, _Fill] = {}
        self.fill_wait_max = FILL_WAIT_MAX

    def waiting(self, cluster: str) -> bool:
        """Are units for this cluster waiting for the next commit?"""
        return bool(self._waiting.get(cluster))

    async def submit(self, cluster: str, unit: Unit) -> R:
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(cluster, []).append((unit, future))
        if unit.caller:
            fill = self._fill.setdefault(cluster, _Fill())
            fill.arrived += 1
            if fill.answered and fill.arrived - fill.mark >= fill.answered:
                fill.woken.set()
        if cluster not in self._drainers:
            self._drainers[cluster] = asyncio.create_task(self._drain(cluster))
        return await asyncio.shield(future)

    def _take(self, queue: list[tuple[Unit, asyncio.Future[R]]]) -> list[tuple[Unit, asyncio.Future[R]]]:
        count, taken = 0, 0
        while taken < len(queue) and (taken == 0 or count + len(queue[taken][0].submissions) <= self.max_submissions):
            count += len(queue[taken][0].submissions)
            taken += 1
        batch = queue[:taken]
        del queue[:taken]
        return batch

    async def _drain(self, cluster: str) -> None:
        queue = self._waiting[cluster]
        batch: list[tuple[Unit, asyncio.Future[R]]] = []
        fill = self._fill.setdefault(cluster, _Fill())
        try:
            while queue:
                await self._filled(fill, queue)
                batch = self._take(queue)
                started = time.perf_counter()
                try:
                    results = await self._commit(cluster, [unit for unit, _ in batch])
                except Exception as exc:
                    if len(batch) == 1:
                        _settle(batch[0][1], exc)
                    else:  # one bad command must not fail the others: commit them one by one
                        for unit, future in batch:
                            try:
                                _settle(future, (await self._commit(cluster, [unit]))[0])
                            except Exception as one:
                                _settle(future, one)
                else:
                    for (_, future), result in zip(batch, results):
                        _settle(future, result)
                fill.last_commit_s = time.perf_counter() - started
                fill.answered, fill.mark = sum(1 for unit, _ in batch if unit.caller), fill.arrived
                batch = []
                if self._after is not None:  # the answers are out: now the work after the commit
                    try:
                        await self._after(cluster)
                    except Exception as exc:  # snapshots and checkpoints are caches and proofs: the commit stands
                        log.warning("batcher.after_commit_failed", cluster=cluster, error=repr(exc))
        except BaseException:  # cancelled (shutdown): nobody is left waiting forever
            for _, future in [*batch, *queue]:
                _settle(future, RuntimeError("the service is shutting down"))
            queue.clear()
            raise
        finally:
            # no await between the empty check above and this: nothing can slip in unseen
            self._drainers.pop(cluster, None)


    async def _filled(self, fill: _Fill, queue: list[tuple[Unit, asyncio.Future[R]]]) -> None:
        """Wait (briefly) for the callers the last commit answered: see the module docstring."""
        answered, fill.answered = fill.answered, 0
        if not answered or not queue or fill.arrived - fill.mark >= answered:
            return
        if sum(len(unit.submissions) for unit, _ in queue) + answered > self.max_submissions:
            return  # the next batch is full without them
        wait = min(self.fill_wait_max, fill.last_commit_s * FILL_FRACTION)
        if wait <= 0:
            return
        fill.answered = answered  # submit() wakes us when they are all back
        fill.woken.clear()
        try:
            await asyncio.wait_for(fill.woken.wait(), wait)
        except TimeoutError:
            pass
        finally:
            fill.answered = 0


def _settle(future: asyncio.Future[R], outcome: R | BaseException) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
