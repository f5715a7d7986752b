"""A workload's pod groups (model.md, *Workloads and pod groups*): the models that both the flat body
(workload.py) and the tree's (composite.py) build on."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictInt, model_validator

from service.domain.model.specs import MAX_WORKLOAD_PODS
from service.schemas.common import Requests, StrictModel
from service.schemas.devices import ResourceClaimSpec
from service.schemas.errors import duplicate_names as _duplicates
from service.schemas.errors import raise_errors
from service.schemas.names import DNSLabel, LabelMap, QualifiedName
from service.schemas.scheduling import MAX_TOLERATIONS, Affinity, Toleration

MAX_POD_GROUPS = 8
MAX_PODS_PER_WORKLOAD = MAX_WORKLOAD_PODS  # the domain's bound (scale checks it too)
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
