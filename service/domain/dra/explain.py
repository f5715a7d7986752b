"""Why a pod's claims cannot be allocated (the devices part of an explanation)."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from service.domain.dra import claims as cl
from service.domain.dra.claims import POD, Request, Share, Template, Use
from service.domain.dra.devices import DeviceState
from service.domain.dra.index import MatcherKey
from service.domain.dra.ledger import Ledger

if TYPE_CHECKING:
    from service.domain.model.workload import Group

Order = tuple[int, int, int]  # (use, request or -1 / past the last, kind): the entries' order
Entry = Callable[..., None]  # entry(order, base, nodes, **extra)


def explain_pod(ledger: Ledger, g: Group, pod: int, rows: np.ndarray | None = None) -> dict[str, Any] | None:
    """Why the pod's claims cannot be allocated on these rows (nodes that passed every other
    filter): per claim and request, the nodes short of devices, with what they need and the
    most any of them has free / reaches; constraints that no free devices satisfy; shared
    claims whose allocated devices the nodes do not reach."""
    ds, nodes = ledger.ds, ledger.nodes
    if rows is None:
        rows = np.flatnonzero(nodes.schedulable[: nodes.count])
    rows = np.asarray(rows, dtype=np.int64)
    if not len(rows):
        return None
    entries: dict[Order, dict[str, Any]] = {}
    pod_name = g.spec.pod_names[pod]

    def entry(order: Order, base: dict[str, Any], k: int, **extra: Any) -> None:
        if k <= 0:
            return
        e = entries.get(order)
        if e is None:
            e = {**base, "nodes": 0, **extra}
            entries[order] = e
        e["nodes"] += k
        for name in ("available", "reachable"):
            if name in extra:
                e[name] = max(e[name], extra[name])

    uses = cl.pod_uses(ds, g, pod)
    remaining = np.ones(len(rows), dtype=bool)
    need: dict[MatcherKey, int] = {}
    index = ds.index(nodes)
    for u, use in enumerate(uses):
        base = {"claim": use.name, "sharing": use.sharing, "pod": pod_name if use.sharing == POD else None}
        alloc = ledger.allocation(cl.key(g, pod, use))
        if alloc is not None:
            if use.consumer:
                ok = ds.reach_mask(nodes, alloc.device_ids)[rows]
                entry((u, -1, 0), {**base, "reason": "AllocatedDevicesNotReachable"},
                      int(np.count_nonzero(remaining & ~ok)))
                remaining &= ok
            continue
        if use.template.error is not None:
            entry((u, -1, 1), {**base, "reason": use.template.error}, int(np.count_nonzero(remaining)))
            remaining[:] = False
            break
        for r, req in enumerate(use.template.requests):
            m = index.matcher(nodes, ds, req)
            rbase = {**base, "request": req.name, "deviceClassName": req.device_class,
                     "needed": "All" if req.all else req.count}
            if m is None:
                entry((u, r, 0), {**rbase, "reason": "DeviceClassNotFound"}, int(np.count_nonzero(remaining)))
                remaining[:] = False
                break
            total = m.counts(nodes, None)[rows]
            free = m.counts(nodes, ds.busy)[rows]
            if req.all:
                ok = (total >= 1) & (free == total)
            else:
                key = (req.device_class, req.selectors)
                need[key] = need.get(key, 0) + req.count
                ok = free >= need[key]
            bad = remaining & ~ok
            if bad.any():
                entry((u, r, 0), {**rbase, "reason": "InsufficientDevices"}, int(np.count_nonzero(bad)),
                      available=int(free[bad].max()), reachable=int(total[bad].max()))
            remaining &= ok
    for row in rows[remaining]:
        _diagnose(ledger, g, pod, int(row), uses, entry)
    if not entries:
        return None
    return {"claims": [entries[k] for k in sorted(entries)]}


def _diagnose(ledger: Ledger, g: Group, pod: int, row: int, uses: tuple[Use, ...], entry: Entry) -> None:
    """The exact first failure on one row (the counts said enough devices)."""
    ds, nodes = ledger.ds, ledger.nodes
    pod_name = g.spec.pod_names[pod]
    taken: list[tuple[int, Share | None]] = []
    try:
        for u, use in enumerate(uses):
            base = {"claim": use.name, "sharing": use.sharing, "pod": pod_name if use.sharing == POD else None}
            alloc = ledger.allocation(cl.key(g, pod, use))
            if alloc is not None:
                if use.consumer and not all(ds.reaches(nodes, d, row) for d in alloc.device_ids):
                    entry((u, -1, 0), {**base, "reason": "AllocatedDevicesNotReachable"}, 1)
                    return
                continue
            got = ds.allocate(nodes, use.template, row)
            if got is not None:
                ids, shares = got
                for i, d in enumerate(ids):
                    share = shares[i] if shares is not None else None
                    if share is None:
                        ds.busy[d] = True
                    else:
                        ds.add_share(d, share[2], 1)
                    taken.append((d, share))
                continue
            unconstrained = Template(use.template.requests, ())
            if use.template.constraints and ds.allocate(nodes, unconstrained, row) is not None:
                entry((u, len(use.template.requests), 0), {
                    **base, "reason": "ConstraintNotSatisfied",
                    "constraints": [{"matchAttribute": attr,
                                     "requests": [use.template.requests[i].name for i in members]}
                                    for attr, members in use.template.constraints]}, 1)
                return
            # a request short once earlier requests of this claim took their devices
            index = ds.index(nodes)
            for r, req in enumerate(use.template.requests):
                if ds.allocate(nodes, Template(use.template.requests[: r + 1], ()), row) is None:
                    m = index.matcher(nodes, ds, req)
                    cands = m.candidates(nodes, row) if m is not None else ()
                    entry((u, r, 0), {**base, "request": req.name, "deviceClassName": req.device_class,
                                      "needed": "All" if req.all else req.count,
                                      "reason": "InsufficientDevices"}, 1,
                          available=sum(1 for d in cands if _free(ds, d, req)), reachable=len(cands))
                    return
            entry((u, -1, 2), {**base, "reason": "InsufficientDevices"}, 1)  # pragma: no cover
            return
    finally:
        for d, share in taken:
            if share is None:
                ds.busy[d] = False
            else:
                ds.add_share(d, share[2], -1)


def _free(ds: DeviceState, d: int, req: Request) -> bool:
    """Can take the request now (sharing.md: a device short of capacity is reachable only)."""
    if not req.capacity and not ds.devices[d].shareable and not ds.nshares:
        return not ds.busy[d]
    if ds.devices[d].shareable:
        return ds.can_share(d, req) is not None
    return ds.can_take_exclusive(d, req)
