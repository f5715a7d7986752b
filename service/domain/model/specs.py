"""Normalised, immutable specs built from validated bodies (plain dicts).

The HTTP/Kafka adapters validate shape and syntax; these constructors apply the
spec's defaults and turn quantities into integers, so the decider never looks at
raw strings on its hot path.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.domain.model import composite as _tree
from service.domain.model.quantity import PODS, parse_quantity

GANG = "gang"
BASIC = "basic"
SINGLE = "Single"
ALL = "All"
PREEMPT_LOWER = "PreemptLowerPriority"
NEVER = "Never"
MAX_WORKLOAD_PODS = 10_000  # pods of a workload over its life (lifecycle.md: finished ones included)


Taint = tuple[str, str, str]  # (key, value, effect)
Toleration = tuple[str, str, str, str]  # (key, operator, value, effect)
Requirement = tuple[str, str, tuple[str, ...]]  # (key, operator, values)
Term = tuple[tuple[Requirement, ...], tuple[Requirement, ...]]  # (matchExpressions, matchFields)

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"


@dataclass(frozen=True)
class NodeSpec:
    name: str
    labels: tuple[tuple[str, str], ...]
    allocatable: tuple[tuple[str, int], ...]  # sorted by resource name
    unschedulable: bool
    taints: tuple[Taint, ...] = ()  # in the node's order (explanations name the first untolerated one)

    @staticmethod
    def from_body(name: str, body: dict[str, Any]) -> NodeSpec:
        alloc = {r: parse_quantity(v, r) for r, v in (body.get("allocatable") or {}).items()}
        return NodeSpec(
            name=name,
            labels=tuple(sorted((body.get("labels") or {}).items())),
            allocatable=tuple(sorted(alloc.items())),
            unschedulable=bool(body.get("unschedulable", False)),
            taints=tuple((t["key"], t.get("value") or "", t["effect"]) for t in body.get("taints") or ()),
        )


@dataclass(frozen=True)
class PriorityClass:
    name: str
    value: int
    preemption_policy: str

    @staticmethod
    def from_body(name: str, body: dict[str, Any]) -> PriorityClass:
        return PriorityClass(name, int(body.get("value", 0)), body.get("preemptionPolicy") or PREEMPT_LOWER)


@dataclass(frozen=True)
class ClaimRef:
    """A pod's (or group's, or workload's) claim entry: a name and its template."""
    name: str
    template: str


@dataclass(frozen=True)
class PodShape:
    """What one pod needs; pods with equal shapes are interchangeable for placement.

    Tolerations and node-affinity terms are held in a canonical order (sorted, values sorted and
    distinct), so that pods whose specs say the same thing in another order share a shape."""
    requests: tuple[tuple[str, int], ...]  # explicit requests, sorted; may include zeros
    node_selector: tuple[tuple[str, str], ...]
    claims: tuple[ClaimRef, ...]  # the pod's claim entries, in order
    tolerations: tuple[Toleration, ...] = ()
    required: tuple[Term, ...] = ()  # required node affinity: any term; () when there is none
    preferred: tuple[tuple[int, Term], ...] = ()  # (weight, term)


def _requirements(items: list[dict[str, Any]] | None) -> tuple[Requirement, ...]:
    return tuple(sorted({(r["key"], r["operator"], tuple(sorted(set(r.get("values") or ()))))
                         for r in items or ()}))


def _term(body: dict[str, Any] | None) -> Term:
    body = body or {}
    return (_requirements(body.get("matchExpressions")), _requirements(body.get("matchFields")))


def tolerations_from_body(items: list[dict[str, Any]] | None) -> tuple[Toleration, ...]:
    return tuple(sorted({(t.get("key") or "", t.get("operator") or "Equal", t.get("value") or "", t.get("effect") or "")
                         for t in items or ()}))


def node_affinity_from_body(affinity: dict[str, Any] | None) -> tuple[tuple[Term, ...], tuple[tuple[int, Term], ...]]:
    """(required terms, preferred (weight, term)) of a pod entry's `affinity`, canonical."""
    node = (affinity or {}).get("nodeAffinity") or {}
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = tuple(sorted({_term(t) for t in required.get("nodeSelectorTerms") or ()}))
    # equal preferred terms add up (kube-scheduler sums every matching term's weight): keep each
    preferred = tuple(sorted((int(p["weight"]), _term(p.get("preference")))
                             for p in node.get("preferredDuringSchedulingIgnoredDuringExecution") or ()))
    return terms, preferred


@dataclass(frozen=True)
class GroupSpec:
    name: str
    gang: bool
    min_count: int  # basic groups: 1
    disruption_all: bool
    topology_key: str | None
    claims: tuple[ClaimRef, ...]  # the group's shared claims
    pod_names: tuple[str, ...]
    pod_shapes: tuple[int, ...]  # index into WorkloadSpec.shapes, per pod
    parent: int | None = None  # index into WorkloadSpec.cpgs: the CPG holding it (composite.md)


@dataclass(frozen=True)
class WorkloadSpec:
    namespace: str
    name: str
    priority: int
    preemption_policy: str
    groups: tuple[GroupSpec, ...]
    shapes: tuple[PodShape, ...]
    claims: tuple[ClaimRef, ...]  # workload-shared claims
    templates: tuple[tuple[str, Any], ...]  # (template name, claim spec dict), as submitted
    cpgs: tuple[_tree.CpgSpec, ...] = ()  # composite pod groups, pre-order (empty: a flat workload)
    roots: tuple[int, ...] = ()  # indices into cpgs of the roots, in order


def _claim_refs(entries: list[dict[str, Any]] | None) -> tuple[ClaimRef, ...]:
    return tuple(ClaimRef(e["name"], e.get("resourceClaimTemplateName", "")) for e in entries or ())


def workload_from_submission(data: dict[str, Any]) -> WorkloadSpec:
    """Build the spec from a WorkloadSubmitted event's data."""
    body = data["spec"]
    tree = None
    if body.get("compositePodGroups") is not None:  # a tree: its pod groups in pre-order, expanded
        tree = _tree.expand(body["compositePodGroups"])
        body = {**body, "podGroups": [g.body for g in tree.groups]}
    shapes: list[PodShape] = []
    shape_index: dict[PodShape, int] = {}
    groups: list[GroupSpec] = []
    for g in body.get("podGroups") or ():  # none in a workload of templates (lifecycle.md)
        policy = g.get("schedulingPolicy") or {"basic": {}}
        gang = "gang" in policy
        names: list[str] = []
        pod_shapes: list[int] = []
        for entry in g["pods"]:
            requests = tuple(sorted(
                (r, parse_quantity(v, r)) for r, v in (entry.get("requests") or {}).items() if r != PODS
            ))
            required, preferred = node_affinity_from_body(entry.get("affinity"))
            shape = PodShape(requests, tuple(sorted((entry.get("nodeSelector") or {}).items())),
                             _claim_refs(entry.get("resourceClaims")), tolerations_from_body(entry.get("tolerations")),
                             required, preferred)
            idx = shape_index.setdefault(shape, len(shapes))
            if idx == len(shapes):
                shapes.append(shape)
            for i in range(int(entry.get("count", 1))):
                names.append(f"{entry['name']}-{i}")
                pod_shapes.append(idx)
        groups.append(GroupSpec(
            name=g["name"], gang=gang,
            min_count=int(policy["gang"]["minCount"]) if gang else 1,
            disruption_all=g.get("disruptionMode", SINGLE) == ALL,
            topology_key=(g.get("topology") or {}).get("key"),
            claims=_claim_refs(g.get("resourceClaims")),
            pod_names=tuple(names), pod_shapes=tuple(pod_shapes),
            parent=None if tree is None else tree.groups[len(groups)].parent,
        ))
    return WorkloadSpec(
        namespace=data["namespace"], name=data["name"], priority=int(data["priority"]),
        preemption_policy=data["preemptionPolicy"], groups=tuple(groups), shapes=tuple(shapes),
        claims=_claim_refs(body.get("resourceClaims")),
        templates=tuple((t["name"], t.get("spec") or {}) for t in body.get("resourceClaimTemplates") or ()),
        cpgs=() if tree is None else tree.cpgs, roots=() if tree is None else tree.roots,
    )
