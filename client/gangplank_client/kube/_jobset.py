"""JobSet (jobset.x-k8s.io/v1alpha2): a tree of its replicated Jobs, cut into stages by
`dependsOn` and `startupPolicyOrder: InOrder` (shared/spec/client.md, *Start order*)."""
from __future__ import annotations

from gangplank_client.kube._convert import (
    JOBSET_TOPOLOGY,
    KUEUE_PREFERRED,
    KUEUE_REQUIRED,
    Context,
    group_fields,
    job_group,
    job_pods,
    pod_group_of,
    pod_template,
)
from gangplank_client.kube._pods import pod_shape
from gangplank_client.kube._read import Obj, Refusals, annotations_of, as_map, origin

STORAGE = "storage is not modelled; a volume bound to a zone is not enforced"
Waits = list[tuple[str, str]]  # (replicated job, Ready | Complete)


def replicated_jobs(obj: Obj, out: Refusals) -> list[tuple[int, str, Obj]]:
    spec = out.get_map(obj, "spec", "", required=True)
    found = []
    for i, rj in enumerate(out.get_maps(spec, "replicatedJobs", "spec", required=bool(spec))):
        name = out.get_str(rj, "name", f"spec.replicatedJobs[{i}]", required=True)
        if name is not None:
            found.append((i, name, rj))
    if spec and not found and not out.items:
        out.add("spec.replicatedJobs", "Required value: a JobSet needs at least one replicated job")
    return found


def stages(obj: Obj, rjs: list[tuple[int, str, Obj]], out: Refusals) -> list[tuple[list[int], Waits]]:
    """[(indices of the replicated jobs of the stage, what it waits for)], the first stage first."""
    spec = obj.get("spec") or {}
    policy = out.get_map(spec, "startupPolicy", "spec")
    in_order = policy.get("startupPolicyOrder") == "InOrder"
    earlier: list[str] = []
    first: list[int] = []
    later: list[tuple[list[int], Waits]] = []
    for n, (i, name, rj) in enumerate(rjs):
        waits: Waits = []
        for j, dep in enumerate(out.get_maps(rj, "dependsOn", f"spec.replicatedJobs[{i}]")):
            where = f"spec.replicatedJobs[{i}].dependsOn[{j}]"
            target = out.get_str(dep, "name", where, required=True)
            status = out.get_str(dep, "status", where, required=True)
            if target is not None and target not in earlier:
                out.add(f"{where}.name", f"Invalid value: {target!r}: must name an earlier replicated job")
            elif status is not None and status not in ("Ready", "Complete"):
                out.add(f"{where}.status", f"Unsupported value: {status!r}: supported values: \"Ready\", \"Complete\"")
            elif target is not None and status is not None:
                waits.append((target, status))
        if not waits and in_order and n > 0:
            waits = [(rjs[n - 1][1], "Ready")]
        earlier.append(name)
        if waits:
            later.append(([n], waits))
        else:
            first.append(n)
    return [(first, []), *later] if first else later


def _exclusive_key(obj: Obj, rj: Obj, path: str) -> tuple[str | None, str]:
    """The exclusive topology of a replicated job (its template's annotation, else the JobSet's), and
    where it is written."""
    own: str | None = annotations_of(rj.get("template") or {}).get(JOBSET_TOPOLOGY)
    if own:
        return own, f"{path}.template.metadata.annotations[{JOBSET_TOPOLOGY}]"
    return annotations_of(obj).get(JOBSET_TOPOLOGY), f"metadata.annotations[{JOBSET_TOPOLOGY}]"


def body(name: str, obj: Obj, rjs: list[tuple[int, str, Obj]], ctx: Context) -> Obj:
    """The workload of some replicated jobs of a JobSet: a root CPG gang of all its children, or
    flat pod groups when every Job's pods join PodGroup objects."""
    out = ctx.out
    groups: list[Obj] = []
    cpgs: list[Obj] = []
    joined: dict[str, Obj] = {}
    for i, rj_name, rj in rjs:
        path = f"spec.replicatedJobs[{i}]"
        replicas = out.get_int(rj, "replicas", path, 1)
        template = out.get_map(rj, "template", path, required=True)
        job_spec = out.get_map(template, "spec", f"{path}.template", required=bool(template))
        if not replicas or not job_spec:
            continue
        jpath = f"{path}.template.spec"
        _, pod_spec = pod_template(job_spec, jpath, Refusals())
        pg = pod_group_of(pod_spec, f"{jpath}.template.spec", ctx) if pod_spec else None
        if pg is not None:
            pg_name, pg_spec, pg_path = pg
            pods = job_pods(job_spec, jpath, out)
            ctx.prio.add(pod_spec, f"{jpath}.template.spec")
            shape = pod_shape(pod_spec, f"{jpath}.template.spec", out)
            if pg_name not in joined:
                ctx.prio.add(pg_spec, pg_path)
                policy, extra = group_fields(pg_spec, pg_path, out, pods=None, default_gang=False)
                joined[pg_name] = origin({"name": pg_name, "schedulingPolicy": policy, **extra, "pods": []}, pg_path)
            joined[pg_name]["pods"].append(origin({"name": rj_name, "count": replicas * pods, **shape},
                                                  f"{jpath}.template.spec", {"count": f"{path}.replicas"}))
            continue
        group = job_group(rj_name, job_spec, jpath, ctx, entry=rj_name, default_gang=True)
        key, key_path = _exclusive_key(obj, rj, path)
        if key and "topology" not in group:
            group["topology"] = {"key": key, "exclusive": True}
            origin(group, None, {"topology": key_path})
        entry = _podset(group, job_spec, replicas, path)
        (cpgs if "podGroups" in entry or "compositePodGroups" in entry else groups).append(entry)
    if not groups and not cpgs:
        return {**origin({"name": name}, "metadata", {"name": "metadata.name"}), "podGroups": list(joined.values())}
    groups += list(joined.values())
    children = sum(c.get("count", 1) for c in groups + cpgs)
    root: Obj = origin({"name": name, "schedulingPolicy": {"gang": {"minGroupCount": max(children, 1)}}},
                       "spec.replicatedJobs")
    root.update({k: v for k, v in (("podGroups", groups), ("compositePodGroups", cpgs)) if v})
    return {**origin({"name": name}, "metadata", {"name": "metadata.name"}), "compositePodGroups": [root]}


def _podset(group: Obj, job_spec: Obj, replicas: int, path: str) -> Obj:
    """The tree entry of a replicated job's Jobs (`count: replicas`). Kueue's pod set of a replicated
    job is all its Jobs' pods: with several replicas, its required (preferred) topology holds them
    together in a CPG of their own, named after the replicated job."""
    notes = annotations_of(job_spec.get("template") or {})
    key = notes.get(KUEUE_REQUIRED) or notes.get(KUEUE_PREFERRED)
    counted = origin({**group, "count": replicas}, None, {"count": f"{path}.replicas"})
    if replicas == 1 or not key or group.get("topology", {}).get("exclusive"):
        return counted
    topology = counted.pop("topology", None)
    kind = "compositePodGroups" if "podGroups" in group else "podGroups"
    outer: Obj = origin({"name": group["name"], "schedulingPolicy": {"gang": {"minGroupCount": replicas}}}, path,
                        {"schedulingPolicy": f"{path}.replicas",
                         "topology": group.get("_from", {}).get("topology", path)})
    if topology:
        outer["topology"] = topology
    outer[kind] = [counted]
    return outer


def jobset(obj: Obj, ctx: Context) -> list[tuple[Obj, list[tuple[str, list[str], str]]]]:
    """[(body, [(workload it waits for, its replicated jobs, Ready | Complete)])]: the first stage first."""
    name = obj["metadata"]["name"]
    out = ctx.out
    spec = as_map(obj.get("spec"))
    for i, _ in enumerate(out.get_maps(spec, "volumeClaimPolicies", "spec")):
        out.warn(f"spec.volumeClaimPolicies[{i}]", STORAGE)
    rjs = replicated_jobs(obj, out)
    plan = stages(obj, rjs, out)
    holder: dict[str, str] = {}
    result: list[tuple[Obj, list[tuple[str, list[str], str]]]] = []
    for n, (indices, waits) in enumerate(plan):
        chosen = [rjs[k] for k in indices]
        stage_name = name if n == 0 and not waits else f"{name}-{chosen[0][1]}"
        for _, rj_name, _ in chosen:
            holder[rj_name] = stage_name
        grouped: dict[tuple[str, str], list[str]] = {}
        for target, status in waits:
            grouped.setdefault((holder.get(target, name), status), []).append(target)
        result.append((body(stage_name, obj, chosen, ctx),
                       [(wl, targets, status) for (wl, status), targets in grouped.items()]))
    return result

