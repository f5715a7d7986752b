"""Replicas on one PostgreSQL database (issue 16, point 3): throughput, p99 and failover.

    .venv/bin/python bench/replicas.py [--replicas 1,2,3] [--scenarios one,eight,failover]
                                       [--nodes 5000] [--submissions 2000] [--concurrency 8]

Every scenario starts its `gangplank serve` replicas (`python -m service serve`, subprocesses on
free loopback ports) on a fresh PostgreSQL database (service.store.testing), loads the nodes over
HTTP, warms every replica up, then POSTs gang workloads (bench/http_load.py's: 1-16 pods of one
GPU, rack topology, priorities 10/50/100, each with an Idempotency-Key) from --concurrency
clients and DELETEs the oldest to keep at most --live workloads (per 5,000 nodes) running. The
bench is the load balancer: each request, POST or DELETE, goes to the next replica in turn
(round robin over the live ones); a request whose connection fails is sent again, with the same
key, to the next replica, and the time it waited counts from its first try.

- one: one cluster of --nodes nodes, served by 1, 2 and 3 replicas (--replicas);
- eight: --clusters clusters (--nodes in all, split evenly), each workload to the next cluster,
  every replica serving every cluster;
- pinned (not run by default): the eight clusters, each cluster's requests to one replica (the k-th
  cluster to the (k mod n)-th live replica), as a load balancer hashing on the path would route them;
- failover: the eight clusters on --failover-replicas replicas; when half of the timed
  submissions are acknowledged the bench kills one replica with SIGKILL and goes on with the
  others. Reported: the longest wait of any request (target: below 2 s), how long the requests
  caught on the killed replica took to be answered elsewhere, and how soon every cluster had
  a new commit after the kill.

After each scenario: every acknowledged submission and deletion is in its cluster's stream
exactly once, every stream verifies (GET /audit/verify), and `gangplank replay --verify`
re-decides every cluster byte for byte. Reported per run: submissions/s, requests/s, POST
p50/p99/max, DELETE p99, the replicas' CPU per request, transport retries, and the machine's
CPU count and load (other processes on the machine take CPU from the measured ones).
"""
from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path; keep it out (see http_load.py).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import asyncio  # noqa: E402
import collections  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

import asyncpg  # noqa: E402
import httpx  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import rawhttp  # noqa: E402
from bench.http_load import cpu_seconds, free_port, machine, pct, wait_ready, workload_body  # noqa: E402
from service.store import open_store  # noqa: E402
from service.store.migrate import upgrade  # noqa: E402
from service.store.testing import temporary_postgres_database  # noqa: E402

PER_RACK = 50
HOST = "127.0.0.1"


def node_body(rack: int) -> dict[str, Any]:
    return {"labels": {"example.com/rack": f"r{rack:03d}", "topology.kubernetes.io/zone": f"z{rack % 4}"},
            "allocatable": {"cpu": "64", "memory": "512Gi", "example.com/gpu": "8", "pods": "110"}}


# ----------------------------------------------------------------------------------- replicas

@dataclass
class Replica:
    index: int
    url: str
    log_dir: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    alive: bool = False
    killed_at: float | None = None
    profile: bool = False
    cpu_at_kill: float = 0.0

    def start(self) -> None:
        self.port = free_port()
        log = open(self.log_dir / f"replica-{self.index}.log", "wb")
        env = {k: v for k, v in os.environ.items() if not k.startswith("GANGPLANK_")}
        profiler = ["-m", "cProfile", "-o", str(self.log_dir / f"replica-{self.index}.prof")] if self.profile else []
        self.proc = subprocess.Popen([sys.executable, *profiler, "-m", "service", "serve", "--port", str(self.port),
                                      "--database-url", self.url, "--no-migrate"],
                                     cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.alive = True

    def kill(self) -> None:
        assert self.proc is not None
        self.cpu_at_kill = self.cpu()
        self.proc.send_signal(signal.SIGKILL)
        self.killed_at = time.perf_counter()
        self.alive = False  # a load balancer's health check takes it out; the bench at once
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def cpu(self) -> float:
        assert self.proc is not None
        try:
            return cpu_seconds(self.proc.pid)
        except (FileNotFoundError, ProcessLookupError):
            return 0.0


@dataclass
class Sent:
    """One request as the bench saw it: first try to final answer."""
    method: str
    cluster: str
    start: float
    end: float = 0.0
    status: int = 0
    tries: list[int] = field(default_factory=list)  # the replicas it was sent to, in order


class Balancer:
    """Round robin over the live replicas; a failed request goes to the next one, same key."""

    def __init__(self, replicas: list[Replica], pinned: bool = False) -> None:
        self.replicas = replicas
        self.pinned = pinned  # each cluster to one replica (the k-th cluster to the (k mod n)-th live one)
        self.turn = 0
        self.retries = 0
        self.sent: list[Sent] = []

    def next(self, cluster: str) -> Replica:
        live = [r for r in self.replicas if r.alive]
        if not live:
            raise RuntimeError("no replica left")
        if self.pinned and cluster.rsplit("-", 1)[-1].isdigit():
            return live[int(cluster.rsplit("-", 1)[-1]) % len(live)]
        replica = live[self.turn % len(live)]
        self.turn += 1
        return replica

    async def request(self, conns: dict[int, rawhttp.Connection], cluster: str, method: str, path: str,
                      body: Any = None, key: str | None = None) -> tuple[int, bytes]:
        record = Sent(method, cluster, time.perf_counter())
        headers = {"Idempotency-Key": key} if key else None
        for _ in range(20):
            replica = self.next(cluster)
            record.tries.append(replica.index)
            conn = conns.get(replica.index)
            if conn is None:
                conn = conns[replica.index] = rawhttp.Connection(HOST, replica.port)
            try:
                status, data = await conn.request(method, path, body, headers)
            except ConnectionError:
                conns.pop(replica.index).close()
                self.retries += 1
                if replica.proc is not None and replica.proc.poll() is not None:
                    replica.alive = False
                continue
            if status == 503:  # a replica shutting down: try the next
                self.retries += 1
                continue
            record.end, record.status = time.perf_counter(), status
            self.sent.append(record)
            return status, data
        raise RuntimeError(f"{method} {path}: no replica answered")


# ----------------------------------------------------------------------------------- one run

@dataclass
class Plan:
    name: str
    replicas: int
    clusters: list[str]
    nodes_per_cluster: int
    submissions: int
    warmup: int
    concurrency: int
    live_per_cluster: int
    seed: int
    kill_at: float | None = None  # kill replica 0 when this share of the timed submissions is acknowledged
    pinned: bool = False  # see Balancer


async def load_nodes(balancer: Balancer, plan: Plan) -> float:
    todo = collections.deque((c, f"r{i // PER_RACK:03d}-n{i % PER_RACK:02d}", i // PER_RACK)
                             for c in plan.clusters for i in range(plan.nodes_per_cluster))
    t0 = time.perf_counter()

    async def worker(_: int) -> None:
        conns: dict[int, rawhttp.Connection] = {}
        while todo:
            cluster, name, rack = todo.popleft()
            status, data = await balancer.request(conns, cluster, "PUT", f"/v1/clusters/{cluster}/nodes/{name}",
                                                  node_body(rack))
            assert status == 200, data
        for conn in conns.values():
            conn.close()

    await asyncio.gather(*(worker(w) for w in range(plan.concurrency)))
    return time.perf_counter() - t0


@dataclass
class Load:
    """What the clients acknowledged, per cluster."""
    submitted: dict[str, list[str]] = field(default_factory=lambda: collections.defaultdict(list))
    deleted: dict[str, list[str]] = field(default_factory=lambda: collections.defaultdict(list))
    post_lat: list[float] = field(default_factory=list)
    del_lat: list[float] = field(default_factory=list)
    phases: collections.Counter[str] = field(default_factory=collections.Counter)


async def submit(balancer: Balancer, plan: Plan, bodies: list[tuple[str, dict[str, Any]]], load: Load,
                 timed: bool, on_ack: Any = None) -> None:
    queue = collections.deque(bodies)
    live: dict[str, collections.deque[str]] = {c: collections.deque() for c in plan.clusters}

    async def worker(_: int) -> None:
        conns: dict[int, rawhttp.Connection] = {}
        while queue:
            cluster, body = queue.popleft()
            api = f"/v1/clusters/{cluster}/namespaces/bench/workloads"
            t = time.perf_counter()
            status, data = await balancer.request(conns, cluster, "POST", api, body,
                                                  f"submit-{cluster}-{body['name']}")
            assert status == 201, data
            load.submitted[cluster].append(body["name"])
            if timed:
                load.post_lat.append(time.perf_counter() - t)
                load.phases[json.loads(data)["status"]["phase"]] += 1
                if on_ack is not None:
                    on_ack()
            live[cluster].append(body["name"])
            while len(live[cluster]) > plan.live_per_cluster:
                old = live[cluster].popleft()
                t = time.perf_counter()
                status, data = await balancer.request(conns, cluster, "DELETE", f"{api}/{old}", key=f"delete-{cluster}-{old}")
                assert status == 200, data
                load.deleted[cluster].append(old)
                if timed:
                    load.del_lat.append(time.perf_counter() - t)
        for conn in conns.values():
            conn.close()

    await asyncio.gather(*(worker(w) for w in range(plan.concurrency)))


async def check_streams(url: str, plan: Plan, load: Load, replicas: list[Replica]) -> dict[str, Any]:
    """Every acknowledged submission and deletion exactly once; gapless; verified; replayed."""
    store = open_store(url)
    problems: list[str] = []
    events = 0
    try:
        for cluster in plan.clusters:
            rows = await store.read_data(cluster)
            events += len(rows)
            if [r[0] for r in rows] != list(range(1, len(rows) + 1)):
                problems.append(f"{cluster}: positions are not gapless")
            submitted = collections.Counter(r[3]["name"] for r in rows if r[1] == "WorkloadSubmitted")
            deleted = collections.Counter(r[3]["name"] for r in rows if r[1] == "WorkloadDeleted")
            twice = [n for n, k in submitted.items() if k > 1] + [n for n, k in deleted.items() if k > 1]
            lost = [n for n in load.submitted[cluster] if submitted[n] != 1] + \
                   [n for n in load.deleted[cluster] if deleted[n] != 1]
            if twice or lost:
                problems.append(f"{cluster}: twice {twice[:3]}, lost {lost[:3]}")
    finally:
        await store.close()
    survivor = next(r for r in replicas if r.alive)
    async with httpx.AsyncClient(base_url=f"http://{HOST}:{survivor.port}", timeout=120) as client:
        for cluster in plan.clusters:
            verify = (await client.get(f"/v1/clusters/{cluster}/audit/verify")).json()
            if not verify["ok"]:
                problems.append(f"{cluster}: verify {verify}")
    replayed = 0
    for cluster in plan.clusters:  # the CLI, as an operator runs it
        done = subprocess.run([sys.executable, "-m", "service", "replay", "--cluster", cluster, "--verify",
                               "--database-url", url], cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            problems.append(f"{cluster}: replay --verify rc {done.returncode}: {done.stdout[-300:]}{done.stderr[-300:]}")
        else:
            replayed += 1
    return {"ok": not problems, "events": events, "replay_verified_clusters": replayed, "problems": problems}


async def heads(url: str, clusters: list[str]) -> dict[str, int]:
    store = open_store(url)
    try:
        return {c: await store.last_position(c) for c in clusters}
    finally:
        await store.close()


async def commits_after(url: str, heads0: dict[str, int]) -> int:
    """Transactions that appended events after these positions: one recordedAt each."""
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://", 1))
    try:
        return sum([await conn.fetchval("SELECT count(DISTINCT recorded_at) FROM events WHERE cluster = $1"
                                        " AND position > $2", c, p) for c, p in heads0.items()])
    finally:
        await conn.close()


def failover_report(balancer: Balancer, killed: Replica, acks_after: list[float]) -> dict[str, Any]:
    k = killed.killed_at
    assert k is not None
    caught = [s for s in balancer.sent if s.start <= k <= s.end and killed.index in s.tries]
    around = [s for s in balancer.sent if s.end >= k - 2 and s.start <= k + 5]
    per_cluster: dict[str, float] = {}
    for s in balancer.sent:
        if s.end > k and s.status < 300 and s.tries[-1] != killed.index:
            per_cluster[s.cluster] = min(per_cluster.get(s.cluster, s.end), s.end)
    return {
        "killed_replica": killed.index,
        "max_wait_ms": round(max(s.end - s.start for s in balancer.sent) * 1000, 1),
        "max_wait_around_kill_ms": round(max((s.end - s.start for s in around), default=0) * 1000, 1),
        "caught_on_killed": len(caught),
        "caught_answered_within_ms": round(max((s.end - k for s in caught), default=0) * 1000, 1),
        "every_cluster_committed_again_within_ms": round(max((t - k for t in per_cluster.values()), default=0)
                                                         * 1000, 1),
        "acks_in_1s_before_kill": sum(1 for t in acks_after if k - 1 <= t < k),
        "acks_in_1s_after_kill": sum(1 for t in acks_after if k <= t < k + 1),
    }


async def run(plan: Plan, log_dir: Path, verify: bool, profile: bool = False) -> dict[str, Any]:
    async with temporary_postgres_database("gp_bench_replicas") as url:
        await upgrade(url)
        replicas = [Replica(i, url, log_dir / plan.name, profile=profile) for i in range(plan.replicas)]
        (log_dir / plan.name).mkdir(parents=True, exist_ok=True)
        result: dict[str, Any] = {"scenario": plan.name, "replicas": plan.replicas, "clusters": len(plan.clusters),
                                  "nodes_per_cluster": plan.nodes_per_cluster, "concurrency": plan.concurrency}
        try:
            for r in replicas:
                r.start()
            for r in replicas:
                async with httpx.AsyncClient(base_url=f"http://{HOST}:{r.port}", timeout=60) as client:
                    assert r.proc is not None
                    await wait_ready(client, r.proc)
            balancer = Balancer(replicas, pinned=plan.pinned)
            result["nodes_load_s"] = round(await load_nodes(balancer, plan), 2)
            rng = random.Random(plan.seed)
            total = plan.warmup + plan.submissions
            bodies = [(plan.clusters[i % len(plan.clusters)], workload_body(f"job-{i:05d}", rng)) for i in range(total)]
            load = Load()
            await submit(balancer, plan, bodies[:plan.warmup], load, timed=False)  # every replica loads every cluster
            balancer.sent.clear()
            retries0 = balancer.retries
            acks: list[float] = []
            kill_after = None if plan.kill_at is None else int(plan.submissions * plan.kill_at)

            def on_ack() -> None:
                acks.append(time.perf_counter())
                if kill_after is not None and len(acks) == kill_after and replicas[0].alive:
                    replicas[0].kill()

            heads0 = await heads(url, plan.clusters)
            cpu0 = sum(r.cpu() for r in replicas)
            t0 = time.perf_counter()
            await submit(balancer, plan, bodies[plan.warmup:], load, timed=True, on_ack=on_ack)
            wall = time.perf_counter() - t0
            cpu = sum(r.cpu() if r.alive else r.cpu_at_kill for r in replicas) - cpu0
            requests = len(load.post_lat) + len(load.del_lat)
            commits = await commits_after(url, heads0)
            result["run"] = {
                "submissions": plan.submissions, "wall_s": round(wall, 2),
                "submissions_per_s": round(plan.submissions / wall, 1), "requests_per_s": round(requests / wall, 1),
                "post_p50_ms": pct(load.post_lat, 0.5), "post_p99_ms": pct(load.post_lat, 0.99),
                "post_max_ms": pct(load.post_lat, 1.0), "delete_p99_ms": pct(load.del_lat, 0.99),
                "phases": dict(load.phases), "transport_retries": balancer.retries - retries0,
                "replica_cpu_ms_per_request": round(cpu / requests * 1000, 2),
                "commits": commits, "inputs_per_commit": round(requests / max(1, commits), 2), **machine(),
            }
            if plan.kill_at is not None:
                result["failover"] = failover_report(balancer, replicas[0], acks)
            if verify:
                result["check"] = await check_streams(url, plan, load, replicas)
        finally:
            for r in replicas:
                r.stop()
        return result


def summary(result: dict[str, Any]) -> str:
    r = result["run"]
    line = (f"{result['scenario']:>9} x{result['replicas']}  {result['clusters']} cluster(s) of "
            f"{result['nodes_per_cluster']} nodes: {r['submissions_per_s']:7.1f} submissions/s, "
            f"p50 {r['post_p50_ms']:7.1f} ms, p99 {r['post_p99_ms']:7.1f} ms, max {r['post_max_ms']:7.1f} ms, "
            f"cpu {r['replica_cpu_ms_per_request']} ms/request, {r['inputs_per_commit']} inputs/commit, "
            f"load {r['loadavg_1m']}")
    if "failover" in result:
        f = result["failover"]
        line += (f"\n           failover: max wait {f['max_wait_ms']} ms, {f['caught_on_killed']} caught requests "
                 f"answered within {f['caught_answered_within_ms']} ms, every cluster committed again within "
                 f"{f['every_cluster_committed_again_within_ms']} ms")
    if "check" in result:
        c = result["check"]
        line += f"\n           check: {'ok' if c['ok'] else 'FAILED ' + '; '.join(c['problems'])}, {c['events']} events"
    return line


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", default="1,2,3", help="replica counts for the one- and eight-cluster runs")
    ap.add_argument("--scenarios", default="one,eight,failover")
    ap.add_argument("--nodes", type=int, default=5000, help="nodes in all (eight clusters split them)")
    ap.add_argument("--clusters", type=int, default=8)
    ap.add_argument("--submissions", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--live", type=int, default=1500, help="running workloads kept per 5,000 nodes")
    ap.add_argument("--failover-replicas", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every scenario this many times, interleaved (the machine's load drifts); medians at the end")
    ap.add_argument("--no-verify", action="store_true", help="skip the stream checks and replay --verify")
    ap.add_argument("--json", metavar="FILE", help="write every result to FILE")
    ap.add_argument("--logs", metavar="DIR", help="keep the replicas' logs here (default: a temporary folder)")
    ap.add_argument("--profile", action="store_true", help="run the replicas under cProfile (stats beside the logs)")
    ap.add_argument("--target-nodes", type=int, default=1500, help="targets: the one cluster's nodes")
    ap.add_argument("--target-submissions", type=int, default=600, help="targets, spread4: per phase")
    ap.add_argument("--target-rounds", type=int, default=3, help="targets, spread4: interleaved rounds")
    ap.add_argument("--target-live", type=int, default=1000, help="targets, spread4: running workloads kept")
    ap.add_argument("--spread-nodes", type=int, default=1000, help="spread4: nodes per cluster")
    ap.add_argument("--memory-pods", type=int, default=50_000, help="memory: pods placed per cluster")
    args = ap.parse_args()
    if {"targets", "spread4", "memory"} & set(args.scenarios.split(",")):
        await _targets(args)
        return

    log_dir = Path(args.logs or tempfile.mkdtemp(prefix="gangplank-replicas-"))
    counts = [int(x) for x in args.replicas.split(",") if x]
    scenarios = [s for s in args.scenarios.split(",") if s]
    per_cluster = args.nodes // args.clusters

    def live(nodes: int) -> int:
        return max(1, args.live * nodes // 5000)

    plans: list[Plan] = []
    common = {"submissions": args.submissions, "warmup": args.warmup, "concurrency": args.concurrency,
              "seed": args.seed}
    if "one" in scenarios:
        plans += [Plan(f"one-x{n}", n, ["bench"], args.nodes, live_per_cluster=live(args.nodes), **common)
                  for n in counts]
    eight = [f"bench-{c}" for c in range(args.clusters)]
    if "eight" in scenarios:
        plans += [Plan(f"eight-x{n}", n, eight, per_cluster, live_per_cluster=live(per_cluster), **common)
                  for n in counts]
    if "pinned" in scenarios:
        plans += [Plan(f"pinned-x{n}", n, eight, per_cluster, live_per_cluster=live(per_cluster), pinned=True,
                       **common) for n in counts]
    if "failover" in scenarios:
        plans.append(Plan(f"failover-x{args.failover_replicas}", args.failover_replicas, eight, per_cluster,
                          live_per_cluster=live(per_cluster), kill_at=0.5, **common))
    results = []
    for _ in range(args.rounds):
        for plan in plans:
            result = await run(plan, log_dir, verify=not args.no_verify, profile=args.profile)
            results.append(result)
            print(summary(result), flush=True)
    if args.rounds > 1:
        print(f"medians of {args.rounds} rounds:")
        for plan in plans:
            runs = [r["run"] for r in results if r["scenario"] == plan.name]
            print(f"{plan.name:>12}: {statistics.median(r['submissions_per_s'] for r in runs):7.1f} submissions/s,"
                  f" p99 {statistics.median(r['post_p99_ms'] for r in runs):7.1f} ms")
    print(f"replica logs: {log_dir}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    if any(not r.get("check", {"ok": True})["ok"] for r in results):
        sys.exit(1)


async def _targets(args: argparse.Namespace) -> None:
    """docs/replicas.md's targets (bench/replica_targets.py): ratios measured in one run."""
    from bench.replica_targets import memory, spread4, targets

    log_dir = Path(args.logs or tempfile.mkdtemp(prefix="gangplank-replicas-"))
    common = {"submissions": args.target_submissions, "rounds": args.target_rounds,
              "concurrency": args.concurrency, "live": args.target_live, "seed": args.seed}
    results = []
    if "targets" in args.scenarios:
        results.append(await targets(log_dir, nodes=args.target_nodes, **common))
        t = results[-1]
        for r, m in t["per_replicas"].items():
            print(f"targets x{r}: {m['submissions_per_s']:7.1f} submissions/s, cpu {m['cpu_ms_per_submission']} ms"
                  f"/submission (all 3 replicas), p99 {m['post_p99_ms']} ms", flush=True)
        print(f"targets: throughput 2/1 {t['throughput_2_over_1']} (>= 0.9), 3/1 {t['throughput_3_over_1']} (>= 0.85);"
              f" cpu 2/1 {t['cpu_2_over_1']}, 3/1 {t['cpu_3_over_1']} (<= 1.15); load {t['loadavg_1m']}", flush=True)
    if "spread4" in args.scenarios:
        results.append(await spread4(log_dir, nodes=args.spread_nodes, **common))
        s = results[-1]
        print(f"spread4: 1 replica {s['submissions_per_s'][1]} submissions/s, 2 replicas {s['submissions_per_s'][2]}:"
              f" ratio {s['ratio_2_over_1']} (>= 1.5); load {s['loadavg_1m']}", flush=True)
    if "memory" in args.scenarios:
        results.append(await memory(log_dir, pods=args.memory_pods, concurrency=args.concurrency))
        m = results[-1]
        print(f"memory: growth 1 replica {m['one']['rss_growth_mb']} MB, 2 replicas {m['two']['rss_growth_mb']} MB:"
              f" ratio {m['ratio']} (<= 0.65)", flush=True)
    print(f"replica logs: {log_dir}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
