"""Benchmark of composite pod groups in the pure decider (issue 15, item 8).

5,000 nodes in 10 blocks x 10 racks x 50 nodes (cpu 64, example.com/gpu 8, pods 110). A
stream of LeaderWorkerSet-like trees (a root on `block` holding 2-8 replicas, each a CPG on
`rack` of a 1-pod leader and a gang of 4-16 workers) mixed with flat gangs (4-32 GPU pods,
some on `rack`), at priorities 0/50/100, is submitted; once the cluster is near 90% of its
GPUs, the oldest workloads are deleted to stay there. Reports trees decided/s, pods/s, and
p50/p99 per tree input and per flat input (accept + handle, as bench/decider.py).
Preemption is on (every workload may preempt lower priorities; which of trees' pods preemption
takes is the branch tree-preempt's, issue 21 part 2).

Issue 21 additions: `--pending-trees N` first submits N trees that cannot fit (a root on `block`
needing 11 replicas, each a whole rack of 50 eight-GPU workers, in a block of 10 racks),
which stay pending through the stream; with `--probe` every 20th input is one that frees nothing (a
node relabelled with a label no selector, affinity or topology reads), timed apart as `nothing_ms`
(off by default: bench/digest.py hashes the default stream).

    python bench/composite.py [--inputs 3000] [--tree-share 0.5] [--seed 7] [--pending-trees 0] [--probe]
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.domain import ClusterState, Event, Rejection, accept, handle  # noqa: E402
from service.gcpause import configure_for_serving  # noqa: E402

BLOCKS, RACKS, PER_RACK = 10, 10, 50
GPU = "example.com/gpu"
WORKER = {"cpu": "8", GPU: "1"}
LEADER = {"cpu": "4"}


class Driver:
    def __init__(self) -> None:
        self.state = ClusterState("bench")

    def run(self, kind: str, name: str, namespace: str | None, body: dict | None) -> tuple[float, list[Event]]:
        t0 = time.perf_counter()
        accepted = accept(self.state, kind, name, namespace, body)
        if isinstance(accepted, Rejection):
            raise RuntimeError(accepted)
        etype, data = accepted
        decisions = handle(self.state, Event(self.state.position + 1, etype, data))
        return time.perf_counter() - t0, decisions

    def gpus_in_use(self) -> int:
        """GPUs held by placed pods, from the node table (a leader asks for none)."""
        nodes = self.state.nodes
        col = nodes.resources.get(GPU)
        return 0 if col is None else int(nodes.used[: nodes.count, col].sum())


def placed_by(decisions: list[Event]) -> int:
    """Pods these decisions placed: PodGroupScheduled / PodsScheduled pods and the pods of a
    CompositePodGroupScheduled's groups (a PodGroupPreempted lists pods evicted, not placed)."""
    placed = 0
    for e in decisions:
        if e.type in ("PodGroupScheduled", "PodsScheduled"):
            placed += len(e.data["pods"])
        elif e.type == "CompositePodGroupScheduled":
            placed += sum(len(g["pods"]) for g in e.data["groups"])
    return placed


def tree(rng: random.Random, name: str, priority: int) -> tuple[dict, int]:
    replicas = rng.randint(2, 8)
    workers = rng.randint(4, 16)
    body = {"name": name, "priority": priority, "compositePodGroups": [{
        "name": "lws", "topology": {"key": "block"},
        "schedulingPolicy": {"gang": {"minGroupCount": replicas}},
        "compositePodGroups": [{
            "name": "replica", "count": replicas, "topology": {"key": "rack"},
            "schedulingPolicy": {"gang": {"minGroupCount": 2}},
            "podGroups": [
                {"name": "leader", "schedulingPolicy": {"gang": {"minCount": 1}},
                 "pods": [{"name": "leader", "requests": LEADER}]},
                {"name": "workers", "schedulingPolicy": {"gang": {"minCount": workers}},
                 "pods": [{"name": "worker", "count": workers, "requests": WORKER}]}]}]}]}
    return body, replicas * (workers + 1)


def hopeless(name: str) -> dict:
    """A tree that cannot fit: 11 replicas of a whole rack each, inside one block of 10 racks."""
    return {"name": name, "priority": 0, "compositePodGroups": [{
        "name": "lws", "topology": {"key": "block"},
        "schedulingPolicy": {"gang": {"minGroupCount": 11}},
        "compositePodGroups": [{
            "name": "replica", "count": 11, "topology": {"key": "rack"},
            "schedulingPolicy": {"gang": {"minGroupCount": 2}},
            "podGroups": [
                {"name": "leader", "schedulingPolicy": {"gang": {"minCount": 1}},
                 "pods": [{"name": "leader", "requests": LEADER}]},
                {"name": "workers", "schedulingPolicy": {"gang": {"minCount": PER_RACK}},
                 "pods": [{"name": "worker", "count": PER_RACK, "requests": {"cpu": "8", GPU: "8"}}]}]}]}]}


def flat(rng: random.Random, name: str, priority: int) -> tuple[dict, int]:
    n = rng.choice([4, 8, 16, 32])
    group: dict = {"name": "g", "schedulingPolicy": {"gang": {"minCount": n}},
                   "pods": [{"name": "w", "count": n, "requests": WORKER}]}
    if rng.random() < 0.3:
        group["topology"] = {"key": "rack"}
    return {"name": name, "priority": priority, "podGroups": [group]}, n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs", type=int, default=3000)
    ap.add_argument("--tree-share", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--pending-trees", type=int, default=0)
    ap.add_argument("--probe", action="store_true", help="every 20th input frees nothing (nothing_ms)")
    args = ap.parse_args()
    configure_for_serving()
    rng = random.Random(args.seed)
    d = Driver()
    for b in range(BLOCKS):
        for r in range(RACKS):
            for i in range(PER_RACK):
                d.run("UpsertNode", f"n-{b}-{r}-{i:02d}", None, {
                    "labels": {"block": f"b{b}", "rack": f"b{b}-r{r}"},
                    "allocatable": {"cpu": "64", GPU: "8", "pods": "110"}})
    total_gpus = BLOCKS * RACKS * PER_RACK * 8
    for i in range(args.pending_trees):
        d.run("SubmitWorkload", f"hopeless-{i}", "bench", hopeless(f"hopeless-{i}"))
    live: list[tuple[str, int]] = []
    times: dict[str, list[float]] = {"tree": [], "flat": [], "delete": [], "nothing": []}
    pods = 0
    trees_decided = 0
    t_start = time.perf_counter()
    for i in range(args.inputs):
        if args.probe and i % 20 == 19:  # an input that frees nothing: a label nobody reads
            dt, _ = d.run("UpsertNode", "n-0-0-00", None, {
                "labels": {"block": "b0", "rack": "b0-r0", "bench/probe": str(i)},
                "allocatable": {"cpu": "64", GPU: "8", "pods": "110"}})
            times["nothing"].append(dt)
        if d.gpus_in_use() > 0.9 * total_gpus and live:
            name, _ = live.pop(0)
            dt, _ = d.run("DeleteWorkload", name, "bench", None)
            times["delete"].append(dt)
            continue
        kind = "tree" if rng.random() < args.tree_share else "flat"
        body, n = (tree if kind == "tree" else flat)(rng, f"w{i}", rng.choice([0, 50, 100]))
        dt, decisions = d.run("SubmitWorkload", body["name"], "bench", body)
        times[kind].append(dt)
        trees_decided += kind == "tree"
        pods += placed_by(decisions)
        live.append((body["name"], n))
    elapsed = time.perf_counter() - t_start

    def pct(xs: list[float], q: float) -> float:
        xs = sorted(xs)
        return round(1000 * xs[min(len(xs) - 1, int(q * len(xs)))], 2) if xs else 0.0

    print(json.dumps({
        "nodes": BLOCKS * RACKS * PER_RACK, "inputs": args.inputs, "seconds": round(elapsed, 2),
        "trees_decided_per_s": round(trees_decided / sum(times["tree"]), 1) if times["tree"] else 0,
        "pods_placed_per_s": round(pods / elapsed, 1),
        "tree_ms": {"p50": pct(times["tree"], 0.5), "p99": pct(times["tree"], 0.99), "n": len(times["tree"])},
        "flat_ms": {"p50": pct(times["flat"], 0.5), "p99": pct(times["flat"], 0.99), "n": len(times["flat"])},
        "delete_ms": {"p50": pct(times["delete"], 0.5), "p99": pct(times["delete"], 0.99), "n": len(times["delete"])},
        "nothing_ms": {"p50": pct(times["nothing"], 0.5), "p99": pct(times["nothing"], 0.99),
                       "n": len(times["nothing"])},
        "pending_trees": args.pending_trees,
        "gpu_fill": round(d.gpus_in_use() / total_gpus, 3),
    }, indent=1))


if __name__ == "__main__":
    main()
