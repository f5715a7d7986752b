"""The series route's work (console.md, *Series*): the cluster's numbers at up to P positions
spread over [from, to], each the state after that position, with the preemptions and losses
recorded since the point before.

The state before `from` comes from the nearest snapshot and the events after it (the cluster
cache's rebuild: never the stream before that snapshot); from there the events up to `to` are
folded once, segment by segment, with the fast fold (`ClusterCache.fold_fast`), and each point is
read off the state between two segments. So the cost grows with the points and the events between
`from` and `to`, not with the length of the stream. Deterministic: the same store gives the same
document."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from service.app.cache import ClusterCache
from service.domain import ClusterState
from service.domain.fold.fast import ReplayError
from service.domain.read import series as sr
from service.store.base import EventStore

DEFAULT_POINTS = 500
MAX_POINTS = 2000


class SeriesRange(ValueError):
    """`from` or `to` does not name a range of the stream: `field` is the query parameter."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class _Counts:
    """Preemptions and losses among the rows folded since the last point."""

    def __init__(self) -> None:
        self.preemptions = 0
        self.losses = 0

    def observe(self, rows: Sequence[Any]) -> None:
        for row in rows:
            kind = row[1]
            if kind in sr.PREEMPTION_TYPES:
                self.preemptions += 1
            elif kind in sr.LOSS_TYPES:
                self.losses += 1


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
        times = await self._times(cluster, positions)
        out = []
        for position in positions:
            counts = _Counts()
            state = await self._fold(state, position, counts)
            out.append({"position": position, "time": times.get(position), **sr.point(state),
                        "preemptions": counts.preemptions, "losses": counts.losses})
        return {"from": start, "to": end, "points": out}

    async def _fold(self, state: ClusterState, position: int, counts: _Counts) -> ClusterState:
        """The state after `position`, folded on from `state`, counting what it folds."""
        if position <= state.position:
            return state
        after = state.position
        try:
            await self.cache.fold_fast(state, position, counts.observe)
            return state
        except ReplayError:  # a stream the fast fold cannot mirror: fold every event instead
            counts.preemptions = counts.losses = 0
            rebuilt = await self.cache.rebuild(state.cluster, until=position, light=True)
            rows = await self.store.read_data(state.cluster, after=after, until=position, decode=False)
            counts.observe(rows)
            return rebuilt

    async def _times(self, cluster: str, positions: list[int]) -> dict[int, str]:
        """The recordedAt of each position (one read per point)."""
        times: dict[int, str] = {}
        for position in positions:
            if position == 0:
                continue
            found = await self.store.read(cluster, after=position - 1, limit=1)
            if found:
                times[position] = found[0].envelope()["recordedAt"]
        return times
