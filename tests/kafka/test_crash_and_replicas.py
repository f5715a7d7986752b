"""Crashes and scale-out: `gangplank serve` SIGKILLed mid-stream, and two replicas in one group."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from service.domain import ClusterState, Event, Rejection, accept, handle, rejection_event
from service.kafka.messages import Parsed, parse_record
from service.kafka.runtime import ensure_topics
from service.store import open_store
from service.store.base import canonical_json
from tests.kafka.conftest import (
    command,
    create_topic,
    free_port,
    make_settings,
    node_body,
    produce,
    wait_for,
    workload_body,
)
from tests.kafka.helpers import all_events, check_feed, consumed, outbox_empty, running

pytestmark = pytest.mark.kafka
ROOT = Path(__file__).resolve().parents[2]


def stream(clusters: list[str], total: int, seed: int = 11) -> list[dict]:
    """Nodes first, then submissions and deletions (and a few rejections) over several clusters."""
    rng = random.Random(seed)
    messages: list[dict] = []
    for cluster in clusters:
        for i in range(12):
            messages.append(command(cluster, "UpsertNode", f"n{i:02d}",
                                    body=node_body(cpu="16", rack=f"r{i % 3}")))
    live: dict[str, list[str]] = {c: [] for c in clusters}
    serial = 0
    while len(messages) < total:
        cluster = rng.choice(clusters)
        roll = rng.random()
        if live[cluster] and roll < (0.9 if len(live[cluster]) > 20 else 0.3):  # keep the queue short
            name = live[cluster].pop(rng.randrange(len(live[cluster])))
            messages.append(command(cluster, "DeleteWorkload", name, namespace="team"))
        elif roll < 0.37:
            messages.append(command(cluster, "DeleteWorkload", "ghost", namespace="team"))  # rejected
        else:
            name = f"w{serial:05d}"
            serial += 1
            body = workload_body(name, pods=rng.choice([1, 2, 3]), cpu=rng.choice(["2", "4"]),
                                 priority=rng.choice([0, 10, 50]))
            if rng.random() < 0.2:
                body["podGroups"][0]["topology"] = {"key": "example.com/rack"}
            messages.append(command(cluster, "SubmitWorkload", name, namespace="team", body=body))
            live[cluster].append(name)
    return messages


def reference_streams(messages: list[dict], clusters: list[str]) -> dict[str, list[tuple]]:
    """What an uninterrupted run records: every cluster's commands decided in topic order by the
    same domain functions the application service runs (accept, rejection_event, handle), in
    memory; the data as stored (canonical JSON)."""
    out: dict[str, list[tuple]] = {}
    for cluster in clusters:
        state = ClusterState(cluster)
        events: list[tuple] = []
        for m in messages:
            if m["cluster"] != cluster:
                continue
            parsed = parse_record(json.dumps(m).encode(), topic="ref")
            assert isinstance(parsed, Parsed)
            cmd = parsed.item.command
            accepted = accept(state, cmd.type, cmd.name, cmd.namespace, cmd.body)
            if isinstance(accepted, Rejection):
                accepted = rejection_event(cmd.type, cmd.name, cmd.namespace, accepted)
            inp = Event(state.position + 1, *accepted)
            decisions = handle(state, inp)
            events += [(e.type, json.loads(canonical_json(e.data))) for e in [inp, *decisions]]
        out[cluster] = events
    return out


def serve(settings, port: int, log_path: Path) -> subprocess.Popen:
    env = {**os.environ, "GANGPLANK_COMMANDS_TOPIC": settings.commands_topic,
           "GANGPLANK_DLQ_TOPIC": settings.dlq_topic, "GANGPLANK_DECISIONS_TOPIC": settings.decisions_topic,
           "GANGPLANK_CONSUMER_GROUP": settings.consumer_group, "GANGPLANK_KAFKA_PARTITIONS": "3",
           "GANGPLANK_KAFKA_SESSION_TIMEOUT_MS": "3000"}
    log = open(log_path, "ab")
    return subprocess.Popen(
        [sys.executable, "-m", "service", "serve", "--port", str(port), "--kafka-bootstrap", settings.kafka_bootstrap,
         "--no-kafka-idempotence", "--database-url", settings.database_url],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


async def ready(port: int) -> bool:
    try:
        async with httpx.AsyncClient() as client:
            answer = await client.get(f"http://127.0.0.1:{port}/readyz", timeout=1)
        return answer.status_code == 200 and answer.json()["checks"].get("kafka") is True
    except httpx.HTTPError:
        return False


async def test_sigkill_mid_stream_loses_nothing_and_applies_nothing_twice(
        kafka_bootstrap, db_url, tmp_path, request):
    s = make_settings(kafka_bootstrap, db_url, "sigkill")
    clusters = ["east", "west", "north"]
    messages = stream(clusters, 5000)
    await create_topic(kafka_bootstrap, s.commands_topic, 3)  # exists already; serve creates the other two
    first, rest = messages[:2500], messages[2500:]
    await produce(kafka_bootstrap, s.commands_topic, first)
    store = open_store(db_url)
    log_path = tmp_path / "serve.log"
    port = free_port()
    proc = serve(s, port, log_path)
    try:
        await wait_for(lambda: _consumed_at_least(store, s, 1000), timeout=60, what="the first 1,000 commands")
        await produce(kafka_bootstrap, s.commands_topic, rest)
        await wait_for(lambda: _consumed_at_least(store, s, 3000), timeout=60, what="3,000 commands")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        at_kill = await consumed(store, s)
        unsent = len(await store.outbox_batch(100_000))
        assert at_kill < len(messages), "the kill came after the end of the stream"
        proc = serve(s, port, log_path)  # again: the topics exist now
        await wait_for(lambda: ready(port), timeout=60, what="readyz after the restart")
        await wait_for(lambda: _consumed_at_least(store, s, len(messages)), timeout=90, what="the whole stream")
        await wait_for(lambda: outbox_empty(store), timeout=30, what="the outbox relayed")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        request.node.user_properties.append(("consumed_at_kill", at_kill))
        request.node.user_properties.append(("outbox_rows_at_kill", unsent))

        expected = reference_streams(messages, clusters)
        for cluster in clusters:
            events = await all_events(store, cluster)
            assert [(e.type, e.data) for e in events] == expected[cluster], cluster
            inputs = [e for e in events if e.metadata["causationPosition"] is None]
            assert [e.metadata["commandId"] for e in inputs] == [m["id"] for m in messages if m["cluster"] == cluster]
            assert (await store.verify(cluster)).ok
        await check_feed(kafka_bootstrap, s, store, clusters)
    except BaseException:
        print(log_path.read_text(errors="replace")[-6000:])  # the service's log, shown on failure
        raise
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        await store.close()


async def _consumed_at_least(store, settings, n: int) -> bool:
    return await consumed(store, settings) >= n


async def _holds_partitions(runtime) -> bool:
    return runtime.consumer is not None and bool(runtime.consumer.positions)


async def test_two_replicas_in_one_group_never_fork_a_cluster(kafka_bootstrap, db_url):
    s = make_settings(kafka_bootstrap, db_url, "replicas", partitions=6)
    await ensure_topics(s)
    clusters = [f"c{i}" for i in range(6)]
    rng = random.Random(5)
    messages = stream(clusters, 900, seed=3)
    # cluster "shared" is fed on every partition (random keys): both replicas decide for it at once
    shared = [command("shared", "UpsertNode", f"n{i}", body=node_body(cpu="64")) for i in range(4)]
    shared += [command("shared", "SubmitWorkload", f"s{i}", namespace="team", body=workload_body(f"s{i}", pods=1))
               for i in range(200)]
    keyed = {id(m): f"k{rng.randrange(1000)}".encode() for m in shared}

    def key(m):
        return keyed.get(id(m)) or m["cluster"].encode()

    store_a, store_b, store = open_store(db_url), open_store(db_url), open_store(db_url)
    try:
        async with running(s, store=store_a, session_timeout_ms=3000) as (svc_a, rt_a):
            await produce(kafka_bootstrap, s.commands_topic, shared[:4] + messages[:450], key=key)
            await wait_for(lambda: _consumed_at_least(store, s, 100), timeout=30, what="replica A consuming")
            async with running(s, store=store_b, session_timeout_ms=3000) as (svc_b, rt_b):
                # On a fast machine A could finish everything before the group rebalances: feed the
                # second half only once B holds (and has synchronised) partitions of its own.
                await wait_for(lambda: _holds_partitions(rt_b), timeout=30, what="replica B assigned")
                await produce(kafka_bootstrap, s.commands_topic, shared[4:] + messages[450:], key=key)
                total = len(shared) + len(messages)
                await wait_for(lambda: _consumed_at_least(store, s, total), timeout=60, what="everything")
                await wait_for(lambda: outbox_empty(store), timeout=30, what="the outbox relayed")
                assert rt_a.total_processed > 0 and rt_b.total_processed > 0, "both replicas took a share"
        for cluster in clusters + ["shared"]:
            events = await all_events(store, cluster)
            assert [e.position for e in events] == list(range(1, len(events) + 1))
            assert (await store.verify(cluster)).ok
            ids = [e.metadata["commandId"] for e in events if e.metadata["causationPosition"] is None]
            sent = [m["id"] for m in (shared if cluster == "shared" else messages) if m["cluster"] == cluster]
            assert sorted(ids) == sorted(sent) and len(set(ids)) == len(ids)  # each applied exactly once
            if cluster != "shared":
                assert ids == sent  # one partition: the order of the topic
        shared_types = [e.type for e in await all_events(store, "shared") if e.metadata["causationPosition"] is None]
        assert shared_types.count("WorkloadSubmitted") == 200
        await check_feed(kafka_bootstrap, s, store, clusters + ["shared"])
    finally:
        for st in (store_a, store_b, store):
            await st.close()
