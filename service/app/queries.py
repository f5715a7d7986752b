"""The query service: what the adapters read. Views of the cached state (nodes, objects,
workloads), a workload's history, the cluster as it stood after event N, the event feed (long
poll), the hash chain check, the cluster list and readiness. Nothing here writes."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from service.app import whatif
from service.app.cache import ClusterCache
from service.app.handler import AppendSignal
from service.app.replay import ReplayService
from service.domain import ClusterState
from service.domain.placement import scoring
from service.domain.read import views
from service.domain.read.whatif import Changes
from service.store.base import EventStore, StoredEvent

LONG_POLL_TICK = 0.25  # a long poll looks at the store at least this often (other writers append too)


def event_json(stored: StoredEvent) -> dict[str, Any]:
    return stored.envelope()


class QueryService:
    def __init__(self, store: EventStore, cache: ClusterCache, appended: AppendSignal,
                 replays: ReplayService | None = None) -> None:
        self.store = store
        self.cache = cache
        self.appended = appended
        self.replays = replays if replays is not None else ReplayService(store, cache)
        self.kafka_running: bool | None = None  # None: Kafka not configured (set by the Kafka runtime)
        # docs/replicas.md: a live replica (joined, lease running); None: the one process (SQLite, memory)
        self.replica_live: Callable[[], bool] | None = None

    async def _state(self, cluster: str) -> ClusterState:
        return (await self.cache.fresh(cluster)).state

    async def list_nodes(self, cluster: str) -> list[dict[str, Any]]:
        return views.node_views(await self._state(cluster))

    async def get_node(self, cluster: str, name: str) -> dict[str, Any] | None:
        return views.node_view(await self._state(cluster), name)

    async def scheduler(self, cluster: str) -> dict[str, Any]:
        """GET /scheduler: the configuration in force (sharing.md)."""
        return scoring.scheduler_view(await self._state(cluster))

    async def list_objects(self, cluster: str, kind: str) -> list[dict[str, Any]]:
        return views.object_views(await self._state(cluster), kind)

    async def get_object(self, cluster: str, kind: str, name: str) -> dict[str, Any] | None:
        for obj in await self.list_objects(cluster, kind):
            if obj["name"] == name:
                return obj
        return None

    async def get_workload(self, cluster: str, namespace: str, name: str,
                           position: int | None = None) -> dict[str, Any] | None:
        """The latest incarnation of the name, or the one submitted at `position`."""
        state = await self._state(cluster)
        wl = state.incarnation(namespace, name, position)
        return views.workload_view(state, wl) if wl is not None else None

    async def list_workloads(self, cluster: str, *, namespace: str | None, phase: str | None,
                             limit: int, after: int) -> dict[str, Any]:
        state = await self._state(cluster)
        items: list[dict[str, Any]] = []
        more = False
        for pos in sorted(p for p in state.by_position if p > after):
            wl = state.by_position[pos]
            if wl.owner is not None:  # a PodGroup object (GET /podgroups lists those)
                continue
            if namespace is not None and wl.spec.namespace != namespace:
                continue
            if phase is not None and views.workload_phase(wl) != phase:
                continue
            if len(items) == limit:
                more = True
                break
            items.append(views.workload_view(state, wl))
        return {"items": items, "next": items[-1]["position"] if more and items else None}

    async def get_podgroup(self, cluster: str, namespace: str, name: str) -> dict[str, Any] | None:
        state = await self._state(cluster)
        pg = state.podgroups.get((namespace, name))
        return views.podgroup_view(state, pg) if pg is not None else None

    async def list_podgroups(self, cluster: str, *, namespace: str | None, workload: str | None, phase: str | None,
                             limit: int, after: int) -> dict[str, Any]:
        """A page of PodGroup objects in creation order, deleted ones included (lifecycle.md *Views*)."""
        state = await self._state(cluster)
        items: list[dict[str, Any]] = []
        more = False
        for pg in sorted((p for p in state.podgroups.values() if p.position > after), key=lambda p: p.position):
            view = views.podgroup_view(state, pg)
            if (namespace is not None and pg.spec.namespace != namespace) or \
                    (workload is not None and pg.spec.name != workload) or \
                    (phase is not None and view["status"]["phase"] != phase):
                continue
            if len(items) == limit:
                more = True
                break
            items.append(view)
        return {"items": items, "next": items[-1]["position"] if more and items else None}

    async def events(self, cluster: str, *, after: int, limit: int, wait: float) -> dict[str, Any]:
        deadline = time.monotonic() + max(0.0, wait)
        while True:
            batch = await self.store.read(cluster, after=after, limit=limit)
            if batch or time.monotonic() >= deadline:
                last = await self.store.last_position(cluster)
                return {"events": [event_json(e) for e in batch], "lastPosition": last}
            await self.appended.wait(min(LONG_POLL_TICK, max(0.0, deadline - time.monotonic())))

    async def history(self, cluster: str, namespace: str, name: str,
                      position: int | None = None) -> dict[str, Any] | None:
        """The events of the name's latest incarnation, or of the one submitted at `position`."""
        state = await self._state(cluster)
        wl = state.incarnation(namespace, name, position)
        if wl is None:
            return None
        out = []
        for pos in list(wl.events):  # as committed now, before awaiting
            found = await self.store.read(cluster, after=pos - 1, limit=1)
            if found:
                out.append(event_json(found[0]))
        return {"events": out}

    async def incarnations(self, cluster: str) -> dict[tuple[str, str], list[int]]:
        """The names used again and the submissions of their incarnations (views.incarnations)."""
        return views.incarnations(await self._state(cluster))

    async def state_at(self, cluster: str, at: int | None, *, include_finished: bool = False) -> dict[str, Any]:
        """The cluster after event `at`: the nearest snapshot plus a short replay (never the
        whole stream). Finished workloads are counted, and listed with include_finished."""
        state = await self._state(cluster)
        if at is None or at >= state.position:
            return state_view(state, state.position, include_finished)
        past = await self.cache.rebuild(cluster, until=at, light=not include_finished)
        return state_view(past, at, include_finished)

    async def verify(self, cluster: str) -> dict[str, Any]:
        result = await self.store.verify(cluster)
        out: dict[str, Any] = {"ok": result.ok, "events": result.events, "head": result.head}
        if not result.ok:
            out["firstBadPosition"] = result.first_bad_position
        return out

    async def what_if(self, cluster: str, changes: Changes) -> dict[str, Any] | None:
        """The what-if report (audit.md) of the recorded stream, None when it has no events. Read
        from the store (never the live state) and decided in a worker thread: the cluster's own
        decisions go on meanwhile. Raises WhatIfInvalid for an entry that cannot apply."""
        rows: list[Any] = []
        after = 0
        while batch := await self.store.read_data(cluster, after=after, limit=50_000):
            rows.extend(batch)
            after = batch[-1][0]
        if not rows:
            return None
        return await asyncio.to_thread(lambda: whatif.report(cluster, whatif.domain_events(rows), changes))

    async def replay_report(self, cluster: str, until: int | None = None) -> dict[str, Any] | None:
        """The report of `replay --verify` (audit.md), by the replay service (as the CLI's): read from
        the store (never the live state), decided in a worker thread, its checkpoints merged in; None
        when the cluster has no events. Raises verify.NewerRules for decisions of newer rules."""
        verified = await self.replays.verify(cluster, until)
        return None if verified is None else verified[0]

    async def checkpoints(self, cluster: str) -> dict[str, Any]:
        """The cluster's signed checkpoints (audit.md), by position."""
        return {"items": [c.as_json() for c in await self.store.checkpoints(cluster)]}

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
        checks["replica"] = self.replica_live() if self.replica_live is not None else True
        return all(v for k, v in checks.items() if k != "error"), checks


def state_view(state: ClusterState, at: int, include_finished: bool) -> dict[str, Any]:
    every = [wl for wl in state.by_position.values() if wl.owner is None]  # PodGroup objects are in their owner's
    listed = [wl for wl in every if include_finished or wl.deleted_at is None]
    listed.sort(key=lambda w: w.position)
    return {"position": at, "nodes": views.node_views(state),
            "workloads": [views.workload_view(state, wl) for wl in listed],
            "finishedWorkloads": state.finished_before
            + sum(1 for wl in every if wl.deleted_at is not None)}
