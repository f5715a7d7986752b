"""`convert()`: a whole input (files, folders, stdin) as Gangplank submissions, later JobSet stages,
warnings and the objects skipped (shared/spec/client.md, *Manifests as users keep them*)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gangplank_client.builder import label_error, validate
from gangplank_client.kube._bundle import bundle, claim_template, used_templates, where
from gangplank_client.kube._convert import Context, instance_spec, job, leaderworkerset, templates_of, workload_ref
from gangplank_client.kube._jobset import jobset
from gangplank_client.kube._pods import Priority
from gangplank_client.kube._read import (
    BodyPath,
    ManifestError,
    Manifests,
    Obj,
    Refusals,
    as_map,
    load,
    manifest_path,
    name_objects,
    take_origins,
)

# what each kind is served as (apiVersion), as the API servers of v1.37 and the CRDs serve them
SERVED: dict[str, tuple[str, tuple[str, ...]]] = {
    "Job": ("batch", ("v1",)),
    "JobSet": ("jobset.x-k8s.io", ("v1alpha2",)),
    "LeaderWorkerSet": ("leaderworkerset.x-k8s.io", ("v1",)),
    # v1alpha3: the API server's spelling beside CompositePodGroup, as the Kubernetes documentation writes it,
    # read like v1beta1 (client.md, *Everyday use*)
    "Workload": ("scheduling.k8s.io", ("v1beta1", "v1alpha3", "v1alpha2", "v1alpha1")),
    "PodGroup": ("scheduling.k8s.io", ("v1beta1", "v1alpha3", "v1alpha2")),
    "CompositePodGroup": ("scheduling.k8s.io", ("v1alpha3",)),
    "Pod": ("", ("v1",)),
    "ResourceClaimTemplate": ("resource.k8s.io", ("v1", "v1beta2", "v1beta1")),
}
SUPPORTED = ("batch/v1 Job, jobset.x-k8s.io/v1alpha2 JobSet, leaderworkerset.x-k8s.io/v1 LeaderWorkerSet, "
             "scheduling.k8s.io/v1beta1 Workload with its PodGroups, CompositePodGroups and Pods")
# controllers of pods that Gangplank has no converter for: refused by name even without a template
POD_CONTROLLERS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController", "CronJob",
                   "PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob", "TrainJob", "RayJob",
                   "RayCluster", "RayService", "Notebook", "InferenceService", "Rollout", "Workflow", "VolcanoJob"}
TOPS = {"Job": job, "LeaderWorkerSet": leaderworkerset}


@dataclass(frozen=True)
class Wait:
    """What a stage waits for: every pod of `replicated_jobs` of workload `namespace/workload`
    placed (`Ready`) or `Succeeded` (`Complete`)."""
    namespace: str
    workload: str
    replicated_jobs: tuple[str, ...]
    condition: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.workload} ({', '.join(self.replicated_jobs)} {self.condition})"

    def reached(self, view: Any) -> bool:
        """Whether the workload's view (a WorkloadView of `namespace/workload`) shows the wait over:
        every pod of the replicated jobs' groups placed (`Ready`) or `Succeeded` (`Complete`)."""
        pods = [p for g in view.status.pod_groups
                if any(g.name == rj or g.name.startswith(f"{rj}-") or g.name.startswith(f"{self.workload}-{rj}")
                       for rj in self.replicated_jobs) for p in g.pods]
        if self.condition == "Complete":
            return bool(pods) and all(p.phase == "Succeeded" for p in pods)
        return bool(pods) and all(p.node is not None for p in pods)


@dataclass
class Stage:
    namespace: str
    body: dict[str, Any]
    waits_for: list[Wait]

    @property
    def line(self) -> str:
        return f"staged: {self.namespace}/{self.body['name']} waits for " + " and ".join(map(str, self.waits_for))


@dataclass
class Conversion:
    workloads: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    stages: list[Stage] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    # (namespace, workload name) -> (the object it was converted from, {body path: manifest path})
    sources: dict[tuple[str, str], tuple[str, dict[BodyPath, str]]] = field(default_factory=dict)
    # with keep_going: the objects refused, each (its "Kind name", or "document N", and its error lines)
    refused: list[tuple[str, list[str]]] = field(default_factory=list)

    def locate(self, namespace: str, name: str, loc: BodyPath) -> str | None:
        """Where a location in the body of `namespace/name` (as a 422 names it: ["body", ...]) is in
        its manifest: "JobSet big: spec.replicatedJobs[0].replicas"; None when not converted here."""
        if (source := self.sources.get((namespace, name))) is None:
            return None
        rest = tuple(loc[1:]) if loc and loc[0] == "body" else tuple(loc)
        return f"{source[0]}: {manifest_path(source[1], rest) or '.'.join(map(str, rest)) or 'spec'}"

    def refusal(self, namespace: str, name: str, problem: Any) -> str:
        """A server's refusal of a converted body, each field error named at its manifest path: one
        line per error (`problem` is a gangplank_client.ProblemError)."""
        errors = getattr(problem, "errors", None) or []
        lines = [f"{where}: {e.msg}" for e in errors
                 if (where := self.locate(namespace, name, tuple(e.loc))) is not None]
        if not lines or len(lines) != len(errors):
            return str(problem)
        return "\n".join(lines)


def _holds_pods(value: Any) -> bool:
    if isinstance(value, dict):
        return "containers" in value or any(_holds_pods(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_pods(v) for v in value)
    return False


def _classify(objs: list[Obj], errors: list[str], skipped: list[str]) -> list[Obj]:
    """The objects Gangplank reads (apiVersion checked against the kind, names checked); others are
    skipped (no pods) or refused (pods through a controller without a converter)."""
    kept = []
    for n, obj in enumerate(objs):
        version, kind = obj.get("apiVersion"), obj.get("kind")
        meta = obj.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(version, str) or not isinstance(kind, str) or not version or not kind:
            errors.append(f"document {n + 1}: apiVersion and kind: Required value")
            continue
        group, _, ver = version.rpartition("/")
        served = SERVED.get(kind)
        if served is not None and group == served[0]:
            if ver not in served[1]:
                errors.append(f"{kind} {name or '?'}: apiVersion: Unsupported value: {version!r}: {kind} is served as "
                              + ", ".join(f"{group + '/' if group else ''}{v}" for v in served[1]))
                continue
        elif kind in POD_CONTROLLERS or _holds_pods(obj.get("spec")) or _holds_pods(obj.get("template")):
            errors.append(f"{version} {kind} {name or '?'}: cannot be converted: Gangplank converts {SUPPORTED} "
                          "(and skips objects without pods)")
            continue
        else:
            skipped.append(f"skipped: {version} {kind} {name or '?'}")
            continue
        why = "Required value (metadata.name or metadata.generateName)" if not name else label_error(name)
        if why is not None:
            errors.append(f"{kind} {name or '?'}: metadata.name: {why}")
            continue
        kept.append(obj)
    return kept


def _pod_groups(objs: list[Obj]) -> dict[str, tuple[Obj, str]]:
    """Every PodGroup of the input by name: its spec over its Workload template's (when given)."""
    workloads = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Workload"}
    found = {}
    for o in objs:
        if o["kind"] != "PodGroup":
            continue
        spec = as_map(o.get("spec"))
        wl = workloads.get(workload_ref(spec)[0] or "")
        templates = templates_of(wl.get("spec") or {}, Refusals())[0] if wl else {}
        found[o["metadata"]["name"]] = (instance_spec(o, templates), f"PodGroup {o['metadata']['name']}: spec")
    return found


def _namespace(obj: Obj, given: str | None, errors: list[str]) -> str:
    own = obj["metadata"].get("namespace")
    if own and given and own != given:
        errors.append(f"{where(obj)}: metadata.namespace: {own!r} does not match the namespace given ({given!r})")
    return str(own or given or "default")


def _finish(body: Obj, ctx: Context, claim_templates: dict[str, Obj]) -> dict[BodyPath, str]:
    """The body completed (priority, claim templates) and checked; where its parts come from."""
    origins = take_origins(body)
    ctx.prio.apply(body)
    used = used_templates(body)
    for missing in sorted(used - set(claim_templates)):
        ctx.out.add("resourceClaimTemplateName", f"no ResourceClaimTemplate {missing!r} among the manifests")
    if used & set(claim_templates):
        body["resourceClaimTemplates"] = [claim_template(claim_templates[n], ctx.out)
                                          for n in sorted(used & set(claim_templates))]
    if not ctx.out.items:
        for e in validate(body):
            where = manifest_path(origins, tuple(e.loc[1:]))
            ctx.out.add(where or ".".join(str(p) for p in e.loc[1:]) or "spec",
                        e.msg if where else f"{e.msg} (in the converted workload)")
    return origins


def convert(manifests: Manifests, namespace: str | None = None, *, ignore_unenforced: bool = False,
            keep_going: bool = False) -> Conversion:
    """Every workload the manifests give, in input order; ManifestError naming each object and path.
    With `keep_going`, as `kubectl apply` goes on: the workloads of the objects that convert, and
    each refused object in `refused` (nothing raised)."""
    result = _convert(manifests, namespace, ignore_unenforced)
    if result.refused and not keep_going:
        raise ManifestError([line for _, lines in result.refused for line in lines])
    return result


def _refuse(result: Conversion, lines: list[str]) -> bool:
    """Record each line under the object it names (its "Kind name: " prefix); False when none."""
    for line in lines:
        label = line.split(":", 1)[0]
        if result.refused and result.refused[-1][0] == label:
            result.refused[-1][1].append(line)
        else:
            result.refused.append((label, [line]))
    return bool(lines)


def _taken(errors: list[str]) -> list[str]:
    """The errors gathered so far, the list emptied (they are recorded once)."""
    taken = list(errors)
    errors.clear()
    return taken


def _convert(manifests: Manifests, namespace: str | None, ignore_unenforced: bool) -> Conversion:
    objs = load(manifests)
    name_objects(objs)
    result = Conversion()
    errors: list[str] = []
    objs = _classify(objs, errors, result.skipped)
    _refuse(result, _taken(errors))
    pod_groups = _pod_groups(objs)
    claim_templates = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ResourceClaimTemplate"}
    used_groups: set[str] = set()
    bundles = []
    for obj in objs:
        kind = obj["kind"]
        if kind not in (*TOPS, "JobSet"):
            if kind == "Workload":
                bundles.append(obj)
            continue
        ns = _namespace(obj, namespace, errors)
        ctx = Context(Refusals(where(obj), ignore_unenforced=ignore_unenforced), Priority(Refusals()), pod_groups)
        ctx.prio = Priority(ctx.out)
        if kind == "JobSet":
            planned = jobset(obj, ctx)
        else:
            planned = [(TOPS[kind](obj, ctx), [])]
        for body, _ in planned:
            result.sources[ns, body["name"]] = (where(obj), _finish(body, ctx, claim_templates))
        result.warnings += ctx.out.warnings
        used_groups |= ctx.used_pod_groups
        if _refuse(result, _taken(errors) + ctx.out.lines()):
            continue
        for body, waits in planned:
            if waits:
                result.stages.append(Stage(ns, body, [Wait(ns, wl, tuple(rjs), status) for wl, rjs, status in waits]))
            else:
                result.workloads.append((ns, body))
    taken = {workload_ref(pod_groups[g][0])[0] for g in used_groups}
    companions = [o for o in objs if o["kind"] in ("PodGroup", "CompositePodGroup", "Pod")]
    for wl in bundles:
        if wl["metadata"]["name"] in taken:
            continue
        ctx = Context(Refusals(where(wl), ignore_unenforced=ignore_unenforced), Priority(Refusals()))
        ctx.prio = Priority(ctx.out)
        ns = _namespace(wl, namespace, errors)
        body = bundle(wl, companions, ctx)
        result.sources[ns, body["name"]] = (where(wl), _finish(body, ctx, claim_templates))
        result.warnings += ctx.out.warnings
        if not _refuse(result, _taken(errors) + ctx.out.lines()):
            result.workloads.append((ns, body))
    known = set(pod_groups) | {t for wl in bundles for t in templates_of(wl.get("spec") or {}, Refusals())[0]}
    errors += _strays(objs, {o["metadata"]["name"] for o in bundles}, used_groups, known)
    if _refuse(result, _taken(errors)) or result.refused:
        return result
    used = set().union(*(used_templates(b) for _, b in result.workloads), *(used_templates(s.body) for s in result.stages))
    result.skipped += [f"skipped: ResourceClaimTemplate {name} (used by no workload)"
                       for name in claim_templates if name not in used]
    return result


def _strays(objs: list[Obj], workloads: set[str], used_groups: set[str], groups: set[str]) -> list[str]:
    """PodGroups without their Workload, Pods that name no PodGroup of the input."""
    errors = []
    for o in objs:
        spec = as_map(o.get("spec"))
        if o["kind"] in ("PodGroup", "CompositePodGroup") and o["metadata"]["name"] not in used_groups:
            ref = workload_ref(spec)[0]
            if ref is not None and ref not in workloads:
                errors.append(f"{where(o)}: spec.workloadRef.workloadName: names Workload {ref!r}, which the input "
                              "does not give")
        elif o["kind"] == "Pod":
            sg = as_map(spec.get("schedulingGroup"))
            name = sg.get("podGroupName")
            if name is None:
                errors.append(f"{where(o)}: spec.schedulingGroup.podGroupName: Required value: a Pod goes with a "
                              f"Workload and its PodGroup (Gangplank converts {SUPPORTED})")
            elif name not in groups:
                errors.append(f"{where(o)}: spec.schedulingGroup.podGroupName: names PodGroup {name!r}, which the "
                              "input does not give")
    return errors


def to_workload(manifests: Manifests, namespace: str | None = None, *,
                ignore_unenforced: bool = False) -> tuple[str, dict[str, Any]]:
    """(namespace, body) of an input that gives exactly one workload and no stages."""
    result = convert(manifests, namespace, ignore_unenforced=ignore_unenforced)
    if len(result.workloads) != 1 or result.stages:
        raise ManifestError([f"the manifests give {len(result.workloads)} workloads and {len(result.stages)} later "
                             "stages; to_workload takes exactly one workload (use convert())"])
    return result.workloads[0]
