"""The converters of each kind; the mapping tables are in docs/client.md."""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import yaml

from gangplank_client.builder import label_error, validate
from gangplank_client.kube._pods import Priority, Refusals, claim_entries, pod_shape

JOBSET_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
LWS_TOPOLOGY = "leaderworkerset.sigs.k8s.io/exclusive-topology"
LWS_SUBGROUP_TOPOLOGY = "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology"
Manifests = str | bytes | Mapping[str, Any] | Iterable[Mapping[str, Any]]
Obj = dict[str, Any]


def _strip(value: Any) -> Any:
    """Without nulls: Kubernetes reads a null field as an absent one."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def load(manifests: Manifests) -> list[Obj]:
    """The objects of YAML/JSON text, a mapping or a list of mappings (`List` kinds unpacked)."""
    if isinstance(manifests, bytes):
        manifests = manifests.decode("utf-8")
    if isinstance(manifests, str):
        try:
            docs: list[Any] = [d for d in yaml.safe_load_all(manifests) if d is not None]
        except yaml.YAMLError as exc:
            raise ValueError(f"the manifests are not valid YAML or JSON: {exc}") from exc
    elif isinstance(manifests, Mapping):
        docs = [manifests]
    else:
        docs = list(manifests)
    out: list[Obj] = []
    for doc in docs:
        if not isinstance(doc, Mapping):
            raise ValueError(f"a manifest must be an object, not {type(doc).__name__}")
        doc = _strip(json.loads(json.dumps(doc)))  # plain dicts and lists, whatever the loader built
        if doc.get("kind", "").endswith("List") and isinstance(doc.get("items"), list):
            out.extend(load(doc["items"]))
        else:
            out.append(doc)
    return out


def _group_of(obj: Obj) -> str:
    return str(obj.get("apiVersion", "")).rpartition("/")[0]


def _where(obj: Obj) -> str:
    return f"{obj.get('kind')} {obj.get('metadata', {}).get('name', '?')}"


def _pods_of(job_spec: Obj) -> int:
    """The pods a Job runs at once: parallelism (default 1), at most its completions."""
    parallelism: int = job_spec.get("parallelism", 1)
    completions = job_spec.get("completions")
    return min(parallelism, completions) if isinstance(completions, int) else parallelism


def _disruption(mode: Any) -> str | None:
    """Kubernetes' union `{"all": {}}` / `{"single": {}}` (a plain string is read too)."""
    if isinstance(mode, str):
        return mode
    if isinstance(mode, Mapping):
        return "All" if "all" in mode else "Single" if "single" in mode else None
    return None


def _constraints(spec: Obj, path: str, out: Refusals) -> dict[str, Any]:
    """Topology and disruption mode of a PodGroup, CompositePodGroup or Job `spec.scheduling`."""
    fields: dict[str, Any] = {}
    topology = (spec.get("schedulingConstraints") or {}).get("topology") or []
    if len(topology) > 1:
        out.add(f"{path}.schedulingConstraints.topology[1]", "Gangplank honours one topology key per group")
    if topology:
        fields["topology"] = {"key": topology[0]["key"]}
    if (mode := _disruption(spec.get("disruptionMode"))) is not None:
        fields["disruptionMode"] = mode
    return fields


def _group(name: str, policy: Obj, entries: list[Obj], extra: Mapping[str, Any]) -> Obj:
    return {"name": name, "schedulingPolicy": policy, **extra, "pods": entries}


# -- batch/v1 Job ---------------------------------------------------------------------------------

def _job_group(name: str, job_spec: Obj, path: str, out: Refusals, prio: Priority, *, entry: str,
               default_gang: bool) -> Obj:
    """The pod group of one Job: `parallelism` pods, and KEP-5547's `spec.scheduling`."""
    pods = _pods_of(job_spec)
    if not isinstance(pods, int) or pods < 1:
        out.add(f"{path}.parallelism", "a Job with no pods to run has nothing to place")
        pods = 1
    template = (job_spec.get("template") or {}).get("spec") or {}
    prio.add(template, f"{path}.template.spec")
    shape = pod_shape(template, f"{path}.template.spec", out)
    sched = job_spec.get("scheduling") or {}
    policy = sched.get("schedulingPolicy") or {}
    extra = _constraints(sched, f"{path}.scheduling", out)
    if claims := claim_entries(sched.get("resourceClaims"), f"{path}.scheduling.resourceClaims", out):
        extra["resourceClaims"] = claims
    if "gang" in policy or (default_gang and "basic" not in policy):
        scheduling: Obj = {"gang": {"minCount": (policy.get("gang") or {}).get("minCount", pods)}}
    else:
        scheduling = {"basic": {}}
    return _group(name, scheduling, [{"name": entry, "count": pods, **shape}], extra)


def job(objs: list[Obj], out: Refusals, prio: Priority) -> Obj:
    j = objs[0]
    name = j["metadata"]["name"]
    group = _job_group("job", j.get("spec") or {}, "spec", out, prio, entry=name, default_gang=False)
    return {"name": name, "podGroups": [group]}


# -- JobSet -----------------------------------------------------------------------------------------

def jobset(objs: list[Obj], out: Refusals, prio: Priority) -> Obj:
    js = objs[0]
    name = js["metadata"]["name"]
    default_key = (js["metadata"].get("annotations") or {}).get(JOBSET_TOPOLOGY)
    groups, children = [], 0
    for i, rj in enumerate((js.get("spec") or {}).get("replicatedJobs") or ()):
        path = f"spec.replicatedJobs[{i}]"
        template = rj.get("template") or {}
        group = _job_group(rj["name"], template.get("spec") or {}, f"{path}.template.spec", out, prio,
                           entry=rj["name"], default_gang=True)
        key = ((template.get("metadata") or {}).get("annotations") or {}).get(JOBSET_TOPOLOGY, default_key)
        if key and "topology" not in group:
            group["topology"] = {"key": key}
        replicas = rj.get("replicas", 1)
        groups.append({"name": group.pop("name"), "count": replicas, **group})
        children += replicas if isinstance(replicas, int) else 1
    if not groups:
        out.add("spec.replicatedJobs", "a JobSet needs at least one replicated job")
    root = {"name": name, "schedulingPolicy": {"gang": {"minGroupCount": max(children, 1)}}, "podGroups": groups}
    return {"name": name, "compositePodGroups": [root]}


# -- LeaderWorkerSet --------------------------------------------------------------------------------

def leaderworkerset(objs: list[Obj], out: Refusals, prio: Priority) -> Obj:
    lws = objs[0]
    name = lws["metadata"]["name"]
    annotations = lws["metadata"].get("annotations") or {}
    if LWS_SUBGROUP_TOPOLOGY in annotations:
        out.add(f"metadata.annotations[{LWS_SUBGROUP_TOPOLOGY}]", "sub-group topology cannot be honoured")
    spec = lws.get("spec") or {}
    lwt = spec.get("leaderWorkerTemplate") or {}
    size = lwt.get("size", 1)
    worker = (lwt.get("workerTemplate") or {}).get("spec") or {}
    leader_path = "spec.leaderWorkerTemplate.leaderTemplate.spec" if "leaderTemplate" in lwt \
        else "spec.leaderWorkerTemplate.workerTemplate.spec"
    leader = (lwt.get("leaderTemplate") or {}).get("spec") or worker
    prio.add(leader, leader_path)
    groups = [_group("leader", {"gang": {"minCount": 1}}, [{"name": "leader", "count": 1,
                                                             **pod_shape(leader, leader_path, out)}],
                     {"disruptionMode": "All"})]
    if isinstance(size, int) and size > 1:
        path = "spec.leaderWorkerTemplate.workerTemplate.spec"
        prio.add(worker, path)
        groups.append(_group("workers", {"gang": {"minCount": size - 1}},
                             [{"name": "worker", "count": size - 1, **pod_shape(worker, path, out)}],
                             {"disruptionMode": "All"}))
    elif not isinstance(size, int) or size < 1:
        out.add("spec.leaderWorkerTemplate.size", "must be a positive integer")
    copy: Obj = {"name": name, "count": spec.get("replicas", 1),
                 "schedulingPolicy": {"gang": {"minGroupCount": len(groups)}}, "disruptionMode": "All"}
    if annotations.get(LWS_TOPOLOGY):
        copy["topology"] = {"key": annotations[LWS_TOPOLOGY]}
    copy["podGroups"] = groups
    return {"name": name, "compositePodGroups": [copy]}


# -- scheduling.k8s.io Workload, PodGroup, CompositePodGroup, Pod -------------------------------

_NUMBERED = re.compile(r"^(?P<prefix>.+)-(?P<index>\d+)$")


def _entries(pods: list[tuple[str, Obj]]) -> list[Obj]:
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


def _templates(wl_spec: Obj) -> tuple[dict[str, Obj], dict[str, Obj]]:
    """(pod group templates, composite templates) of a Workload by name, nested ones included, each
    with `_parent` naming the composite template that holds it."""
    groups: dict[str, Obj] = {}
    cpgs: dict[str, Obj] = {}

    def walk(node: Obj, parent: str | None) -> None:
        for g in node.get("podGroupTemplates") or ():
            groups[g["name"]] = {**g, "_parent": parent}
        for c in node.get("compositePodGroupTemplates") or ():
            cpgs[c["name"]] = {**c, "_parent": parent}
            walk(c, c["name"])
    walk(wl_spec, None)
    return groups, cpgs


def _instances(objs: list[Obj], kind: str, templates: dict[str, Obj]) -> dict[str, tuple[Obj, str]]:
    """{name: (spec with the template's fields as defaults, path)}; the templates themselves when no
    object of that kind is given (one instance each, named after its template)."""
    given = [o for o in objs if o.get("kind") == kind]
    if not given:
        return {n: ({**t, "parentCompositePodGroupName": t["_parent"]}, f"Workload spec template {n}")
                for n, t in templates.items()}
    out = {}
    for o in given:
        spec = o.get("spec") or {}
        template = templates.get((spec.get("workloadRef") or {}).get("templateName", ""), {})
        out[o["metadata"]["name"]] = ({**template, **spec}, f"{_where(o)}: spec")
    return out


def bundle(objs: list[Obj], out: Refusals, prio: Priority) -> Obj:
    wl = objs[0]
    name = wl["metadata"]["name"]
    group_templates, cpg_templates = _templates(wl.get("spec") or {})
    groups = _instances(objs, "PodGroup", group_templates)
    cpgs = _instances(objs, "CompositePodGroup", cpg_templates)
    members: dict[str, list[tuple[str, Obj]]] = {g: [] for g in groups}
    for pod in (o for o in objs if o.get("kind") == "Pod"):
        where, spec = _where(pod), pod.get("spec") or {}
        group = (spec.get("schedulingGroup") or {}).get("podGroupName")
        if group not in members:
            out.add(f"{where}: spec.schedulingGroup.podGroupName", f"names no PodGroup of Workload {name} ({group!r})")
            continue
        prio.add(spec, f"{where}: spec")
        members[group].append((pod["metadata"]["name"], pod_shape(spec, f"{where}: spec", out)))
    children: dict[str | None, tuple[list[Obj], list[Obj]]] = {None: ([], []), **{c: ([], []) for c in cpgs}}
    for gname, (spec, path) in groups.items():
        prio.add(spec, path)
        parent = spec.get("parentCompositePodGroupName")
        if not members[gname]:
            out.add(path, f"no Pod names pod group {gname!r} in spec.schedulingGroup.podGroupName")
        policy = spec.get("schedulingPolicy") or {"basic": {}}
        extra = _constraints(spec, path, out)
        if claims := claim_entries(spec.get("resourceClaims"), f"{path}.resourceClaims", out):
            extra["resourceClaims"] = claims
        children.setdefault(parent, ([], []))[0].append(_group(gname, dict(policy), _entries(members[gname]), extra))
    for cname, (spec, path) in cpgs.items():
        prio.add(spec, path)
        node = {"name": cname, "schedulingPolicy": spec.get("schedulingPolicy") or {"basic": {}},
                **_constraints(spec, path, out)}
        children.setdefault(spec.get("parentCompositePodGroupName"), ([], []))[1].append(node)
    for node in (n for _, kids in children.values() for n in kids):  # attach each composite's children
        pod_groups, composites = children.get(node["name"], ([], []))
        node.update({k: v for k, v in (("podGroups", pod_groups), ("compositePodGroups", composites)) if v})
    flat, roots = children[None]
    unknown = {c for c in children if c is not None} - set(cpgs)
    for parent in sorted(unknown):
        out.add("parentCompositePodGroupName", f"{parent!r} is no CompositePodGroup of Workload {name}")
    if flat and roots:
        out.add("PodGroup", "pod groups outside every composite pod group cannot sit next to composite ones")
    return {"name": name, **({"compositePodGroups": roots} if roots else {"podGroups": flat})}


# -- dispatch -------------------------------------------------------------------------------------

Converter = Callable[[list[Obj], Refusals, Priority], Obj]
KINDS: dict[tuple[str, str], Converter] = {
    ("batch", "Job"): job,
    ("jobset.x-k8s.io", "JobSet"): jobset,
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): leaderworkerset,
    ("scheduling.k8s.io", "Workload"): bundle,
}
_COMPANIONS = {("scheduling.k8s.io", "PodGroup"), ("scheduling.k8s.io", "CompositePodGroup"), ("", "Pod"),
               ("resource.k8s.io", "ResourceClaimTemplate")}
_DEVICE_REQUEST = {"name", "exactly"}
_EXACT = {"deviceClassName", "allocationMode", "count", "selectors"}
_CONSTRAINT = {"requests", "matchAttribute"}


def _claim_template(obj: Obj, out: Refusals) -> Obj:
    """A resource.k8s.io ResourceClaimTemplate as a `resourceClaimTemplates` entry (v1beta1's flat
    requests read as v1's `exactly`); a device field Gangplank does not know is refused."""
    where = f"{_where(obj)}: spec.spec.devices"
    devices = ((obj.get("spec") or {}).get("spec") or {}).get("devices") or {}
    for key in set(devices) - {"requests", "constraints"}:
        out.add(f"{where}.{key}", "cannot be honoured")
    requests = []
    for i, r in enumerate(devices.get("requests") or ()):
        r = dict(r)
        if "exactly" not in r and "deviceClassName" in r:
            r = {"name": r.pop("name", None), "exactly": r}
        for key in set(r) - _DEVICE_REQUEST:
            out.add(f"{where}.requests[{i}].{key}", "cannot be honoured")
        for key in set(r.get("exactly") or {}) - _EXACT:
            out.add(f"{where}.requests[{i}].exactly.{key}", "cannot be honoured")
        requests.append({k: v for k, v in r.items() if k in _DEVICE_REQUEST})
    for i, c in enumerate(devices.get("constraints") or ()):
        for key in set(c) - _CONSTRAINT:
            out.add(f"{where}.constraints[{i}].{key}", "cannot be honoured")
    spec: Obj = {"devices": {"requests": [{**r, "exactly": {k: v for k, v in r.get("exactly", {}).items()
                                                             if k in _EXACT}} for r in requests]}}
    if devices.get("constraints"):
        spec["devices"]["constraints"] = [{k: v for k, v in c.items() if k in _CONSTRAINT}
                                          for c in devices["constraints"]]
    return {"name": obj["metadata"]["name"], "spec": spec}


def _used_templates(body: Obj) -> set[str]:
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "resourceClaimTemplateName" in node:
                found.add(node["resourceClaimTemplateName"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(body)
    return found


def _namespace(objs: list[Obj], namespace: str | None) -> str:
    given = {o.get("metadata", {}).get("namespace") for o in objs} - {None}
    if len(given) > 1:
        raise ValueError(f"metadata.namespace: the manifests name several namespaces ({', '.join(sorted(given))})")
    if given and namespace is not None and given != {namespace}:
        raise ValueError(f"metadata.namespace: {given.pop()!r} does not match the namespace given ({namespace!r})")
    return given.pop() if given else namespace or "default"


def to_workload(manifests: Manifests, namespace: str | None = None) -> tuple[str, dict[str, Any]]:
    """(namespace, Gangplank workload body) for one job's manifests; ValueError naming every field
    that cannot be honoured. `namespace` is the default for objects that name none (as `kubectl -n`)."""
    objs = load(manifests)
    kinds = [(_group_of(o), o.get("kind", "")) for o in objs]
    tops = [i for i, k in enumerate(kinds) if k in KINDS]
    strangers = [f"{o.get('apiVersion')} {o.get('kind')}" for o, k in zip(objs, kinds)
                 if k not in KINDS and k not in _COMPANIONS]
    if strangers:
        raise ValueError(f"kind: cannot convert {', '.join(strangers)} (known: Job, JobSet, LeaderWorkerSet, "
                         "Workload with its PodGroups, CompositePodGroups and Pods, ResourceClaimTemplates)")
    if len(tops) != 1:
        raise ValueError(f"kind: expected one Job, JobSet, LeaderWorkerSet or Workload, got {len(tops)}")
    top = objs[tops[0]]
    if kinds[tops[0]] != ("scheduling.k8s.io", "Workload") and any(k[1] in ("Pod", "PodGroup", "CompositePodGroup")
                                                                  for k in kinds):
        raise ValueError(f"kind: Pods, PodGroups and CompositePodGroups go with a Workload, not a {top['kind']}")
    ns = _namespace(objs, namespace)
    out = Refusals(_where(top))
    prio = Priority(out)
    name = (top.get("metadata") or {}).get("name")
    if (why := label_error(name)) is not None:
        out.add(f"{_where(top)}: metadata.name", why)
        out.raise_any()
    body = KINDS[kinds[tops[0]]]([top, *(o for o in objs if o is not top)], out, prio)
    prio.apply(body)
    templates = {o["metadata"]["name"]: o for o in objs if o.get("kind") == "ResourceClaimTemplate"}
    used = _used_templates(body)
    for missing in sorted(used - set(templates)):
        out.add("resourceClaimTemplateName", f"no ResourceClaimTemplate {missing!r} among the manifests")
    if used & set(templates):
        body["resourceClaimTemplates"] = [_claim_template(templates[n], out) for n in sorted(used & set(templates))]
    out.raise_any()
    errors = validate(body)
    if errors:
        raise ValueError(f"{_where(top)} gives an invalid workload:\n" + "\n".join(f"  {e}" for e in errors))
    return ns, body
