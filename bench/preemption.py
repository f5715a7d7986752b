"""Benchmark of workload-aware preemption in the pure decider (issue 4, item 6).

1,000 nodes in 10 racks of 100 (cpu 64, memory 512Gi, example.com/gpu 8, pods 110)
are filled with 1,000 running lower-priority workloads (priorities 10/20/30/40; groups
of 1-16 pods: gangs at minCount, gangs with surplus above minCount, disruptionMode All
groups, basic groups, some with rack topology, some with a cpu-only driver pod first,
some workloads with a second small group). Then a stream of higher-priority workloads
(priority 100/200; gangs of 1-32 GPU pods, whole-node gangs, basic groups; 40% with rack
topology) arrives; the cluster being full, they preempt. High-priority work is deleted
oldest first once it holds more than 40% of the GPUs.

Modes:
- `refill` (default): after each input, low workloads left pending (victims not placed
  again) are cancelled and new ones submitted until 1,000 run again (untimed): every
  input meets a full cluster of 1,000 low gangs and no backlog.
- `backlog`: victims stay pending, as the spec has it; the queue grows to hundreds of
  groups and every eviction restarts a sweep over it (model.md *The queue*).

Reports, per preempting input (an input whose decisions hold a PodGroupPreempted;
accept + handle, as bench/decider.py): p50/p99/max wall and CPU time, how many
`preemption.plan` calls it made (victims preempting in turn, in the same pass) and
the share of its time spent in them; per `plan` call that had candidates: p50/p99/max.
The candidate order's first build (once per state object) is timed apart.

    python bench/preemption.py [--mode refill|backlog] [--preemptors 200] [--seed 11]
                               [--low-priorities 10,20,30,40] [--profile] [--trees-below 0]

`--trees-below N` first runs N small trees (priority 5) that stay below every preemptor, so that
every preemption has trees' units among its candidates.
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import random
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.domain import ClusterState, Event, Rejection, accept, handle  # noqa: E402
from service.domain.model import events as ev  # noqa: E402
from service.domain.preemption import candidates  # noqa: E402
from service.domain.preemption import flat as pre  # noqa: E402, F401  (rebound by `global pre` in main)
from service.gcpause import configure_for_serving  # noqa: E402

RACKS, PER_RACK = 10, 100
GPU = "example.com/gpu"
GPU_POD = {"cpu": "8", "memory": "64Gi", GPU: "1"}
GPU2_POD = {"cpu": "16", "memory": "128Gi", GPU: "2"}
CPU_POD = {"cpu": "4", "memory": "32Gi"}
NODE_POD = {"cpu": "60", "memory": "480Gi", GPU: "8"}
LOW_PRIORITIES = [10, 20, 30, 40]


class Driver:
    def __init__(self) -> None:
        self.state = ClusterState("bench")
        # per timed input: (kind, wall s, cpu s, victim groups, s in preemption.plan, plans)
        self.samples: list[tuple[str, float, float, int, float, int]] = []
        self.plan_s = 0.0
        self.plans = 0
        self.low_seq = 0
        self.timing = False
        self.low: set[str] = set()  # low workloads not deleted

    def run(self, kind: str, name: str, namespace: str | None = None, body: dict | None = None,
            timed: bool = True) -> list[Event]:
        self.plan_s, self.plans = 0.0, 0
        self.timing = timed
        t0, c0 = time.perf_counter(), time.process_time()
        accepted = accept(self.state, kind, name, namespace, body)
        if isinstance(accepted, Rejection):
            raise RuntimeError(accepted)
        etype, data = accepted
        decisions = handle(self.state, Event(self.state.position + 1, etype, data))
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        if timed:
            n = sum(1 for d in decisions if d.type == ev.POD_GROUP_PREEMPTED)
            self.samples.append((kind, dt, dc, n, self.plan_s, self.plans))
        return decisions

    def fill(self, resource: str) -> float:
        nodes = self.state.nodes
        col = nodes.resources[resource]
        return float(nodes.used[: nodes.count, col].sum() / nodes.alloc[: nodes.count, col].sum())

    def gpus_used(self) -> int:
        nodes = self.state.nodes
        return int(nodes.used[: nodes.count, nodes.resources[GPU]].sum())


def build_cluster(d: Driver) -> None:
    for rack in range(RACKS):
        for i in range(PER_RACK):
            d.run("UpsertNode", f"r{rack:02d}-n{i:03d}", body={
                "labels": {"example.com/rack": f"r{rack:02d}", "topology.kubernetes.io/zone": f"z{rack % 3}"},
                "allocatable": {"cpu": "64", "memory": "512Gi", GPU: "8", "pods": "110"}}, timed=False)


def low_workload(rng: random.Random, i: int) -> dict:
    size = rng.randint(1, 16)
    shape = rng.choices([GPU_POD, GPU2_POD, CPU_POD], weights=[70, 5, 25])[0]
    entries = [{"name": "w", "count": size, "requests": dict(shape)}]
    total = size
    if size >= 4 and rng.random() < 0.2:  # a driver pod of another shape first
        entries.insert(0, {"name": "driver", "count": 1, "requests": dict(CPU_POD)})
        total += 1
    group: dict = {"name": "main", "pods": entries}
    kind = rng.random()
    if kind < 0.15:
        group["schedulingPolicy"] = {"basic": {}}
    else:
        surplus = rng.randint(1, max(1, total // 2)) if (kind < 0.45 and total > 1) else 0
        group["schedulingPolicy"] = {"gang": {"minCount": total - surplus}}
        if rng.random() < 0.25:
            group["topology"] = {"key": "example.com/rack"}
    if rng.random() < 0.2:
        group["disruptionMode"] = "All"
    groups = [group]
    if rng.random() < 0.08:  # a second, small group in the same workload
        groups.append({"name": "aux", "schedulingPolicy": {"gang": {"minCount": 1}},
                       "pods": [{"name": "a", "count": rng.randint(1, 3), "requests": dict(CPU_POD)}]})
    return {"name": f"low-{i:05d}", "priority": rng.choice(LOW_PRIORITIES), "podGroups": groups}


def cancel_pending_low(d: Driver) -> None:
    """Delete (untimed) every low workload with a group not fully placed (in the queue)."""
    while True:
        pending = sorted({g.workload.spec.name for g in d.state.queue.values()
                          if g.workload.spec.name in d.low})
        if not pending:
            return
        for name in pending:
            d.low.discard(name)
            d.run("DeleteWorkload", name, "bench", timed=False)


def fill(d: Driver, rng: random.Random, target: int, gpu_target: float = 0.93, give_up: int = 200) -> int:
    """Submit low workloads (untimed) until `target` run with every pod placed or the GPUs
    are `gpu_target` full; cancel those that do not fit, and any they preempt, so nothing
    low is left pending. Stops after `give_up` submissions in a row that did not fit."""
    cancel_pending_low(d)
    running = len(d.low)
    capacity = RACKS * PER_RACK * 8
    misses = 0
    while running < target and misses < give_up and d.gpus_used() < gpu_target * capacity:
        body = low_workload(rng, d.low_seq)
        d.low_seq += 1
        d.run("SubmitWorkload", body["name"], "bench", body, timed=False)
        d.low.add(body["name"])
        fitted = not any(g.pending for g in d.state.workloads[("bench", body["name"])].groups)
        misses = 0 if fitted else misses + 1
        cancel_pending_low(d)
        running = len(d.low)
    return running


def high_workload(rng: random.Random, i: int) -> dict:
    r = rng.random()
    if r < 0.15:  # a basic group: each pod a preemptor of one pod
        group = {"name": "main", "schedulingPolicy": {"basic": {}},
                 "pods": [{"name": "p", "count": rng.randint(1, 4), "requests": dict(GPU_POD)}]}
    elif r < 0.25:  # whole nodes
        n = rng.randint(1, 8)
        group = {"name": "main", "schedulingPolicy": {"gang": {"minCount": n}},
                 "pods": [{"name": "w", "count": n, "requests": dict(NODE_POD)}]}
        if rng.random() < 0.5:
            group["topology"] = {"key": "example.com/rack"}
    else:
        size = rng.randint(1, 32)
        shape = rng.choice([GPU_POD, GPU_POD, GPU2_POD])
        group = {"name": "main", "schedulingPolicy": {"gang": {"minCount": max(1, size - rng.randint(0, 2))}},
                 "pods": [{"name": "w", "count": size, "requests": dict(shape)}]}
        if rng.random() < 0.4:
            group["topology"] = {"key": "example.com/rack"}
    return {"name": f"high-{i:05d}", "priority": rng.choice([100, 100, 100, 200]), "podGroups": [group]}


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))] * 1000, 3) if xs else 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preemptors", type=int, default=200)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--low", type=int, default=1000)
    ap.add_argument("--low-priorities", default="10,20,30,40",
                    help="priorities of the running workloads (one value: victims never preempt each other)")
    ap.add_argument("--high-share", type=float, default=0.4)
    ap.add_argument("--mode", choices=("refill", "backlog"), default="refill",
                    help="refill: after each input, cancel low workloads left pending and refill the "
                         "cluster (untimed); backlog: victims stay pending")
    ap.add_argument("--reference", action="store_true",
                    help="decide with tests/domain/reference_preemption.py (the unoptimised implementation)")
    ap.add_argument("--profile", action="store_true", help="cProfile the stream, print the top 30")
    ap.add_argument("--trees-below", type=int, default=0,
                    help="first run this many small trees (priority 5, one cpu pod each) below every preemptor")
    args = ap.parse_args()
    LOW_PRIORITIES[:] = [int(p) for p in args.low_priorities.split(",")]
    global pre
    if args.reference:
        from service.domain.decide import decider
        from tests.domain import reference_preemption
        pre = decider.pre = reference_preemption  # type: ignore[assignment]
    configure_for_serving()  # as `gangplank serve` runs (service/gcpause.py)
    rng = random.Random(args.seed)

    d = Driver()
    build_cluster(d)
    for i in range(args.trees_below):  # a lower tree among every preemptor's candidates
        d.run("SubmitWorkload", f"tree-{i}", "bench", {"name": f"tree-{i}", "priority": 5, "compositePodGroups": [
            {"name": "root", "podGroups": [{"name": "g", "schedulingPolicy": {"gang": {"minCount": 1}},
                                            "pods": [{"name": "p", "requests": {"cpu": "1"}}]}]}]})
    running = fill(d, rng, args.low, gpu_target=1.0, give_up=20 * args.low)
    capacity = RACKS * PER_RACK * 8
    setup = {"mode": args.mode, "implementation": "reference" if args.reference else "service",
             "nodes": RACKS * PER_RACK, "low_running": running, "low_priorities": LOW_PRIORITIES,
             "low_pods_placed": sum(d.state.placed_by_priority.values()),
             "gpu_fill": round(d.gpus_used() / capacity, 3), "cpu_fill": round(d.fill("cpu"), 3),
             "trees_below": args.trees_below}
    setup["pending_groups"] = len(d.state.queue)

    plan_times: list[tuple[float, str]] = []  # (s, outcome) per preemption.plan call
    real_plan = pre.plan

    def timed_plan(*a, **kw):
        t0 = time.perf_counter()
        out = real_plan(*a, **kw)
        dt = time.perf_counter() - t0
        if d.timing:
            plan_times.append((dt, getattr(out, "reason", "Plan")))
        d.plan_s += dt
        d.plans += 1
        return out

    pre.plan = timed_plan
    # one preemption decision: the preemptor's try that evicts (plan, its events, folding them)
    from service.domain.decide import decider as dec
    decision_times: list[float] = []
    real_try = dec._try

    def timed_try(*a, **kw):
        t0 = time.perf_counter()
        out = real_try(*a, **kw)
        if d.timing and out == "evicted":
            decision_times.append(time.perf_counter() - t0)
        return out

    dec._try = timed_try
    # the candidate order is kept per state and brought up to date incrementally; its first
    # build (once per state object: after a restart, a restore, or journal overflow... see
    # preemption._Order) is timed apart
    t_cold = time.perf_counter()
    if not args.reference:
        candidates.Candidates(d.state, 2**31 - 1)
    cold_ms = round((time.perf_counter() - t_cold) * 1000, 1)
    setup["cold_candidate_order_ms"] = cold_ms
    print(json.dumps(setup))
    gc.collect()
    gc.freeze()
    d.samples.clear()
    plan_times.clear()
    decision_times.clear()
    prof = cProfile.Profile() if args.profile else None
    high: list[str] = []
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    for i in range(args.preemptors):
        body = high_workload(rng, i)
        d.run("SubmitWorkload", body["name"], "bench", body)
        wl = d.state.workloads[("bench", body["name"])]
        if any(g.placed for g in wl.groups):
            high.append(body["name"])
        else:
            d.run("DeleteWorkload", body["name"], "bench")
        high_gpus = _gpus_of(d, high)
        while high and high_gpus > args.high_share * capacity:
            name = high.pop(0)
            d.run("DeleteWorkload", name, "bench")
            high_gpus = _gpus_of(d, high)
        if args.mode == "refill":
            if prof:
                prof.disable()
            fill(d, rng, args.low, give_up=30)
            if prof:
                prof.enable()
    if prof:
        prof.disable()
    wall = time.perf_counter() - t0
    pre.plan = real_plan
    dec._try = real_try

    pre_in = [s for s in d.samples if s[3]]
    with_victims = [dt for dt, why in plan_times if why != pre.NO_VICTIMS]
    out = {
        "preempting_inputs": len(pre_in), "victim_groups": sum(s[3] for s in pre_in),
        "preempting_input_p50_ms": pct([s[1] for s in pre_in], 0.5),
        "preempting_input_p99_ms": pct([s[1] for s in pre_in], 0.99),
        "preempting_input_max_ms": pct([s[1] for s in pre_in], 1.0),
        "preempting_input_cpu_p50_ms": pct([s[2] for s in pre_in], 0.5),
        "preempting_input_cpu_p99_ms": pct([s[2] for s in pre_in], 0.99),
        "plans_per_preempting_input": round(sum(s[5] for s in pre_in) / max(1, len(pre_in)), 1),
        "share_of_preempting_input_in_plan": round(sum(s[4] for s in pre_in) / max(1e-9, sum(s[1] for s in pre_in)), 3),
        "preemption_decisions": len(decision_times),
        "preemption_decision_p50_ms": pct(decision_times, 0.5),
        "preemption_decision_p99_ms": pct(decision_times, 0.99),
        "preemption_decision_max_ms": pct(decision_times, 1.0),
        "plan_calls_with_candidates": len(with_victims),
        "plan_p50_ms": pct(with_victims, 0.5), "plan_p99_ms": pct(with_victims, 0.99),
        "plan_max_ms": pct(with_victims, 1.0),
        "plan_calls_without_candidates": len(plan_times) - len(with_victims),
        "pending_groups_at_end": len(d.state.queue), "gpu_fill_at_end": round(d.gpus_used() / capacity, 3),
        "wall_s": round(wall, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    print(json.dumps(out))
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def _gpus_of(d: Driver, names: list[str]) -> int:
    state = d.state
    col = state.nodes.resources[GPU]
    total = 0
    for name in names:
        wl = state.workloads[("bench", name)]
        for g in wl.groups:
            for p, row in enumerate(g.node_of):
                if row >= 0:
                    total += int(state.shape_vector(wl, g.spec.pod_shapes[p])[col])
    return total


if __name__ == "__main__":
    main()
