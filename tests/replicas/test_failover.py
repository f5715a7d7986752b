"""Failover (issue 16, point 2): three `gangplank serve` replicas share two clusters under load,
round robin; one is killed with SIGKILL while it holds a cluster's writer lock. The others go on
at once, nothing acknowledged is lost, nothing is applied twice, the chains verify, and
`gangplank replay --verify` re-decides both clusters byte for byte."""
from __future__ import annotations

import asyncio
import collections
import subprocess
import sys
import time
from pathlib import Path

import pytest

from service.store import open_store
from tests.replicas.conftest import ROOT, Answer, Replica, RoundRobin, backends_alive, lock_holders

pytestmark = pytest.mark.slow

CLUSTERS = ["failover-east", "failover-west"]


def node(rack: int) -> dict:
    return {"labels": {"example.com/rack": f"r{rack}"}, "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}}


def workload(name: str, pods: int) -> dict:
    return {"name": name, "podGroups": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": pods}},
                                          "topology": {"key": "example.com/rack"},
                                          "pods": [{"name": "w", "count": pods, "requests": {"cpu": "2"}}]}]}


async def test_sigkill_of_a_lock_holder_under_load(pg_url: str, tmp_path: Path) -> None:
    replicas = [Replica(i, pg_url, tmp_path / f"replica-{i}.log").start() for i in range(3)]
    balancer = RoundRobin(replicas)
    try:
        for r in replicas:
            await r.ready()
        for cluster in CLUSTERS:
            for i in range(16):
                answer = await balancer.request("PUT", f"/v1/clusters/{cluster}/nodes/n{i:02d}", json=node(i % 4))
                assert answer.status == 200, answer.body
        todo = collections.deque((CLUSTERS[i % 2], f"w{i:04d}", 1 + i % 4) for i in range(360))
        live: dict[str, collections.deque[str]] = {c: collections.deque() for c in CLUSTERS}
        submitted: dict[str, list[str]] = {c: [] for c in CLUSTERS}
        deleted: dict[str, list[str]] = {c: [] for c in CLUSTERS}
        answers: list[tuple[float, Answer]] = []
        killed_at: list[float] = []

        async def client() -> None:
            while todo:
                cluster, name, pods = todo.popleft()
                path = f"/v1/clusters/{cluster}/namespaces/team/workloads"
                answer = await balancer.request("POST", path, json=workload(name, pods), key=f"s-{cluster}-{name}")
                assert answer.status == 201, answer.body
                answers.append((time.monotonic(), answer))
                submitted[cluster].append(name)
                live[cluster].append(name)
                while len(live[cluster]) > 12:
                    old = live[cluster].popleft()
                    answer = await balancer.request("DELETE", f"{path}/{old}", key=f"d-{cluster}-{old}")
                    assert answer.status == 200, answer.body
                    answers.append((time.monotonic(), answer))
                    deleted[cluster].append(old)

        async def killer() -> list[int]:
            """Once a third is acknowledged, kill replica 0 the moment it holds a writer lock."""
            while len(answers) < 120:
                await asyncio.sleep(0.01)
            assert replicas[0].proc is not None
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                holders = await lock_holders(pg_url, replicas[0].proc.pid)
                if holders:
                    replicas[0].kill()
                    killed_at.append(time.monotonic())
                    return holders
            raise AssertionError("replica 0 never held a cluster's writer lock")

        kill_task = asyncio.ensure_future(killer())
        await asyncio.gather(*(client() for _ in range(6)))
        holders = await kill_task
        # the killed replica's sessions ended with it: PostgreSQL released its locks
        assert await backends_alive(pg_url, holders) == []

        kill = killed_at[0]
        after = [a for _, a in answers if a.started > kill]
        assert len(after) > 100, "the survivors went on"
        assert {a.replicas[-1] for a in after} == {1, 2}
        assert max(a.waited for _, a in answers) < 5.0, max(a.waited for _, a in answers)

        store = open_store(pg_url)
        try:
            for cluster in CLUSTERS:
                rows = await store.read_data(cluster)
                assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
                names = collections.Counter(r[3]["name"] for r in rows if r[1] == "WorkloadSubmitted")
                gone = collections.Counter(r[3]["name"] for r in rows if r[1] == "WorkloadDeleted")
                assert sorted(names) == sorted(submitted[cluster]) and set(names.values()) == {1}
                assert sorted(gone) == sorted(deleted[cluster]) and set(gone.values()) == {1}
                assert (await store.verify(cluster)).ok
        finally:
            await store.close()
        for cluster in CLUSTERS:
            done = subprocess.run([sys.executable, "-m", "service", "replay", "--cluster", cluster, "--verify",
                                   "--database-url", pg_url], cwd=ROOT, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stdout + done.stderr
    except BaseException:
        for r in replicas:
            print(f"--- replica {r.index}\n{r.log_tail()}")
        raise
    finally:
        await balancer.close()
        for r in replicas:
            r.stop()
