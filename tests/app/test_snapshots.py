"""Snapshots: every `snapshot_every` events, put off while commands are waiting (up to
SNAPSHOT_DEFER intervals); a cache whose failure leaves the commit standing."""
from __future__ import annotations

from service.app import snapshots as sn
from service.app.cache import CachedCluster
from service.app.commands import Accepted
from service.app.service import Gangplank
from service.domain import ClusterState
from service.store import open_store
from tests.app.conftest import C, CountingStore, execute, node, submission
from tests.app.test_group_commit import KAFKA_LIKE


def test_a_snapshot_is_due_every_interval_and_waits_under_load():
    snapper = sn.Snapshotter(store=None, every=10)  # type: ignore[arg-type]
    entry = CachedCluster(ClusterState(C))
    assert not snapper.due(entry, 9, busy=False)
    assert snapper.due(entry, 1, busy=False) and entry.since_snapshot == 0 and entry.snapshots == 1
    for _ in range(sn.SNAPSHOT_DEFER - 1):
        assert not snapper.due(entry, 10, busy=True)  # put off while commands wait...
    assert snapper.due(entry, 10, busy=True)  # ...up to SNAPSHOT_DEFER intervals
    assert snapper.due(entry, 10, busy=False)


async def _snapshot_positions(app: Gangplank) -> list[int]:
    found = await app.store.latest_snapshot(C, (sn.LIGHT_SNAPSHOT_VERSION, sn.SNAPSHOT_VERSION))
    return [] if found is None else [found.position]


async def test_a_backlog_defers_the_snapshot_until_a_pause(store_url: str):
    app = Gangplank(CountingStore(open_store(store_url)), snapshot_every=5)
    run = [submission(node(f"n{i}")) for i in range(8)]
    await app.commands.execute_unit(C, run, KAFKA_LIKE)  # a run of several: a backlog
    assert await _snapshot_positions(app) == []  # 8 events: due, but put off
    assert isinstance(await execute(app, node("n9")), Accepted)  # alone: no backlog
    assert await _snapshot_positions(app) == [9]
    await app.close()


async def test_a_failed_snapshot_leaves_the_commit_standing(store_url: str):
    app = Gangplank(CountingStore(open_store(store_url)), snapshot_every=1)

    async def broken(snapshot):  # noqa: ANN001, ANN202
        raise OSError("disk full")

    app.store.save_snapshot = broken
    result = await execute(app, node("n1"))
    assert isinstance(result, Accepted) and await app.store.last_position(C) == 1
    await app.close()


async def test_a_restart_starts_from_the_full_snapshot_and_folds_the_rest(store_url: str, monkeypatch):
    monkeypatch.setattr(sn, "LIGHT_PER_FULL", 1)  # a full snapshot with every light one
    app = Gangplank(CountingStore(open_store(store_url)), snapshot_every=3)
    for i in range(5):
        await execute(app, node(f"n{i}"))
    await app.close()
    again = Gangplank(CountingStore(open_store(store_url)))
    reads: list[int] = []
    real_read = again.store.read_data

    async def read_data(cluster, *, after, **kwargs):  # noqa: ANN001, ANN003, ANN202
        reads.append(after)
        return await real_read(cluster, after=after, **kwargs)

    again.store.read_data = read_data
    entry = await again.cache.fresh(C)
    assert entry.state.position == 5 and len(entry.state.nodes.live_indices()) == 5
    assert reads[0] == 3  # the events after the snapshot only
    await again.close()
