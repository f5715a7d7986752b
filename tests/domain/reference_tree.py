"""A naive reference of composite.md's tree routine, written straight from the text, on top of
the flat placement routine (placement.attempt). It copies the whole state for every candidate
domain instead of undoing trials, and scores domains from the copied usage."""
from __future__ import annotations

import copy
from fractions import Fraction

import numpy as np

from service.domain.placement import routine as pl
from service.domain.state.cluster import ClusterState


def _apply(state: ClusterState, wl_key: tuple[str, str], gi: int, res: pl.Attempt) -> None:
    g = state.workloads[wl_key].groups[gi]
    for pod, node in res.placements:
        state.nodes.used[node] += state.shape_vector(g.workload, g.spec.pod_shapes[pod])
        g.node_of[pod] = node  # only the usage and node_of matter to the routine here
    g.placed += len(res.placements)


def place(state: ClusterState, wl_key: tuple[str, str], ci: int, allowed: np.ndarray | None):
    """Returns (satisfied, new state, [(group index, [(pod, node)])], {cpg index: domain value})."""
    wl = state.workloads[wl_key]
    spec = wl.spec.cpgs[ci]
    if spec.topology_key is None:
        return _children(state, wl_key, ci, allowed)
    ids, values = state.nodes.domains(spec.topology_key)
    ids = ids[: state.nodes.count]
    inside = (ids >= 0) if allowed is None else (ids >= 0) & allowed
    best = None
    for d in sorted({int(x) for x in ids[inside]}, key=lambda d: values[d]):  # ascending value
        rows = inside & (ids == d)
        ok, after, placed, domains = _children(copy.deepcopy(state), wl_key, ci, rows)
        if not ok:
            continue
        score = _score(after, wl_key, placed, rows)
        if best is None or score > best[0]:
            best = (score, after, placed, {**domains, ci: values[d]})
    if best is None:
        return False, state, [], {}
    return True, best[1], best[2], best[3]


def _children(state: ClusterState, wl_key: tuple[str, str], ci: int, allowed: np.ndarray | None):
    start = copy.deepcopy(state)
    wl = state.workloads[wl_key]
    spec = wl.spec.cpgs[ci]
    placed: list[tuple[int, list[tuple[int, int]]]] = []
    domains: dict[int, str] = {}
    satisfied = 0
    for gi in spec.child_groups:
        g = state.workloads[wl_key].groups[gi]
        pods = [i for i, n in enumerate(g.node_of) if n < 0]
        need = g.spec.min_count if g.spec.gang else 1
        res = pl.attempt(state, g, pods, need, restrict=allowed, explain=False)
        if res.ok:
            _apply(state, wl_key, gi, res)
            placed.append((gi, res.placements))
            satisfied += 1
    for cj in spec.child_cpgs:
        ok, state, more, doms = place(state, wl_key, cj, allowed)
        if ok:
            satisfied += 1
            placed += more
            domains.update(doms)
    if satisfied < spec.min_group_count:
        return False, start, [], {}
    return True, state, placed, domains


def _score(after: ClusterState, wl_key: tuple[str, str], placed, rows: np.ndarray) -> Fraction:
    wl = after.workloads[wl_key]
    requested = sorted({r for gi, ps in placed for p, _ in ps
                        for r, _ in wl.spec.shapes[wl.groups[gi].spec.pod_shapes[p]].requests})
    if not requested:
        return Fraction(0)
    nodes = after.nodes
    members = np.flatnonzero(rows)
    total = Fraction(0)
    for r in requested:
        col = nodes.resources[r]
        alloc = int(sum(int(nodes.alloc[m, col]) for m in members if nodes.declared[m, col]))
        if alloc:
            total += Fraction(int(sum(int(nodes.used[m, col]) for m in members)), alloc)
    return total / len(requested)
