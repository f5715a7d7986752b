"""How close the decider's victims are to the fewest possible (issue 4, item 6).

On small random clusters (at most 6 nodes, capacity counted in pods: nodes declare only
`pods`, pods request nothing) filled with lower-priority groups (basic groups, gangs at
minCount, gangs with surplus, disruptionMode All; priorities 1-5), a priority-10 preemptor
(a gang, sometimes with rack topology, or one pod of a basic group) that does not fit
asks `preemption.plan` for victims. The brute force tries every set of candidate units
(at most 8, so at most 256 sets; the gang surplus rule applied as the decider applies it:
a gang losing more than its surplus loses every pod) and keeps those after whose eviction
the placement routine places at least as many of the preemptor's pods as the decider's
plan does. The minimum is the set with the fewest pods evicted, ties broken by lowest
priorities first (the evicted pods' priorities, highest first, compared lexicographically).

The decider follows the spec's order (remove least important units first until the pods
fit, then reprieve most important first): a heuristic. Reports the ratio (pods the
decider evicts / the minimum): mean, max, the share of cases where it is optimal (same
pod count) and where it picked exactly the minimum set, and the worst case found.
For reference it also compares with the priority-first minimum (the lowest victim
priorities possible, then the fewest pods at each, as Kubernetes ranks candidates),
which is closer to what the spec's order aims at.

    python bench/preemption_bruteforce.py [--cases 2000] [--seed 5]
"""
from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.domain import ClusterState, Event, Rejection, accept, evolve, handle  # noqa: E402
from service.domain.placement import routine as pl  # noqa: E402
from service.domain.preemption import flat as pre  # noqa: E402
from service.domain.state.cluster import Group  # noqa: E402

MAX_UNITS = 8


def run(state: ClusterState, kind: str, name: str, body: dict[str, Any] | None, decide: bool = True) -> None:
    accepted = accept(state, kind, name, "default" if kind in ("SubmitWorkload", "DeleteWorkload") else None, body)
    if isinstance(accepted, Rejection):
        raise RuntimeError(accepted)
    etype, data = accepted
    event = Event(state.position + 1, etype, json.loads(json.dumps(data)))
    if decide:
        handle(state, event)
    else:
        evolve(state, event)  # recorded, not decided: the caller asks for the plan itself


def victim_group(rng: random.Random, i: int) -> dict[str, Any]:
    count = rng.randint(1, 4)
    group: dict[str, Any] = {"name": "g", "pods": [{"name": "p", "count": count}]}
    kind = rng.random()
    if kind < 0.3:
        group["schedulingPolicy"] = {"basic": {}}
    elif kind < 0.6 and count > 1:  # a gang with surplus above minCount
        group["schedulingPolicy"] = {"gang": {"minCount": rng.randint(1, count - 1)}}
    else:
        group["schedulingPolicy"] = {"gang": {"minCount": count}}
    if rng.random() < 0.25:
        group["disruptionMode"] = "All"
    return {"name": f"v{i}", "priority": rng.randint(1, 5), "podGroups": [group]}


def make_case(rng: random.Random) -> tuple[ClusterState, Group, list[int], int] | None:
    """A crowded cluster and a preemptor that does not fit, recorded but not yet tried."""
    state = ClusterState("brute")
    n = rng.randint(1, 6)
    capacity = 0
    for i in range(n):
        size = rng.randint(1, 4)
        capacity += size
        run(state, "UpsertNode", f"n{i}", {"labels": {"rack": f"r{i % 2}"}, "allocatable": {"pods": size}})
    groups = [victim_group(rng, i) for i in range(rng.randint(1, 8))]
    groups.sort(key=lambda b: -b["priority"])  # higher first: the fill itself never preempts
    for body in groups:
        run(state, "SubmitWorkload", body["name"], body)
    if rng.random() < 0.25:
        size = 1
        pgroup: dict[str, Any] = {"name": "g", "schedulingPolicy": {"basic": {}}, "pods": [{"name": "p", "count": 1}]}
    else:
        size = rng.randint(1, max(1, min(capacity, 6)))
        pgroup = {"name": "g", "schedulingPolicy": {"gang": {"minCount": rng.randint(1, size)}},
                  "pods": [{"name": "p", "count": size}]}
        if rng.random() < 0.3:
            pgroup["topology"] = {"key": "rack"}
    run(state, "SubmitWorkload", "pre", {"name": "pre", "priority": 10, "podGroups": [pgroup]}, decide=False)
    g = state.workloads[("default", "pre")].groups[0]
    pods = list(range(g.total))
    need = g.spec.min_count if g.spec.gang else 1
    if not g.spec.gang:
        pods = [0]
    if pl.attempt(state, g, pods, need, explain=False).ok:
        return None  # fits without preemption
    return state, g, pods, need


def effective(units: list[pre.Unit]) -> dict[int, tuple[Group, set[int]]]:
    """The pods a set of units evicts, by group, with the decider's gang surplus rule."""
    by_group: dict[int, tuple[Group, set[int]]] = {}
    for u in units:
        by_group.setdefault(id(u.group), (u.group, set()))[1].update(u.pods)
    for key, (g, pods) in by_group.items():
        if g.spec.gang and len(pods) > g.placed - g.spec.min_count:
            by_group[key] = (g, {i for i, r in enumerate(g.node_of) if r >= 0})
    return by_group


def places(state: ClusterState, g: Group, pods: list[int], need: int, evicted: dict[int, tuple[Group, set[int]]]) -> int:
    """How many of the preemptor's pods the placement routine places with these pods gone."""
    used = state.nodes.used
    removed = []
    for vg, vpods in evicted.values():
        for p in vpods:
            vec = state.shape_vector(vg.workload, vg.spec.pod_shapes[p])
            used[vg.node_of[p]] -= vec
            removed.append((vg.node_of[p], vec))
    try:
        return pl.attempt(state, g, pods, need, explain=False).placeable
    finally:
        for row, vec in removed:
            used[row] += vec


def cost(evicted: dict[int, tuple[Group, set[int]]]) -> tuple[int, tuple[int, ...]]:
    prios = sorted((vg.workload.spec.priority for vg, vpods in evicted.values() for _ in vpods), reverse=True)
    return (len(prios), tuple(prios))


def priority_first(evicted: dict[int, tuple[Group, set[int]]]) -> tuple[int, ...]:
    """Pods evicted per priority, highest priority first: minimal = the lowest priorities
    possible, then the fewest pods at each (how Kubernetes ranks its candidates)."""
    counts = [0] * 10
    for vg, vpods in evicted.values():
        counts[9 - vg.workload.spec.priority] += len(vpods)
    return tuple(counts)


def signature(evicted: dict[int, tuple[Group, set[int]]]) -> frozenset:
    return frozenset((vg.workload.spec.name, p) for vg, vpods in evicted.values() for p in vpods)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=2000, help="cases with a preemption plan to compare")
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    ratios: list[float] = []
    exact = 0
    skipped = {"fits": 0, "refused": 0, "too_many_units": 0}
    worst: dict[str, Any] | None = None
    tried = 0
    pf_ratios: list[float] = []
    pf_optimal = 0
    pf_worst: dict[str, Any] | None = None
    while len(ratios) < args.cases:
        tried += 1
        case = make_case(rng)
        if case is None:
            skipped["fits"] += 1
            continue
        state, g, pods, need = case
        units = pre.candidate_units(state, g.workload.spec.priority)
        if len(units) > MAX_UNITS:
            skipped["too_many_units"] += 1
            continue
        plan = pre.plan(state, g, pods, need)
        if isinstance(plan, pre.Refusal):
            skipped["refused"] += 1
            continue
        k = plan.placement.placeable
        chosen = {id(v.group): (v.group, set(v.pods)) for v in plan.victims}
        assert places(state, g, pods, need, chosen) >= k, "the decider's victims do not let it place k pods"
        best: tuple[tuple[int, tuple[int, ...]], frozenset] | None = None
        best_pf: tuple[tuple[int, ...], int] | None = None  # priority-first minimum, its pods
        for r in range(1, len(units) + 1):
            for subset in itertools.combinations(units, r):
                evicted = effective(list(subset))
                c, pf = cost(evicted), priority_first(evicted)
                if (best is not None and c >= best[0]) and (best_pf is not None and pf >= best_pf[0]):
                    continue
                if places(state, g, pods, need, evicted) >= k:
                    if best is None or c < best[0]:
                        best = (c, signature(evicted))
                    if best_pf is None or pf < best_pf[0]:
                        best_pf = (pf, c[0])
        assert best is not None and best_pf is not None  # the decider's own set is one of them
        mine = cost(chosen)
        ratio = mine[0] / best[0][0]
        ratios.append(ratio)
        exact += signature(chosen) == best[1]
        pf_ratios.append(mine[0] / best_pf[1])
        pf_optimal += priority_first(chosen) == best_pf[0]
        if priority_first(chosen) != best_pf[0] and (pf_worst is None or pf_ratios[-1] > pf_worst["ratio"]):
            pf_worst = {"ratio": pf_ratios[-1], "decider": list(mine[1]), "priority_first_minimum_pods": best_pf[1],
                        "minimum_counts_by_priority_9_to_0": list(best_pf[0]),
                        "preemptor": {"pods": len(pods), "need": need, "placed": k,
                                      "topology": g.spec.topology_key is not None}, "units": len(units)}
        if worst is None or ratio > worst["ratio"]:
            worst = {"ratio": ratio, "decider_pods": mine[0], "min_pods": best[0][0],
                     "decider_priorities": list(mine[1]), "min_priorities": list(best[0][1]),
                     "preemptor": {"pods": len(pods), "need": need, "placed": k,
                                   "topology": g.spec.topology_key is not None},
                     "units": len(units), "nodes": int(state.nodes.count),
                     "victims": [{"workload": vg.workload.spec.name, "pods": sorted(vp)} for vg, vp in chosen.values()],
                     "minimum": sorted(best[1])}
    optimal = sum(1 for r in ratios if r == 1.0)
    print(json.dumps({
        "cases": len(ratios), "generated": tried, "skipped": skipped,
        "ratio_mean": round(statistics.mean(ratios), 4), "ratio_max": round(max(ratios), 4),
        "optimal_pod_count_share": round(optimal / len(ratios), 4),
        "same_set_as_minimum_share": round(exact / len(ratios), 4),
        "ratio_p99": round(sorted(ratios)[int(0.99 * (len(ratios) - 1))], 4),
        "priority_first": {"ratio_mean": round(statistics.mean(pf_ratios), 4), "ratio_max": round(max(pf_ratios), 4),
                           "optimal_share": round(pf_optimal / len(ratios), 4)},
    }))
    print(json.dumps({"worst": worst}, default=str))
    print(json.dumps({"worst_priority_first": pf_worst}, default=str))


if __name__ == "__main__":
    main()
