"""PodGroup objects and the templates they come from (lifecycle.md *PodGroup objects*, KEP-5832):
a workload's `podGroupTemplates`, and the body of `POST .../namespaces/{namespace}/podgroups`.

Shape only; what a body names (its workload, its template, claim templates) and the pod group it
resolves to are checked against the state by the domain (domain/decide/podgroups.py)."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictInt, model_validator

from service.schemas.common import PRIORITY_MAX, PRIORITY_MIN, PreemptionPolicy, StrictModel
from service.schemas.errors import duplicate_names as _duplicates
from service.schemas.errors import raise_errors
from service.schemas.groups import (
    MAX_CLAIMS,
    MAX_PODS_PER_WORKLOAD,
    Errors,
    PodEntry,
    ResourceClaimEntry,
    SchedulingPolicy,
    Topology,
)
from service.schemas.names import DNSLabel, DNSSubdomain

MAX_POD_GROUP_TEMPLATES = 8


def _group_errors(policy: SchedulingPolicy | None, pods: list[PodEntry] | None,
                  claims: list[ResourceClaimEntry]) -> Errors:
    errors: Errors = []
    _duplicates(errors, ("pods",), [p.name for p in pods or ()])
    _duplicates(errors, ("resourceClaims",), [c.name for c in claims])
    gang = policy.gang if policy is not None else None
    count = sum(p.count for p in pods or ())
    if gang is not None and pods is not None and gang.min_count > count:
        errors.append((("schedulingPolicy", "gang", "minCount"), f"must be at most the group's pod count ({count})"))
    return errors


class PodGroupTemplate(StrictModel):
    """A pod group of model.md that PodGroup objects copy; `pods` may be left out, each PodGroup then
    giving its own."""
    name: DNSLabel
    scheduling_policy: SchedulingPolicy
    disruption_mode: Literal["Single", "All"] = "Single"
    topology: Topology = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel
    resource_claims: list[ResourceClaimEntry] = Field(default_factory=list, max_length=MAX_CLAIMS)
    pods: list[PodEntry] = Field(None, min_length=1, max_length=MAX_PODS_PER_WORKLOAD)  # type: ignore[arg-type]

    @model_validator(mode="after")
    def _check(self) -> PodGroupTemplate:
        raise_errors("PodGroupTemplate", _group_errors(self.scheduling_policy, self.pods, self.resource_claims))
        return self


class WorkloadRef(StrictModel):
    """Kubernetes v1beta1's `spec.workloadRef`: the workload of templates, and one of its templates."""
    workload_name: DNSLabel
    template_name: DNSLabel = None


class PodGroupObject(StrictModel):
    """A PodGroup object: `POST /v1/clusters/{cluster}/namespaces/{namespace}/podgroups`. The pod group
    fields given are used, the others copied from the template; without one, `schedulingPolicy` and
    `pods` are required."""
    name: DNSLabel
    namespace: DNSLabel = Field(None, description="Optional; when given, it must equal the namespace in the path.")
    workload_ref: WorkloadRef
    priority: StrictInt = Field(None, ge=PRIORITY_MIN, le=PRIORITY_MAX,  # type: ignore[assignment]
                                description="Its own priority; by default the workload's.")
    priority_class_name: DNSSubdomain = None
    preemption_policy: PreemptionPolicy = None  # type: ignore[assignment]  # by default the workload's
    scheduling_policy: SchedulingPolicy = None  # type: ignore[assignment]
    disruption_mode: Literal["Single", "All"] = None  # type: ignore[assignment]
    topology: Topology = None  # type: ignore[assignment]
    resource_claims: list[ResourceClaimEntry] = Field(None, max_length=MAX_CLAIMS)  # type: ignore[arg-type]
    pods: list[PodEntry] = Field(None, min_length=1, max_length=MAX_PODS_PER_WORKLOAD)  # type: ignore[arg-type]
    parent_composite_pod_group_name: Any = Field(
        None, description="Refused (a 422): a PodGroup object is flat; trees are submitted whole",
        json_schema_extra={"not": {}})

    @model_validator(mode="after")
    def _check(self) -> PodGroupObject:
        errors = _group_errors(self.scheduling_policy, self.pods, self.resource_claims or [])
        if self.priority is not None and self.priority_class_name is not None:
            errors.append((("priorityClassName",), "must not be set together with priority"))
        if "parent_composite_pod_group_name" in self.model_fields_set:
            errors.append((("parentCompositePodGroupName",), "a PodGroup object is flat: trees are submitted whole, "
                                                             "as a workload's compositePodGroups"))
        if self.workload_ref.template_name is None:
            for field, value in (("schedulingPolicy", self.scheduling_policy), ("pods", self.pods)):
                if value is None:
                    errors.append(((field,), "Field required (without workloadRef.templateName)"))
        raise_errors("PodGroupObject", errors)
        return self
