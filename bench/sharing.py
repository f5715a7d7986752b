"""The FGD paper's inflation experiment through the service's decider (sharing.md, *The benchmark*).

    .venv/bin/python bench/sharing.py [--trace DIR] [--files default,gpuspec10] [--seeds 42-51]
                                      [--strategies MostAllocated,FragmentationAware] [--json OUT]

Cluster: every node of openb_node_list_gpu_node.csv (cpu, memory), one slice per node with
gpu-0 … gpu-<k-1>, each shareable with capacity `milli` 1000 (no policy), attributes model and
index; device class `gpu`. Pods: one workload each, one basic group of one pod (cpu, memory) and,
with num_gpu k > 0, its own claim of k devices of class gpu asking `milli` = gpu_milli (and a
selector on the models of gpu_spec). Order: pods sorted by name, shuffled with
random.Random(seed), then clones of random originals appended while the GPU milli requested stays
within 130% of the cluster's. Nothing is deleted; a pod that does not fit stays pending (dropped).
Metric: after each pod, arrived = Σ num_gpu·gpu_milli submitted, allocated = milli consumed on
every device; the figure at p% is the mean of allocated/capacity over the pods after which
round(100·arrived/capacity) = p. Decisions come from `service.domain.handle`, as the service's.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import csv  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from service.domain import ClusterState, Event, Rejection, accept, handle  # noqa: E402
from service.domain.model import events as ev  # noqa: E402
from service.domain.placement import scoring  # noqa: E402

TRACE = next((p / "shared" / "traces" / "openb" for p in ROOT.parents if (p / "shared" / "traces" / "openb").is_dir()),
             ROOT.parent / "shared" / "traces" / "openb")
DRIVER = "gpu.example.com"
POINTS = (100, 110, 120, 130)
PAPER = {  # at 130%, mean of 10 seeds (the paper's expected results)
    "default": {"Random": 87.47, "DotProd": 90.85, "GpuClustering": 91.88, "GpuPacking": 92.00, "BestFit": 93.08,
                "FGD": 95.39},
    "gpuspec10": {"Random": 87.43, "DotProd": 90.39, "GpuClustering": 92.18, "GpuPacking": 92.46, "BestFit": 93.31,
                  "FGD": 94.95},
}

Pod = tuple[str, int, int, int, int, tuple[str, ...]]  # name, cpu_milli, memory_mib, num_gpu, gpu_milli, models


def read_nodes(trace: Path) -> list[tuple[str, int, int, int, str]]:
    with open(trace / "openb_node_list_gpu_node.csv", newline="") as f:
        return [(r["sn"], int(r["cpu_milli"]), int(r["memory_mib"]), int(r["gpu"]), r["model"])
                for r in csv.DictReader(f)]


def read_pods(path: Path) -> list[Pod]:
    with open(path, newline="") as f:
        return [(r["name"], int(r["cpu_milli"]), int(r["memory_mib"]), int(r["num_gpu"]), int(r["gpu_milli"]),
                 tuple(sorted(set(filter(None, r["gpu_spec"].split("|")))))) for r in csv.DictReader(f)]


def order(pods: list[Pod], capacity: int, seed: int) -> list[Pod]:
    """The simulator's order: sorted by name, shuffled, then clones up to 130% of capacity."""
    rng = random.Random(seed)
    shuffled = sorted(pods, key=lambda p: p[0])
    rng.shuffle(shuffled)
    total = sum(p[3] * p[4] for p in shuffled)
    out = list(shuffled)
    i = 0
    while True:
        c = pods[rng.randrange(len(pods))]
        if 10 * (total + c[4]) > 13 * capacity:
            break
        out.append((f"{c[0]}-tuned-{i}", *c[1:]))
        total += c[3] * c[4]
        i += 1
    return out


def target(pods: list[Pod]) -> list[dict[str, Any]]:
    """The simulator's target workload: shapes counted, most first (ties: the larger tuple),
    kept while the pods kept are below 95% of the file's."""
    counts = Counter((p[1], p[4], p[3], p[5]) for p in pods)
    shapes = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    out, kept = [], 0
    for (cpu, milli, k, models), n in shapes:
        if 100 * kept >= 95 * len(pods):
            break
        shape: dict[str, Any] = {"weight": n, "cpu": f"{cpu}m"}
        if k:
            dev: dict[str, Any] = {"count": k, "capacity": {"requests": {"milli": str(milli)}}}
            if models:
                dev["selectors"] = [{"cel": {"expression": _models(models)}}]
            shape["devices"] = dev
        out.append(shape)
        kept += n
    return out


def _models(models: tuple[str, ...]) -> str:
    return f'device.attributes["{DRIVER}"].model in [{", ".join(json.dumps(m) for m in models)}]'


class Cluster:
    def __init__(self) -> None:
        self.state = ClusterState("openb")

    def run(self, kind: str, name: str, namespace: str | None, body: dict[str, Any]) -> list[Event]:
        got = accept(self.state, kind, name, namespace, body)
        assert not isinstance(got, Rejection), got
        etype, data = got
        return handle(self.state, Event(self.state.position + 1, etype, data))

    def configure(self, body: dict[str, Any]) -> None:
        handle(self.state, Event(self.state.position + 1, ev.SCHEDULER_CONFIGURED, scoring.recorded(body)))


def build(nodes: list[tuple[str, int, int, int, str]]) -> Cluster:
    c = Cluster()
    c.run("UpsertDeviceClass", "gpu", None, {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]})
    for name, cpu, mem, k, model in nodes:
        c.run("UpsertNode", name, None, {"allocatable": {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}})
        c.run("UpsertResourceSlice", name, None, {
            "driver": DRIVER, "pool": {"name": name, "generation": 1}, "nodeName": name,
            "devices": [{"name": f"gpu-{i}", "allowMultipleAllocations": True,
                         "attributes": {"model": {"string": model}, "index": {"int": i}},
                         "capacity": {"milli": {"value": "1000"}}} for i in range(k)]})
    return c


def workload(p: Pod) -> dict[str, Any]:
    name, cpu, mem, k, milli, models = p
    entry: dict[str, Any] = {"name": "p", "requests": {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}}
    body: dict[str, Any] = {"name": name, "podGroups": [{"name": "g", "schedulingPolicy": {"basic": {}},
                                                          "pods": [entry]}]}
    if k:
        exactly: dict[str, Any] = {"deviceClassName": "gpu", "count": k, "capacity": {"requests": {"milli": str(milli)}}}
        if models:
            exactly["selectors"] = [{"cel": {"expression": _models(models)}}]
        entry["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]
        body["resourceClaimTemplates"] = [{"name": "gpu", "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": exactly}]}}}]
    return body


def run(nodes: list[Any], pods: list[Pod], file_pods: list[Pod], seed: int, strategy: str,
        tolerance: int = 80) -> dict[str, Any]:
    capacity = 1000 * sum(n[3] for n in nodes)
    c = build(nodes)
    if strategy != "MostAllocated":
        c.configure({"type": "FragmentationAware", "fragmentationAware": {
            "deviceClassName": "gpu", "capacity": "milli", "tolerance": tolerance,
            "targetWorkload": {"shapes": target(file_pods)}}})
    arrived = 0
    sums: dict[int, list[float]] = {p: [] for p in POINTS}
    spent = 0.0
    placed = 0
    stream = order(pods, capacity, seed)
    for p in stream:
        arrived += p[3] * p[4]
        t0 = time.perf_counter()
        out = c.run("SubmitWorkload", p[0], "openb", workload(p))
        spent += time.perf_counter() - t0
        placed += any(e.type == ev.POD_GROUP_SCHEDULED for e in out)
        used = c.state.dra.cap_used.get("milli")
        allocated = int(used.sum()) if used is not None else 0
        point = round(100 * arrived / capacity)
        if point in sums:
            sums[point].append(allocated / capacity)
    return {"seed": seed, "strategy": strategy, "placed": placed, "pods": len(stream),
            "alloc": {p: (100 * statistics.fmean(v) if v else None) for p, v in sums.items()},
            "decide_ms_per_pod": 1000 * spent / len(stream)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace", type=Path, default=TRACE)
    ap.add_argument("--files", default="default,gpuspec10")
    ap.add_argument("--seeds", default="42-51")
    ap.add_argument("--strategies", default="MostAllocated,FragmentationAware")
    ap.add_argument("--tolerance", type=int, default=80)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    lo, _, hi = args.seeds.partition("-")
    seeds = list(range(int(lo), int(hi or lo) + 1))
    nodes = read_nodes(args.trace)
    results = []
    for file in args.files.split(","):
        pods = read_pods(args.trace / f"openb_pod_list_{file}.csv")
        for strategy in args.strategies.split(","):
            rows = []
            for seed in seeds:
                r = run(nodes, pods, pods, seed, strategy, args.tolerance)
                r["file"] = file
                rows.append(r)
                results.append(r)
                print(f"{file:10} {strategy:18} seed {seed}: " + "  ".join(
                    f"{p}%: {r['alloc'][p]:.2f}" for p in POINTS if r["alloc"][p] is not None)
                    + f"  ({r['decide_ms_per_pod']:.2f} ms/pod)", flush=True)
            means = {p: statistics.fmean(r["alloc"][p] for r in rows if r["alloc"][p] is not None) for p in POINTS}
            print(f"{file:10} {strategy:18} mean of {len(rows)} seeds: "
                  + "  ".join(f"{p}%: {v:.2f}" for p, v in means.items())
                  + f"  decide {statistics.fmean(r['decide_ms_per_pod'] for r in rows):.2f} ms/pod", flush=True)
        print(f"{file:10} the paper at 130%: " + "  ".join(f"{k} {v:.2f}" for k, v in PAPER[file].items()), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
