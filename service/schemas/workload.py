"""The workload body (model.md, *Workloads and pod groups*)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, StrictInt, model_validator

from service.schemas.common import MAX_RESOURCES, PRIORITY_MAX, PRIORITY_MIN, PreemptionPolicy, Requests, StrictModel
from service.schemas.devices import ResourceClaimSpec
from service.schemas.errors import duplicate_names as _duplicates
from service.schemas.errors import raise_errors
from service.schemas.names import DNSLabel, DNSSubdomain, LabelMap, QualifiedName
from service.schemas.scheduling import MAX_TOLERATIONS, Affinity, Toleration

if TYPE_CHECKING:
    from service.schemas.composite import CompositePodGroup

MAX_POD_GROUPS = 8
MAX_PODS_PER_WORKLOAD = 10_000
MAX_CLAIMS = 32
MAX_TEMPLATES = 32

Errors = list[tuple[tuple[Any, ...], str]]


class BasicPolicy(StrictModel):
    """Every pod is placed on its own: `{}`."""


class GangPolicy(StrictModel):
    """All-or-nothing: at least `minCount` pods, tried in pod order, or none."""
    min_count: StrictInt = Field(ge=1, le=MAX_PODS_PER_WORKLOAD)


class SchedulingPolicy(StrictModel):
    """Exactly one of `basic` or `gang`."""
    basic: BasicPolicy = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel
    gang: GangPolicy = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel

    @model_validator(mode="after")
    def _exactly_one(self) -> SchedulingPolicy:
        if (self.basic is None) == (self.gang is None):
            raise_errors("SchedulingPolicy", [((), "exactly one of basic or gang must be set")])
        return self


class Topology(StrictModel):
    key: QualifiedName = Field(description="A node label: every pod of the group lands on nodes sharing one value of it.")


class ResourceClaimEntry(StrictModel):
    """A claim made from one of the workload's `resourceClaimTemplates`."""
    name: DNSLabel
    resource_claim_template_name: DNSLabel


class ResourceClaimTemplate(StrictModel):
    name: DNSLabel
    spec: ResourceClaimSpec


class PodEntry(StrictModel):
    """`count` pods named `<name>-0` … `<name>-<count-1>`."""
    name: DNSLabel
    count: StrictInt = Field(1, ge=1, le=MAX_PODS_PER_WORKLOAD)
    requests: Requests = Field(default_factory=dict)
    node_selector: LabelMap = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list, max_length=MAX_TOLERATIONS)
    affinity: Affinity = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel
    resource_claims: list[ResourceClaimEntry] = Field(default_factory=list, max_length=MAX_CLAIMS)

    @model_validator(mode="after")
    def _check(self) -> PodEntry:
        errors: Errors = []
        _duplicates(errors, ("resourceClaims",), [c.name for c in self.resource_claims])
        raise_errors("PodEntry", errors)
        return self


class PodGroup(StrictModel):
    name: DNSLabel
    scheduling_policy: SchedulingPolicy
    disruption_mode: Literal["Single", "All"] = "Single"
    topology: Topology = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel
    resource_claims: list[ResourceClaimEntry] = Field(default_factory=list, max_length=MAX_CLAIMS)
    pods: list[PodEntry] = Field(min_length=1, max_length=MAX_PODS_PER_WORKLOAD)

    @property
    def pod_count(self) -> int:
        return sum(entry.count for entry in self.pods)

    @model_validator(mode="after")
    def _check(self) -> PodGroup:
        errors: Errors = []
        _duplicates(errors, ("pods",), [p.name for p in self.pods])
        _duplicates(errors, ("resourceClaims",), [c.name for c in self.resource_claims])
        gang = self.scheduling_policy.gang
        if gang is not None and gang.min_count > self.pod_count:
            errors.append((("schedulingPolicy", "gang", "minCount"),
                           f"must be at most the group's pod count ({self.pod_count})"))
        raise_errors("PodGroup", errors)
        return self


class Workload(StrictModel):
    """A workload: `POST /v1/clusters/{cluster}/namespaces/{namespace}/workloads`."""
    model_config = {**StrictModel.model_config,
                    "json_schema_extra": {"oneOf": [{"required": ["podGroups"]}, {"required": ["compositePodGroups"]}]}}
    name: DNSLabel
    namespace: DNSLabel = Field(None, description="Optional; when given, it must equal the namespace in the path.")
    priority: StrictInt = Field(None, ge=PRIORITY_MIN, le=PRIORITY_MAX,  # type: ignore[assignment]  # may be absent, never null: see StrictModel
                                description="Either this or priorityClassName; neither means 0.")
    priority_class_name: DNSSubdomain = None
    preemption_policy: PreemptionPolicy = "PreemptLowerPriority"
    pod_groups: list[PodGroup] = Field(None, min_length=1, max_length=MAX_POD_GROUPS,  # type: ignore[arg-type]  # may be absent, never null: see StrictModel
                                       description="Flat pod groups; or compositePodGroups, never both.")
    composite_pod_groups: list[CompositePodGroup] = Field(
        None, min_length=1, max_length=MAX_POD_GROUPS,  # type: ignore[arg-type]  # may be absent, never null: see StrictModel
        description="A tree of composite pod groups (composite.md); or podGroups, never both.")
    resource_claims: list[ResourceClaimEntry] = Field(default_factory=list, max_length=MAX_CLAIMS)
    resource_claim_templates: list[ResourceClaimTemplate] = Field(default_factory=list, max_length=MAX_TEMPLATES)

    @model_validator(mode="after")
    def _check(self) -> Workload:
        errors: Errors = []
        if self.priority is not None and self.priority_class_name is not None:
            errors.append((("priorityClassName",), "must not be set together with priority"))
        if self.pod_groups is None and self.composite_pod_groups is None:
            errors.append((("podGroups",), "Field required (or compositePodGroups: a tree)"))
        elif self.pod_groups is not None and self.composite_pod_groups is not None:
            errors.append((("compositePodGroups",), "must not be set together with podGroups"))
        if self.pod_groups is not None:
            _duplicates(errors, ("podGroups",), [g.name for g in self.pod_groups])
        if self.composite_pod_groups is not None:
            errors += composite.tree_errors(self.composite_pod_groups)
        groups = composite.pod_group_locs(self.pod_groups, self.composite_pod_groups)
        _duplicates(errors, ("resourceClaims",), [c.name for c in self.resource_claims])
        _duplicates(errors, ("resourceClaimTemplates",), [t.name for t in self.resource_claim_templates])
        names = {r for _, group in groups for entry in group.pods for r in entry.requests}
        if len(names) > MAX_RESOURCES:
            errors.append(((groups[0][0][0],) if groups else (), f"the pods request at most {MAX_RESOURCES} "
                                                               f"distinct resources (these request {len(names)})"))
        total = sum(group.pod_count for group in self.pod_groups or ())
        if total > MAX_PODS_PER_WORKLOAD:
            errors.append((("podGroups",), f"a workload has at most {MAX_PODS_PER_WORKLOAD} pods (this one has {total})"))
        templates = {t.name for t in self.resource_claim_templates}

        def check_claims(loc: tuple[Any, ...], claims: list[ResourceClaimEntry]) -> None:
            for index, claim in enumerate(claims):
                if claim.resource_claim_template_name not in templates:
                    errors.append(((*loc, index, "resourceClaimTemplateName"),
                                   f"no resourceClaimTemplates entry named {claim.resource_claim_template_name!r}"))

        check_claims(("resourceClaims",), self.resource_claims)
        for loc, group in groups:
            check_claims((*loc, "resourceClaims"), group.resource_claims)
            for p, entry in enumerate(group.pods):
                check_claims((*loc, "pods", p, "resourceClaims"), entry.resource_claims)
        raise_errors("Workload", errors)
        return self


# the tree's models (composite.py) build on PodGroup above; importing them here completes Workload
from service.schemas import composite  # noqa: E402
