"""The workload body (model.md, *Workloads and pod groups*)."""
from __future__ import annotations

from typing import Any

from pydantic import Field, StrictInt, model_validator

from service.schemas import composite
from service.schemas.common import MAX_RESOURCES, PRIORITY_MAX, PRIORITY_MIN, PreemptionPolicy, StrictModel
from service.schemas.composite import CompositePodGroup
from service.schemas.errors import duplicate_names as _duplicates
from service.schemas.errors import raise_errors
from service.schemas.groups import (
    MAX_CLAIMS,
    MAX_POD_GROUPS,
    MAX_PODS_PER_WORKLOAD,
    MAX_TEMPLATES,
    Errors,
    PodGroup,
    ResourceClaimEntry,
    ResourceClaimTemplate,
)
from service.schemas.names import DNSLabel, DNSSubdomain
from service.schemas.podgroups import MAX_POD_GROUP_TEMPLATES, PodGroupTemplate


class Workload(StrictModel):
    """A workload: `POST /v1/clusters/{cluster}/namespaces/{namespace}/workloads`."""
    model_config = {**StrictModel.model_config,
                    "json_schema_extra": {"oneOf": [{"required": ["podGroups"]}, {"required": ["compositePodGroups"]},
                                                   {"required": ["podGroupTemplates"]}]}}
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
    pod_group_templates: list[PodGroupTemplate] = Field(
        None, max_length=MAX_POD_GROUP_TEMPLATES,  # type: ignore[arg-type]  # may be absent, never null: see StrictModel
        description="Templates of PodGroup objects created later (lifecycle.md); or podGroups, or compositePodGroups.")
    resource_claims: list[ResourceClaimEntry] = Field(default_factory=list, max_length=MAX_CLAIMS)
    resource_claim_templates: list[ResourceClaimTemplate] = Field(default_factory=list, max_length=MAX_TEMPLATES)

    @model_validator(mode="after")
    def _check(self) -> Workload:
        errors: Errors = []
        if self.priority is not None and self.priority_class_name is not None:
            errors.append((("priorityClassName",), "must not be set together with priority"))
        given = [k for k, v in (("podGroups", self.pod_groups), ("compositePodGroups", self.composite_pod_groups),
                                ("podGroupTemplates", self.pod_group_templates)) if v is not None]
        if not given:
            errors.append((("podGroups",), "Field required (or compositePodGroups: a tree, or podGroupTemplates)"))
        for later in given[1:]:
            errors.append(((later,), f"must not be set together with {given[0]}"))
        if self.pod_group_templates is not None:
            _duplicates(errors, ("podGroupTemplates",), [t.name for t in self.pod_group_templates])
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
        for t, template in enumerate(self.pod_group_templates or ()):
            check_claims(("podGroupTemplates", t, "resourceClaims"), template.resource_claims)
            for p, entry in enumerate(template.pods or ()):
                check_claims(("podGroupTemplates", t, "pods", p, "resourceClaims"), entry.resource_claims)
        for loc, group in groups:
            check_claims((*loc, "resourceClaims"), group.resource_claims)
            for p, entry in enumerate(group.pods):
                check_claims((*loc, "pods", p, "resourceClaims"), entry.resource_claims)
        raise_errors("Workload", errors)
        return self

