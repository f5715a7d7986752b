"""Kafka takes every command of a job's life (kafka.md, as lifecycle.md changes it): FinishPods,
ScaleWorkload, CreatePodGroup and DeletePodGroup decide as over HTTP, and a refusal by the state is
recorded as CommandRejected."""
from __future__ import annotations

from service.kafka.runtime import ensure_topics
from service.store import open_store
from tests.kafka.conftest import command, node_body, produce, wait_for, workload_body
from tests.kafka.helpers import all_events, consumed, outbox_empty, running

TEMPLATES = {"name": "train", "podGroupTemplates": [
    {"name": "worker", "schedulingPolicy": {"gang": {"minCount": 2}},
     "pods": [{"name": "worker", "count": 2, "requests": {"cpu": "1"}}]}]}


async def test_lifecycle_commands_over_kafka(kafka_bootstrap, kafka_settings, db_url):
    s = kafka_settings
    await ensure_topics(s)
    c = "life"
    scale = {"podGroups": [{"name": "workers", "pods": [{"name": "w", "count": 3}]}]}
    messages = [
        command(c, "UpsertNode", "n1", body=node_body(cpu="8")),
        command(c, "SubmitWorkload", "pi", namespace="ns", body=workload_body("pi", pods=2, cpu="1")),
        command(c, "FinishPods", "pi", namespace="ns",
                body={"pods": [{"podGroup": "workers", "name": "w-0", "phase": "Succeeded"}]}),
        command(c, "ScaleWorkload", "pi", namespace="ns", body=scale),
        command(c, "ScaleWorkload", "ghost", namespace="ns", body=scale),  # unknown: rejected
        command(c, "SubmitWorkload", "train", namespace="ns", body=TEMPLATES),
        command(c, "CreatePodGroup", "train-0", namespace="ns",
                body={"name": "train-0", "workloadRef": {"workloadName": "train", "templateName": "worker"}}),
        command(c, "CreatePodGroup", "train-1", namespace="ns",  # no such template: rejected
                body={"name": "train-1", "workloadRef": {"workloadName": "train", "templateName": "nope"}}),
        command(c, "DeletePodGroup", "train-0", namespace="ns"),
        command(c, "DeletePodGroup", "train-0", namespace="ns"),  # already deleted: rejected
    ]
    await produce(kafka_bootstrap, s.commands_topic, messages)
    store = open_store(db_url)
    try:
        async with running(s):
            await wait_for(lambda: _done(store, s, len(messages)), what="consumed")
            await wait_for(lambda: outbox_empty(store), what="outbox relayed")
        events = await all_events(store, c)
        inputs = [e for e in events if e.metadata["causationPosition"] is None]
        assert [e.type for e in inputs] == [
            "NodeUpserted", "WorkloadSubmitted", "PodsFinished", "WorkloadScaled", "CommandRejected",
            "WorkloadSubmitted", "PodGroupCreated", "CommandRejected", "PodGroupDeleted", "CommandRejected"]
        rejected = [e.data for e in inputs if e.type == "CommandRejected"]
        assert [(r["command"], r["status"]) for r in rejected] == [
            ("ScaleWorkload", 404), ("CreatePodGroup", 422), ("DeletePodGroup", 404)]
        decided = [(e.type, e.data.get("podGroup")) for e in events if e.metadata["causationPosition"] is not None]
        assert ("PodsScheduled", "workers") in decided and ("PodGroupScheduled", "train-0") in decided
    finally:
        await store.close()


async def _done(store, settings, n: int) -> bool:
    return await consumed(store, settings) >= n
