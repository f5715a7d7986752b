"""`to_objects`: a scheduling.k8s.io Workload (v1beta1) with the PodGroup objects that name it and their
Pods, as Gangplank's two objects (lifecycle.md *The client, the commands and the reference
controller*): the workload of `podGroupTemplates` and one PodGroup body per PodGroup object.

`to_workload` of the same manifests still gives one workload with its groups embedded (_bundle.py);
the pieces both read are shared (templates, group fields, pod shapes, claim templates)."""
from __future__ import annotations

from typing import Any

from gangplank_client.kube._bundle import claim_template, used_templates, where
from gangplank_client.kube._convert import entries_of, group_fields, templates_of, workload_ref
from gangplank_client.kube._pods import Priority, claim_entries, pod_shape
from gangplank_client.kube._read import ManifestError, Manifests, Obj, Refusals, as_map, load, name_objects

_KINDS = ("Workload", "PodGroup", "Pod", "ResourceClaimTemplate")


def _template(t: Obj, path: str, out: Refusals) -> Obj:
    """A Workload's podGroupTemplate as a Gangplank template: its policy, topology, disruption mode,
    claims; no pods (each PodGroup gives its own)."""
    policy, extra = group_fields(t, path, out, pods=None, default_gang=False)
    return {"name": t["name"], "schedulingPolicy": policy, **extra}


def _podgroup(pg: Obj, pods: list[tuple[str, Obj]], out: Refusals) -> Obj:
    """One PodGroup object's body: name, workloadRef, its spec's pod group and priority fields, pods."""
    path = f"{where(pg)}: spec"
    spec = out.get_map(pg, "spec", "")
    workload, template = workload_ref(spec)
    ref = {"workloadName": workload, **({"templateName": template} if template else {})}
    body: Obj = {"name": pg["metadata"]["name"], "workloadRef": ref}
    own = {k: v for k, v in spec.items() if k in ("schedulingPolicy", "schedulingConstraints", "disruptionMode",
                                                  "resourceClaims")}
    if own:
        policy, extra = group_fields(own, path, out, pods=len(pods) or None, default_gang=False)
        if "schedulingPolicy" in own:
            body["schedulingPolicy"] = policy
        body.update(extra)
    prio = Priority(out)
    prio.add(spec, path)
    prio.apply(body)
    if pods:
        body["pods"] = entries_of(pods)
    elif template is None:
        out.add(path, "no Pod names this PodGroup in spec.schedulingGroup.podGroupName, and it names no template")
    return body


def to_objects(manifests: Manifests, namespace: str | None = None) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """(namespace, the workload with `podGroupTemplates`, one PodGroup body per PodGroup object in the
    order given). A CompositePodGroup (or a composite template) is a ValueError: trees go whole,
    through `to_workload`."""
    objs = load(manifests)
    name_objects(objs)
    out = Refusals("the manifests")
    composite = [o for o in objs if o.get("kind") == "CompositePodGroup"]
    if composite:
        raise ManifestError([f"{where(composite[0])}: a tree is submitted whole: use to_workload (PodGroup "
                             "objects are flat)"])
    workloads = [o for o in objs if o.get("kind") == "Workload"]
    if len(workloads) != 1:
        raise ManifestError([f"the manifests give {len(workloads)} Workloads; to_objects takes exactly one"])
    wl = workloads[0]
    name = wl["metadata"]["name"]
    ns = str(wl["metadata"].get("namespace") or namespace or "default")
    spec = out.get_map(wl, "spec", "")
    templates, composites = templates_of(spec, out)
    if composites:
        raise ManifestError([f"{where(wl)}: spec.compositePodGroupTemplates: a tree is submitted whole: use "
                             "to_workload"])
    body: Obj = {"name": name, "podGroupTemplates": [_template(t, f"{where(wl)}: spec.podGroupTemplates[{i}]", out)
                                                     for i, t in enumerate(templates.values())]}
    if claims := claim_entries(spec.get("resourceClaims"), f"{where(wl)}: spec.resourceClaims", out):
        body["resourceClaims"] = claims  # workload claims, shared by every PodGroup (KEP-5729)
    prio = Priority(out)
    prio.add(spec, f"{where(wl)}: spec")
    prio.apply(body)
    groups = [o for o in objs if o.get("kind") == "PodGroup" and workload_ref(as_map(o.get("spec")))[0] == name]
    members: dict[str, list[tuple[str, Obj]]] = {g["metadata"]["name"]: [] for g in groups}
    for pod in (o for o in objs if o.get("kind") == "Pod"):
        pspec = out.get_map(pod, "spec", "")
        group = out.get_map(pspec, "schedulingGroup", "spec").get("podGroupName")
        if group in members:
            members[group].append((pod["metadata"]["name"], pod_shape(pspec, f"{where(pod)}: spec", out)))
        else:
            out.add(f"{where(pod)}: spec.schedulingGroup.podGroupName", f"names no PodGroup of Workload {name}")
    for o in objs:
        if o.get("kind") not in _KINDS:
            out.add(where(o), f"cannot go with to_objects (it takes {', '.join(_KINDS)})")
    bodies = [_podgroup(g, members[g["metadata"]["name"]], out) for g in groups]
    claim_templates = {o["metadata"]["name"]: o for o in objs if o.get("kind") == "ResourceClaimTemplate"}
    used = used_templates(body) | set().union(*(used_templates(b) for b in bodies))
    for missing in sorted(used - set(claim_templates)):
        out.add("resourceClaimTemplateName", f"no ResourceClaimTemplate {missing!r} among the manifests")
    if used & set(claim_templates):
        body["resourceClaimTemplates"] = [claim_template(claim_templates[n], out) for n in sorted(used & set(claim_templates))]
    out.raise_any()
    return ns, body, bodies
