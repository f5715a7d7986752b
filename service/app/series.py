"""The series route's work (console.md, *Series*): the cluster's numbers at up to P positions
spread over [from, to], each the state after that position, with the preemptions and losses
recorded since the point before.

The state before `from` comes from the nearest snapshot and the events after it (the cluster
cache's rebuild: never the stream before that snapshot); from there the events up to `to` are read
in long batches and folded once, segment by segment, with the fast fold (`domain/fold/fast.py`),
and each point is read off the state between two segments. So the cost grows with the points and the events between
`from` and `to`, not with the length of the stream. Deterministic: the same store gives the same
document."""
from __future__ import annotations

import asyncio
import collections
from collections.abc import Sequence
from typing import Any

from service.app.cache import ClusterCache
from service.domain import ClusterState
from service.domain.fold.fast import Replay, ReplayError, Row
from service.domain.read import series as sr
from service.gcpause import gc_paused
from service.store.base import EventStore

DEFAULT_POINTS = 500
READ_BATCH = 5000  # events per read
MAX_POINTS = 2000


class SeriesRange(ValueError):
    """`from` or `to` does not name a range of the stream: `field` is the query parameter."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class _Counts:
    """Preemptions and losses among the rows of a segment."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self.preemptions = sum(1 for r in rows if r[1] in sr.PREEMPTION_TYPES)
        self.losses = sum(1 for r in rows if r[1] in sr.LOSS_TYPES)


class SeriesQuery:
    def __init__(self, store: EventStore, cache: ClusterCache) -> None:
        self.store = store
        self.cache = cache

    async def series(self, cluster: str, start: int | None, end: int | None,
                     points: int = DEFAULT_POINTS) -> dict[str, Any]:
        """The series document (of a cluster without events: its one point, position 0). Raises
        SeriesRange for a `from` past the head or after `to` (`to` past the head is the head)."""
        last = await self.store.last_position(cluster)
        start = 0 if start is None else start
        if start > last:
            raise SeriesRange("from", f"must not be past the cluster's last position ({last})")
        end = last if end is None else min(end, last)
        if end < start:
            raise SeriesRange("to", "must not be before from")
        positions = sr.sample_positions(start, end, points)
        state = await self.cache.rebuild(cluster, until=max(start - 1, 0), light=True)
        rows: collections.deque[Row] = collections.deque()
        times: dict[int, str] = {}
        wanted = set(positions)
        read_to = state.position
        out = []
        with gc_paused():  # the fold allocates much and frees little (see ClusterCache.catch_up)
            for position in positions:
                while read_to < position:  # the events up to this point, read in long batches
                    batch = await self.store.read(cluster, after=read_to, limit=READ_BATCH, until=end)
                    if not batch:
                        break
                    rows.extend((e.position, e.type, e.schema_version, e.data) for e in batch)
                    times.update((e.position, e.recorded_at) for e in batch if e.position in wanted)
                    read_to = batch[-1].position
                segment = []
                while rows and rows[0][0] <= position:
                    segment.append(rows.popleft())
                counts = _Counts(segment)
                state = await self._fold(state, segment, position)
                out.append({"position": position, "time": times.get(position), **sr.point(state),
                            "preemptions": counts.preemptions, "losses": counts.losses})
        return {"from": start, "to": end, "points": out}

    async def _fold(self, state: ClusterState, segment: list[Row], position: int) -> ClusterState:
        """The state after `position`: `segment` (the events after `state` up to it) folded with
        the fast fold, or, for a stream it cannot mirror, rebuilt from the store."""
        if not segment:
            return state
        try:
            replay = Replay(state)
            replay.ahead(segment)
            replay.fold(segment)
            replay.finish()
        except ReplayError:  # the state is half folded: rebuild it (evolve, event by event)
            return await self.cache.rebuild(state.cluster, until=position, light=True)
        await asyncio.sleep(0)  # a long range: other requests get their turn between points
        return state
