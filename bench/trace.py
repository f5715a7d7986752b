"""A real GPU-cluster trace through the service: Alibaba's openb (ATC'23 "Beware of Fragmentation").

    .venv/bin/python bench/trace.py [--trace ../shared/traces/openb] [--seeds 1] [--pods N]
                                    [--skip-replay] [--skip-inflation] [--in-process]

Starts `gangplank serve` on a free loopback port against a fresh PostgreSQL database (as
bench/http_load.py does) and talks to it over HTTP, one request at a time (the trace's order is
the order of the inputs). `--in-process` runs the same requests through the decider in this
process instead (no HTTP, no store: a quick check).

The cluster: every node of `openb_node_list_gpu_node.csv` (1,213 GPU nodes) with its cpu, memory
and `nvidia.com/gpu` allocatable, labelled `nvidia.com/gpu.product=<model>` and tainted
`nvidia.com/gpu=present:NoSchedule`. Each pod is a workload of one basic group of one pod, with
its cpu, memory and GPUs as requests; a GPU pod tolerates the taint, and its `gpu_spec`
(`V100M16|V100M32`: any of these models) becomes required node affinity `In` on the model label.
A GPU-sharing task (`gpu_milli` < 1000) takes one whole GPU here: Gangplank has no fractional GPUs.
A CPU-only pod tolerates nothing, so it fits nowhere: every node of this trace is a GPU node.

Replay: pods from `openb_pod_list_gpuspec10.csv` (or the default file when it is absent), submitted
in creation order and deleted at their deletion time (a deletion before a creation at the same
second). Reports inputs/s, p50/p99 per request, the GPU allocation over the trace's time, and
checks that every placed pod sits on a node of a model it accepts and whose taint it tolerates
(from every decision as it comes, and from the node views at the end).

Inflation (the paper's experiment): pods sampled with replacement from the default trace (a seed
per run), submitted with no deletions until the GPUs requested reach 130% of the cluster's
(counted, as the paper counts them, in shares: a 0.46-GPU task requests 0.46). A pod that does not
fit stays pending (the paper drops it; no room is ever freed here, so it changes nothing). Reports
the share of GPU capacity allocated at the end in the paper's measure (each placed pod counts by
its share) and in whole GPUs held, beside the paper's figures.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import asyncio  # noqa: E402
import csv  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import rawhttp  # noqa: E402

# ../shared/traces/openb beside the repository (or beside the folder of its worktrees)
TRACE = next((p / "shared" / "traces" / "openb" for p in ROOT.parents if (p / "shared" / "traces" / "openb").is_dir()),
             ROOT.parent / "shared" / "traces" / "openb")
MODEL_LABEL = "nvidia.com/gpu.product"
GPU = "nvidia.com/gpu"
TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}
TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
NAMESPACE = "openb"
PAPER = {"Random": 87.5, "DotProd": 90.9, "GpuClustering": 91.9, "GpuPacking": 92.0, "BestFit": 93.1, "FGD": 95.4}


# -- the trace ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Node:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True)
class Pod:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    gpu_milli: int
    models: tuple[str, ...]  # the accepted GPU models; () = any
    created: int
    deleted: int | None

    @property
    def shares(self) -> float:
        """GPUs requested as the paper counts them (a sharing task by its share)."""
        return self.gpus * self.gpu_milli / 1000 if self.gpus else 0.0


def read_nodes(trace: Path) -> list[Node]:
    with open(trace / "openb_node_list_gpu_node.csv", newline="") as f:
        return [Node(r["sn"], int(r["cpu_milli"]), int(r["memory_mib"]), int(r["gpu"]), r["model"])
                for r in csv.DictReader(f)]


def pods_file(trace: Path) -> Path:
    spec10 = trace / "openb_pod_list_gpuspec10.csv"
    return spec10 if spec10.exists() else trace / "openb_pod_list_default.csv"


def read_pods(path: Path) -> list[Pod]:
    with open(path, newline="") as f:
        return [Pod(r["name"], int(r["cpu_milli"]), int(r["memory_mib"]), int(r["num_gpu"]), int(r["gpu_milli"]),
                    tuple(sorted(set(filter(None, r["gpu_spec"].split("|"))))), int(r["creation_time"]),
                    int(r["deletion_time"]) if r["deletion_time"] else None)
                for r in csv.DictReader(f)]


def node_body(node: Node, tainted: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"labels": {MODEL_LABEL: node.model},
                            "allocatable": {"cpu": f"{node.cpu_milli}m", "memory": f"{node.memory_mib}Mi",
                                            GPU: str(node.gpus)}}
    if tainted and node.gpus:
        body["taints"] = [TAINT]
    return body


def workload_body(name: str, pod: Pod, tainted: bool = True, affinity: bool = True) -> dict[str, Any]:
    requests = {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}
    entry: dict[str, Any] = {"name": "main", "requests": requests}
    if pod.gpus:
        requests[GPU] = str(pod.gpus)  # a sharing task (gpu_milli < 1000) takes one whole GPU
        if tainted:
            entry["tolerations"] = [TOLERATION]
        if affinity and pod.models:
            entry["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": MODEL_LABEL, "operator": "In", "values": list(pod.models)}]}]}}}
    return {"name": name, "podGroups": [{"name": "pod", "schedulingPolicy": {"basic": {}}, "pods": [entry]}]}


def timeline(pods: list[Pod]) -> list[tuple[int, str, int]]:
    """(trace time, "submit" | "delete", pod index): creation order, deletions at their time (before
    the creations of the same second; a pod deleted at its creation right after it)."""
    items: list[tuple[tuple[int, int, int, int], str, int]] = []
    for i, pod in enumerate(pods):
        items.append(((pod.created, 1, i, 0), "submit", i))
        if pod.deleted is not None:
            key = (pod.deleted, 0, i, 0) if pod.deleted > pod.created else (pod.created, 1, i, 1)
            items.append((key, "delete", i))
    items.sort()
    return [(key[0], kind, i) for key, kind, i in items]


# -- the two ways of sending requests ---------------------------------------------------------------
class Http:
    def __init__(self, port: int, cluster: str) -> None:
        self.conn = rawhttp.Connection("127.0.0.1", port)
        self.api = f"/v1/clusters/{cluster}"

    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        status, data = await self.conn.request(method, self.api + path, body)
        return status, json.loads(data) if data else None

    def close(self) -> None:
        self.conn.close()


class InProcess:
    """The decider in this process: the decisions an HTTP answer would carry, and the node views."""

    def __init__(self, cluster: str) -> None:
        from service.domain import ClusterState
        self.state = ClusterState(cluster)

    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        from service.domain import Event, Rejection, accept, handle
        from service.domain.read.views import node_views
        parts = path.strip("/").split("/")
        if method == "GET" and parts == ["nodes"]:
            return 200, {"items": node_views(self.state)}
        if parts[0] == "nodes":
            kind, name, ns = "UpsertNode", parts[1], None
        else:  # namespaces/<ns>/workloads[/<name>]
            ns = parts[1]
            kind, name = ("SubmitWorkload", body["name"]) if method == "POST" else ("DeleteWorkload", parts[3])
        accepted = accept(self.state, kind, name, ns, body)
        if isinstance(accepted, Rejection):
            return accepted.status, {"detail": accepted.detail}
        etype, data = accepted
        out = handle(self.state, Event(self.state.position + 1, etype, json.loads(json.dumps(data))))
        return (201 if kind == "SubmitWorkload" else 200), {"decisions": [{"type": e.type, "data": e.data} for e in out]}

    def close(self) -> None:
        pass


# -- following the decisions ----------------------------------------------------------------------
class Tracker:
    """Where every pod is, from the decisions in the answers; checks each placement as it comes."""

    def __init__(self, nodes: list[Node], pods_by_workload: dict[str, Pod], tainted: bool) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.pods = pods_by_workload
        self.tainted = tainted
        self.where: dict[str, str] = {}  # workload -> node
        self.gpus = 0  # whole GPUs held
        self.shares = 0.0  # the paper's measure
        self.violations: list[str] = []
        self.placements = 0

    def check(self, workload: str, node_name: str) -> None:
        pod, node = self.pods[workload], self.nodes[node_name]
        if pod.models and node.model not in pod.models:
            self.violations.append(f"{workload} (accepts {'|'.join(pod.models)}) on {node_name} ({node.model})")
        if self.tainted and node.gpus and not pod.gpus:
            self.violations.append(f"{workload} tolerates no taint, on tainted {node_name}")

    def place(self, workload: str, node_name: str) -> None:
        self.check(workload, node_name)
        self.where[workload] = node_name
        pod = self.pods[workload]
        self.gpus += pod.gpus
        self.shares += pod.shares
        self.placements += 1

    def release(self, workload: str) -> None:
        if self.where.pop(workload, None) is not None:
            pod = self.pods[workload]
            self.gpus -= pod.gpus
            self.shares -= pod.shares

    def follow(self, decisions: list[dict[str, Any]]) -> None:
        for d in decisions:
            data = d["data"]
            if d["type"] in ("PodGroupScheduled", "PodsScheduled"):
                for p in data["pods"]:
                    self.place(data["workload"], p["node"])
            elif d["type"] in ("PodsLost", "PodGroupPreempted"):
                self.release(data["workload"])

    def check_views(self, views: list[dict[str, Any]]) -> int:
        """Every pod the node views show: on a node it accepts, and where the tracker has it."""
        seen = 0
        for view in views:
            for p in view["pods"]:
                seen += 1
                self.check(p["workload"], view["name"])
                if self.where.get(p["workload"]) != view["name"]:
                    self.violations.append(f"{p['workload']} is on {view['name']} but the decisions said "
                                           f"{self.where.get(p['workload'])}")
        if seen != len(self.where):
            self.violations.append(f"the node views hold {seen} pods, the decisions {len(self.where)}")
        return seen


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))] * 1000, 2) if xs else 0.0


def latency(xs: list[float]) -> dict[str, Any]:
    return {"count": len(xs), "p50_ms": pct(xs, 0.5), "p99_ms": pct(xs, 0.99), "max_ms": pct(xs, 1.0)}


async def load_nodes(client: Any, nodes: list[Node], tainted: bool) -> list[float]:
    took = []
    for node in nodes:
        t = time.perf_counter()
        status, answer = await client.request("PUT", f"/nodes/{node.name}", node_body(node, tainted))
        took.append(time.perf_counter() - t)
        assert status == 200, answer
    return took


# -- the replay -------------------------------------------------------------------------------------
async def replay(client: Any, nodes: list[Node], pods: list[Pod], samples: int = 24) -> dict[str, Any]:
    capacity = sum(n.gpus for n in nodes)
    tracker = Tracker(nodes, {p.name: p for p in pods}, tainted=True)
    put = await load_nodes(client, nodes, tainted=True)
    events = timeline(pods)
    end = max(t for t, _, _ in events) or 1
    lat: dict[str, list[float]] = {"submit": [], "delete": []}
    over_time: list[dict[str, Any]] = []
    next_sample, live, peak = 0, 0, 0
    t0 = time.perf_counter()
    for at, kind, i in events:
        pod = pods[i]
        t = time.perf_counter()
        if kind == "submit":
            status, answer = await client.request("POST", f"/namespaces/{NAMESPACE}/workloads", workload_body(pod.name, pod))
            assert status == 201, answer
            live += 1
        else:
            status, answer = await client.request("DELETE", f"/namespaces/{NAMESPACE}/workloads/{pod.name}")
            assert status == 200, answer
            tracker.release(pod.name)
            live -= 1
        lat[kind].append(time.perf_counter() - t)
        tracker.follow(answer["decisions"])
        peak = max(peak, tracker.gpus)
        if at >= next_sample * end / samples:  # the state after the last input before each sample time
            over_time.append({"day": round(at / 86400, 1), "gpus_allocated": tracker.gpus,
                              "gpu_share_pct": round(100 * tracker.gpus / capacity, 1),
                              "pods_running": len(tracker.where), "pods_waiting": live - len(tracker.where)})
            next_sample = int(at * samples // end) + 1
    wall = time.perf_counter() - t0
    status, views = await client.request("GET", "/nodes")
    assert status == 200
    seen = tracker.check_views(views["items"])
    gpu_pods = [p for p in pods if p.gpus]
    return {
        "pods_file": "", "nodes": len(nodes), "gpus": capacity, "pods": len(pods),
        "gpu_pods": len(gpu_pods), "with_gpu_spec": sum(1 for p in gpu_pods if p.models),
        "sharing_tasks_take_a_whole_gpu": sum(1 for p in gpu_pods if p.gpus == 1 and p.gpu_milli < 1000),
        "inputs": len(events), "wall_s": round(wall, 2), "inputs_per_s": round(len(events) / wall, 1),
        "node_put": latency(put), "submit": latency(lat["submit"]), "delete": latency(lat["delete"]),
        "placements": tracker.placements, "peak_gpus_allocated": peak,
        "peak_gpu_share_pct": round(100 * peak / capacity, 1), "placed_at_end": seen,
        "gpu_allocation_over_time": over_time,
        "check": {"ok": not tracker.violations, "violations": tracker.violations[:10],
                  "placements_checked": tracker.placements, "pods_in_node_views": seen},
    }


# -- the inflation run -----------------------------------------------------------------------------
async def inflation(client: Any, nodes: list[Node], pods: list[Pod], seed: int, tainted: bool) -> dict[str, Any]:
    capacity = sum(n.gpus for n in nodes)
    rng = random.Random(seed)
    await load_nodes(client, nodes, tainted)
    sampled: dict[str, Pod] = {}
    tracker = Tracker(nodes, sampled, tainted)
    requested, took = 0.0, []
    t0 = time.perf_counter()
    while requested < 1.3 * capacity:
        pod = pods[rng.randrange(len(pods))]
        name = f"s{len(sampled):05d}"
        sampled[name] = pod
        requested += pod.shares
        t = time.perf_counter()
        status, answer = await client.request("POST", f"/namespaces/{NAMESPACE}/workloads",
                                              workload_body(name, pod, tainted, affinity=False))
        took.append(time.perf_counter() - t)
        assert status == 201, answer
        tracker.follow(answer["decisions"])
    wall = time.perf_counter() - t0
    status, views = await client.request("GET", "/nodes")
    assert status == 200
    seen = tracker.check_views(views["items"])
    return {"seed": seed, "tainted": tainted, "submitted": len(sampled),
            "requested_gpu_shares_pct": round(100 * requested / capacity, 1), "placed": seen,
            "allocated_pct_paper_measure": round(100 * tracker.shares / capacity, 1),
            "allocated_pct_whole_gpus": round(100 * tracker.gpus / capacity, 1),
            "submit": latency(took), "inputs_per_s": round(len(sampled) / wall, 1),
            "check": {"ok": not tracker.violations, "violations": tracker.violations[:10]}}


# -- main --------------------------------------------------------------------------------------------
async def run(args: argparse.Namespace, make_client: Any) -> None:
    nodes = read_nodes(args.trace)
    if not args.skip_replay:
        path = pods_file(args.trace)
        pods = read_pods(path)[: args.pods] if args.pods else read_pods(path)
        client = await make_client("openb")
        try:
            result = await replay(client, nodes, pods)
        finally:
            client.close()
        result["pods_file"] = path.name
        print(json.dumps({"replay": result}), flush=True)
    if not args.skip_inflation:
        default = read_pods(args.trace / "openb_pod_list_default.csv")
        runs = []
        for seed in range(1, args.seeds + 1):
            for tainted in (True, False):
                client = await make_client(f"inflation-{seed}-{'tainted' if tainted else 'open'}")
                try:
                    runs.append(await inflation(client, nodes, default, seed, tainted))
                finally:
                    client.close()
                print(json.dumps({"inflation": runs[-1]}), flush=True)
        summary = {}
        for tainted in (True, False):
            mine = [r for r in runs if r["tainted"] is tainted]
            summary["tainted" if tainted else "open"] = {
                "seeds": len(mine),
                "allocated_pct_paper_measure": round(sum(r["allocated_pct_paper_measure"] for r in mine) / len(mine), 1),
                "allocated_pct_whole_gpus": round(sum(r["allocated_pct_whole_gpus"] for r in mine) / len(mine), 1)}
        print(json.dumps({"inflation_summary": summary, "paper_mean_of_10_seeds_pct": PAPER}), flush=True)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace", type=Path, default=TRACE)
    ap.add_argument("--pods", type=int, default=0, help="only the first N pods of the replay (0: all)")
    ap.add_argument("--seeds", type=int, default=1, help="inflation runs (seeds 1..N), each tainted and open")
    ap.add_argument("--skip-replay", action="store_true")
    ap.add_argument("--skip-inflation", action="store_true")
    ap.add_argument("--in-process", action="store_true", help="the decider in this process: no HTTP, no store")
    args = ap.parse_args()
    if args.in_process:
        from service.gcpause import configure_for_serving
        configure_for_serving()  # the collector's thresholds of `gangplank serve`

        async def local(cluster: str) -> InProcess:
            return InProcess(cluster)
        await run(args, local)
        return

    import httpx

    from bench.http_load import free_port, machine, wait_ready
    from service.store.migrate import upgrade
    from service.store.testing import temporary_postgres_database
    async with temporary_postgres_database("gp_trace") as url:
        await upgrade(url)
        port = free_port()
        log = tempfile.NamedTemporaryFile(prefix="gangplank-trace-", suffix=".log", delete=False)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GANGPLANK_")}
        proc = subprocess.Popen([sys.executable, "-m", "service", "serve", "--port", str(port), "--database-url", url],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as probe:
                await wait_ready(probe, proc)

                async def remote(cluster: str) -> Http:
                    return Http(port, cluster)
                await run(args, remote)
                verify = (await probe.get("/v1/clusters/openb/audit/verify")).json()
                print(json.dumps({"audit_verify": verify, "machine": machine(), "server_log": log.name}), flush=True)
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()


if __name__ == "__main__":
    asyncio.run(main())
