"""The application: its rooms, wired over one event store.

    app = Gangplank(store, outbox_topic=..., snapshot_every=1000)   # service/bootstrap.py builds it
    result = await app.commands.execute(submission, policy)          # HTTP, Kafka, the CLI
    view = await app.queries.get_workload(cluster, namespace, name)

- `cache` (cache.py): each cluster's state, loaded once and caught up from the store;
- `snapshots` (snapshots.py): the state saved now and then, deferred under load;
- `checkpoints` (checkpoints.py): signed chain heads, with a signing key (audit.md);
- `commands` (handler.py): one unit of work per batch, group-committed (batcher.py);
- `replays` (replay.py): the one replay service (`replay`, `replay --verify`, `GET /audit/replay`);
- `queries` (queries.py): views, history, state at N, the event feed, verify, readiness;
- `series` (series.py): the console's chart, the cluster's numbers over positions;
- `summaries` (summaries.py): events in the words of `audit explain`, for the console.
Adapters use these public rooms only.
"""
from __future__ import annotations

from service.app.cache import ClusterCache
from service.app.checkpoints import Checkpointer, Signer
from service.app.handler import CommandHandler
from service.app.queries import QueryService
from service.app.replay import ReplayService
from service.app.series import SeriesQuery
from service.app.snapshots import Snapshotter
from service.app.summaries import Summaries
from service.store.base import EventStore


class Gangplank:
    def __init__(self, store: EventStore, *, outbox_topic: str | None = None, snapshot_every: int = 1000,
                 signer: Signer | None = None, checkpoint_events: int = 1000,
                 checkpoint_seconds: float = 60.0) -> None:
        self.store = store
        self.cache = ClusterCache(store)
        self.snapshots = Snapshotter(store, every=snapshot_every)
        self.checkpoints = Checkpointer(store, signer, every=checkpoint_events, seconds=checkpoint_seconds,
                                        outbox_topic=outbox_topic)
        self.commands = CommandHandler(store, self.cache, self.snapshots, outbox_topic=outbox_topic,
                                       checkpoints=self.checkpoints)
        self.replays = ReplayService(store, self.cache)
        self.queries = QueryService(store, self.cache, self.commands.appended, self.replays)
        self.series = SeriesQuery(store, self.cache)
        self.summaries = Summaries(store)

    async def close(self) -> None:
        await self.store.close()
