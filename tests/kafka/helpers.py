"""Shared helpers of the Kafka tests: run the adapter in-process, check the feed against the store."""
from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from service.app.service import Gangplank
from service.config import Settings
from service.kafka.runtime import KafkaRuntime
from service.store import open_store
from service.store.base import EventStore, StoredEvent, canonical_json
from tests.kafka.conftest import read_topic


@asynccontextmanager
async def running(settings: Settings, store: Any = None, **options: Any
                  ) -> AsyncIterator[tuple[Gangplank, KafkaRuntime]]:
    """A Gangplank on its own store with the Kafka runtime started (and stopped after)."""
    own = store is None
    store = store if store is not None else open_store(settings.database_url)
    service = Gangplank(store, outbox_topic=settings.decisions_topic)
    options.setdefault("session_timeout_ms", 3000)
    runtime = await KafkaRuntime(service, settings, **options).start(connect_timeout=30)
    assert runtime.connected.is_set(), "the Kafka runtime did not connect"
    try:
        yield service, runtime
    finally:
        await runtime.stop()
        if own:
            await store.close()


async def consumed(store: EventStore, settings: Settings) -> int:
    """Records whose effect committed: the sum of the stored next offsets (partitions start at 0)."""
    return sum((await store.stored_offsets(settings.consumer_group, settings.commands_topic)).values())


async def outbox_empty(store: EventStore) -> bool:
    return not await store.outbox_batch(1)


async def all_events(store: EventStore, cluster: str) -> list[StoredEvent]:
    return await store.read(cluster, after=0)


def dedupe_feed(records: list[Any]) -> dict[str, list[dict[str, Any]]]:
    """The decision feed per cluster, first occurrence of each (cluster, position) kept, in topic order.
    Asserts the key is the cluster and that no event comes before an earlier one of its cluster."""
    feeds: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        envelope = json.loads(record.value)
        cluster = envelope["cluster"]
        assert record.key == cluster.encode("utf-8")
        feed = feeds.setdefault(cluster, [])
        if envelope["position"] <= len(feed):
            assert canonical_json(feed[envelope["position"] - 1]) == canonical_json(envelope)
            continue  # a repeat (at least once)
        assert envelope["position"] == len(feed) + 1, \
            f"{cluster}: position {envelope['position']} after {len(feed)}: out of order or skipped"
        feed.append(envelope)
    return feeds


async def check_feed(bootstrap: str, settings: Settings, store: EventStore, clusters: list[str]) -> dict[str, int]:
    """Every stored event is on the decision topic, in order per cluster; returns events per cluster."""
    feeds = dedupe_feed(await read_topic(bootstrap, settings.decisions_topic))
    counts = {}
    for cluster in clusters:
        stored = [e.envelope() for e in await all_events(store, cluster)]
        assert [canonical_json(e) for e in feeds.get(cluster, [])] == [canonical_json(e) for e in stored], cluster
        counts[cluster] = len(stored)
    assert set(feeds) <= set(clusters)
    return counts
