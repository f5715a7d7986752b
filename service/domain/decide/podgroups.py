"""PodGroup objects (lifecycle.md *PodGroup objects*, KEP-5832): the accept of CreatePodGroup and
DeletePodGroup. A body here is valid in shape (service/schemas/podgroups.py); these check it
against the state: the workload it names and the template, the name, the resolved pod group.

A PodGroup object lives in the state as a workload of its own (`Workload.owner` is the workload of
templates; its one group is the PodGroup), so that placement, preemption, the queue and the fold
treat it as one more unit, at its own priority and creation position (fold/evolve.py).
"""
from __future__ import annotations

from typing import Any

from service.domain.model import events as ev
from service.domain.model.rejection import Accepted, Rejection
from service.domain.model.specs import MAX_WORKLOAD_PODS
from service.domain.model.workload import Workload
from service.domain.state.cluster import ClusterState

GROUP_FIELDS = ("schedulingPolicy", "disruptionMode", "topology", "resourceClaims", "pods")


def podgroup_of(state: ClusterState, namespace: str, name: str) -> Workload | None:
    """The PodGroup object of that name (live or deleted): the one lookup of PodGroup names."""
    return state.podgroups.get((namespace, name))


def _pods(spec: dict[str, Any]) -> int:
    return sum(int(p.get("count", 1)) for p in spec.get("pods") or ())


def _resolve(body: dict[str, Any], template: dict[str, Any] | None, name: str) -> dict[str, Any] | Rejection:
    """The pod group the body and the template give (the body's fields first), or the 422."""
    spec: dict[str, Any] = {"name": name}
    for key in GROUP_FIELDS:
        if key in body:
            spec[key] = body[key]
        elif template is not None and key in template:
            spec[key] = template[key]
    spec.setdefault("disruptionMode", "Single")
    spec.setdefault("resourceClaims", [])
    for key in ("schedulingPolicy", "pods"):
        if key not in spec:
            where = "no template is named" if template is None else f"template {template['name']!r} gives none"
            return Rejection(422, "InvalidPodGroup", f"{key} is required: {where}", ("body", key))
    gang = spec["schedulingPolicy"].get("gang")
    if gang is not None and int(gang["minCount"]) > _pods(spec):
        loc = ("body", "schedulingPolicy", "gang", "minCount") if "schedulingPolicy" in body else ("body", "pods")
        return Rejection(422, "InvalidPodGroup", f"minCount {gang['minCount']} must be at most the PodGroup's "
                                                 f"pod count ({_pods(spec)})", loc)
    return spec


def _claim_refusal(wl: Workload, body: dict[str, Any], spec: dict[str, Any]) -> Rejection | None:
    """Every claim entry names one of the workload's resourceClaimTemplates."""
    names = {t["name"] for t in wl.body.get("resourceClaimTemplates") or ()}
    entries: list[tuple[tuple[Any, ...], Any]] = [(("resourceClaims", i), c) for i, c in enumerate(spec["resourceClaims"])]
    entries += [(("pods", j, "resourceClaims", i), c) for j, p in enumerate(spec["pods"])
                for i, c in enumerate(p.get("resourceClaims") or ())]
    for loc, claim in entries:
        if claim["resourceClaimTemplateName"] not in names:
            at = ("body", *loc, "resourceClaimTemplateName") if loc[0] in body else ("body", "workloadRef", "templateName")
            return Rejection(422, "UnknownClaimTemplate", f"workload {wl.spec.namespace}/{wl.spec.name} has no "
                             f"resourceClaimTemplates entry named {claim['resourceClaimTemplateName']!r}", at)
    return None


def resolve_priority(state: ClusterState, body: dict[str, Any], default: tuple[int, str]) -> tuple[int, str] | Rejection:
    """(priority, preemptionPolicy) of a body (model.md *Priority classes*): `priority`, else its
    `priorityClassName`'s value, else `default`'s; the policy given, else the class's, else `default`'s.
    A workload's default is (0, PreemptLowerPriority), a PodGroup object's its workload's."""
    priority, policy = body.get("priority"), body.get("preemptionPolicy")
    class_name = body.get("priorityClassName")
    if class_name is not None:
        pc = state.priority_classes.get(class_name)
        if pc is None:
            return Rejection(422, "UnknownPriorityClass", f"priority class {class_name!r} does not exist",
                             ("body", "priorityClassName"))
        priority = pc.value if priority is None else priority
        policy = policy or pc.preemption_policy
    return int(priority if priority is not None else default[0]), policy or default[1]


def _workload(state: ClusterState, ns: str, body: dict[str, Any]) -> tuple[Workload, dict[str, Any] | None] | Rejection:
    ref = body["workloadRef"]
    wl = state.workloads.get((ns, ref["workloadName"]))
    if wl is None:
        return Rejection(422, "UnknownWorkload", f"workload {ns}/{ref['workloadName']} does not exist",
                         ("body", "workloadRef", "workloadName"))
    if wl.deleted_at is not None:
        return Rejection(409, "WorkloadDeleted", f"workload {ns}/{wl.spec.name} was deleted at position "
                                                 f"{wl.deleted_at}")
    templates = wl.body.get("podGroupTemplates")
    if templates is None:
        return Rejection(409, "WorkloadHasPodGroups", f"workload {ns}/{wl.spec.name} was submitted with its pod "
                         f"groups: it takes no PodGroup objects (its spec gives no podGroupTemplates)")
    name = ref.get("templateName")
    if name is None:
        return wl, None
    template = next((t for t in templates if t["name"] == name), None)
    if template is None:
        return Rejection(422, "UnknownTemplate", f"workload {ns}/{wl.spec.name} has no podGroupTemplates entry "
                                                 f"named {name!r}", ("body", "workloadRef", "templateName"))
    return wl, template


def create_pod_group(state: ClusterState, name: str, namespace: str | None,
                     body: dict[str, Any]) -> Accepted | Rejection:
    """PodGroupCreated (lifecycle.md *Creating a PodGroup*)."""
    ns = namespace or ""
    existing = podgroup_of(state, ns, name)
    if existing is not None:
        if existing.deleted_at is not None:
            return Rejection(409, "AlreadyExists", f"PodGroup {ns}/{name} already exists: the name was used by a "
                             f"PodGroup deleted at position {existing.deleted_at}, and a name is not reused")
        return Rejection(409, "AlreadyExists", f"PodGroup {ns}/{name} already exists")
    found = _workload(state, ns, body)
    if isinstance(found, Rejection):
        return found
    wl, template = found
    spec = _resolve(body, template, name)
    if isinstance(spec, Rejection):
        return spec
    refused = _claim_refusal(wl, body, spec)
    if refused is not None:
        return refused
    live = sum(g.total for g in wl.groups)
    if live + _pods(spec) > MAX_WORKLOAD_PODS:
        return Rejection(422, "TooManyPods", f"workload {ns}/{wl.spec.name}'s live pod groups would hold "
                         f"{live + _pods(spec)} pods (at most {MAX_WORKLOAD_PODS})", ("body", "pods"))
    resolved = resolve_priority(state, body, (wl.spec.priority, wl.spec.preemption_policy))
    if isinstance(resolved, Rejection):
        return resolved
    priority, policy = resolved
    return ev.POD_GROUP_CREATED, {"namespace": ns, "workload": wl.spec.name, "name": name,
                                  "template": template["name"] if template is not None else None,
                                  "priority": priority, "preemptionPolicy": policy, "spec": spec}


def delete_pod_group(state: ClusterState, name: str, namespace: str | None,
                     body: dict[str, Any]) -> Accepted | Rejection:
    """PodGroupDeleted (lifecycle.md *Deleting a PodGroup*)."""
    ns = namespace or ""
    pg = podgroup_of(state, ns, name)
    if pg is None:
        return Rejection(404, "NotFound", f"PodGroup {ns}/{name} not found")
    if pg.deleted_at is not None:
        return Rejection(404, "NotFound", f"PodGroup {ns}/{name} was already deleted at position {pg.deleted_at}")
    return ev.POD_GROUP_DELETED, {"namespace": ns, "workload": pg.spec.name, "name": name}
