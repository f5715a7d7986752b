"""The snapshotter: a cluster's state saved now and then, so that a restart (and `/state?at=N`)
folds a short tail instead of the whole stream. Snapshots are caches: a damaged or stale one
is ignored, a failed save leaves the commit before it standing.

Every `every` events a light snapshot (without finished workloads: /state?at=N starts from it),
every LIGHT_PER_FULL-th a full one too (restarts rebuild from it). A snapshot costs ~0.1-0.2 s
of CPU on a 5,000-node cluster: while commands for the cluster are waiting it waits for a
pause, up to SNAPSHOT_DEFER times the interval.
"""
from __future__ import annotations

import copy
import pickle
import zlib
from typing import TYPE_CHECKING

import structlog

from service.domain import ClusterState
from service.store.base import EventStore, Snapshot

if TYPE_CHECKING:
    from service.app.cache import CachedCluster

# v5: pod phases (Group.succeeded/failed, finished pods in node_of, ClusterState.finishing); v4:
SNAPSHOT_VERSION = "state-v6"  # v6: the domain's classes moved into packages by concern (pickled by path)
# The whole state: restarts rebuild from it
LIGHT_SNAPSHOT_VERSION = "state-light-v6"  # without finished workloads: /state?at=N starts from it
LIGHT_PER_FULL = 50  # a light snapshot every `every` events, a full one too every 50th
SNAPSHOT_DEFER = 10  # under load, a snapshot waits for a pause up to this many intervals
log = structlog.get_logger("gangplank.app")


def decode(snap: Snapshot) -> ClusterState | None:
    """The state a snapshot holds; None when it cannot be read (a stale or damaged cache)."""
    try:
        state: ClusterState = pickle.loads(zlib.decompress(snap.blob))
    except Exception:  # a cache: whatever is wrong with it, rebuild from events instead
        return None
    return state


def light_copy(state: ClusterState) -> ClusterState:
    """The state without finished workloads (a shallow copy sharing everything else)."""
    lite = copy.copy(state)
    # the active workloads are those with a group queued or running: O(active), not O(all ever
    # submitted); listed in submission order, as in the full dicts
    # (a PodGroup object's group stands for its owner, the workload of templates: `home`)
    active = {g.workload.home.position: g.workload.home for g in (*state.queue.values(), *state.running.values())
              if g.workload.deleted_at is None}
    for position in state.finishing:  # live with finished pods, or of templates: maybe neither queued nor running
        wl = state.by_position[position].home
        active[wl.position] = wl
    ordered = [active[p] for p in sorted(active)]
    lite.workloads = {w.key: w for w in ordered}
    lite.by_position = {w.position: w for w in ordered}
    for w in ordered:  # a live workload's PodGroup objects (lifecycle.md)
        lite.by_position.update((g.workload.position, g.workload) for g in w.groups if g.workload is not w)
    if state.podgroups:
        lite.podgroups = {k: pg for k, pg in state.podgroups.items() if pg.position in lite.by_position}
    lite.finished_before = state.finished_before + len(state.by_position) - len(lite.by_position)
    return lite


class Snapshotter:
    def __init__(self, store: EventStore, *, every: int = 1000) -> None:
        self.store = store
        self.every = every

    async def save(self, state: ClusterState, *, light: bool = False) -> None:
        """Save the state as a snapshot. A light one leaves finished workloads out."""
        saved, version = (light_copy(state), LIGHT_SNAPSHOT_VERSION) if light else (state, SNAPSHOT_VERSION)
        blob = zlib.compress(pickle.dumps(saved, protocol=pickle.HIGHEST_PROTOCOL), 1)
        await self.store.save_snapshot(Snapshot(state.cluster, state.position, version, blob))

    def due(self, entry: CachedCluster, appended: int, *, busy: bool) -> bool:
        """Count `appended` events; is a snapshot due now? `busy`: more commands for the cluster
        are waiting (the snapshot then waits, up to SNAPSHOT_DEFER intervals)."""
        entry.since_snapshot += appended
        if entry.since_snapshot < self.every * (SNAPSHOT_DEFER if busy else 1):
            return False
        entry.since_snapshot = 0
        entry.snapshots += 1
        return True

    async def after_commit(self, entry: CachedCluster, appended: int, *, busy: bool) -> None:
        """Called by the command handler after each commit, under the entry's lock."""
        if not self.due(entry, appended, busy=busy):
            return
        state = entry.state
        try:
            await self.save(state, light=True)
            if entry.snapshots % LIGHT_PER_FULL == 0:
                await self.save(state)
        except Exception as exc:  # a snapshot is a cache: the commit before it stands
            log.warning("snapshot.failed", cluster=state.cluster, position=state.position, error=repr(exc))
