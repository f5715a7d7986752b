"""Inventory bodies: nodes and priority classes (device classes and slices are in devices.py)."""
from __future__ import annotations

from pydantic import Field, StrictBool, StrictInt

from service.schemas.common import PRIORITY_MAX, PRIORITY_MIN, PreemptionPolicy, Resources, StrictModel
from service.schemas.names import DNSSubdomain, LabelMap


class Node(StrictModel):
    """A node: `PUT /v1/clusters/{cluster}/nodes/{name}` creates or replaces it."""
    name: DNSSubdomain = Field(None, description="Optional; when given, it must equal the name in the path.")
    labels: LabelMap = Field(default_factory=dict)
    allocatable: Resources = Field(default_factory=dict)
    unschedulable: StrictBool = False


class PriorityClass(StrictModel):
    """A priority class: `PUT /v1/clusters/{cluster}/priorityclasses/{name}`."""
    name: DNSSubdomain = Field(None, description="Optional; when given, it must equal the name in the path.")
    value: StrictInt = Field(ge=PRIORITY_MIN, le=PRIORITY_MAX)
    preemption_policy: PreemptionPolicy = "PreemptLowerPriority"
