"""Normalised, immutable specs built from validated bodies (plain dicts).

The HTTP/Kafka adapters validate shape and syntax; these constructors apply the
spec's defaults and turn quantities into integers, so the decider never looks at
raw strings on its hot path.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.domain import tree as _tree
from service.domain.quantity import PODS, parse_quantity

GANG = "gang"
BASIC = "basic"
SINGLE = "Single"
ALL = "All"
PREEMPT_LOWER = "PreemptLowerPriority"
NEVER = "Never"


@dataclass(frozen=True)
class NodeSpec:
    name: str
    labels: tuple[tuple[str, str], ...]
    allocatable: tuple[tuple[str, int], ...]  # sorted by resource name
    unschedulable: bool

    @staticmethod
    def from_body(name: str, body: dict[str, Any]) -> NodeSpec:
        alloc = {r: parse_quantity(v, r) for r, v in (body.get("allocatable") or {}).items()}
        return NodeSpec(
            name=name,
            labels=tuple(sorted((body.get("labels") or {}).items())),
            allocatable=tuple(sorted(alloc.items())),
            unschedulable=bool(body.get("unschedulable", False)),
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
    """What one pod needs; pods with equal shapes are interchangeable for placement."""
    requests: tuple[tuple[str, int], ...]  # explicit requests, sorted; may include zeros
    node_selector: tuple[tuple[str, str], ...]
    claims: tuple[ClaimRef, ...]  # the pod's claim entries, in order


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
    for g in body["podGroups"]:
        policy = g.get("schedulingPolicy") or {"basic": {}}
        gang = "gang" in policy
        names: list[str] = []
        pod_shapes: list[int] = []
        for entry in g["pods"]:
            requests = tuple(sorted(
                (r, parse_quantity(v, r)) for r, v in (entry.get("requests") or {}).items() if r != PODS
            ))
            shape = PodShape(requests, tuple(sorted((entry.get("nodeSelector") or {}).items())),
                             _claim_refs(entry.get("resourceClaims")))
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
