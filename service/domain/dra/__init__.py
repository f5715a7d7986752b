"""DRA device allocation (model.md *Devices*): pure, deterministic, indexed per node.

One concern per module:
- `cel`: CEL selectors, compiled once, evaluated once per distinct device;
- `inventory`: resource slices and the devices they publish;
- `claims`: claim templates, claim keys, and which claims each pod of a group uses;
- `index`: per matcher (class + selectors) the matching devices, per node row;
- `search`: which candidate devices a claim gets on one node (matchAttribute search);
- `capacity`: consumable capacity: request policies, consumption, canonical amounts;
- `sharing`: allocation with shareable devices, capacity requests and distinctAttribute;
- `devices`: the device state (`ClusterState.dra`): devices, live claims, busy devices;
- `ledger`: trial allocation while placement places pods;
- `explain`: why a pod's claims cannot be allocated;
- `release`: what releasing pods frees (events, the preemption simulation, lost devices);
- `changes`: the device state's part of `evolve`;
- `views`: claims as views and events show them.

Nothing here takes the cluster state: the device state and the node table are passed, so the
package depends on `nodes`, `model` and `workload` only (and `state` depends on it).
"""
from service.domain.dra.changes import (
    claims_allocated,
    claims_dropped,
    claims_moved,
    remove_class,
    remove_slice,
    upsert_class,
    upsert_slice,
    workload_released,
)
from service.domain.dra.claims import GROUP, POD, WORKLOAD, Allocation, group_needs_devices, pod_needs_devices
from service.domain.dra.devices import DeviceState
from service.domain.dra.explain import explain_pod
from service.domain.dra.ledger import Ledger
from service.domain.dra.release import Loss, Release, Reprieve, claims_released, held_devices, losses, unit_conflicts
from service.domain.dra.views import canonical, claim_views, describe_allocations, device_usage

__all__ = [
    "GROUP", "POD", "WORKLOAD", "Allocation", "DeviceState", "Ledger", "Loss", "Release", "Reprieve", "canonical",
    "claim_views", "claims_allocated", "claims_moved", "device_usage", "claims_dropped", "claims_released",
    "describe_allocations",
    "explain_pod", "group_needs_devices", "held_devices", "losses", "pod_needs_devices", "remove_class",
    "remove_slice", "unit_conflicts", "upsert_class", "upsert_slice", "workload_released",
]
