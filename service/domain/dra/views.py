"""Claims and devices as views and events show them."""
from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from service.domain.dra import capacity
from service.domain.dra import claims as cl
from service.domain.dra.claims import GROUP, POD, WORKLOAD, Allocation, ClaimKey
from service.domain.dra.devices import DeviceState

if TYPE_CHECKING:
    from service.domain.model.workload import Group


def share_id(cluster: str, g: Group, key: ClaimKey, request: str, k: int) -> str:
    """sharing.md, *Allocation*: a UUID v5 in the URL namespace, the same on replay."""
    group = "-" if key[0] == WORKLOAD else g.spec.name
    pod = g.spec.pod_names[key[3]] if key[0] == POD else "-"
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{cluster}/{key[1]}/{key[0]}/{group}/{pod}/{key[-1]}/{request}/{k}"))


def _devices(ds: DeviceState, ids: Iterable[int]) -> list[dict[str, str]]:
    devs = ds.devices
    return [{"driver": devs[d].ident[0], "pool": devs[d].ident[1], "device": devs[d].ident[2]} for d in ids]


def _alloc_devices(ds: DeviceState, g: Group, a: Allocation) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = list(_devices(ds, a.device_ids))
    if a.shares is not None:
        for entry, share in zip(out, a.shares, strict=True):
            if share is not None:
                entry["shareID"] = share_id(ds.cluster, g, a.claim, share[0], share[1])
                entry["consumedCapacity"] = capacity.amounts_view(share[2])
    return out


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
            "devices": _alloc_devices(ds, g, a), "reservedFor": _reserved_for(g, a)}


def describe_allocations(ds: DeviceState, g: Group, allocations: list[Allocation]) -> list[dict[str, Any]]:
    return [_claim_view(ds, g, a) for a in allocations]


def claim_views(ds: DeviceState, g: Group) -> list[dict[str, Any]]:
    """The allocated claims the group uses: its own, the workload's it uses, its pods'."""
    if not ds.by_workload.get(g.workload.position) and not ds.by_workload.get(g.workload.home.position):
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
        "shares": sorted([list(devs[d].ident), sorted(used.items()), ds.nshares.get(d, 0)]
                         for d, used in ds.used.items()),
    }


def device_usage(ds: DeviceState, slice_name: str, whose: Any) -> list[dict[str, Any]]:
    """sharing.md, *Views*: per device the slice publishes, its live allocations and, on a
    shareable device, what they consume. `whose(key)` gives (group, the claim's owner fields)."""
    sl = ds.slices.get(slice_name)
    if sl is None:
        return []
    out = []
    for name in sorted(sl.devices):
        did = ds.ident_id.get(sl.ident(name))
        if did is None:
            continue
        dev = ds.devices[did]
        allocations = []
        keys = sorted(ds.sharers.get(did, ()))
        owner = ds.owner.get(did)
        if owner is not None:
            keys = [owner, *keys]
        total: dict[str, int] = {n: 0 for n in dev.caps}
        for key in keys:
            a = ds.claims.get(key)
            if a is None:
                continue
            g, base = whose(key)
            for i, d in enumerate(a.device_ids):
                if d != did:
                    continue
                share = a.share(i)
                entry = {**base, "claim": a.name, "sharing": a.sharing, "request": _request_of(ds, g, a, i, share)}
                if share is not None:
                    entry["shareID"] = share_id(ds.cluster, g, key, share[0], share[1])
                    entry["consumedCapacity"] = capacity.amounts_view(share[2])
                    for n, v in share[2]:
                        total[n] = total.get(n, 0) + v
                allocations.append(entry)
        allocations.sort(key=lambda e: e.get("shareID", ""))
        view: dict[str, Any] = {"name": name, "allocations": allocations}
        if dev.shareable or ds.sharers.get(did):
            view["consumedCapacity"] = capacity.amounts_view(tuple(sorted(total.items())))
        out.append(view)
    return out


def _request_of(ds: DeviceState, g: Group, a: Allocation, i: int, share: Any) -> str:
    if share is not None:
        return str(share[0])
    seen = 0
    for req in cl.template_of(ds, g, a.claim).requests:
        seen += req.count if not req.all else len(a.device_ids)
        if i < seen:
            return req.name
    return ""
