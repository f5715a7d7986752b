"""Group commit: one batcher for every adapter; commands waiting for a cluster commit together."""
from __future__ import annotations

import asyncio

from service.app.commands import Accepted, Command, Rejected
from service.app.service import Gangplank
from service.kafka.consumer import kafka_policy
from service.store.base import ConsumedOffset
from tests.app.conftest import C, execute, node, submission, workload

KAFKA_LIKE = kafka_policy()


async def test_commands_arriving_during_a_commit_are_committed_together(app: Gangplank):
    await execute(app, node("n1", cpu="64"))
    app.store.appends.clear()
    results = await asyncio.gather(*(execute(app, workload(f"w{i}")) for i in range(20)))
    assert all(isinstance(r, Accepted) for r in results)
    # the first opens a commit; the 19 that arrive meanwhile share the next transaction
    assert len(app.store.appends) < 20
    assert sum(app.store.appends) == 40  # each: its input and one PodGroupScheduled
    positions = [p for r in results for p in r.positions]
    assert positions == list(range(2, 42))  # decided in arrival order, no gap, no fork
    assert await app.store.last_position(C) == 41


async def test_a_unit_is_never_split_and_its_offsets_commit_with_it(app: Gangplank):
    await execute(app, node("n1", cpu="64"))
    app.commands.batcher.max_submissions = 4  # small transactions, to see where they are cut
    app.store.appends.clear()
    run = [submission(workload(f"k{i}")) for i in range(10)]
    offset = ConsumedOffset("g", "cmd", 0, 10)
    results = await asyncio.gather(
        execute(app, workload("h1")),
        app.commands.execute_unit(C, run, KAFKA_LIKE, offsets=[offset]),
        execute(app, workload("h2")))
    assert isinstance(results[0], Accepted) and isinstance(results[2], Accepted)
    assert len(results[1]) == 10 and all(isinstance(r, Accepted) for r in results[1])
    assert results[1][0].body == {"position": results[1][0].positions[0], "decisions": results[1][0].positions[1:]}
    assert 20 in app.store.appends  # the run's 10 inputs and 10 decisions in one transaction
    assert await app.store.stored_offsets("g", "cmd") == {0: 10}


async def test_one_failing_command_does_not_fail_the_others(app: Gangplank):
    await execute(app, node("n1", cpu="64"))

    async def refuse_bad(args):  # noqa: ANN001, ANN202
        if any(e.data.get("name") == "bad" for e in args[2]):
            raise RuntimeError("the store refuses this one")

    app.store.before_append = refuse_bad
    results = await asyncio.gather(*(execute(app, workload(n)) for n in ("a", "b", "bad", "c")),
                                   return_exceptions=True)
    assert [type(r).__name__ for r in results] == ["Accepted", "Accepted", "RuntimeError", "Accepted"]
    names = {e.data.get("name") for e in await app.store.read(C)}
    assert {"a", "b", "c"} <= names and "bad" not in names


async def test_rejections_are_answered_or_recorded_as_the_policy_says(app: Gangplank):
    remove = Command(C, "RemoveNode", "ghost")
    http = await execute(app, remove)
    assert isinstance(http, Rejected) and http.rejection.status == 404 and http.positions == []
    assert await app.store.last_position(C) == 0  # HTTP: answered, nothing recorded
    kafka = await execute(app, remove, KAFKA_LIKE)
    assert isinstance(kafka, Rejected) and kafka.positions == [1]
    (event,) = await app.store.read(C)
    assert event.type == "CommandRejected" and event.data["reason"] == "NotFound"


async def _callers(app: Gangplank, callers: int, rounds: int, *, think: float, prefix: str = "c") -> None:
    """Closed-loop callers: each sends its next request when it has its answer (after `think` s);
    half of them start during the first commit."""
    async def caller(c: int) -> None:
        await asyncio.sleep(0.005 * (c % 2))
        for r in range(rounds):
            result = await execute(app, workload(f"{prefix}{c}-r{r}"))
            assert isinstance(result, Accepted)
            await asyncio.sleep(think)
    await asyncio.gather(*(caller(c) for c in range(callers)))


async def test_callers_answered_by_a_commit_fill_the_next_one(app: Gangplank):
    """Eight closed-loop callers and a commit of 10 ms: the drainer waits (at most a quarter of a
    commit) for the callers it just answered, so the batches carry all eight instead of two groups
    taking turns."""
    await execute(app, node("n1", cpu="1000"))

    async def slow_commit(args):  # noqa: ANN001, ANN202
        await asyncio.sleep(0.01)

    app.store.before_append = slow_commit
    app.store.appends.clear()
    await _callers(app, 8, 12, think=0.0005)
    batches = [events // 2 for events in app.store.appends]  # each input with one PodGroupScheduled
    assert sum(batches) == 96
    full = sum(1 for size in batches if size == 8)
    assert full >= len(batches) - 3, batches  # without the wait: two groups of 4 take turns

    # a caller that does not come back costs a batch at most the wait, never a stall
    app.commands.batcher.fill_wait_max = 0.0
    app.store.appends.clear()
    await _callers(app, 8, 12, think=0.0005, prefix="d")
    unfilled = [events // 2 for events in app.store.appends]
    assert sum(1 for size in unfilled if size == 8) <= 3, unfilled  # the groups take turns

