"""The replica targets of docs/replicas.md, measured in one run (bench/replicas.py --scenarios targets,spread4).

- targets: three replicas run throughout on one cluster of --target-nodes nodes (64 cpu, 512Gi, 8 GPUs,
  racks of 50); replica 0 owns it. Gang workloads of 1-8 pods (8 cpu, 64Gi, one GPU each, one rack),
  each with an Idempotency-Key, from --concurrency closed-loop clients; the oldest deleted to keep
  --target-live running. "R replicas": the requests go round robin to R of them, the owner first among
  them; "1 replica": the owner alone. Rounds interleave R = 1, 2, 3. Reported per R: submissions/s and
  the CPU (user + system) of all three replicas per acknowledged submission, and the ratios to R = 1.
- spread4: 4 clusters of --spread-nodes nodes, served by one replica alone, then (a fresh database) by
  two replicas that own two each, requests round robin. Reported: submissions/s of each and the ratio.
"""
from __future__ import annotations

import random
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from bench.http_load import machine, pct, wait_ready
from bench.replicas import HOST, Balancer, Load, Plan, Replica, load_nodes, submit
from service.store.migrate import upgrade
from service.store.testing import temporary_postgres_database


def gang(name: str, rng: random.Random) -> dict[str, Any]:
    size = rng.randint(1, 8)
    return {"name": name, "podGroups": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": size}},
                                         "topology": {"key": "example.com/rack"},
                                         "pods": [{"name": "w", "count": size,
                                                   "requests": {"cpu": "8", "memory": "64Gi",
                                                                "example.com/gpu": "1"}}]}]}


async def _started(url: str, log_dir: Path, count: int) -> list[Replica]:
    replicas = [Replica(i, url, log_dir) for i in range(count)]
    for r in replicas:
        r.start()
    for r in replicas:
        async with httpx.AsyncClient(base_url=f"http://{HOST}:{r.port}", timeout=60) as client:
            assert r.proc is not None
            await wait_ready(client, r.proc)
    return replicas


async def _phase(replicas: list[Replica], serving: list[Replica], plan: Plan, bodies: list[tuple[str, dict[str, Any]]],
                 load: Load) -> dict[str, Any]:
    balancer = Balancer(serving)
    cpu0 = sum(r.cpu() for r in replicas)
    t0 = time.perf_counter()
    before = len(load.post_lat)
    await submit(balancer, plan, bodies, load, timed=True)
    wall = time.perf_counter() - t0
    cpu = sum(r.cpu() for r in replicas) - cpu0
    acked = len(load.post_lat) - before
    return {"submissions_per_s": round(acked / wall, 1), "cpu_ms_per_submission": round(cpu / acked * 1000, 3),
            "post_p99_ms": pct(load.post_lat[before:], 0.99), "retries": balancer.retries}


async def targets(log_dir: Path, *, nodes: int, submissions: int, rounds: int, concurrency: int, live: int,
                  seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    plan = Plan("targets", 3, ["one"], nodes, submissions, 0, concurrency, live, seed)
    async with temporary_postgres_database("gp_bench_targets") as url:
        await upgrade(url)
        (log_dir / "targets").mkdir(parents=True, exist_ok=True)
        replicas = await _started(url, log_dir / "targets", 3)
        try:
            await load_nodes(Balancer(replicas[:1]), plan)  # replica 0 receives the first request: it owns "one"
            counter = iter(range(10**9))

            def batch(n: int) -> list[tuple[str, dict[str, Any]]]:
                return [("one", gang(f"job-{next(counter):06d}", rng)) for _ in range(n)]
            load = Load()
            await submit(Balancer(replicas), plan, batch(300), load, timed=False)  # warm every replica up
            per_r: dict[int, list[dict[str, Any]]] = {1: [], 2: [], 3: []}
            for _ in range(rounds):
                for r in (1, 2, 3):
                    per_r[r].append(await _phase(replicas, replicas[:r], plan, batch(submissions), load))
        finally:
            for r in replicas:
                r.stop()
    medians = {r: {k: statistics.median(x[k] for x in runs) for k in ("submissions_per_s", "cpu_ms_per_submission",
                                                                       "post_p99_ms")} for r, runs in per_r.items()}
    return {"scenario": "targets", "nodes": nodes, "rounds": rounds, "per_replicas": medians, "runs": per_r,
            "throughput_2_over_1": round(medians[2]["submissions_per_s"] / medians[1]["submissions_per_s"], 3),
            "throughput_3_over_1": round(medians[3]["submissions_per_s"] / medians[1]["submissions_per_s"], 3),
            "cpu_2_over_1": round(medians[2]["cpu_ms_per_submission"] / medians[1]["cpu_ms_per_submission"], 3),
            "cpu_3_over_1": round(medians[3]["cpu_ms_per_submission"] / medians[1]["cpu_ms_per_submission"], 3),
            **machine()}


async def _spread_run(log_dir: Path, count: int, nodes: int, submissions: int, concurrency: int, live: int,
                      seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    clusters = [f"spread-{i}" for i in range(4)]
    plan = Plan(f"spread4-x{count}", count, clusters, nodes, submissions, 0, concurrency, live, seed)
    async with temporary_postgres_database("gp_bench_spread") as url:
        await upgrade(url)
        (log_dir / plan.name).mkdir(parents=True, exist_ok=True)
        replicas = await _started(url, log_dir / plan.name, count)
        try:
            await load_nodes(Balancer(replicas), plan)
            bodies = [(clusters[i % 4], gang(f"job-{i:06d}", rng)) for i in range(200 + submissions)]
            load = Load()
            await submit(Balancer(replicas), plan, bodies[:200], load, timed=False)
            return await _phase(replicas, replicas, plan, bodies[200:], load)
        finally:
            for r in replicas:
                r.stop()


async def spread4(log_dir: Path, *, nodes: int, submissions: int, rounds: int, concurrency: int, live: int,
                  seed: int) -> dict[str, Any]:
    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    for _ in range(rounds):
        for count in (1, 2):
            runs[count].append(await _spread_run(log_dir, count, nodes, submissions, concurrency, live, seed))
    rate = {c: statistics.median(x["submissions_per_s"] for x in r) for c, r in runs.items()}
    return {"scenario": "spread4", "nodes_per_cluster": nodes, "rounds": rounds, "runs": runs,
            "submissions_per_s": rate, "ratio_2_over_1": round(rate[2] / rate[1], 3), **machine()}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def wide(name: str, pods: int) -> dict[str, Any]:
    """A workload of `pods` small pods (no topology): many pods placed per submission."""
    return {"name": name, "podGroups": [{"name": "g", "schedulingPolicy": {"gang": {"minCount": 1}},
                                         "pods": [{"name": "p", "count": pods, "requests": {"cpu": "500m"}}]}]}


async def _memory_run(log_dir: Path, count: int, clusters: int, nodes: int, pods: int, concurrency: int
                      ) -> dict[str, Any]:
    names = [f"mem-{i}" for i in range(clusters)]
    per = 50
    plan = Plan(f"memory-x{count}", count, names, nodes, 0, 0, concurrency, 10**9, 0)
    async with temporary_postgres_database("gp_bench_memory") as url:
        await upgrade(url)
        (log_dir / plan.name).mkdir(parents=True, exist_ok=True)
        replicas = await _started(url, log_dir / plan.name, count)
        try:
            ready = {r.index: rss_mb(r.proc.pid) for r in replicas if r.proc is not None}
            await load_nodes(Balancer(replicas), plan)
            bodies = [(names[i % clusters], wide(f"w-{i:06d}", per)) for i in range(clusters * pods // per)]
            await submit(Balancer(replicas), plan, bodies, Load(), timed=False)
            async with httpx.AsyncClient(timeout=120) as client:  # read through every replica
                for r in replicas:
                    for name in names:
                        assert (await client.get(f"http://{HOST}:{r.port}/v1/clusters/{name}/nodes")).status_code == 200
            grown = {r.index: round(rss_mb(r.proc.pid) - ready[r.index], 1) for r in replicas if r.proc is not None}
            return {"replicas": count, "rss_growth_mb": grown}
        finally:
            for r in replicas:
                r.stop()


async def memory(log_dir: Path, *, clusters: int = 8, nodes: int = 500, pods: int = 50_000,
                 concurrency: int = 8) -> dict[str, Any]:
    """8 clusters of 500 nodes with `pods` pods placed in each, served by one replica, then by two (each
    owning 4), read and written through all of them: each replica's resident memory beyond what it held
    when it became ready, and the ratio (target: at most 0.65)."""
    one = await _memory_run(log_dir, 1, clusters, nodes, pods, concurrency)
    two = await _memory_run(log_dir, 2, clusters, nodes, pods, concurrency)
    worst = max(two["rss_growth_mb"].values())
    return {"scenario": "memory", "one": one, "two": two,
            "ratio": round(worst / max(0.1, one["rss_growth_mb"][0]), 3), **machine()}
