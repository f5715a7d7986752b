"""The converters of Job, LeaderWorkerSet and scheduling.k8s.io objects, and what they share with
JobSet's (`kube/_jobset.py`): pod groups from Job specs, PodGroup objects, Kueue's annotations.
The mapping tables are in docs/client.md."""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gangplank_client.kube._pods import Priority, claim_entries, pod_shape
from gangplank_client.kube._read import Obj, Refusals, annotations_of, as_map, origin

JOBSET_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
LWS_TOPOLOGY = "leaderworkerset.sigs.k8s.io/exclusive-topology"
LWS_SUBGROUP_TOPOLOGY = "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology"
KUEUE = "kueue.x-k8s.io/"
KUEUE_REQUIRED = KUEUE + "podset-required-topology"
KUEUE_PREFERRED = KUEUE + "podset-preferred-topology"
KUEUE_SLICE_REQUIRED = KUEUE + "podset-slice-required-topology"
KUEUE_SLICE_SIZE = KUEUE + "podset-slice-size"
KUEUE_GROUP = KUEUE + "podset-group-name"


@dataclass
class Context:
    """What one submission's conversion reads besides its own object: the PodGroup objects of the
    input (by name, each with its Workload template's fields under its own), and what it used."""
    out: Refusals
    prio: Priority
    pod_groups: dict[str, tuple[Obj, str]] = field(default_factory=dict)
    used_pod_groups: set[str] = field(default_factory=set)


def disruption(mode: Any, path: str, out: Refusals) -> str | None:
    """`Single`/`All`, the union `{single: {}}`/`{all: {}}`, and v1alpha2's `Pod`/`PodGroup`."""
    if mode is None:
        return None
    if isinstance(mode, str):
        value = {"Pod": "Single", "PodGroup": "All", "Single": "Single", "All": "All"}.get(mode)
    elif isinstance(mode, Mapping):
        value = "All" if "all" in mode else "Single" if "single" in mode else None
    else:
        value = None
    if value is None:
        out.add(path, f"Unsupported value: {mode!r}: supported values: \"Single\", \"All\" (v1alpha2: \"Pod\", "
                "\"PodGroup\")")
    return value


def constraints(spec: Obj, path: str, out: Refusals) -> dict[str, Any]:
    """Topology (`key`, or an earlier `level`) and disruption mode of a PodGroup, CompositePodGroup or
    Job `spec.scheduling`."""
    fields: dict[str, Any] = {}
    sc = out.get_map(spec, "schedulingConstraints", path)
    topology = out.get_maps(sc, "topology", f"{path}.schedulingConstraints")
    if len(topology) > 1:
        out.add(f"{path}.schedulingConstraints.topology[1]", "Gangplank honours one topology key per group")
    if topology:
        where = f"{path}.schedulingConstraints.topology[0]"
        key = out.get_str(topology[0], "key", where) or out.get_str(topology[0], "level", where)
        if key is None:
            out.add(f"{where}.key", "Required value")
        else:
            fields["topology"] = {"key": key}
    if (mode := disruption(spec.get("disruptionMode"), f"{path}.disruptionMode", out)) is not None:
        fields["disruptionMode"] = mode
    return fields


def group_fields(spec: Obj, path: str, out: Refusals, *, pods: int | None, default_gang: bool) -> tuple[Obj, Obj]:
    """(schedulingPolicy, other fields) of a PodGroup-like spec. A gang without `minCount` takes
    `pods`; without a policy the group is a gang of `pods` when `default_gang`, else basic."""
    policy = out.get_map(spec, "schedulingPolicy", path)
    extra = constraints(spec, path, out)
    if claims := claim_entries(spec.get("resourceClaims"), f"{path}.resourceClaims", out):
        extra["resourceClaims"] = claims
    if "gang" in policy:
        gang = out.get_map(policy, "gang", f"{path}.schedulingPolicy")
        minimum = out.get_int(gang, "minCount", f"{path}.schedulingPolicy.gang", pods, minimum=1)
        if minimum is None:
            out.add(f"{path}.schedulingPolicy.gang.minCount", "Required value")
        return {"gang": {"minCount": minimum or 1}}, extra
    if "basic" in policy or not default_gang or pods is None:
        return {"basic": {}}, extra
    return {"gang": {"minCount": pods}}, extra


def job_pods(job_spec: Obj, path: str, out: Refusals) -> int:
    """The pods a Job runs at once: parallelism (default 1), at most its completions."""
    parallelism = out.get_int(job_spec, "parallelism", path, 1)
    completions = out.get_int(job_spec, "completions", path)
    pods = min(parallelism, completions) if parallelism is not None and completions is not None else parallelism
    if pods is not None and pods < 1:
        out.add(f"{path}.parallelism", "a Job with no pods to run (parallelism 0) has nothing to place")
    return max(pods or 1, 1)


def pod_template(job_spec: Obj, path: str, out: Refusals) -> tuple[Obj, Obj]:
    """(the template, its pod spec) of a Job spec; both are required, and containers in the spec."""
    template = out.get_map(job_spec, "template", path, required=True)
    spec = out.get_map(template, "spec", f"{path}.template", required=bool(template))
    if spec:
        out.get_list(spec, "containers", f"{path}.template.spec", required=True)
    return template, spec


def pod_group_of(spec: Obj, path: str, ctx: Context) -> tuple[str, Obj, str] | None:
    """The PodGroup object the pod template's `spec.schedulingGroup.podGroupName` names, if any."""
    sg = ctx.out.get_map(spec, "schedulingGroup", path)
    name = ctx.out.get_str(sg, "podGroupName", f"{path}.schedulingGroup")
    if name is None:
        return None
    if name not in ctx.pod_groups:
        ctx.out.add(f"{path}.schedulingGroup.podGroupName", f"names PodGroup {name!r}, which the input does not "
                    "give (Kubernetes holds such pods until the PodGroup exists)")
        return None
    ctx.used_pod_groups.add(name)
    pg_spec, pg_path = ctx.pod_groups[name]
    return name, pg_spec, pg_path


def apply_kueue(group: Obj, template: Obj, path: str, out: Refusals) -> Obj:
    """Kueue's topology annotations on the pod template: a required or preferred topology, or slices
    (the group becomes a CPG of gangs of N pods each). The group is returned changed or replaced."""
    notes = annotations_of(template)
    where = f"{path}.metadata.annotations"
    required, preferred = notes.get(KUEUE_REQUIRED), notes.get(KUEUE_PREFERRED)
    if required and preferred:
        out.add(f"{where}[{KUEUE_PREFERRED}]", f"cannot be given with {KUEUE_REQUIRED}")
    topology = {"key": required} if required else {"key": preferred, "mode": "Preferred"} if preferred else None
    noted = f"{where}[{KUEUE_REQUIRED if required else KUEUE_PREFERRED}]"
    slice_key, slice_size = notes.get(KUEUE_SLICE_REQUIRED), notes.get(KUEUE_SLICE_SIZE)
    if not slice_key:
        if slice_size:
            out.add(f"{where}[{KUEUE_SLICE_SIZE}]", f"needs {KUEUE_SLICE_REQUIRED}")
        if topology and "topology" not in group:
            group["topology"] = topology
            origin(group, None, {"topology": noted})
        return group
    entries = group["pods"]
    pods = sum(e["count"] for e in entries)
    size = int(slice_size) if slice_size and slice_size.isdigit() and int(slice_size) > 0 else None
    if size is None:
        out.add(f"{where}[{KUEUE_SLICE_SIZE}]", f"Invalid value: {slice_size!r}: a positive integer is required "
                f"with {KUEUE_SLICE_REQUIRED}")
        return group
    if pods % size or len(entries) != 1:
        out.add(f"{where}[{KUEUE_SLICE_SIZE}]", f"Invalid value: {size}: the pod set's {pods} pods do not divide "
                "into slices of that size")
        return group
    extra = {k: v for k, v in group.items() if k in ("disruptionMode", "resourceClaims")}
    slices = {"name": "slice", "count": pods // size, "schedulingPolicy": {"gang": {"minCount": size}},
              "topology": {"key": slice_key}, **extra, "pods": [{**entries[0], "count": size}]}
    origin(slices, f"{where}[{KUEUE_SLICE_SIZE}]", {"topology": f"{where}[{KUEUE_SLICE_REQUIRED}]"})
    cpg: Obj = {"name": group["name"], "schedulingPolicy": {"gang": {"minGroupCount": pods // size}}}
    origin(cpg, group.get("_from", {}).get("", path), {"topology": noted})
    if topology or "topology" in group:
        cpg["topology"] = group.get("topology") or topology
    if "disruptionMode" in group:
        cpg["disruptionMode"] = group["disruptionMode"]
    cpg["podGroups"] = [slices]
    return cpg


def job_group(name: str, job_spec: Obj, path: str, ctx: Context, *, entry: str, default_gang: bool) -> Obj:
    """The pod group of one Job: `parallelism` pods, KEP-5547's `spec.scheduling`, or the PodGroup
    its pods join; Kueue's annotations may make it a CPG (`podGroups` key present) of slices."""
    out = ctx.out
    pods = job_pods(job_spec, path, out)
    template, spec = pod_template(job_spec, path, out)
    ctx.prio.add(spec, f"{path}.template.spec")
    shape = pod_shape(spec, f"{path}.template.spec", out)
    sched = out.get_map(job_spec, "scheduling", path)
    policy, extra = group_fields(sched, f"{path}.scheduling", out, pods=pods, default_gang=default_gang)
    pod_entry = origin({"name": entry, "count": pods, **shape}, f"{path}.template.spec",
                       {"count": f"{path}.parallelism", "requests": f"{path}.template.spec.containers"})
    group = origin({"name": name, "schedulingPolicy": policy, **extra, "pods": [pod_entry]}, path, {
        "schedulingPolicy": f"{path}.scheduling.schedulingPolicy" if "schedulingPolicy" in sched
        else f"{path}.parallelism",
        "topology": f"{path}.scheduling.schedulingConstraints.topology[0]",
        **{k: f"{path}.scheduling.{k}" for k in ("disruptionMode", "resourceClaims")}})
    return apply_kueue(group, template, f"{path}.template", out)


def job(obj: Obj, ctx: Context) -> Obj:
    """batch/v1 Job: one pod group `job` (or the PodGroup its pods join, named after it)."""
    name = obj["metadata"]["name"]
    spec = ctx.out.get_map(obj, "spec", "", required=True)
    template, pod_spec = pod_template(spec, "spec", Refusals())  # read once more, quietly, for its PodGroup
    joined = pod_group_of(pod_spec, "spec.template.spec", ctx) if pod_spec else None
    group = job_group("job", spec, "spec", ctx, entry=name, default_gang=False)
    if joined is not None:
        pg_name, pg_spec, pg_path = joined
        ctx.prio.add(pg_spec, pg_path)
        policy, extra = group_fields(pg_spec, pg_path, ctx.out, pods=None, default_gang=False)
        group = origin({"name": pg_name, "schedulingPolicy": policy, **extra, "pods": group.get("pods", [])}, pg_path)
    body = origin({"name": name}, "metadata", {"name": "metadata.name"})
    return {**body, ("compositePodGroups" if "podGroups" in group else "podGroups"): [group]}


# -- LeaderWorkerSet --------------------------------------------------------------------------------

def leaderworkerset(obj: Obj, ctx: Context) -> Obj:
    out = ctx.out
    name = obj["metadata"]["name"]
    notes = annotations_of(obj)
    if LWS_SUBGROUP_TOPOLOGY in notes:
        out.add(f"metadata.annotations[{LWS_SUBGROUP_TOPOLOGY}]", "sub-group topology cannot be honoured")
    spec = out.get_map(obj, "spec", "", required=True)
    lwt = out.get_map(spec, "leaderWorkerTemplate", "spec", required=bool(spec))
    size = out.get_int(lwt, "size", "spec.leaderWorkerTemplate", 1, minimum=1) or 1
    worker_t = out.get_map(lwt, "workerTemplate", "spec.leaderWorkerTemplate", required=bool(lwt))
    worker = out.get_map(worker_t, "spec", "spec.leaderWorkerTemplate.workerTemplate", required=bool(worker_t))
    leader_t = out.get_map(lwt, "leaderTemplate", "spec.leaderWorkerTemplate") or worker_t
    leader_path = "spec.leaderWorkerTemplate.leaderTemplate" if "leaderTemplate" in lwt \
        else "spec.leaderWorkerTemplate.workerTemplate"
    leader = out.get_map(leader_t, "spec", leader_path) or worker
    for where, holder in (("spec.leaderWorkerTemplate", lwt), ("spec", spec)):  # the API's place, and the spec's
        for i, _ in enumerate(out.get_maps(holder, "volumeClaimTemplates", where)):
            out.warn(f"{where}.volumeClaimTemplates[{i}]", "storage is not modelled; a volume bound to a zone is "
                     "not enforced")
    ctx.prio.add(leader, f"{leader_path}.spec")
    leader_entry = origin({"name": "leader", "count": 1, **pod_shape(leader, f"{leader_path}.spec", out)},
                          f"{leader_path}.spec", {"requests": f"{leader_path}.spec.containers"})
    groups = [origin({"name": "leader", "schedulingPolicy": {"gang": {"minCount": 1}}, "disruptionMode": "All",
                      "pods": [leader_entry]}, leader_path)]
    templates = [(leader_t, leader_path)]
    if size > 1:
        path = "spec.leaderWorkerTemplate.workerTemplate.spec"
        ctx.prio.add(worker, path)
        size_path = "spec.leaderWorkerTemplate.size"
        worker_entry = origin({"name": "worker", "count": size - 1, **pod_shape(worker, path, out)}, path,
                              {"count": size_path, "requests": f"{path}.containers"})
        groups.append(origin({"name": "workers", "schedulingPolicy": {"gang": {"minCount": size - 1}},
                              "disruptionMode": "All", "pods": [worker_entry]},
                             "spec.leaderWorkerTemplate.workerTemplate", {"schedulingPolicy": size_path}))
        templates.append((worker_t, "spec.leaderWorkerTemplate.workerTemplate"))
    copy: Obj = {"name": name, "count": out.get_int(spec, "replicas", "spec", 1, minimum=1) or 1,
                 "schedulingPolicy": {"gang": {"minGroupCount": len(groups)}}, "disruptionMode": "All"}
    origin(copy, "spec", {"count": "spec.replicas", "schedulingPolicy": "spec.leaderWorkerTemplate.size"})
    if notes.get(LWS_TOPOLOGY):
        copy["topology"] = {"key": notes[LWS_TOPOLOGY], "exclusive": True}
        origin(copy, None, {"topology": f"metadata.annotations[{LWS_TOPOLOGY}]"})
    _kueue_lws(copy, groups, templates, out)
    copy["podGroups"] = groups
    return {**origin({"name": name}, "metadata", {"name": "metadata.name"}), "compositePodGroups": [copy]}


def _kueue_lws(copy: Obj, groups: list[Obj], templates: list[tuple[Obj, str]], out: Refusals) -> None:
    """Kueue on an LWS: each template's annotations apply to its own group (a pod set each); leader
    and workers sharing `podset-group-name` also share the domain, so the copy (the CPG that holds
    both) gets that topology too."""
    notes = [annotations_of(t) for t, _ in templates]
    names = {n.get(KUEUE_GROUP) for n in notes}
    if len(templates) == 2 and len(names) == 1 and None not in names:
        keys = {n.get(KUEUE_REQUIRED) or n.get(KUEUE_PREFERRED) for n in notes} - {None}
        if len(keys) > 1:
            out.add(f"{templates[1][1]}.metadata.annotations[{KUEUE_REQUIRED}]",
                    "pod sets of one podset-group-name must name the same topology")
            return
        if keys and "topology" not in copy:
            key = keys.pop()
            required = any(n.get(KUEUE_REQUIRED) for n in notes)
            copy["topology"] = {"key": key} if required else {"key": key, "mode": "Preferred"}
            origin(copy, None, {"topology": f"{templates[0][1]}.metadata.annotations["
                                            f"{KUEUE_REQUIRED if required else KUEUE_PREFERRED}]"})
    for i, (template, path) in enumerate(templates):
        changed = apply_kueue(groups[i], template, path, out)
        if "podGroups" in changed:
            out.add(f"{path}.metadata.annotations[{KUEUE_SLICE_REQUIRED}]",
                    "slices of a LeaderWorkerSet's pod set cannot be honoured")
        else:
            groups[i] = changed


# -- scheduling.k8s.io Workload, PodGroup, CompositePodGroup, Pod -------------------------------

_NUMBERED = re.compile(r"^(?P<prefix>.+)-(?P<index>\d+)$")


def entries_of(pods: list[tuple[str, Obj]]) -> list[Obj]:
    """Pods `w-0`, `w-1`, … of one shape become one entry `w` with `count` (same names in Gangplank);
    any other pod an entry of its own (named after it: its Gangplank pod is `<name>-0`)."""
    entries: list[Obj] = []
    for pod_name, shape in pods:
        m = _NUMBERED.match(pod_name)
        last = entries[-1] if entries else None
        if m and last is not None and last.get("_prefix") == m["prefix"] and int(m["index"]) == last["count"] \
                and {k: v for k, v in last.items() if k not in ("name", "count", "_prefix")} == shape:
            last["count"] += 1
        elif m and int(m["index"]) == 0:
            entries.append({"name": m["prefix"], "count": 1, "_prefix": m["prefix"], **shape})
        else:
            entries.append({"name": pod_name, "count": 1, **shape})
    for e in entries:
        e.pop("_prefix", None)
    return entries


def workload_ref(spec: Obj) -> tuple[str | None, str | None]:
    """(workload name, template name) of a PodGroup or CompositePodGroup: v1beta1's `workloadRef` or
    v1alpha2's `podGroupTemplateRef.workload`."""
    ref = spec.get("workloadRef")
    if isinstance(ref, Mapping):
        return ref.get("workloadName"), ref.get("templateName")
    old = spec.get("podGroupTemplateRef")
    old = old.get("workload") if isinstance(old, Mapping) else None
    if isinstance(old, Mapping):
        return old.get("workloadName"), old.get("podGroupTemplateName") or old.get("compositePodGroupTemplateName")
    return None, None


def templates_of(wl_spec: Obj, out: Refusals) -> tuple[dict[str, Obj], dict[str, Obj]]:
    """(pod group templates, composite templates) of a Workload by name, nested ones included, each
    with `_parent` naming the composite template that holds it."""
    groups: dict[str, Obj] = {}
    cpgs: dict[str, Obj] = {}

    def walk(node: Obj, parent: str | None, path: str) -> None:
        for i, g in enumerate(out.get_maps(node, "podGroupTemplates", path)):
            if (name := out.get_str(g, "name", f"{path}.podGroupTemplates[{i}]", required=True)) is not None:
                groups[name] = {**g, "_parent": parent}
        for i, c in enumerate(out.get_maps(node, "compositePodGroupTemplates", path)):
            where = f"{path}.compositePodGroupTemplates[{i}]"
            if (name := out.get_str(c, "name", where, required=True)) is not None:
                cpgs[name] = {**c, "_parent": parent}
                walk(c, name, where)
    walk(wl_spec, None, "spec")
    return groups, cpgs


def instance_spec(obj: Obj, templates: Mapping[str, Obj]) -> Obj:
    """A PodGroup's (CompositePodGroup's) spec over its template's fields."""
    spec = as_map(obj.get("spec"))
    template = templates.get(workload_ref(spec)[1] or "", {})
    return {**{k: v for k, v in template.items() if k != "name"}, **spec}
