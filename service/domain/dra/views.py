"""Claims and devices as views and events show them."""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from service.domain.dra import claims as cl
from service.domain.dra.claims import GROUP, POD, Allocation
from service.domain.dra.devices import DeviceState

if TYPE_CHECKING:
    from service.domain.workload import Group


def _devices(ds: DeviceState, ids: Iterable[int]) -> list[dict[str, str]]:
    devs = ds.devices
    return [{"driver": devs[d].ident[0], "pool": devs[d].ident[1], "device": devs[d].ident[2]} for d in ids]


def _reserved_for(g: Group, a: Allocation) -> list[dict[str, str]]:
    if a.sharing == POD:
        assert a.pod is not None  # a per-pod claim names its pod
        return [{"kind": "Pod", "name": g.spec.pod_names[a.pod]}]
    if a.sharing == GROUP:
        return [{"kind": "PodGroup", "name": g.spec.name}]
    return [{"kind": "Workload", "name": g.workload.spec.name}]


def _claim_view(ds: DeviceState, g: Group, a: Allocation) -> dict[str, Any]:
    return {"name": a.name, "sharing": a.sharing,
            "pod": g.spec.pod_names[a.pod] if a.sharing == POD and a.pod is not None else None,
            "devices": _devices(ds, a.device_ids), "reservedFor": _reserved_for(g, a)}


def describe_allocations(ds: DeviceState, g: Group, allocations: list[Allocation]) -> list[dict[str, Any]]:
    return [_claim_view(ds, g, a) for a in allocations]


def claim_views(ds: DeviceState, g: Group) -> list[dict[str, Any]]:
    """The allocated claims the group uses: its own, the workload's it uses, its pods'."""
    if not ds.by_workload.get(g.workload.position):
        return []
    info = cl.info(ds, g)
    out = []
    for use in info.group_uses + info.wl_uses:
        a = ds.claims.get(cl.key(g, -1, use))
        if a is not None:
            out.append(_claim_view(ds, g, a))
    if any(u.sharing == POD for uses in info.shape_uses.values() for u in uses):
        for p, node in enumerate(g.node_of):
            if node < 0:
                continue
            for use in info.shape_uses.get(g.spec.pod_shapes[p], ()):
                if use.sharing == POD:
                    a = ds.claims.get(cl.key(g, p, use))
                    if a is not None:
                        out.append(_claim_view(ds, g, a))
    return out


def canonical(ds: DeviceState) -> Any:
    """Every allocation, and the devices marked busy (which must be exactly theirs)."""
    devs = ds.devices
    return {
        "claims": [{"key": list(k), "devices": [list(devs[d].ident) for d in ds.claims[k].device_ids]}
                   for k in sorted(ds.claims)],
        "busy": sorted(list(devs[int(d)].ident) for d in np.flatnonzero(ds.busy)),
        "devices": sorted([list(d.ident), d.slice] for d in devs if d.alive),
    }
