"""Idempotency keys: a retry gets the stored answer, a different request under the same key is
refused (and dead-lettered under a policy that says so), whether the first is already stored or
in the same transaction."""
from __future__ import annotations

import asyncio

from service.api.answers import HTTP_POLICY, answer
from service.app.commands import Accepted, KeyReused, Policy, Replayed
from service.app.service import Gangplank
from service.store.base import DeadLetter, IdempotencyRecord
from tests.app.conftest import C, execute, node, submission, workload


async def test_a_retry_answers_the_stored_answer_and_records_nothing(app: Gangplank):
    await execute(app, node("n1"))
    first = await execute(app, workload("w"), key="k1")
    assert isinstance(first, Accepted) and first.created
    last = await app.store.last_position(C)
    again = await execute(app, workload("w"), key="k1")
    assert isinstance(again, Replayed)
    assert (again.status, again.body) == answer(first) == (201, first.body)
    assert await app.store.last_position(C) == last
    app.cache.drop(C)  # from the store, not from memory
    assert await execute(app, workload("w"), key="k1") == again


async def test_the_same_key_for_another_request_is_refused(app: Gangplank):
    await execute(app, node("n1"))
    await execute(app, workload("w"), key="k1")
    last = await app.store.last_position(C)
    other = await execute(app, workload("other"), key="k1", fingerprint="another request")
    assert other == KeyReused("fp-k1")
    assert answer(other)[0] == 409
    assert await app.store.last_position(C) == last


async def test_a_reused_key_is_dead_lettered_in_the_same_transaction_when_the_policy_says_so(app: Gangplank):
    letters: list[tuple[int, IdempotencyRecord]] = []

    def letter(index: int, stored: IdempotencyRecord) -> DeadLetter:
        letters.append((index, stored))
        return DeadLetter(topic="dlq", key=b"k1", value=b"{}", headers=[("error", b"key reused")])

    kafka = Policy(record_rejections=True, views=False, stored_answer=answer, key_reused_letter=letter)
    await execute(app, node("n1"), key="k1")
    run = [submission(node("n2")), submission(node("n3"), key="k1", fingerprint="x")]
    result = await app.commands.execute_unit(C, run, kafka)
    assert isinstance(result[0], Accepted) and isinstance(result[1], KeyReused)
    assert [(i, r.key) for i, r in letters] == [(1, "k1")]
    assert [row.topic for row in await app.store.outbox_batch(10)] == ["dlq"]


async def test_the_same_key_twice_in_one_transaction(app: Gangplank):
    await execute(app, node("n1", cpu="64"))
    same, retry, other = await asyncio.gather(
        execute(app, workload("a"), key="k"), execute(app, workload("a"), key="k"),
        execute(app, workload("b"), key="k", fingerprint="another request"))
    assert isinstance(same, Accepted)
    assert retry == Replayed(201, same.body)
    assert isinstance(other, KeyReused)
    names = [e.data.get("name") for e in await app.store.read(C) if e.type == "WorkloadSubmitted"]
    assert names == ["a"]


async def test_a_dry_run_ignores_its_key_and_records_nothing(app: Gangplank):
    await execute(app, node("n1"))
    dry = await app.commands.execute(submission(workload("w"), key="k"), HTTP_POLICY, dry_run=True)
    assert isinstance(dry, Accepted) and dry.dry_run and not dry.created and dry.body["dryRun"] is True
    assert answer(dry)[0] == 200
    assert await app.store.last_position(C) == 1

