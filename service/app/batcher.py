"""Group commit: one batcher for every adapter.

Units of work for one cluster that arrive while a commit is in flight are decided in order and
committed together in the next transaction, so durable throughput is not bounded by one fsync
per request. A unit (one HTTP request; one Kafka run, committed with its consumed offsets) is
never split. A drainer task per cluster does the work, so a caller that goes away does not
abandon the others' commit.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from service.app.commands import Policy, Submission
from service.store.base import ConsumedOffset

GROUP_COMMIT_MAX = 64  # submissions decided and committed in one transaction at most (a unit may be larger)
R = TypeVar("R")


@dataclass(frozen=True)
class Unit:
    """Submissions committed together or not at all, with the adapter's policy and the
    consumed offsets (Kafka) that commit with them."""
    submissions: Sequence[Submission]
    policy: Policy
    offsets: Sequence[ConsumedOffset] = field(default=())


class GroupCommit(Generic[R]):
    """`commit(cluster, units)` decides and commits units in one transaction, returning each
    unit's results; if it fails for several units, each is committed again on its own, so
    that one bad command does not fail the others."""

    def __init__(self, commit: Callable[[str, list[Unit]], Awaitable[list[R]]],
                 max_submissions: int = GROUP_COMMIT_MAX) -> None:
        self._commit = commit
        self.max_submissions = max_submissions
        self._waiting: dict[str, list[tuple[Unit, asyncio.Future[R]]]] = {}
        self._drainers: dict[str, asyncio.Task[None]] = {}

    def waiting(self, cluster: str) -> bool:
        """Are units for this cluster waiting for the next commit?"""
        return bool(self._waiting.get(cluster))

    async def submit(self, cluster: str, unit: Unit) -> R:
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(cluster, []).append((unit, future))
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
        try:
            while queue:
                batch = self._take(queue)
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
                batch = []
        except BaseException:  # cancelled (shutdown): nobody is left waiting forever
            for _, future in [*batch, *queue]:
                _settle(future, RuntimeError("the service is shutting down"))
            queue.clear()
            raise
        finally:
            # no await between the empty check above and this: nothing can slip in unseen
            self._drainers.pop(cluster, None)


def _settle(future: asyncio.Future[R], outcome: R | BaseException) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
