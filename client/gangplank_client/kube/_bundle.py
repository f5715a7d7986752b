"""scheduling.k8s.io objects: a Workload with its PodGroups (v1beta1, v1alpha2), CompositePodGroups
(v1alpha3) and the Pods that name their group; ResourceClaimTemplates as `resourceClaimTemplates`."""
from __future__ import annotations

from typing import Any

from gangplank_client.kube._convert import (
    Context,
    constraints,
    entries_of,
    group_fields,
    instance_spec,
    templates_of,
    workload_ref,
)
from gangplank_client.kube._pods import pod_shape
from gangplank_client.kube._read import Obj, Refusals, as_map


def where(obj: Obj) -> str:
    meta = as_map(obj.get("metadata"))
    return f"{obj.get('kind')} {meta.get('name') or '?'}"


def _instances(objs: list[Obj], kind: str, templates: dict[str, Obj]) -> dict[str, tuple[Obj, str]]:
    """{name: (spec with the template's fields as defaults, path)}; the templates themselves when no
    object of that kind is given (one instance each, named after its template)."""
    given = [o for o in objs if o.get("kind") == kind]
    if not given:
        return {n: ({**t, "parentCompositePodGroupName": t["_parent"]}, f"Workload spec template {n}")
                for n, t in templates.items()}
    return {o["metadata"]["name"]: (instance_spec(o, templates), f"{where(o)}: spec") for o in given}


def belongs(obj: Obj, workload: str) -> bool:
    spec = as_map(obj.get("spec"))
    ref = workload_ref(spec)[0]
    return ref is None or ref == workload


def bundle(wl: Obj, objs: list[Obj], ctx: Context) -> Obj:
    """The Workload `wl` with its objects among `objs` (PodGroups and CompositePodGroups naming it,
    the Pods naming those)."""
    out, prio = ctx.out, ctx.prio
    name = wl["metadata"]["name"]
    group_templates, cpg_templates = templates_of(out.get_map(wl, "spec", ""), out)
    mine = [o for o in objs if o.get("kind") in ("PodGroup", "CompositePodGroup") and belongs(o, name)]
    groups = _instances(mine, "PodGroup", group_templates)
    cpgs = _instances(mine, "CompositePodGroup", cpg_templates)
    members: dict[str, list[tuple[str, Obj]]] = {g: [] for g in groups}
    for pod in (o for o in objs if o.get("kind") == "Pod"):
        spec = out.get_map(pod, "spec", "")
        group = out.get_map(spec, "schedulingGroup", "spec").get("podGroupName")
        if group not in members:
            continue
        prio.add(spec, f"{where(pod)}: spec")
        members[group].append((pod["metadata"]["name"], pod_shape(spec, f"{where(pod)}: spec", out)))
    if not any(members.values()):
        out.add("spec", f"Workload {name} has no pods: no Pod, Job, JobSet or LeaderWorkerSet names its pod groups, "
                "so its pod shapes are unknown")
        return {"name": name, "podGroups": []}
    children: dict[str | None, tuple[list[Obj], list[Obj]]] = {None: ([], []), **{c: ([], []) for c in cpgs}}
    for gname, (spec, path) in groups.items():
        prio.add(spec, path)
        if not members[gname]:
            out.add(path, f"no Pod names pod group {gname!r} in spec.schedulingGroup.podGroupName")
        policy, extra = group_fields(spec, path, out, pods=None, default_gang=False)
        children.setdefault(spec.get("parentCompositePodGroupName"), ([], []))[0].append(
            {"name": gname, "schedulingPolicy": policy, **extra, "pods": entries_of(members[gname])})
    for cname, (spec, path) in cpgs.items():
        prio.add(spec, path)
        node = {"name": cname, "schedulingPolicy": spec.get("schedulingPolicy") or {"basic": {}},
                **constraints(spec, path, out)}
        children.setdefault(spec.get("parentCompositePodGroupName"), ([], []))[1].append(node)
    for node in (n for _, kids in children.values() for n in kids):  # attach each composite's children
        pod_groups, composites = children.get(node["name"], ([], []))
        node.update({k: v for k, v in (("podGroups", pod_groups), ("compositePodGroups", composites)) if v})
    flat, roots = children[None]
    for parent in sorted({c for c in children if c is not None} - set(cpgs)):
        out.add("parentCompositePodGroupName", f"{parent!r} is no CompositePodGroup of Workload {name}")
    if flat and roots:
        out.add("PodGroup", "pod groups outside every composite pod group cannot sit next to composite ones")
    return {"name": name, **({"compositePodGroups": roots} if roots else {"podGroups": flat})}


_DEVICE_REQUEST = {"name", "exactly"}
_EXACT = {"deviceClassName", "allocationMode", "count", "selectors"}
_CONSTRAINT = {"requests", "matchAttribute"}


def claim_template(obj: Obj, out: Refusals) -> Obj:
    """A resource.k8s.io ResourceClaimTemplate as a `resourceClaimTemplates` entry (v1beta1's flat
    requests read as v1's `exactly`); a device field Gangplank does not know is refused."""
    at = f"{where(obj)}: spec.spec.devices"
    devices = out.get_map(out.get_map(out.get_map(obj, "spec", ""), "spec", "spec"), "devices", "spec.spec")
    for key in set(devices) - {"requests", "constraints"}:
        out.add(f"{at}.{key}", "cannot be honoured")
    requests = []
    for i, r in enumerate(out.get_maps(devices, "requests", at)):
        if "exactly" not in r and "deviceClassName" in r:
            r = {"name": r.pop("name", None), "exactly": r}
        for key in set(r) - _DEVICE_REQUEST:
            out.add(f"{at}.requests[{i}].{key}", "cannot be honoured")
        for key in set(r.get("exactly") or {}) - _EXACT:
            out.add(f"{at}.requests[{i}].exactly.{key}", "cannot be honoured")
        requests.append({k: v for k, v in r.items() if k in _DEVICE_REQUEST})
    constraints_ = out.get_maps(devices, "constraints", at)
    for i, c in enumerate(constraints_):
        for key in set(c) - _CONSTRAINT:
            out.add(f"{at}.constraints[{i}].{key}", "cannot be honoured")
    spec: Obj = {"devices": {"requests": [{**r, "exactly": {k: v for k, v in (r.get("exactly") or {}).items()
                                                             if k in _EXACT}} for r in requests]}}
    if constraints_:
        spec["devices"]["constraints"] = [{k: v for k, v in c.items() if k in _CONSTRAINT} for c in constraints_]
    return {"name": obj["metadata"]["name"], "spec": spec}


def used_templates(body: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(body, dict):
        if "resourceClaimTemplateName" in body:
            found.add(body["resourceClaimTemplateName"])
        for v in body.values():
            found |= used_templates(v)
    elif isinstance(body, list):
        for v in body:
            found |= used_templates(v)
    return found
