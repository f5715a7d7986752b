"""Another writer got there first: the append conflicts, the cached state is dropped, reloaded
and the batch decided again on the stream as it now is. The stream never forks."""
from __future__ import annotations

from service.app.commands import Accepted
from service.app.service import Gangplank
from service.domain.model import events as ev
from service.store import open_store
from tests.app.conftest import C, CountingStore, execute, node, workload


async def test_a_conflicting_append_is_retried_on_the_other_writers_events(app: Gangplank, store_url: str):
    other = Gangplank(open_store(store_url))
    await execute(app, node("n1", cpu="1"))
    raced = []

    async def other_writer_first(args):  # noqa: ANN001, ANN202
        if not raced:  # once: between this writer's decision and its append
            raced.append(await execute(other, node("n2", cpu="8")))

    app.store.before_append = other_writer_first
    result = await execute(app, workload("w", cpu="4"))  # fits n2 only, which this writer had not seen
    assert isinstance(raced[0], Accepted) and raced[0].positions == [2]
    assert isinstance(result, Accepted)
    events = await app.store.read(C)
    assert [e.position for e in events] == [1, 2, 3, 4]
    assert [e.type for e in events] == [ev.NODE_UPSERTED, ev.NODE_UPSERTED, ev.WORKLOAD_SUBMITTED,
                                        ev.POD_GROUP_SCHEDULED]
    assert events[3].data["pods"][0]["node"] == "n2"  # decided again, on the state with n2
    assert app.store.appends.count(2) == 2  # the conflicting attempt and the retry
    await other.close()


async def test_a_writer_catches_up_before_deciding(app: Gangplank, store_url: str):
    """No conflict at all when the other writer committed before this one read the head."""
    other = Gangplank(CountingStore(open_store(store_url)))
    await execute(app, node("n1", cpu="1"))
    await execute(other, node("n2", cpu="8"))
    result = await execute(app, workload("w", cpu="4"))
    assert isinstance(result, Accepted) and result.positions == [3, 4]
    assert app.store.appends == [1, 2]  # no retry
    assert result.body["status"]["podGroups"][0]["phase"] == "Scheduled"
    await other.close()
