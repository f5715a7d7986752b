"""Cost of node affinity and tolerations in the decider, next to a nodeSelector pod (issue 14, item 6).

    .venv/bin/python bench/affinity.py [--nodes 5000] [--rounds 2000] [--seed 7]

5,000 nodes in 100 racks (cpu 64, memory 512Gi, example.com/gpu 8), a GPU model label (H100, H200,
A100, L4: a quarter each) and, on half of them, the taint `nvidia.com/gpu=present:NoSchedule`. Each
round submits one workload of one basic pod (8 cpu, 64Gi, 1 GPU) of each kind below, in turn (so
that the machine's noise falls on every kind alike), and deletes it again, so the cluster stays as
it was. Reports the submission's decide time (accept + handle), p50 and mean per kind, and their
ratio to the nodeSelector pod:

- `selector`: `nodeSelector: {model: H100}`, with the toleration;
- `required`: required node affinity `model In [H100]`, with the toleration;
- `required-2`: `model In [H100, H200]` (what a nodeSelector cannot say), with the toleration;
- `preferred`: the toleration, no selector, a preferred term `model In [H100]` (weight 50): every
  node is feasible, the weights order them;
- `plain`: no selector, no affinity, no toleration (the untainted half).

`--cold` also replaces a node before every submission, which drops the table's mask caches, so each
submission computes its masks again (the selector's and the affinity's) over the 5,000 nodes.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.domain import ClusterState, Event, Rejection, accept, handle  # noqa: E402
from service.gcpause import configure_for_serving  # noqa: E402

MODELS = ["H100", "H200", "A100", "L4"]
TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
REQUESTS = {"cpu": "8", "memory": "64Gi", "example.com/gpu": "1"}


def node_body(i: int) -> dict[str, Any]:
    body: dict[str, Any] = {"labels": {"example.com/rack": f"r{i // 50:03d}", "example.com/model": MODELS[i % 4]},
                            "allocatable": {"cpu": "64", "memory": "512Gi", "example.com/gpu": "8"}}
    if (i // 4) % 2 == 0:
        body["taints"] = [TAINT]
    return body


def required(*models: str) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "example.com/model", "operator": "In", "values": list(models)}]}]}}}


KINDS: dict[str, dict[str, Any]] = {
    "selector": {"nodeSelector": {"example.com/model": "H100"}, "tolerations": [TOLERATION]},
    "required": {"affinity": required("H100"), "tolerations": [TOLERATION]},
    "required-2": {"affinity": required("H100", "H200"), "tolerations": [TOLERATION]},
    "preferred": {"tolerations": [TOLERATION], "affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "preference": {"matchExpressions": [
            {"key": "example.com/model", "operator": "In", "values": ["H100"]}]}}]}}},
    "plain": {},
}


class Driver:
    def __init__(self) -> None:
        self.state = ClusterState("bench")

    def run(self, kind: str, name: str, namespace: str | None = None, body: dict[str, Any] | None = None) -> float:
        t0 = time.perf_counter()
        accepted = accept(self.state, kind, name, namespace, body)
        if isinstance(accepted, Rejection):
            raise RuntimeError(accepted)
        etype, data = accepted
        decisions = handle(self.state, Event(self.state.position + 1, etype, data))
        took = time.perf_counter() - t0
        if kind == "SubmitWorkload":
            assert decisions and decisions[0].type == "PodGroupScheduled", decisions
        return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--cold", action="store_true", help="replace a node before every submission (no warm masks)")
    args = ap.parse_args()
    configure_for_serving()
    d = Driver()
    for i in range(args.nodes):
        d.run("UpsertNode", f"n{i:05d}", body=node_body(i))
    took: dict[str, list[float]] = {k: [] for k in KINDS}
    for r in range(args.rounds + 50):
        for kind, extra in KINDS.items():
            if args.cold:
                d.run("UpsertNode", f"n{r % args.nodes:05d}", body=node_body(r % args.nodes))
            name = f"{kind}-{r}"
            body = {"name": name, "podGroups": [{"name": "g", "schedulingPolicy": {"basic": {}},
                                                 "pods": [{"name": "p", "requests": REQUESTS, **extra}]}]}
            dt = d.run("SubmitWorkload", name, "ns", body)
            if r >= 50:  # warm-up rounds are not counted
                took[kind].append(dt)
            d.run("DeleteWorkload", name, "ns")
    base = statistics.median(took["selector"])
    out = {kind: {"p50_us": round(statistics.median(xs) * 1e6, 1), "mean_us": round(statistics.mean(xs) * 1e6, 1),
                  "p50_vs_selector": round(statistics.median(xs) / base, 2)} for kind, xs in took.items()}
    print(json.dumps({"nodes": args.nodes, "rounds": args.rounds, "cold": args.cold, "submit": out}, indent=1))


if __name__ == "__main__":
    main()
