"""accept: a command against the state -> its input event, or a Rejection.

One accept function per command type, in ACCEPT: the domain's half of the command registry
(service/app/registry.py adds each type's body model, addressing and answer view). A body
here is already valid in shape (service/schemas); accept checks it against the state.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from service.domain.decide import lifecycle, podgroups, scale
from service.domain.model import events as ev
from service.domain.model.composite import group_bodies
from service.domain.model.rejection import Accepted, Rejection
from service.domain.model.specs import PREEMPT_LOWER
from service.domain.placement import scoring
from service.domain.state.cluster import ClusterState

__all__ = ["ACCEPT", "Accepted", "AcceptFn", "Rejection", "accept", "rejection_event"]

# (state, name, namespace, body: {} when the command has none) -> the input event or a Rejection
AcceptFn = Callable[[ClusterState, str, "str | None", dict[str, Any]], "Accepted | Rejection"]

# Every resource name a cluster has seen is a column of its node table (and of every usage row and
# request vector): a bound keeps one submitter from widening them without end, one name at a time.
MAX_CLUSTER_RESOURCES = 256


def _too_many_resources(state: ClusterState, names: set[str], loc: tuple[Any, ...]) -> Rejection | None:
    new = names - state.nodes.resources.keys()
    if not new or len(state.nodes.resources) + len(new) <= MAX_CLUSTER_RESOURCES:
        return None
    return Rejection(422, "TooManyResources",
                     f"the cluster would know {len(state.nodes.resources) + len(new)} resource names "
                     f"(at most {MAX_CLUSTER_RESOURCES}); new here: {', '.join(sorted(new)[:5])}"
                     + (" …" if len(new) > 5 else ""), loc)


def upsert_node(state: ClusterState, name: str, namespace: str | None, body: dict[str, Any]) -> Accepted | Rejection:
    too_many = _too_many_resources(state, set(body.get("allocatable") or {}), ("body", "allocatable"))
    if too_many is not None:
        return too_many
    data: dict[str, Any] = {"name": name, "labels": body.get("labels") or {},
                            "allocatable": body.get("allocatable") or {},
                            "unschedulable": bool(body.get("unschedulable", False))}
    if body.get("taints"):  # only when there are any: an untainted node's event is as before taints
        data["taints"] = [{"key": t["key"], "value": t.get("value") or "", "effect": t["effect"]}
                          for t in body["taints"]]
    return ev.NODE_UPSERTED, data


def remove_node(state: ClusterState, name: str, namespace: str | None, body: dict[str, Any]) -> Accepted | Rejection:
    if name not in state.nodes.index or not state.nodes.alive[state.nodes.index[name]]:
        return Rejection(404, "NotFound", f"node {name!r} not found")
    return ev.NODE_REMOVED, {"name": name}


def upsert_priority_class(state: ClusterState, name: str, namespace: str | None,
                          body: dict[str, Any]) -> Accepted | Rejection:
    return ev.PRIORITY_CLASS_UPSERTED, {"name": name, "value": int(body.get("value", 0)),
                                        "preemptionPolicy": body.get("preemptionPolicy") or PREEMPT_LOWER}


def upsert_device_class(state: ClusterState, name: str, namespace: str | None,
                        body: dict[str, Any]) -> Accepted | Rejection:
    return ev.DEVICE_CLASS_UPSERTED, {"name": name, **body}


def remove_device_class(state: ClusterState, name: str, namespace: str | None,
                        body: dict[str, Any]) -> Accepted | Rejection:
    if name not in state.device_classes:
        return Rejection(404, "NotFound", f"device class {name!r} not found")
    return ev.DEVICE_CLASS_REMOVED, {"name": name}


def upsert_resource_slice(state: ClusterState, name: str, namespace: str | None,
                          body: dict[str, Any]) -> Accepted | Rejection:
    return ev.RESOURCE_SLICE_UPSERTED, {"name": name, **body}


def remove_resource_slice(state: ClusterState, name: str, namespace: str | None,
                          body: dict[str, Any]) -> Accepted | Rejection:
    if name not in state.resource_slices:
        return Rejection(404, "NotFound", f"resource slice {name!r} not found")
    return ev.RESOURCE_SLICE_REMOVED, {"name": name}


def submit_workload(state: ClusterState, name: str, namespace: str | None,
                    body: dict[str, Any]) -> Accepted | Rejection:
    ns = namespace or ""
    existing = state.workloads.get((ns, name))
    if existing is not None and existing.deleted_at is None:  # a deleted one's name makes a new incarnation
        return Rejection(409, "AlreadyExists", f"workload {ns}/{name} already exists: the one submitted at "
                         f"position {existing.position} lives (delete it before its name is used again)")
    requested = {r for g in group_bodies(body) for p in g.get("pods") or ()
                 for r in (p.get("requests") or {})}
    too_many = _too_many_resources(state, requested, ("body", "podGroups"))
    if too_many is not None:
        return too_many
    resolved = podgroups.resolve_priority(state, body, (0, PREEMPT_LOWER))
    if isinstance(resolved, Rejection):
        return resolved
    return ev.WORKLOAD_SUBMITTED, {"namespace": ns, "name": name, "priority": resolved[0],
                                   "preemptionPolicy": resolved[1], "spec": body}


def delete_workload(state: ClusterState, name: str, namespace: str | None,
                    body: dict[str, Any]) -> Accepted | Rejection:
    ns = namespace or ""
    wl = state.workloads.get((ns, name))
    if wl is None:
        return Rejection(404, "NotFound", f"workload {ns}/{name} not found")
    if wl.deleted_at is not None:
        return Rejection(404, "NotFound", f"workload {ns}/{name} was already deleted")
    return ev.WORKLOAD_DELETED, {"namespace": ns, "name": name}


def create_pod_group(state: ClusterState, name: str, namespace: str | None,
                     body: dict[str, Any]) -> Accepted | Rejection:
    """PodGroupCreated (podgroups.py), its pods held to the cluster's bound on resource names."""
    accepted = podgroups.create_pod_group(state, name, namespace, body)
    if isinstance(accepted, Rejection):
        return accepted
    requested = {r for p in accepted[1]["spec"]["pods"] for r in p.get("requests") or {}}
    return _too_many_resources(state, requested, ("body", "pods")) or accepted


def configure_scheduler(state: ClusterState, name: str, namespace: str | None,
                        body: dict[str, Any]) -> Accepted | Rejection:
    """PUT /scheduler (sharing.md): recorded as SchedulerConfigured, defaults filled in."""
    return ev.SCHEDULER_CONFIGURED, scoring.recorded(body.get("scoringStrategy") or {"type": "MostAllocated"})


# The command types, in the order of the spec's tables (the app's registry follows this order).
ACCEPT: dict[str, AcceptFn] = {
    "UpsertNode": upsert_node,
    "RemoveNode": remove_node,
    "UpsertDeviceClass": upsert_device_class,
    "RemoveDeviceClass": remove_device_class,
    "UpsertResourceSlice": upsert_resource_slice,
    "RemoveResourceSlice": remove_resource_slice,
    "UpsertPriorityClass": upsert_priority_class,
    "ConfigureScheduler": configure_scheduler,
    "SubmitWorkload": submit_workload,
    "DeleteWorkload": delete_workload,
    "FinishPods": lifecycle.finish_pods,
    "ScaleWorkload": scale.scale,
    "CreatePodGroup": create_pod_group,
    "DeletePodGroup": podgroups.delete_pod_group,
}


def accept(state: ClusterState, kind: str, name: str, namespace: str | None,
           body: dict[str, Any] | None) -> Accepted | Rejection:
    """Check a (syntactically valid) command against the state; give its input event."""
    check = ACCEPT.get(kind)
    if check is None:
        return Rejection(422, "UnknownCommand", f"unknown command type {kind!r}")
    return check(state, name, namespace, body or {})


def rejection_event(kind: str, name: str, namespace: str | None, rejection: Rejection) -> Accepted:
    return ev.COMMAND_REJECTED, {"command": kind, "namespace": namespace, "name": name,
                                 "status": rejection.status, "reason": rejection.reason,
                                 "message": rejection.detail}
