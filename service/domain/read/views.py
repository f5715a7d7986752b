"""Read views of the state, shaped as shared/spec/http.md says."""
from __future__ import annotations

from typing import Any

from service.domain import dra
from service.domain.model.quantity import format_quantity
from service.domain.model.reasons import render_explanation
from service.domain.model.workload import Composite, Group, Workload, cpg_satisfied, satisfied_children, subtree_groups
from service.domain.state.cluster import ClusterState


def node_view(state: ClusterState, name: str) -> dict[str, Any] | None:
    nodes = state.nodes
    row = nodes.index.get(name)
    if row is None or not nodes.alive[row]:
        return None
    spec = nodes.specs[row]
    assert spec is not None
    allocatable = dict(spec.allocatable)
    allocated: dict[str, str] = {}
    free: dict[str, str] = {}
    for res, col in nodes.resources.items():
        used = int(nodes.used[row, col])
        if res in allocatable:
            allocated[res] = format_quantity(used, res)
            free[res] = format_quantity(allocatable[res] - used, res) if allocatable[res] >= used \
                else "-" + format_quantity(used - allocatable[res], res)
        elif used and res != "pods":  # a node that does not declare pods does not count them
            allocated[res] = format_quantity(used, res)
    pods = []
    if row < len(state.node_pods):
        for key in sorted(state.node_pods[row]):
            g, pod = state.pod_ref(key)
            pods.append({"namespace": g.workload.spec.namespace, "workload": g.workload.spec.name,
                         "podGroup": g.spec.name, "pod": g.spec.pod_names[pod]})
    return {"name": name, "labels": dict(spec.labels),
            "allocatable": {r: format_quantity(v, r) for r, v in spec.allocatable},
            "unschedulable": spec.unschedulable,
            "taints": [{"key": key, "value": value, "effect": effect} for key, value, effect in spec.taints],
            "allocated": allocated, "free": free, "pods": pods}


def node_views(state: ClusterState) -> list[dict[str, Any]]:
    out = []
    for name in sorted(state.nodes.index):
        view = node_view(state, name)
        if view is not None:
            out.append(view)
    return out


def group_view(state: ClusterState, g: Group) -> dict[str, Any]:
    names = state.nodes.names
    return {
        "name": g.spec.name,
        "parent": None if g.spec.parent is None else g.workload.spec.cpgs[g.spec.parent].name,
        "phase": group_phase(g),
        "minCount": g.spec.min_count,
        "placedPods": g.placed,
        "pendingPods": g.total - g.placed - g.succeeded - g.failed,
        "succeededPods": g.succeeded,
        "failedPods": g.failed,
        "domain": g.domain,
        "explanation": render_explanation(g.explanation) if g.pending and g.workload.deleted_at is None else None,
        "pods": [{"name": n, "phase": g.phase_of(i), "node": names[g.node_of[i]] if g.node_of[i] >= 0 else None}
                 for i, n in enumerate(g.spec.pod_names)],
        "claims": dra.claim_views(state.dra, g),
        "conditions": sorted(g.conditions.values(), key=lambda c: (c["position"], c["type"])),
    }


def group_phase(g: Group) -> str:
    """Completed when every pod finished; else Scheduled while satisfied (lifecycle.md)."""
    if g.completed:
        return "Completed"
    return "Scheduled" if g.scheduled else "Pending"


def cpg_phase(wl: Workload, ci: int) -> str:
    """Completed when every pod group of its subtree is; else Scheduled while satisfied."""
    if all(wl.groups[gi].completed for gi in subtree_groups(wl, ci)):
        return "Completed"
    return "Scheduled" if cpg_satisfied(wl, ci) else "Pending"


def workload_phase(wl: Workload) -> str:
    if wl.deleted_at is not None:
        return "Finished"
    phases = [cpg_phase(wl, ci) for ci in wl.spec.roots] if wl.spec.cpgs else [group_phase(g) for g in wl.groups]
    if not phases:
        return "Pending"  # a workload of templates without PodGroup objects yet
    if all(p == "Completed" for p in phases):
        return "Completed"
    return "Scheduled" if all(p != "Pending" for p in phases) else "Pending"


def composite_view(wl: Workload, c: Composite) -> dict[str, Any]:
    spec = wl.spec.cpgs
    cs = c.spec
    satisfied = cpg_satisfied(wl, cs.index)
    return {
        "name": cs.name, "parent": None if cs.parent is None else spec[cs.parent].name,
        "phase": cpg_phase(wl, cs.index), "minGroupCount": cs.min_group_count,
        "satisfiedChildren": satisfied_children(wl, cs.index),
        "children": [wl.spec.groups[gi].name for gi in cs.child_groups] + [spec[cj].name for cj in cs.child_cpgs],
        "domain": None if cs.topology_key is None or c.domain is None else {"key": cs.topology_key, "value": c.domain},
        "explanation": render_explanation(c.explanation, cs.name, cs.children)
        if not satisfied and wl.deleted_at is None else None,
        "conditions": sorted(c.conditions.values(), key=lambda x: (x["position"], x["type"])),
    }


def workload_view(state: ClusterState, wl: Workload) -> dict[str, Any]:
    return {
        "cluster": state.cluster, "namespace": wl.spec.namespace, "name": wl.spec.name,
        "priority": wl.spec.priority, "preemptionPolicy": wl.spec.preemption_policy,
        "position": wl.position, "previous": wl.previous, "spec": wl.body,
        "status": {"phase": workload_phase(wl), "deletedAt": wl.deleted_at,
                   "podGroups": [group_view(state, g) for g in wl.groups],
                   "compositePodGroups": [composite_view(wl, c) for c in wl.composites]},
    }


def incarnations(state: ClusterState) -> dict[tuple[str, str], list[int]]:
    """The names used again (lifecycle.md): each name with more than one incarnation, and the
    positions of their submissions, ascending."""
    out: dict[tuple[str, str], list[int]] = {}
    for wl in state.workloads.values():
        if wl.previous is None:
            continue
        chain = [wl.position]
        while (before := state.by_position.get(chain[-1])) is not None and before.previous is not None:
            chain.append(before.previous)
        out[wl.key] = chain[::-1]
    return out


_POD_GROUP_STATUS = ("minCount", "placedPods", "pendingPods", "succeededPods", "failedPods", "domain",
                     "explanation", "pods", "claims", "conditions")


def podgroup_view(state: ClusterState, pg: Workload) -> dict[str, Any]:
    """A PodGroup object (lifecycle.md *Views*): its references, the resolved pod group, and its
    group's view as `status` (phase Finished once deleted)."""
    g = pg.groups[0]
    view = group_view(state, g)
    return {
        "cluster": state.cluster, "namespace": pg.spec.namespace, "name": g.spec.name, "workload": pg.spec.name,
        "template": pg.template, "priority": pg.spec.priority, "preemptionPolicy": pg.spec.preemption_policy,
        "position": pg.position, "spec": pg.body["podGroups"][0],
        "status": {"phase": "Finished" if pg.deleted_at is not None else view["phase"], "deletedAt": pg.deleted_at,
                   **{k: view[k] for k in _POD_GROUP_STATUS}},
    }


def podgroup_views(state: ClusterState) -> list[dict[str, Any]]:
    """Every PodGroup object, live and deleted, in creation order."""
    return [podgroup_view(state, pg) for pg in sorted(state.podgroups.values(), key=lambda p: p.position)]


def object_views(state: ClusterState, kind: str) -> list[dict[str, Any]]:
    if kind == "priorityclasses":
        return [{"name": pc.name, "value": pc.value, "preemptionPolicy": pc.preemption_policy}
                for _, pc in sorted(state.priority_classes.items())]
    if kind == "deviceclasses":
        return [{**body, "name": name} for name, body in sorted(state.device_classes.items())]

    def whose(key: tuple[Any, ...]) -> tuple[Any, dict[str, Any]]:
        wl = state.by_position[key[1]]
        g = wl.groups[key[2]] if key[0] != dra.WORKLOAD else wl.groups[0]
        return g, {"namespace": wl.spec.namespace, "workload": wl.spec.name,
                   "podGroup": g.spec.name if key[0] != dra.WORKLOAD else None,
                   "pod": g.spec.pod_names[key[3]] if key[0] == dra.POD else None}

    return [{**body, "name": name, "deviceUsage": dra.device_usage(state.dra, name, whose)}
            for name, body in sorted(state.resource_slices.items())]


def canonical(state: ClusterState) -> dict[str, Any]:
    """Everything observable about the state, for equality checks (live vs replay)."""
    return {
        "position": state.position,
        "nodes": node_views(state),
        "objects": {k: object_views(state, k) for k in ("priorityclasses", "deviceclasses", "resourceslices")},
        "workloads": [
            {**workload_view(state, wl), "events": list(wl.events),
             "internal": [{"placedAt": g.placed_at, "needsExplanation": g.needs_explanation,
                           "everScheduled": g.ever_scheduled} for g in wl.groups],
             "internalComposites": [{"needsExplanation": c.needs_explanation, "everScheduled": c.ever_scheduled}
                                    for c in wl.composites]}
            for wl in sorted(state.by_position.values(), key=lambda w: w.position)
            if wl.owner is None],  # every incarnation (PodGroup objects: below)
        "queue": [list(k) for k in state.queue.keys()],
        "running": [list(k) for k in state.running.keys()],
        "devices": dra.canonical(state.dra),
        "podgroups": [{**v, "internal": {"placedAt": pg.groups[0].placed_at,
                                         "needsExplanation": pg.groups[0].needs_explanation}}
                      for pg, v in zip(sorted(state.podgroups.values(), key=lambda p: p.position),
                                       podgroup_views(state))],
    }
