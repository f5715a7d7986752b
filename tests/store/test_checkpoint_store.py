"""The store's checkpoints (audit.md, *Signed checkpoints*), on every backend: stored beside the
stream (no event, no change to the chain), listed by position, saved once, and published through
the outbox as ChainCheckpoint records when a topic is given."""
from __future__ import annotations

import json

from service.store import EventStore, NewEvent
from service.store.base import Checkpoint


def _cp(cluster: str, position: int, key: str = "k1") -> Checkpoint:
    return Checkpoint(cluster, position, f"{position:064x}", "2026-12-01T00:00:00.000000Z", key, f"sig{position}")


async def test_checkpoints_round_trip_in_position_order(store: EventStore) -> None:
    await store.append("prod", 0, [NewEvent("NodeUpserted", {"name": f"n{i}"}, {}) for i in range(3)])
    before = await store.verify("prod")
    for cp in (_cp("prod", 3), _cp("prod", 1), _cp("prod", 2, "k2"), _cp("other", 1)):
        await store.save_checkpoint(cp)
    await store.save_checkpoint(_cp("prod", 3))  # saved again: nothing changes
    assert await store.checkpoints("prod") == [_cp("prod", 1), _cp("prod", 2, "k2"), _cp("prod", 3)]
    assert await store.checkpoints("prod", until=2) == [_cp("prod", 1), _cp("prod", 2, "k2")]
    assert await store.checkpoints("nobody") == []
    assert await store.verify("prod") == before  # the stream is untouched
    assert await store.last_position("prod") == 3
    assert await store.outbox_batch() == []


async def test_a_checkpoint_goes_out_through_the_outbox_once(store: EventStore) -> None:
    await store.append("prod", 0, [NewEvent("NodeUpserted", {"name": "n1"}, {})], outbox_topic="decisions")
    await store.save_checkpoint(_cp("prod", 1), outbox_topic="decisions")
    await store.save_checkpoint(_cp("prod", 1), outbox_topic="decisions")  # already stored: not sent again
    items = await store.outbox_batch()
    assert [(i.topic, i.key) for i in items] == [("decisions", b"prod"), ("decisions", b"prod")]
    record = json.loads(items[1].value)
    assert record == {"type": "ChainCheckpoint", **_cp("prod", 1).as_json()}
    assert items[1].value.decode() == _cp("prod", 1).record_json()
