"""Explanations when no candidate topology domain is feasible (model.md *Explanations*).

Each node is counted under its own reason: a node of a candidate domain as that domain's try saw
it (the usage of the pods placed before the one that did not fit there), and
`node(s) didn't match pod group topology` only for nodes in no candidate domain or without the
label. A node's reason depends on that node alone, so counts over disjoint rows add up: each
domain's try counts its own nodes (`placement.explain_pod`'s `inside`), and one walk counts the rest.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from service.domain import dra
from service.domain.nodes import filters
from service.domain.state.cluster import ClusterState, Group


def add_counts(counts: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    for reason, k in more.items():
        counts[reason] = counts.get(reason, 0) + k
    return counts


def every_domain_failed(state: ClusterState, g: Group, pod: int, tried: list[tuple[np.ndarray, dict[str, Any]]],
                        first: dict[str, Any] | None) -> dict[str, Any]:
    """The failure when every candidate domain was tried and none is feasible: each node is counted
    under its own reason, a node of a domain as that domain's try saw it; only nodes in no candidate
    domain (or without the label) fail on topology (or an earlier filter), for `pod`. `first`: the
    failure of the domain that placed the most (its devices detail comes first)."""
    nodes = state.nodes
    live = nodes.live_indices()
    covered = np.zeros(nodes.count, dtype=bool)
    counts: dict[str, int] = {}
    for allowed, failure in tried:
        add_counts(counts, failure["inside"])
        covered |= allowed[: nodes.count]
    shape = g.spec.pod_shapes[pod]
    check = filters.Pod(nodes, g.workload.spec.shapes[shape], state.shape_vector(g.workload, shape),
                        covered, dra.pod_needs_devices(g, pod))
    add_counts(counts, filters.explain(check, live[~covered[live]])[0])
    devices = _merge_devices([first["devices"] if first else None,
                              *(f["devices"] for _, f in tried if f is not first)])
    return {"nodes": int(len(live)), "counts": counts, "devices": devices, "pod": pod}


def uniform_failure(state: ClusterState, g: Group, pod: int, ids: np.ndarray, candidates: list[int],
                    restrict: np.ndarray | None) -> dict[str, Any]:
    """every_domain_failed for identical pods without claims, without a try per domain: a domain
    that is not feasible ends its try with each node holding as many pods as fit on it (the sum is
    below what the group needs), so its nodes are explained with that usage added, all in one walk."""
    nodes = state.nodes
    live = nodes.live_indices()
    shape = g.spec.pod_shapes[pod]
    vec = state.shape_vector(g.workload, shape)
    inside = np.isin(ids[: nodes.count], candidates)
    if restrict is not None:
        inside &= restrict[: nodes.count]
    check = filters.Pod(nodes, g.workload.spec.shapes[shape], vec, inside)
    counts = filters.explain(check, live[~inside[live]])[0]
    rows = live[inside[live]]
    cols = np.flatnonzero(vec)
    fit = np.zeros(len(rows), dtype=np.int64)
    if len(cols) and len(rows):
        free = nodes.alloc[np.ix_(rows, cols)] - nodes.used[np.ix_(rows, cols)]
        fit = np.maximum((free // vec[cols]).min(axis=1), 0)  # below the group's pod count here
        fit[~filters.static_mask(nodes, g.workload.spec.shapes[shape])[rows]] = 0
    filled = fit[:, None] * vec[None, :]
    nodes.used[rows] += filled  # restored below, exactly: no cache sees it
    try:
        add_counts(counts, filters.explain(check, rows)[0])
    finally:
        nodes.used[rows] -= filled
    return {"nodes": int(len(live)), "counts": counts, "devices": None, "pod": pod}


def _merge_devices(details: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The devices details of several domains' tries as one: an entry that several give (the same
    claim, request and reason) counts their nodes together, with the most any had free / reached."""
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for detail in details:
        for e in (detail or {}).get("claims", ()):
            key = tuple((k, v) for k, v in e.items() if k not in ("nodes", "available", "reachable"))
            m = merged.get(key)
            if m is None:
                merged[key] = dict(e)
                continue
            m["nodes"] += e["nodes"]
            for name in ("available", "reachable"):
                if name in e:
                    m[name] = max(m[name], e[name])
    return {"claims": list(merged.values())} if merged else None
