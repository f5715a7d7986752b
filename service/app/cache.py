"""The cluster cache: each cluster's state in memory, loaded once and caught up from the store.

A state is loaded from the latest snapshot (a cache) plus the events after it, and caught up
with what other writers appended before each use. A writer holds its entry's lock from deciding
to committing; one that fails after deciding drops the entry (its state holds decisions that
were never committed), and the next use loads the cluster again.

Loaded states live as long as the process: they are frozen out of the collector's generations
(see `entry`).
"""
from __future__ import annotations

import asyncio
import collections
import functools
import gc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from service.app import snapshots
from service.domain import ClusterState, Event, evolve
from service.domain.fold.fast import Replay, ReplayError
from service.domain.model.upcasting import upcast
from service.gcpause import gc_paused
from service.store.base import EventStore

log = structlog.get_logger("gangplank.app")
CATCH_UP_BATCH = 5000  # events per read when folding
REPLAY_SLICE = 500  # rows folded between event loop turns while a read is in flight
REPLAY_AHEAD = 3  # batches a rebuild reads ahead of the one it folds (workloads deleted within are cheap)


@dataclass
class CachedCluster:
    state: ClusterState
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    since_snapshot: int = 0  # events appended since the last snapshot (see Snapshotter)
    snapshots: int = 0  # snapshots taken of this entry


class ClusterCache:
    def __init__(self, store: EventStore) -> None:
        self.store = store
        self._clusters: dict[str, CachedCluster] = {}
        self._loading = asyncio.Lock()
        self._thawed = False  # a cached state was dropped since the last gc.freeze()

    async def entry(self, cluster: str) -> CachedCluster:
        """The cached entry, loaded on first use (not caught up: see `fresh`)."""
        entry = self._clusters.get(cluster)
        if entry is None:
            async with self._loading:
                entry = self._clusters.get(cluster)
                if entry is None:
                    entry = CachedCluster(await self.rebuild(cluster))
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

    def cached(self, cluster: str) -> ClusterState | None:
        """The state in the cache now, if the cluster is loaded (for tests and tools)."""
        entry = self._clusters.get(cluster)
        return entry.state if entry is not None else None

    def loaded(self) -> list[str]:
        """The clusters whose state is in memory."""
        return list(self._clusters)

    def loaded_entry(self, cluster: str) -> CachedCluster | None:
        """The entry when the cluster is loaded (nothing is loaded here)."""
        return self._clusters.get(cluster)

    async def fresh(self, cluster: str) -> CachedCluster:
        """The cached state, caught up with what other writers appended, holding committed
        events only: a writer holds the entry's lock from deciding to committing, so this
        returns between writers. Read the state before the caller's next await."""
        while True:
            entry = await self.entry(cluster)
            last = await self.store.last_position(cluster)
            async with entry.lock:
                if not self.is_current(cluster, entry):
                    continue
                if last > entry.state.position:
                    await self.catch_up(entry.state)
                return entry

    def drop(self, cluster: str) -> None:
        """Forget the cluster's state: the next use loads it again."""
        if self._clusters.pop(cluster, None) is not None:
            gc.unfreeze()  # the dropped state must become collectable (see entry)
            self._thawed = True

    def is_current(self, cluster: str, entry: CachedCluster) -> bool:
        """Is `entry` still the cached one? A writer that failed after deciding drops its entry;
        whoever waited on that entry's lock must not use its state, nor catch it up (its
        positions are not the stream's)."""
        return self._clusters.get(cluster) is entry

    # -- folding ------------------------------------------------------------------------------
    async def rebuild(self, cluster: str, until: int | None = None, *, light: bool = False) -> ClusterState:
        """State from the latest snapshot (a cache) plus the events after it.

        light: start from a snapshot without finished workloads when it is nearer (for views
        that only list active workloads); the result then lacks finished workloads before it."""
        versions = (snapshots.LIGHT_SNAPSHOT_VERSION, snapshots.SNAPSHOT_VERSION) if light \
            else snapshots.SNAPSHOT_VERSION
        snap = await self.store.latest_snapshot(cluster, versions, at_or_before=until)

        def start() -> ClusterState:
            if snap is not None:
                state = snapshots.decode(snap)
                if state is not None:
                    state.dra.cluster = cluster  # snapshots taken before shareIDs lack it
                    return state
            return ClusterState(cluster)

        state = start()
        try:
            await self.fold_fast(state, until)
        except ReplayError as exc:  # a stream the fast fold cannot mirror: fold every event
            log.warning("rebuild.fast_replay_refused", cluster=cluster, error=str(exc))
            state = start()
            await self.catch_up(state, until)
        return state

    @staticmethod
    def fold(state: ClusterState, rows: Sequence[tuple[int, str, int, Any]]) -> None:
        """Fold read_data() rows into `state` (a writer's turn: the events it missed)."""
        with gc_paused(len(rows) >= 256):
            for position, type_, version, data in rows:
                evolve(state, Event(position, type_, upcast(type_, version, data)))

    async def catch_up(self, state: ClusterState, until: int | None = None) -> None:
        """Fold the events after state.position (up to `until`) through `evolve`. Long
        catch-ups read the next batch while folding this one, and fold with the cyclic GC
        paused: the fold allocates much and frees little, so collections would rescan the
        growing state again and again (they cost as much as the fold itself on a large cluster)."""
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

    async def fold_fast(self, state: ClusterState, until: int | None,
                        observe: Callable[[list[Any]], None] | None = None) -> None:
        """A long catch-up with `replay.Replay` (the same state, without the work that cancels
        out for workloads submitted and deleted within it): batches are announced (Replay.ahead)
        REPLAY_AHEAD batches before they are folded, and the next read runs while a batch is
        folded. `observe` sees each batch of rows once folded (the CLI counts and shows
        progress). Raises ReplayError, state half folded, on a stream it cannot mirror (start
        over with `catch_up`)."""
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
