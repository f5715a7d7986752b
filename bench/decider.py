"""Benchmark of the pure decider (issue 2): no store, no HTTP.

5,000 nodes in 100 racks of 50 (cpu 64, memory 512Gi, example.com/gpu 8), a
stream of gang workloads of 1-64 pods (rack topology for gangs of up to 50 pods;
priorities 60% low / 30% mid / 10% high) with deletions that keep the cluster
near 90% full. Run A keeps the queue empty (a submission that does not place is
cancelled at once); run B first leaves 10,000 groups pending, then replays the
same stream. Reports pods decided per second, p50/p99 per input, peak memory.
With --finishes N (lifecycle.md, issue 23), run C replays run A's stream, but each workload
retired by the 90% rule first has one pod reported Succeeded (up to N reports): its per-input
p99 against run A's, and a one-pod report's cost against a one-pod workload's deletion in the
same stream. With --scales M (lifecycle.md, *Growing and shrinking*), run C also changes the size of up
to M retired workloads by one pod just before their deletion (a running gang shrunk by its highest
index, minCount lowered with it when needed; a one-pod workload grown by one): a one-pod scale's cost
against a one-pod deletion's, and run C's p99 against run A's.

    python bench/decider.py [--workloads 20000] [--pending 10000] [--seed 7] [--finishes 0] [--scales 0]
"""
from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.domain import ClusterState, Event, Rejection, accept, handle  # noqa: E402
from service.gcpause import configure_for_serving  # noqa: E402

PRIORITIES = [(0.6, 10), (0.3, 50), (0.1, 100)]
SHAPES = [  # per-pod requests: whole GPUs with their share of cpu and memory
    {"cpu": "8", "memory": "64Gi", "example.com/gpu": "1"},
    {"cpu": "16", "memory": "128Gi", "example.com/gpu": "2"},
    {"cpu": "4", "memory": "32Gi", "example.com/gpu": "1"},
]


class Driver:
    def __init__(self) -> None:
        self.state = ClusterState("bench")
        self.latencies: list[float] = []
        self.kinds: list[str] = []
        self.pods_decided = 0
        self.finishes_left = 0  # run C: one-pod reports still to make before deletions
        self.scales_left = 0  # run C: one-pod scales still to make before deletions
        self.sizes: list[int] = []  # per timed input: pods of the workload it deletes or reports (0: other)

    def run(self, kind: str, name: str, namespace: str | None = None, body: dict | None = None,
            timed: bool = True) -> list[Event]:
        t0 = time.perf_counter()
        accepted = accept(self.state, kind, name, namespace, body)
        if isinstance(accepted, Rejection):
            raise RuntimeError(accepted)
        etype, data = accepted
        decisions = handle(self.state, Event(self.state.position + 1, etype, data))
        dt = time.perf_counter() - t0
        if timed:
            self.latencies.append(dt)
            self.kinds.append(kind)
            self.sizes.append(self._size(kind, name, namespace))
            self.pods_decided += sum(len(d.data.get("pods", ())) for d in decisions
                                     if d.type in ("PodGroupScheduled", "PodsScheduled"))
        return decisions


    def _size(self, kind: str, name: str, namespace: str | None) -> int:
        if kind in ("FinishPods", "ScaleWorkload"):
            return 1
        if kind != "DeleteWorkload":
            return 0
        return sum(g.total for g in self.state.workloads[(namespace or "", name)].groups)

    def retire(self, name: str) -> None:
        """Delete a running workload; in run C first report one Running pod of it Succeeded."""
        wl = self.state.workloads[("bench", name)]
        if self.finishes_left > 0:
            g = wl.groups[0]
            pod = next((p for p, n in enumerate(g.node_of) if n >= 0), None)
            if pod is not None:
                self.finishes_left -= 1
                self.run("FinishPods", name, "bench",
                         {"pods": [{"podGroup": g.spec.name, "name": g.spec.pod_names[pod], "phase": "Succeeded"}]})
        if self.scales_left > 0:
            self.scales_left -= 1
            self.run("ScaleWorkload", name, "bench", _one_pod_scale(wl))
        self.run("DeleteWorkload", name, "bench")


def _one_pod_scale(wl: object) -> dict:
    """The scale body that removes the group's highest pod (or adds one to a one-pod group)."""
    g = wl.groups[0]  # type: ignore[attr-defined]
    entry = wl.body["podGroups"][0]["pods"][0]  # type: ignore[attr-defined]
    count = int(entry.get("count", 1))
    new = count - 1 if count > 1 and g.node_of[count - 1] != -2 else count + 1
    group: dict = {"name": g.spec.name, "pods": [{"name": entry["name"], "count": new}]}
    if g.spec.gang and g.spec.min_count > new:
        group["schedulingPolicy"] = {"gang": {"minCount": new}}
    return {"podGroups": [group]}


def build_cluster(d: Driver) -> None:
    for rack in range(100):
        for i in range(50):
            d.run("UpsertNode", f"r{rack:03d}-n{i:02d}", body={
                "labels": {"example.com/rack": f"r{rack:03d}", "topology.kubernetes.io/zone": f"z{rack % 4}"},
                "allocatable": {"cpu": "64", "memory": "512Gi", "example.com/gpu": "8", "pods": "110"}},
                timed=False)


def make_stream(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        size = rng.randint(1, 64)
        r = rng.random()
        prio = next(p for cut, p in ((0.6, 10), (0.9, 50), (1.01, 100)) if r < cut)
        group = {"name": "workers", "schedulingPolicy": {"gang": {"minCount": size}},
                 "pods": [{"name": "w", "count": size, "requests": dict(rng.choice(SHAPES))}]}
        if size <= 50:
            group["topology"] = {"key": "example.com/rack"}
        out.append({"name": f"job-{i:05d}", "priority": prio, "podGroups": [group]})
    return out


def make_blocked(n: int, seed: int) -> list[dict]:
    """Groups that stay pending: lowest priority, too big for any rack or for free room."""
    rng = random.Random(seed + 1)
    out = []
    for i in range(n):
        size = rng.randint(51, 64)
        group = {"name": "workers", "schedulingPolicy": {"gang": {"minCount": size}},
                 "topology": {"key": "example.com/rack"},
                 "pods": [{"name": "w", "count": size,
                           "requests": {"cpu": "64", "memory": "512Gi", "example.com/gpu": "8"}}]}
        out.append({"name": f"blocked-{i:05d}", "priority": 1, "podGroups": [group]})
    return out


def run_stream(d: Driver, stream: list[dict], capacity: int) -> None:
    running: list[tuple[str, int]] = []  # (name, gpus) in submission order
    used = 0
    for body in stream:
        decisions = d.run("SubmitWorkload", body["name"], "bench", body)
        wl = d.state.workloads[("bench", body["name"])]
        # preemption may have evicted others: account from the state
        if all(g.scheduled for g in wl.groups):
            gpus = sum(int(p["requests"]["example.com/gpu"]) * p["count"]
                       for g in body["podGroups"] for p in g["pods"])
            running.append((body["name"], gpus))
        else:
            d.run("DeleteWorkload", body["name"], "bench")  # cancelled: keeps the stream's queue empty
        used = int(d.state.nodes.used[: d.state.nodes.count, d.state.nodes.resources["example.com/gpu"]].sum())
        while used > 0.9 * capacity and running:
            name, _ = running.pop(0)
            if d.state.workloads[("bench", name)].deleted_at is None:
                d.retire(name)
            used = int(d.state.nodes.used[: d.state.nodes.count,
                                          d.state.nodes.resources["example.com/gpu"]].sum())
        del decisions


def report(label: str, d: Driver, wall: float) -> dict:
    lat = sorted(d.latencies)
    sub = sorted(t for t, k in zip(d.latencies, d.kinds) if k == "SubmitWorkload")
    def pct(xs, q):
        return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000
    out = {
        "run": label, "inputs": len(lat), "pods_decided": d.pods_decided,
        "pods_per_s": round(d.pods_decided / sum(lat)), "inputs_per_s": round(len(lat) / sum(lat)),
        "p50_ms": round(pct(lat, 0.5), 3), "p99_ms": round(pct(lat, 0.99), 3),
        "mean_ms": round(statistics.mean(lat) * 1000, 3),
        "gang_input_p50_ms": round(pct(sub, 0.5), 3), "gang_input_p99_ms": round(pct(sub, 0.99), 3),
        "pending_groups_at_end": len(d.state.queue), "wall_s": round(wall, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    print(json.dumps(out))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", type=int, default=20000)
    ap.add_argument("--pending", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--finishes", type=int, default=0, help="run C: one-pod reports before deletions")
    ap.add_argument("--scales", type=int, default=0, help="run C: one-pod scales before deletions")
    args = ap.parse_args()
    # as `gangplank serve` does: long-lived state should not be rescanned by every gen-2 collection
    configure_for_serving()  # as `gangplank serve` runs (service/gcpause.py)
    stream = make_stream(args.workloads, args.seed)
    capacity = 5000 * 8

    a = Driver()
    build_cluster(a)
    gc.collect()
    gc.freeze()
    t0 = time.perf_counter()
    run_stream(a, stream, capacity)
    ra = report("empty-queue", a, time.perf_counter() - t0)

    b = Driver()
    build_cluster(b)
    for body in make_blocked(args.pending, args.seed):
        b.run("SubmitWorkload", body["name"], "bench", body, timed=False)
    gc.collect()
    gc.freeze()
    t0 = time.perf_counter()
    run_stream(b, stream, capacity)
    rb = report(f"{args.pending}-pending", b, time.perf_counter() - t0)
    print(json.dumps({"slowdown_mean": round(rb["mean_ms"] / ra["mean_ms"], 2),
                      "slowdown_p99": round(rb["p99_ms"] / ra["p99_ms"], 2)}))
    if args.finishes or args.scales:
        c = Driver()
        build_cluster(c)
        c.finishes_left = args.finishes
        c.scales_left = args.scales
        gc.collect()
        gc.freeze()
        t0 = time.perf_counter()
        run_stream(c, stream, capacity)
        rc = report(f"{args.finishes}-finishes-{args.scales}-scales", c, time.perf_counter() - t0)
        finish = sorted(t for t, k in zip(c.latencies, c.kinds) if k == "FinishPods")
        scale = sorted(t for t, k in zip(c.latencies, c.kinds) if k == "ScaleWorkload")
        delete1 = sorted(t for t, k, n in zip(c.latencies, c.kinds, c.sizes) if k == "DeleteWorkload" and n == 1)
        print(json.dumps({
            "finishes": len(finish), "p99_ratio_vs_empty_queue": round(rc["p99_ms"] / ra["p99_ms"], 2),
            "finish_1_pod_mean_ms": round(statistics.mean(finish) * 1000, 3) if finish else None,
            "finish_1_pod_p50_ms": round(finish[len(finish) // 2] * 1000, 3) if finish else None,
            "delete_1_pod_workload_mean_ms": round(statistics.mean(delete1) * 1000, 3) if delete1 else None,
            "delete_1_pod_workload_p50_ms": round(delete1[len(delete1) // 2] * 1000, 3) if delete1 else None,
            "delete_1_pod_workloads": len(delete1),
            "scales": len(scale),
            "scale_1_pod_mean_ms": round(statistics.mean(scale) * 1000, 3) if scale else None,
            "scale_1_pod_p50_ms": round(scale[len(scale) // 2] * 1000, 3) if scale else None}))


if __name__ == "__main__":
    main()
