"""One owner per cluster (docs/replicas.md), with real `gangplank serve` processes on PostgreSQL:
the spread after a join, forwarding (the owner's bytes from every replica, idempotent retries through
another replica, the 421 loop guard), the hand-over on SIGTERM under load, and a frozen owner
(SIGSTOP) whose clusters move after its lease and which, resumed (SIGCONT), records nothing for them."""
from __future__ import annotations

import asyncio
import collections
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.store import open_store
from tests.replicas.conftest import Replica

pytestmark = pytest.mark.slow
LEASE_MS = 1000
ENV = {"GANGPLANK_REPLICA_LEASE_MS": str(LEASE_MS)}
NODE = {"labels": {"example.com/rack": "r0"}, "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"}}


def workload(name: str, pods: int = 1) -> dict[str, Any]:
    return {"name": name, "podGroups": [{"name": "g", "schedulingPolicy": {"gang": {"minCount": pods}},
                                          "pods": [{"name": "p", "count": pods, "requests": {"cpu": "1"}}]}]}


def rid(tmp_path: Path, i: int) -> str:
    return f"{''.join(c for c in tmp_path.name.lower() if c.isalnum())[-16:]}-{i}"


def replica(i: int, pg_url: str, tmp_path: Path) -> Replica:
    return Replica(i, pg_url, tmp_path / f"replica-{i}.log", args=["--replica-id", rid(tmp_path, i)], env=ENV)


async def owners(client: httpx.AsyncClient, base: str) -> dict[str, list[str]]:
    """replica id -> the clusters it owns, as GET /v1/replicas says."""
    listed = (await client.get(f"{base}/v1/replicas")).json()
    return {item["id"]: [c["name"] for c in item["clusters"]] for item in listed["items"] if item["live"]}


async def wait_until(check: Any, timeout: float, what: str) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if await check():
            return time.monotonic() - start
        await asyncio.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {what}")


async def test_spread_after_a_join_forwarding_and_the_loop_guard(pg_url: str, tmp_path: Path) -> None:
    first = replica(0, pg_url, tmp_path).start()
    second = replica(1, pg_url, tmp_path)
    clusters = [f"spread-{i}" for i in range(8)]
    try:
        await first.ready()
        async with httpx.AsyncClient(timeout=10) as client:
            for cluster in clusters:
                put = await client.put(f"{first.base}/v1/clusters/{cluster}/nodes/n1", json=NODE)
                assert put.status_code == 200, put.text
            assert {k: len(v) for k, v in (await owners(client, first.base)).items()} == {rid(tmp_path, 0): 8}
            second.start()
            await second.ready()

            async def even() -> bool:
                counts = sorted(len(v) for v in (await owners(client, second.base)).values())
                return counts == [4, 4]
            assert await wait_until(even, 10, "4 clusters each") < 10
            listed = await owners(client, first.base)
            owner_of = {c: rid for rid, cs in listed.items() for c in cs}
            for cluster in clusters:  # the owner's bytes from every replica
                answers = [await client.get(f"{r.base}/v1/clusters/{cluster}/nodes") for r in (first, second)]
                assert answers[0].content == answers[1].content
                for a in answers:  # whole, as the owner sent it: never chunked
                    assert a.headers["content-length"] == str(len(a.content)) and "transfer-encoding" not in a.headers
                assert {a.headers["gangplank-replica"] for a in answers} == {owner_of[cluster]}
            # an idempotent retry through the other replica gets the stored answer, byte for byte
            path = f"/v1/clusters/{clusters[0]}/namespaces/team/workloads"
            headers = {"Idempotency-Key": "spread-once"}
            made = await client.post(first.base + path, json=workload("w1"), headers=headers)
            again = await client.post(second.base + path, json=workload("w1"), headers=headers)
            assert made.status_code == 201 and again.status_code == 201, (made.text, again.text)
            assert again.content == made.content and again.headers["idempotent-replayed"] == "true"
            reused = await client.post(second.base + path, json=workload("w2"), headers=headers)
            assert reused.status_code == 409
            # a forwarded request is never forwarded again: 421 from a replica that does not own it
            not_owner = first if owner_of[clusters[0]] != rid(tmp_path, 0) else second
            guarded = await client.get(f"{not_owner.base}/v1/clusters/{clusters[0]}/nodes",
                                       headers={"Gangplank-Forwarded-By": "someone"})
            assert guarded.status_code == 421 and guarded.json()["type"].endswith("/misdirected-request")
            metrics = (await client.get(f"{second.base}/metrics")).text
            assert "gangplank_forwarded_total{kind=\"http\"}" in metrics
            assert "gangplank_ownership_changes_total{reason=\"handover\"}" in metrics
    except BaseException:
        for r in (first, second):
            print(f"--- replica {r.index}\n{r.log_tail()}")
        raise
    finally:
        first.stop()
        second.stop()


async def _load(bases: list[str], cluster: str, names: list[str], answers: list[tuple[float, int, float]]) -> None:
    """Closed-loop keyed submissions, round robin, each retried through the next replica on a dropped
    connection or a 503: (first try, status, seconds to the answer)."""
    async with httpx.AsyncClient(timeout=30) as client:
        for i, name in enumerate(names):
            start = time.monotonic()
            for attempt in range(40):
                base = bases[(i + attempt) % len(bases)]
                try:
                    answer = await client.post(f"{base}/v1/clusters/{cluster}/namespaces/team/workloads",
                                               json=workload(name), headers={"Idempotency-Key": f"k-{name}"})
                except httpx.TransportError:
                    continue
                if answer.status_code != 503:
                    break
                await asyncio.sleep(0.05)
            answers.append((start, answer.status_code, time.monotonic() - start))


async def _submitted_once(pg_url: str, cluster: str, names: list[str]) -> None:
    store = open_store(pg_url)
    try:
        rows = await store.read_data(cluster)
        assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
        counted = collections.Counter(r[3]["name"] for r in rows if r[1] == "WorkloadSubmitted")
        assert sorted(counted) == sorted(names) and set(counted.values()) == {1}
        assert (await store.verify(cluster)).ok
    finally:
        await store.close()


async def test_sigterm_hands_over_under_load(pg_url: str, tmp_path: Path) -> None:
    replicas = [replica(i, pg_url, tmp_path).start() for i in range(2)]
    cluster = "handover"
    try:
        for r in replicas:
            await r.ready()
        async with httpx.AsyncClient(timeout=10) as client:
            assert (await client.put(f"{replicas[0].base}/v1/clusters/{cluster}/nodes/n1", json=NODE)).status_code == 200
        answers: list[tuple[float, int, float]] = []
        names = [f"h{i:03d}" for i in range(100)]
        load = [asyncio.ensure_future(_load([r.base for r in replicas], cluster, names[k::4], answers))
                for k in range(4)]
        while len(answers) < 30:
            await asyncio.sleep(0.01)
        assert replicas[0].proc is not None
        replicas[0].proc.send_signal(signal.SIGTERM)  # the owner leaves: the other takes the cluster at once
        await asyncio.gather(*load)
        replicas[0].proc.wait(20)
        assert {status for _, status, _ in answers} == {201}
        assert max(waited for _, _, waited in answers) < 2.0, max(waited for _, _, waited in answers)
        await _submitted_once(pg_url, cluster, names)
        log = replicas[1].log_path.read_text()
        assert '"reason": "handover"' in log and '"event": "ownership.changed"' in log
    except BaseException:
        for r in replicas:
            print(f"--- replica {r.index}\n{r.log_tail()}")
        raise
    finally:
        for r in replicas:
            r.stop()


async def test_a_frozen_owner_is_fenced(pg_url: str, tmp_path: Path) -> None:
    owner, other = replica(0, pg_url, tmp_path).start(), replica(1, pg_url, tmp_path).start()
    cluster = "frozen"
    path = f"/v1/clusters/{cluster}/namespaces/team/workloads"
    try:
        await owner.ready()
        await other.ready()
        async with httpx.AsyncClient(timeout=30) as client:
            assert (await client.put(f"{owner.base}/v1/clusters/{cluster}/nodes/n1", json=NODE)).status_code == 200
            assert (await client.post(owner.base + path, json=workload("before"),
                                      headers={"Idempotency-Key": "f-before"})).status_code == 201
            assert owner.proc is not None
            owner.proc.send_signal(signal.SIGSTOP)
            frozen_at = time.monotonic()
            # sent to the frozen owner: it waits in the kernel's queue until the owner resumes
            stale = asyncio.ensure_future(client.post(owner.base + path, json=workload("stale"),
                                                      headers={"Idempotency-Key": "f-stale"}))
            moved = await client.post(other.base + path, json=workload("after"), headers={"Idempotency-Key": "f-after"})
            answered = time.monotonic() - frozen_at
            assert moved.status_code == 201, moved.text
            assert moved.headers["gangplank-replica"].endswith("-1")
            assert answered < LEASE_MS / 1000 + 2.0, answered
            owner.proc.send_signal(signal.SIGCONT)
            resumed = await stale  # the resumed owner renews, finds the cluster moved and forwards it
            assert resumed.status_code == 201, resumed.text
            assert resumed.headers["gangplank-replica"].endswith("-1")
        await _submitted_once(pg_url, cluster, ["before", "after", "stale"])
        assert '"reason": "failover"' in other.log_path.read_text()
    except BaseException:
        for r in (owner, other):
            if r.proc is not None and r.proc.poll() is None:
                r.proc.send_signal(signal.SIGCONT)
            print(f"--- replica {r.index}\n{r.log_tail()}")
        raise
    finally:
        for r in (owner, other):
            if r.proc is not None and r.proc.poll() is None:
                r.proc.send_signal(signal.SIGCONT)
            r.stop()
