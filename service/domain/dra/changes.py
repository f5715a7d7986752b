"""The device state's part of `evolve`: classes, slices and claims as events change them.

evolve.py keeps the rest of the cluster state in step (the bodies as given, the queue's skip
index, whose bounds a change of devices voids).
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from service.domain.dra import capacity, views
from service.domain.dra import claims as cl
from service.domain.dra.claims import POD, Allocation, ClaimKey, Share
from service.domain.dra.devices import DeviceState
from service.domain.dra.inventory import Ident, Slice

if TYPE_CHECKING:
    from service.domain.model.workload import Group, Workload


def upsert_class(ds: DeviceState, name: str, body: dict[str, Any]) -> None:
    ds.classes[name] = tuple(s["cel"]["expression"] for s in body.get("selectors") or ())
    ds.version += 1


def remove_class(ds: DeviceState, name: str) -> None:
    ds.classes.pop(name, None)
    ds.version += 1


def upsert_slice(ds: DeviceState, name: str, body: dict[str, Any], at: int) -> None:
    """`at`: the position of the event (the claims it loses are `ds.lost`, for the decider)."""
    _slice_changed(ds, name, Slice(name, body), at)


def remove_slice(ds: DeviceState, name: str, at: int) -> None:
    _slice_changed(ds, name, None, at)


def _slice_changed(ds: DeviceState, name: str, new: Slice | None, at: int) -> None:
    old = ds.slices.pop(name, None)
    idents: list[Ident] = []
    if old is not None:
        for dev in old.devices:
            ident = old.ident(dev)
            idents.append(ident)
            pubs = ds.publishers.get(ident)
            if pubs is not None and name in pubs:
                pubs.remove(name)
    if new is not None:
        ds.slices[name] = new
        for dev in new.devices:
            ident = new.ident(dev)
            idents.append(ident)
            pubs = ds.publishers.setdefault(ident, [])
            pubs.append(name)
            pubs.sort()
    lost_keys: set[ClaimKey] = set()
    for ident in idents:
        did = ds.device_id(ident)
        device = ds.devices[did]
        pubs = ds.publishers.get(ident)
        if pubs:
            provider = ds.slices[pubs[0]]
            device.load(provider, provider.devices[ident[2]])
        else:
            ds.publishers.pop(ident, None)
            device.alive = False
            owner = ds.owner.get(did)
            if owner is not None:
                lost_keys.add(owner)
            lost_keys.update(ds.sharers.get(did, ()))
    lost = [a for a in (ds.drop_claim(k) for k in sorted(lost_keys)) if a is not None]
    ds.lost = (at, lost)
    ds.version += 1


def workload_released(ds: DeviceState, wl: Workload) -> None:
    """Deletion: every claim of the workload is freed."""
    for key in sorted(ds.by_workload.get(wl.position, ())):
        ds.drop_claim(key)


def claims_allocated(ds: DeviceState, g: Group, claims: list[dict[str, Any]]) -> None:
    """Fold a decision's allocations (PodGroupScheduled / PodsScheduled "claims")."""
    for c in claims:
        key = cl.key_of(g, c)
        if key is None:
            continue
        devices = c.get("devices") or ()
        ids = tuple(ds.device_id((d["driver"], d["pool"], d["device"])) for d in devices)
        shares = _shares(ds, g, key, devices) if any("shareID" in d for d in devices) else None
        ds.add_claim(Allocation(key, c["name"], c["sharing"], key[3] if c["sharing"] == POD else None, ids, shares))


def _shares(ds: DeviceState, g: Group, key: ClaimKey, devices: Any) -> tuple[Share | None, ...]:
    """The shares of a recorded allocation: each device's request and index among the
    request's results, in the claim's request order (an `All` request's count is read from the
    shareIDs), and what it consumes."""
    requests = cl.template_of(ds, g, key).requests
    out: list[Share | None] = []
    r, k = 0, 0
    for d in devices:
        while r < len(requests) and not requests[r].all and k >= requests[r].count:
            r, k = r + 1, 0
        if r < len(requests) and requests[r].all and "shareID" in d and r + 1 < len(requests):
            if d["shareID"] != views.share_id(ds.cluster, g, key, requests[r].name, k):
                r, k = r + 1, 0
        name = requests[r].name if r < len(requests) else ""
        out.append((name, k, capacity.parse_amounts(d["consumedCapacity"])) if "shareID" in d else None)
        k += 1
    return tuple(out)


def claims_dropped(ds: DeviceState, g: Group, released: list[dict[str, Any]] | None) -> None:
    """Fold a PodGroupPreempted / PodsLost: free the claims its "claimsReleased" lists."""
    for desc in released or ():
        key = cl.key_of(g, desc)
        if key is not None:
            ds.drop_claim(key)


def claims_moved(ds: DeviceState, position: int, groups: dict[int, int],
                 pods: dict[tuple[int, int], tuple[int, int]]) -> None:
    """A change of sizes moved the workload's groups and pods to new indices (lifecycle.md):
    its claims keep their devices under the keys of the new indices. Nothing is freed."""
    freed = set(ds.freed)
    moved: list[tuple[ClaimKey, ClaimKey, int | None]] = []
    for key in sorted(ds.by_workload.get(position, ())):
        if key[0] == POD and pods.get((key[2], key[3]), (key[2], key[3])) != (key[2], key[3]):
            gi, to = pods[(key[2], key[3])]
            moved.append((key, (POD, position, gi, to, key[4]), to))
        elif key[0] == cl.GROUP and groups.get(key[2], key[2]) != key[2]:
            moved.append((key, (cl.GROUP, position, groups[key[2]], key[3]), None))
    allocs = [(ds.drop_claim(old), new, at) for old, new, at in moved]
    for alloc, new, at in allocs:
        assert alloc is not None
        ds.add_claim(replace(alloc, claim=new, pod=at if at is not None else alloc.pod))
    ds.freed = freed
