"""The shapes of the HTTP API's answers, for the OpenAPI document (http.md, *Operations*).

Written from the views the application answers with (service/domain/read/views.py, service/app/queries.py,
service/app/registry.py, the store's event envelope): TypedDicts with the JSON's own camelCase keys,
so a key that is always there is required and one that is sometimes there is `NotRequired`. Nothing
validates answers against these at run time (the answer path stays as fast as it was); the live
answers are checked against them by tests/api/test_openapi.py.
"""
from __future__ import annotations

from typing import Any, Literal, NotRequired

from pydantic import TypeAdapter
from typing_extensions import TypedDict  # pydantic needs this one on Python < 3.12

REQUEST_SCHEMA = "#/components/schemas/{model}"

PreemptionPolicy = Literal["PreemptLowerPriority", "Never"]


# -- inventory -------------------------------------------------------------------------------------

class NodePod(TypedDict):
    namespace: str
    workload: str
    podGroup: str
    pod: str


class NodeTaint(TypedDict):
    key: str
    value: str
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class NodeView(TypedDict):
    """A node as it stands: what it offers, what is placed on it and what is left."""
    name: str
    labels: dict[str, str]
    allocatable: dict[str, str]
    unschedulable: bool
    taints: list[NodeTaint]
    allocated: dict[str, str]
    free: dict[str, str]
    pods: list[NodePod]


class PriorityClassView(TypedDict):
    name: str
    value: int
    preemptionPolicy: PreemptionPolicy


class DeviceClassView(TypedDict):
    """The device class as put (its body, with its name)."""
    name: str
    selectors: NotRequired[list[dict[str, Any]]]


class ResourceSliceView(TypedDict):
    """The resource slice as put (its body, with its name)."""
    name: str
    driver: str
    pool: dict[str, Any]
    nodeName: NotRequired[str]
    allNodes: NotRequired[bool]
    nodeSelector: NotRequired[dict[str, str]]
    devices: NotRequired[list[dict[str, Any]]]
    deviceUsage: list[DeviceUsage]


class DeviceAllocation(TypedDict):
    """A live allocation of a device, for whom (sharing.md, *Views*)."""
    namespace: str
    workload: str
    podGroup: str | None
    pod: str | None
    claim: str
    sharing: Literal["PodGroup", "Workload", "Pod"]
    request: str
    shareID: NotRequired[str]
    consumedCapacity: NotRequired[dict[str, str]]


class DeviceUsage(TypedDict):
    """What a device has consumed and for whom (`consumedCapacity` on shareable devices)."""
    name: str
    consumedCapacity: NotRequired[dict[str, str]]
    allocations: list[DeviceAllocation]


class ReleasedPod(TypedDict):
    namespace: str
    workload: str
    podGroup: str
    pod: str
    node: str | None


# -- workloads -------------------------------------------------------------------------------------

class Reason(TypedDict):
    """A node reason: its code and numbers (audit.md), and its words rendered when read."""
    reason: str
    nodes: int
    resource: NotRequired[str]
    key: NotRequired[str]
    value: NotRequired[str]
    message: str


class Explanation(TypedDict):
    """Why pods wait (model.md, *Explanations*): the stored codes and numbers (audit.md), with
    `message` rendered when read (recorded, for a decision upcast from schemaVersion 1)."""
    message: str
    reasons: list[Reason]
    nodes: NotRequired[int]
    policy: NotRequired[Literal["gang", "basic"]]
    pods: NotRequired[int]
    placeablePods: NotRequired[int]
    minCount: NotRequired[int]
    preemption: NotRequired[str | None]
    devices: NotRequired[dict[str, Any]]


class Condition(TypedDict):
    type: str
    status: str
    reason: str
    message: str
    position: int


class PodStatus(TypedDict):
    name: str
    phase: Literal["Pending", "Running", "Succeeded", "Failed"]
    node: str | None


class ClaimDevice(TypedDict):
    driver: str
    pool: str
    device: str
    shareID: NotRequired[str]  # on a shareable device (sharing.md)
    consumedCapacity: NotRequired[dict[str, str]]


class ClaimReference(TypedDict):
    kind: str
    name: str


class ClaimStatus(TypedDict):
    name: str
    sharing: Literal["PodGroup", "Workload", "Pod"]
    pod: str | None
    devices: list[ClaimDevice]
    reservedFor: list[ClaimReference]


class PodGroupStatus(TypedDict):
    name: str
    phase: Literal["Pending", "Scheduled", "Completed"]
    minCount: int
    placedPods: int
    pendingPods: int
    succeededPods: int
    failedPods: int
    domain: str | None
    explanation: Explanation | None
    pods: list[PodStatus]
    claims: list[ClaimStatus]
    conditions: list[Condition]


class WorkloadStatus(TypedDict):
    phase: Literal["Pending", "Scheduled", "Completed", "Finished"]
    deletedAt: int | None
    podGroups: list[PodGroupStatus]


class WorkloadView(TypedDict):
    cluster: str
    namespace: str
    name: str
    priority: int
    preemptionPolicy: PreemptionPolicy
    position: int
    previous: int | None  # the position of the incarnation of its name before it (null for the first)
    spec: dict[str, Any]  # the Workload body as submitted: a $ref to it (see _SPEC_REF)
    status: WorkloadStatus


class WorkloadPage(TypedDict):
    items: list[WorkloadView]
    next: int | None


class PodGroupObjectStatus(TypedDict):
    """A PodGroup object's status: its group's view (lifecycle.md *Views*), phase Finished once deleted."""
    phase: Literal["Pending", "Scheduled", "Completed", "Finished"]
    deletedAt: int | None
    minCount: int
    placedPods: int
    pendingPods: int
    succeededPods: int
    failedPods: int
    domain: str | None
    explanation: Explanation | None
    pods: list[PodStatus]
    claims: list[ClaimStatus]
    conditions: list[Condition]  # (the fields of PodGroupStatus but name and parent: the schemas stay flat)


class PodGroupView(TypedDict):
    cluster: str
    namespace: str
    name: str
    workload: str
    template: str | None
    priority: int
    preemptionPolicy: PreemptionPolicy
    position: int
    spec: dict[str, Any]  # the resolved pod group
    status: PodGroupObjectStatus


class PodGroupPage(TypedDict):
    items: list[PodGroupView]
    next: int | None


# -- answers to mutating requests --------------------------------------------------------------------

class Decision(TypedDict):
    """A decision event this request caused, for any workload."""
    position: int
    type: str
    data: dict[str, Any]


class NodeAnswer(NodeView):
    decisions: list[Decision]
    dryRun: NotRequired[bool]


class PriorityClassAnswer(PriorityClassView):
    decisions: list[Decision]
    dryRun: NotRequired[bool]


class DeviceClassAnswer(DeviceClassView):
    decisions: list[Decision]
    dryRun: NotRequired[bool]


class ResourceSliceAnswer(ResourceSliceView):
    decisions: list[Decision]
    dryRun: NotRequired[bool]


class WorkloadAnswer(WorkloadView):
    decisions: list[Decision]
    dryRun: NotRequired[bool]


class PodGroupAnswer(PodGroupView):
    decisions: list[Decision]
    dryRun: NotRequired[bool]


class Removal(TypedDict):
    """The answer to removing a node, device class or resource slice: the pods it released."""
    name: str
    removed: NotRequired[bool]  # device classes and resource slices: true (nodes answer without it)
    released: list[ReleasedPod]
    decisions: list[Decision]
    dryRun: NotRequired[bool]


# -- audit and replay --------------------------------------------------------------------------------

class EventMetadata(TypedDict):
    """An input's origin (commandId, source, actor, receivedAt) or a decision's cause (causationPosition)."""
    commandId: NotRequired[str | None]
    source: NotRequired[str | None]
    actor: NotRequired[str | None]
    causationPosition: NotRequired[int | None]
    receivedAt: NotRequired[str | None]


class Event(TypedDict):
    """The event envelope (events.md)."""
    cluster: str
    position: int
    type: str
    schemaVersion: int
    data: dict[str, Any]
    metadata: EventMetadata
    recordedAt: str
    prevHash: str
    hash: str


class ExplainedEvent(TypedDict):
    """An event in the words of `audit explain` (`?explain=true`): its first line, then details."""
    position: int | None  # null: a history's closing line
    lines: list[str]
    about: NotRequired[str | None]  # the event page's: `namespace/name` or the object (`node n1`)
    namespace: NotRequired[str | None]
    workload: NotRequired[str | None]


class EventPage(TypedDict):
    events: list[Event]
    lastPosition: int
    explained: NotRequired[list[ExplainedEvent]]  # with ?explain=true, one per event


class History(TypedDict):
    events: list[Event]
    explained: NotRequired[list[ExplainedEvent]]  # with ?explain=true: the lines of `audit explain`


class StateView(TypedDict):
    position: int
    nodes: list[NodeView]
    workloads: list[WorkloadView]
    finishedWorkloads: int


class Verification(TypedDict):
    ok: bool
    events: int
    head: str
    firstBadPosition: NotRequired[int]


class Checkpoint(TypedDict):
    """A signed chain head (audit.md, *Signed checkpoints*): `signature` is the base64 Ed25519 signature
    of the canonical JSON of the other fields; `keyId` the SHA-256 (hex) of the raw public key."""
    cluster: str
    position: int
    hash: str
    signedAt: str
    keyId: str
    signature: str


class CheckpointList(TypedDict):
    items: list[Checkpoint]


class WhatIfSide(TypedDict):
    """One workload in one world (audit.md, *What-if*): `Completed` once every pod finished (lifecycle.md)."""
    priority: int
    phase: Literal["Pending", "Scheduled", "Completed", "Finished"]
    scheduledAt: int | None
    wait: int | None
    placedPods: int
    preemptionsSuffered: int
    preemptionsCaused: int


class WhatIfWorkload(TypedDict):
    namespace: str
    name: str
    submittedAt: int
    withdrawn: bool
    recorded: WhatIfSide
    whatIf: WhatIfSide | None


class WhatIfTotals(TypedDict):
    workloads: int
    scheduled: int
    neverScheduled: int
    meanWait: float | None
    preemptions: int
    utilisation: dict[str, float]


class WhatIfWorlds(TypedDict):
    recorded: WhatIfTotals
    whatIf: WhatIfTotals


class WhatIfInputs(TypedDict):
    recorded: int
    changes: int
    skipped: int


class RulesVersions(TypedDict):
    current: int
    recorded: list[int]


WhatIfReport = TypedDict("WhatIfReport", {
    "cluster": str, "from": int, "until": int, "rules": RulesVersions, "inputs": WhatIfInputs,
    "totals": WhatIfWorlds, "workloads": list[WhatIfWorkload]})
WhatIfReport.__doc__ = "The what-if report (audit.md, *What-if*): both worlds per workload and in totals."


class Difference(TypedDict):
    path: list[str | int]
    recorded: Any
    redecided: Any


class DecisionOutcome(TypedDict):
    type: str
    outcome: dict[str, Any]


class Divergence(TypedDict):
    position: int
    recorded: DecisionOutcome | None
    redecided: DecisionOutcome | None
    differences: list[Difference]


class ReplayReport(TypedDict):
    """The report of replay --verify (audit.md, *Verifying across releases*), with the replay summary."""
    verdict: Literal["identical", "equivalent", "diverged", "broken"]
    rules: RulesVersions
    explanationDiffs: int
    divergence: Divergence | None
    firstBadPosition: NotRequired[int]
    cluster: str
    position: int
    events: int
    inputs: int
    decisions: int
    eventsByType: dict[str, int]
    nodes: int
    workloads: int
    activeWorkloads: int
    pendingGroups: int
    placedPods: int
    chainOk: bool
    head: str
    firstMismatch: NotRequired[int]
    mismatch: NotRequired[dict[str, Any]]


class ClusterInfo(TypedDict):
    name: str
    lastPosition: int


class SeriesPoint(TypedDict):
    """The cluster after `position` (console.md, *Series*); `time` null at position 0."""
    position: int
    time: str | None
    placedPods: int
    pendingGroups: int
    allocated: dict[str, str]
    allocatable: dict[str, str]
    preemptions: int  # PodGroupPreempted decisions since the previous point
    losses: int  # PodsLost decisions since the previous point


# up to `points` positions spread evenly over [from, to] (`from` is a keyword: the functional form)
Series = TypedDict("Series", {"from": int, "to": int, "points": list[SeriesPoint]})


class NodeList(TypedDict):
    items: list[NodeView]


class PriorityClassList(TypedDict):
    items: list[PriorityClassView]


class DeviceClassList(TypedDict):
    items: list[DeviceClassView]


class ResourceSliceList(TypedDict):
    items: list[ResourceSliceView]


class ClusterList(TypedDict):
    items: list[ClusterInfo]


# -- operations ----------------------------------------------------------------------------------------

class OwnedCluster(TypedDict):
    name: str
    epoch: int  # grows by one at every change of owner


class ReplicaItem(TypedDict):
    id: str
    url: str  # its advertised URL
    live: bool
    startedAt: str
    renewedAt: str
    clusters: list[OwnedCluster]  # in name order


class ReplicaList(TypedDict):
    """GET /v1/replicas (docs/replicas.md): every live replica and every dead one still recorded as an
    owner, in id order; `self` is the replica that answers."""
    self: str
    items: list[ReplicaItem]


class Health(TypedDict):
    status: Literal["ok"]


class TargetWorkloadView(TypedDict):
    pods: int
    shapes: list[dict[str, Any]]


class SchedulerView(TypedDict):
    """The scheduler configuration in force (sharing.md): `position` null when never configured."""
    scoringStrategy: dict[str, Any]
    position: int | None
    targetWorkload: TargetWorkloadView | None


class SchedulerAnswer(SchedulerView):
    decisions: list[Decision]
    dryRun: NotRequired[bool]


class Version(TypedDict):
    version: str
    api: Literal["v1"]
    rules: int  # the decider's rules version (audit.md)


class ReadinessChecks(TypedDict):
    database: bool
    schema: NotRequired[bool]
    kafka: NotRequired[bool]  # only when a Kafka consumer is configured
    replica: NotRequired[bool]  # this process a live replica (joined, its lease running)
    error: NotRequired[str]


class Readiness(TypedDict):
    status: Literal["ready"]
    checks: ReadinessChecks


ANSWERS: tuple[type, ...] = (
    NodeAnswer, NodeView, NodeList, PriorityClassAnswer, PriorityClassView, PriorityClassList,
    DeviceClassAnswer, DeviceClassView, DeviceClassList, ResourceSliceAnswer, ResourceSliceView,
    ResourceSliceList, Removal, WorkloadAnswer, WorkloadView, WorkloadPage, EventPage, History, StateView,
    Verification, CheckpointList, WhatIfReport, ReplayReport, ClusterList, Health, Version, Readiness, SchedulerView, Series,
    SchedulerAnswer, ReplicaList, PodGroupView, PodGroupAnswer, PodGroupPage,
)

_SPEC_REF = {"$ref": REQUEST_SCHEMA.format(model="Workload"), "description": "The workload as submitted."}


def response_schemas() -> dict[str, dict[str, Any]]:
    """Every answer's JSON Schema and the schemas it uses, by name (for components/schemas)."""
    schemas: dict[str, dict[str, Any]] = {}
    for answer in ANSWERS:
        schema = TypeAdapter(answer).json_schema(ref_template=REQUEST_SCHEMA, mode="serialization")
        for name, definition in {**schema.pop("$defs", {}), answer.__name__: schema}.items():
            if name in ("WorkloadView", "WorkloadAnswer"):
                definition["properties"]["spec"] = _SPEC_REF
            if schemas.get(name, definition) != definition:
                raise ValueError(f"two different schemas named {name}")
            schemas[name] = definition
    return dict(sorted(schemas.items()))
