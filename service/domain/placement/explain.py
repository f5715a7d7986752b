"""Explanations (model.md *Explanations*, composite.md *Explanations and events*), written once:

- `explain_pod`: the per-node reasons why a pod fits nowhere (the filter table's order);
- `explanation`: a pod group's recorded explanation (codes and numbers: reasons.py renders the words);
- `cpg_explanation`: a composite pod group's, from its children's outcomes;
- explain_topology.py: the per-node reasons when every topology domain failed.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from service.domain import dra
from service.domain.model import reasons as rs
from service.domain.nodes import filters
from service.domain.placement.explain_topology import add_counts
from service.domain.state.cluster import ClusterState, Group

if TYPE_CHECKING:
    from service.domain.model.composite import CpgSpec
    from service.domain.placement.routine import Trial

GROUP = "PodGroup"
COMPOSITE = "CompositePodGroup"


def explain_pod(state: ClusterState, g: Group, pod: int, allowed: np.ndarray | None,
                trial: Trial) -> dict[str, Any]:
    """Per-node reasons why this pod fits nowhere, as kube-scheduler's filters say them."""
    shape = g.spec.pod_shapes[pod]
    needs = dra.pod_needs_devices(g, pod)
    check = filters.Pod(state.nodes, g.workload.spec.shapes[shape], state.shape_vector(g.workload, shape),
                        allowed, needs)
    live = state.nodes.live_indices()
    if allowed is None:
        counts, seen = filters.explain(check, live)
        inside = counts
    else:
        # the nodes `allowed` admits apart (counts over disjoint rows add up): when every topology
        # domain fails, each domain's own nodes are counted from its own try (explain_topology)
        inside, seen = filters.explain(check, live[allowed[live]])
        counts = add_counts(dict(inside), filters.explain(check, live[~allowed[live]])[0])
    short = seen[filters.DEVICES_ROW.name]
    detail = dra.explain_pod(trial.ledger, g, pod, short) if needs and len(short) else None
    return {"nodes": int(len(live)), "counts": counts, "devices": detail, "pod": pod, "inside": inside}


def explanation(failure: dict[str, Any] | None, g: Group, placeable: int, total_nodes: int) -> dict[str, Any]:
    """The recorded explanation (audit.md): codes and numbers, no words. `placeable`: the group's
    pods placed, or placeable in this try, together. The message is rendered when read
    (reasons.render_explanation)."""
    counts = failure["counts"] if failure else {}
    out: dict[str, Any] = {"nodes": failure["nodes"] if failure else total_nodes,
                           "reasons": rs.node_reasons(counts), "policy": "gang" if g.spec.gang else "basic",
                           "pods": g.total, "placeablePods": placeable, "minCount": g.spec.min_count,
                           "preemption": None}
    if failure and failure.get("devices"):
        out["devices"] = failure["devices"]
    return out


def cpg_explanation(spec: CpgSpec, children: list[tuple[str, str, bool, dict[str, Any] | None]], n: int,
                    domain: dict[str, Any] | None) -> dict[str, Any]:
    """A CPG's explanation: `children` as (name, kind, satisfied when tried, explanation to show)."""
    return {  # the message is rendered when read (reasons.composite_message)
        "minGroupCount": spec.min_group_count, "satisfiableChildren": n,
        "children": [{"name": name, "kind": kind, "satisfied": satisfied, "explanation": explanation}
                     for name, kind, satisfied, explanation in children],
        "domain": domain, "preemption": None,
    }


def worth_explaining(satisfied: bool, x: dict[str, Any] | None) -> bool:
    """A child's explanation is kept when it left something unsatisfied or unplaced."""
    if x is None or not satisfied or "children" not in x:
        return x is not None
    return x["satisfiableChildren"] < len(x["children"]) or any(c["explanation"] for c in x["children"])
