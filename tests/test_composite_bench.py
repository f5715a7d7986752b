"""bench/composite.py counts what it says: pods placed (never pods evicted) and GPUs in use (never
CPU-only pods such as a tree's leaders)."""
from __future__ import annotations

import random

from bench import composite as bench


def driver(nodes: int) -> bench.Driver:
    d = bench.Driver()
    for i in range(nodes):
        d.run("UpsertNode", f"n{i}", None, {"labels": {"block": "b0", "rack": f"b0-r{i % 2}"},
                                            "allocatable": {"cpu": "64", bench.GPU: "8", "pods": "110"}})
    return d


def gang(name: str, n: int, priority: int) -> dict:
    return {"name": name, "priority": priority, "podGroups": [{
        "name": "g", "schedulingPolicy": {"gang": {"minCount": n}},
        "pods": [{"name": "w", "count": n, "requests": bench.WORKER}]}]}


def test_evicted_pods_are_not_counted_as_placed():
    d = driver(2)
    _, decisions = d.run("SubmitWorkload", "low", "bench", gang("low", 16, 0))
    assert bench.placed_by(decisions) == 16 and d.gpus_in_use() == 16
    _, decisions = d.run("SubmitWorkload", "high", "bench", gang("high", 4, 100))
    assert "PodGroupPreempted" in [e.type for e in decisions]  # the 16 go, 4 come
    assert bench.placed_by(decisions) == 4
    assert d.gpus_in_use() == 4


def test_a_trees_leaders_use_no_gpu():
    d = driver(16)
    body, pods = bench.tree(random.Random(3), "t", 0)
    replica = body["compositePodGroups"][0]["compositePodGroups"][0]
    leaders = replica["count"]
    _, decisions = d.run("SubmitWorkload", "t", "bench", body)
    assert bench.placed_by(decisions) == pods
    assert d.gpus_in_use() == pods - leaders
