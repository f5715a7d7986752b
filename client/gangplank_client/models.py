"""Typed views of the HTTP API (shared/spec/http.md, composite.md, events.md).

Attributes are snake_case over the camelCase JSON (`v.status.pod_groups[0].placed_pods`); models are
built from JSON with `Model.model_validate(data)` and written back with `model_dump(by_alias=True)`.
Unknown fields are kept (`model_extra`), so a newer server never breaks an older client; the drift
test (tests/client/test_models_drift.py) fails when these models and contracts/ disagree.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    def to_json(self) -> dict[str, Any]:
        """The camelCase JSON body, without the fields left unset."""
        return self.model_dump(by_alias=True, exclude_none=True, exclude_unset=True, mode="json")


Phase = Literal["Pending", "Scheduled", "Completed", "Finished"]
GroupPhase = Literal["Pending", "Scheduled", "Completed"]
PodPhase = Literal["Pending", "Running", "Succeeded", "Failed"]
DisruptionMode = Literal["Single", "All"]
PreemptionPolicy = Literal["PreemptLowerPriority", "Never"]


# -- request bodies (contracts/schemas) -----------------------------------------------------------

class GangPolicy(Model):
    min_count: int


class SchedulingPolicy(Model):
    basic: dict[str, Any] | None = None
    gang: GangPolicy | None = None


class Topology(Model):
    key: str


class ResourceClaimEntry(Model):
    name: str
    resource_claim_template_name: str


class ResourceClaimTemplate(Model):
    name: str
    spec: dict[str, Any]


class Toleration(Model):
    key: str | None = None
    operator: Literal["Equal", "Exists"] | None = None
    value: str | None = None
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None  # "": every effect
    toleration_seconds: int | None = None  # in the schema, refused by the server (the decider reads no clock)


class Affinity(Model):
    node_affinity: dict[str, Any] | None = None


class PodEntry(Model):
    name: str
    count: int | None = None
    requests: dict[str, str | int] | None = None
    node_selector: dict[str, str] | None = None
    tolerations: list[Toleration] | None = None
    affinity: Affinity | None = None
    resource_claims: list[ResourceClaimEntry] | None = None


class PodGroupSpec(Model):
    name: str
    count: int | None = None  # only inside a composite pod group
    scheduling_policy: SchedulingPolicy
    disruption_mode: DisruptionMode | None = None
    topology: Topology | None = None
    resource_claims: list[ResourceClaimEntry] | None = None
    pods: list[PodEntry]


class CompositeGangPolicy(Model):
    min_group_count: int


class CompositeSchedulingPolicy(Model):
    basic: dict[str, Any] | None = None
    gang: CompositeGangPolicy | None = None


class CompositePodGroupSpec(Model):
    name: str
    count: int | None = None
    scheduling_policy: CompositeSchedulingPolicy | None = None
    topology: Topology | None = None
    disruption_mode: DisruptionMode | None = None
    pod_groups: list[PodGroupSpec] | None = None
    composite_pod_groups: list[CompositePodGroupSpec] | None = None


class PodGroupTemplate(Model):
    """A pod group that PodGroup objects copy (lifecycle.md); `pods` may be left out."""
    name: str
    scheduling_policy: SchedulingPolicy
    disruption_mode: DisruptionMode | None = None
    topology: Topology | None = None
    resource_claims: list[ResourceClaimEntry] | None = None
    pods: list[PodEntry] | None = None


class WorkloadSpec(Model):
    name: str
    namespace: str | None = None
    priority: int | None = None
    priority_class_name: str | None = None
    preemption_policy: PreemptionPolicy | None = None
    pod_groups: list[PodGroupSpec] | None = None
    composite_pod_groups: list[CompositePodGroupSpec] | None = None
    pod_group_templates: list[PodGroupTemplate] | None = None
    resource_claims: list[ResourceClaimEntry] | None = None
    resource_claim_templates: list[ResourceClaimTemplate] | None = None


class WorkloadRef(Model):
    workload_name: str
    template_name: str | None = None


class PodGroupObjectSpec(Model):
    """The body of `create_pod_group` (lifecycle.md *Creating a PodGroup*)."""
    name: str
    namespace: str | None = None
    workload_ref: WorkloadRef
    priority: int | None = None
    priority_class_name: str | None = None
    preemption_policy: PreemptionPolicy | None = None
    scheduling_policy: SchedulingPolicy | None = None
    disruption_mode: DisruptionMode | None = None
    topology: Topology | None = None
    resource_claims: list[ResourceClaimEntry] | None = None
    pods: list[PodEntry] | None = None
    parent_composite_pod_group_name: Any | None = None


class Taint(Model):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class NodeSpec(Model):
    name: str | None = None
    labels: dict[str, str] | None = None
    allocatable: dict[str, str | int]
    unschedulable: bool | None = None
    taints: list[Taint] | None = None


class PriorityClassSpec(Model):
    name: str | None = None
    value: int
    preemption_policy: PreemptionPolicy | None = None


class DeviceClassSpec(Model):
    name: str | None = None
    selectors: list[dict[str, Any]] | None = None


class ResourceSliceSpec(Model):
    name: str | None = None
    driver: str
    pool: dict[str, Any]
    node_name: str | None = None
    all_nodes: bool | None = None
    node_selector: dict[str, str] | None = None
    devices: list[dict[str, Any]] | None = None


# -- views (http.md) ------------------------------------------------------------------------------

class Decision(Model):
    """A decision event as a mutating answer lists it."""
    position: int
    type: str
    data: dict[str, Any]


class Mutation(Model):
    """Every answer to a mutating request carries the decisions it caused (none on a replayed read)."""
    decisions: list[Decision] | None = None
    dry_run: bool | None = None


class NodePod(Model):
    namespace: str
    workload: str
    pod_group: str
    pod: str


class NodeView(Mutation):
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    allocatable: dict[str, str] = Field(default_factory=dict)
    unschedulable: bool = False
    taints: list[Taint] = Field(default_factory=list)
    allocated: dict[str, str] = Field(default_factory=dict)
    free: dict[str, str] = Field(default_factory=dict)
    pods: list[NodePod] = Field(default_factory=list)


class ReleasedPod(Model):
    namespace: str
    workload: str
    pod_group: str
    pod: str
    node: str | None = None


class Removal(Mutation):
    """The answer to removing a node, resource slice or device class."""
    name: str
    removed: bool | None = None
    released: list[ReleasedPod] = Field(default_factory=list)


class DeviceClassView(Mutation):
    name: str
    selectors: list[dict[str, Any]] = Field(default_factory=list)


class DeviceAllocation(Model):
    """A live allocation of a device, for whom (sharing.md, *Views*)."""
    namespace: str
    workload: str
    pod_group: str | None = None
    pod: str | None = None
    claim: str
    sharing: str
    request: str
    share_id: str | None = Field(None, alias="shareID")
    consumed_capacity: dict[str, str] | None = None


class DeviceUsage(Model):
    """What a device has consumed and for whom (`consumed_capacity` on shareable devices)."""
    name: str
    consumed_capacity: dict[str, str] | None = None
    allocations: list[DeviceAllocation] = Field(default_factory=list)


class ResourceSliceView(Mutation):
    name: str
    driver: str
    pool: dict[str, Any]
    node_name: str | None = None
    all_nodes: bool | None = None
    node_selector: dict[str, str] | None = None
    devices: list[dict[str, Any]] = Field(default_factory=list)
    device_usage: list[DeviceUsage] = Field(default_factory=list)


class PriorityClassView(Mutation):
    name: str
    value: int
    preemption_policy: PreemptionPolicy = "PreemptLowerPriority"


class Domain(Model):
    key: str
    value: str


class Reason(Model):
    """A node reason: its code and numbers, and its words (rendered by the server)."""
    reason: str
    nodes: int
    resource: str | None = None
    key: str | None = None
    value: str | None = None
    message: str | None = None


class Explanation(Model):
    """Why pods wait (model.md, *Explanations*); a composite's adds children and domain."""
    message: str
    reasons: list[Reason] = Field(default_factory=list)
    nodes: int | None = None
    policy: Literal["gang", "basic"] | None = None
    pods: int | None = None
    placeable_pods: int | None = None
    min_count: int | None = None
    preemption: str | None = None
    devices: dict[str, Any] | None = None


class Condition(Model):
    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    position: int | None = None


class PodStatus(Model):
    name: str
    phase: PodPhase = "Pending"
    node: str | None = None


class ClaimDevice(Model):
    driver: str
    pool: str
    device: str
    share_id: str | None = Field(None, alias="shareID")  # on a shareable device (sharing.md)
    consumed_capacity: dict[str, str] | None = None


class ClaimReference(Model):
    kind: str
    name: str


class ClaimStatus(Model):
    name: str
    sharing: Literal["PodGroup", "Workload", "Pod"]
    pod: str | None = None
    devices: list[ClaimDevice] = Field(default_factory=list)
    reserved_for: list[ClaimReference] = Field(default_factory=list)


class GroupCounts(Model):
    """What every pod group's status holds: its counts, pods, claims and conditions."""
    min_count: int
    placed_pods: int  # Running pods
    pending_pods: int = 0
    succeeded_pods: int = 0
    failed_pods: int = 0
    domain: str | Domain | None = None
    explanation: Explanation | None = None
    pods: list[PodStatus] = Field(default_factory=list)
    claims: list[ClaimStatus] = Field(default_factory=list)
    conditions: list[Condition] = Field(default_factory=list)


class PodGroupStatus(GroupCounts):
    name: str
    parent: str | None = None
    phase: GroupPhase


class CompositePodGroupStatus(Model):
    name: str
    parent: str | None = None
    phase: GroupPhase
    min_group_count: int
    satisfied_children: int
    children: list[str] = Field(default_factory=list)
    domain: Domain | None = None
    explanation: dict[str, Any] | None = None
    conditions: list[Condition] = Field(default_factory=list)


class WorkloadStatus(Model):
    phase: Phase
    deleted_at: int | None = None
    pod_groups: list[PodGroupStatus] = Field(default_factory=list)
    composite_pod_groups: list[CompositePodGroupStatus] = Field(default_factory=list)


class WorkloadView(Mutation):
    cluster: str
    namespace: str
    name: str
    priority: int
    preemption_policy: PreemptionPolicy = "PreemptLowerPriority"
    position: int
    previous: int | None = None  # the incarnation of the name before this one (lifecycle.md)
    spec: WorkloadSpec
    status: WorkloadStatus

    def pods(self) -> list[tuple[str, str, str | None]]:
        """(pod group, pod, node or None) for every pod, in view order."""
        return [(g.name, p.name, p.node) for g in self.status.pod_groups for p in g.pods]


class WorkloadPage(Model):
    items: list[WorkloadView]
    next: int | None = None


class PodGroupObjectStatus(GroupCounts):
    phase: Phase
    deleted_at: int | None = None


class PodGroupView(Mutation):
    """A PodGroup object (lifecycle.md *Views*)."""
    cluster: str
    namespace: str
    name: str
    workload: str
    template: str | None = None
    priority: int
    preemption_policy: PreemptionPolicy = "PreemptLowerPriority"
    position: int
    spec: PodGroupSpec
    status: PodGroupObjectStatus


class PodGroupPage(Model):
    items: list[PodGroupView]
    next: int | None = None


class EventMetadata(Model):
    command_id: str | None = None
    source: str | None = None
    actor: str | None = None
    causation_position: int | None = None
    received_at: str | None = None


class Event(Model):
    """The event envelope (events.md)."""
    cluster: str
    position: int
    type: str
    schema_version: int
    data: dict[str, Any]
    metadata: EventMetadata
    recorded_at: str
    prev_hash: str
    hash: str


class ExplainedEvent(Model):
    """An event in the words of `audit explain` (`?explain=true`): its first line, then details."""
    position: int | None
    lines: list[str]
    about: str | None = None
    namespace: str | None = None
    workload: str | None = None


class EventPage(Model):
    events: list[Event]
    last_position: int
    explained: list[ExplainedEvent] | None = None  # with ?explain=true


class History(Model):
    events: list[Event]
    explained: list[ExplainedEvent] | None = None  # with ?explain=true


class StateView(Model):
    position: int
    nodes: list[NodeView]
    workloads: list[WorkloadView]
    finished_workloads: int | None = None


class Verification(Model):
    ok: bool
    events: int
    head: str
    first_bad_position: int | None = None


class ClusterInfo(Model):
    name: str
    last_position: int


class Items(Model):
    """A list answer: `{"items": [...]}`, read item by item by the caller's model."""
    items: list[dict[str, Any]]
