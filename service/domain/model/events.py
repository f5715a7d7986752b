"""Event types of shared/spec/events.md, as the decider produces and folds them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# inputs
NODE_UPSERTED = "NodeUpserted"
NODE_REMOVED = "NodeRemoved"
DEVICE_CLASS_UPSERTED = "DeviceClassUpserted"
DEVICE_CLASS_REMOVED = "DeviceClassRemoved"
RESOURCE_SLICE_UPSERTED = "ResourceSliceUpserted"
RESOURCE_SLICE_REMOVED = "ResourceSliceRemoved"
PRIORITY_CLASS_UPSERTED = "PriorityClassUpserted"
WORKLOAD_SUBMITTED = "WorkloadSubmitted"
WORKLOAD_DELETED = "WorkloadDeleted"
COMMAND_REJECTED = "CommandRejected"
SCHEDULER_CONFIGURED = "SchedulerConfigured"
PODS_FINISHED = "PodsFinished"  # lifecycle.md
WORKLOAD_SCALED = "WorkloadScaled"
POD_GROUP_CREATED = "PodGroupCreated"
POD_GROUP_DELETED = "PodGroupDeleted"
# decisions
POD_GROUP_SCHEDULED = "PodGroupScheduled"
PODS_SCHEDULED = "PodsScheduled"
POD_GROUP_UNSCHEDULABLE = "PodGroupUnschedulable"
POD_GROUP_PREEMPTED = "PodGroupPreempted"
PODS_LOST = "PodsLost"
COMPOSITE_POD_GROUP_SCHEDULED = "CompositePodGroupScheduled"
COMPOSITE_POD_GROUP_UNSCHEDULABLE = "CompositePodGroupUnschedulable"

INPUT_TYPES = (NODE_UPSERTED, NODE_REMOVED, DEVICE_CLASS_UPSERTED, DEVICE_CLASS_REMOVED,
               RESOURCE_SLICE_UPSERTED, RESOURCE_SLICE_REMOVED, PRIORITY_CLASS_UPSERTED,
               WORKLOAD_SUBMITTED, WORKLOAD_DELETED, COMMAND_REJECTED, PODS_FINISHED, WORKLOAD_SCALED,
               POD_GROUP_CREATED, POD_GROUP_DELETED,
               SCHEDULER_CONFIGURED)
DECISION_TYPES = (POD_GROUP_SCHEDULED, PODS_SCHEDULED, POD_GROUP_UNSCHEDULABLE,
                  POD_GROUP_PREEMPTED, PODS_LOST, COMPOSITE_POD_GROUP_SCHEDULED,
                  COMPOSITE_POD_GROUP_UNSCHEDULABLE)

# current schemaVersion of every type; older versions are upcast on read (upcasting.py)
# (decisions at 2: `rules` added, reasons as codes and numbers, no words; audit.md)
SCHEMA_VERSIONS: dict[str, int] = {**{t: 1 for t in INPUT_TYPES}, **{t: 2 for t in DECISION_TYPES}}


@dataclass(frozen=True)
class Event:
    """A domain event: its position in the cluster's stream, type and data."""
    position: int
    type: str
    data: dict[str, Any]

    @property
    def is_input(self) -> bool:
        return self.type in INPUT_TYPES
