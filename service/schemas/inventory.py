"""Inventory bodies: nodes and priority classes (device classes and slices are in devices.py)."""
from __future__ import annotations

from pydantic import Field, StrictBool, StrictInt, model_validator

from service.schemas.common import PRIORITY_MAX, PRIORITY_MIN, PreemptionPolicy, Resources, StrictModel
from service.schemas.errors import raise_errors
from service.schemas.names import DNSSubdomain, LabelMap
from service.schemas.scheduling import MAX_TAINTS, Taint, taint_errors


class Node(StrictModel):
    """A node: `PUT /v1/clusters/{cluster}/nodes/{name}` creates or replaces it."""
    name: DNSSubdomain = Field(None, description="Optional; when given, it must equal the name in the path.")
    labels: LabelMap = Field(default_factory=dict)
    allocatable: Resources = Field(default_factory=dict)
    unschedulable: StrictBool = False
    taints: list[Taint] = Field(default_factory=list, max_length=MAX_TAINTS,
                                description="Distinct (key, effect) pairs; their order is the order of explanations.")

    @model_validator(mode="after")
    def _check(self) -> Node:
        raise_errors("Node", [(("taints", *loc), msg) for loc, msg in
                              taint_errors([t.model_dump(by_alias=True) for t in self.taints])])
        return self


class PriorityClass(StrictModel):
    """A priority class: `PUT /v1/clusters/{cluster}/priorityclasses/{name}`."""
    name: DNSSubdomain = Field(None, description="Optional; when given, it must equal the name in the path.")
    value: StrictInt = Field(ge=PRIORITY_MIN, le=PRIORITY_MAX)
    preemption_policy: PreemptionPolicy = "PreemptLowerPriority"
