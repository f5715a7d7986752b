"""One cluster written at once by a Kafka consumer on one replica and HTTP clients on another
(issue 16, point 1): both go through the cluster's writer lock, so neither loses a race and
rebuilds; every command is applied once, the stream is gapless, verifies and replays."""
from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from service.kafka.runtime import ensure_topics
from service.store import open_store
from tests.kafka.conftest import command, make_settings, node_body, produce, wait_for, workload_body
from tests.kafka.helpers import all_events, running
from tests.replicas.conftest import ROOT, Replica

pytestmark = pytest.mark.kafka
CLUSTER = "mixed"


async def _inputs(store, n: int) -> bool:  # noqa: ANN001
    return sum(1 for e in await all_events(store, CLUSTER) if e.metadata["causationPosition"] is None) >= n


async def test_kafka_consumer_and_http_writers_on_two_replicas_share_one_cluster(
        kafka_bootstrap: str, db_url: str, tmp_path: Path) -> None:
    s = make_settings(kafka_bootstrap, db_url, "mixed")
    await ensure_topics(s)
    nodes = [command(CLUSTER, "UpsertNode", f"n{i}", body=node_body(cpu="64", rack=f"r{i % 2}")) for i in range(6)]
    via_kafka = [command(CLUSTER, "SubmitWorkload", f"k{i:03d}", namespace="team",
                         body=workload_body(f"k{i:03d}", pods=1 + i % 3, cpu="1")) for i in range(240)]
    http_replica = Replica(1, db_url, tmp_path / "http-replica.log").start()  # HTTP only: no consumer
    store = open_store(db_url)
    try:
        async with running(s):  # this process: the consumer (and the relay)
            await produce(kafka_bootstrap, s.commands_topic, nodes)
            await wait_for(lambda: _inputs(store, len(nodes)), timeout=30, what="the nodes")
            await http_replica.ready()

            async def http_client(first: int) -> list[int]:
                statuses = []
                async with httpx.AsyncClient(base_url=http_replica.base, timeout=30) as client:
                    for i in range(first, first + 40):
                        answer = await client.post(f"/v1/clusters/{CLUSTER}/namespaces/team/workloads",
                                                   json=workload_body(f"h{i:03d}", pods=1, cpu="1"),
                                                   headers={"Idempotency-Key": f"mixed-h{i}"})
                        statuses.append(answer.status_code)
                return statuses

            results = await asyncio.gather(produce(kafka_bootstrap, s.commands_topic, via_kafka),
                                           *(http_client(k * 40) for k in range(4)))
            assert all(status == 201 for statuses in results[1:] for status in statuses)
            await wait_for(lambda: _inputs(store, len(nodes) + len(via_kafka) + 160), timeout=90,
                           what="every command applied")
        events = await all_events(store, CLUSTER)
        assert [e.position for e in events] == list(range(1, len(events) + 1))
        assert (await store.verify(CLUSTER)).ok
        inputs = [e for e in events if e.metadata["causationPosition"] is None]
        kafka_ids = [e.metadata["commandId"] for e in inputs if e.metadata["source"] == "kafka"]
        assert sorted(kafka_ids) == sorted(m["id"] for m in nodes + via_kafka)  # each once
        http_names = [e.data["name"] for e in inputs if e.metadata["source"] == "http"]
        assert sorted(http_names) == [f"h{i:03d}" for i in range(160)]
        # the topic's order per cluster holds for the consumer's commands
        assert [i for i in kafka_ids if i in {m["id"] for m in via_kafka}] == [m["id"] for m in via_kafka]
        # both writers decided on the state the other had committed: replay re-decides byte for byte
        done = subprocess.run([sys.executable, "-m", "service", "replay", "--cluster", CLUSTER, "--verify",
                               "--database-url", db_url], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    except BaseException:
        print(http_replica.log_tail())
        raise
    finally:
        http_replica.stop()
        await store.close()
