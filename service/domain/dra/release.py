"""What releasing placed pods frees: the claims events record as released, the devices the
preemption simulation gives back, and the pods a slice change leaves without their devices."""
from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from service.domain.dra import claims as cl
from service.domain.dra.claims import GROUP, POD, WORKLOAD, Allocation, ClaimKey
from service.domain.dra.devices import DeviceState
from service.domain.model import events as ev
from service.domain.nodes.statement import Statement
from service.domain.nodes.table import NodeTable

if TYPE_CHECKING:
    from service.domain.model.workload import Group, Workload


@dataclass(frozen=True)
class Loss:
    """Pods of one group whose claims lost devices, and the claims lost."""
    group: Group
    pods: list[int]
    claims: list[dict[str, Any]]


def usable_keys(ds: DeviceState, wl: Workload) -> Collection[ClaimKey]:
    """The live claims a workload's pods may use: its own and, for a PodGroup object, its owner's
    workload claims (lifecycle.md: shared by all its PodGroups, allocated once)."""
    own = ds.by_workload.get(wl.position, ())
    home = wl.home
    if home is wl:
        return own
    shared = [k for k in ds.by_workload.get(home.position, ()) if k[0] == WORKLOAD]
    return [*own, *shared] if shared else own


class Release:
    """The devices victim units give back, prefix by prefix of the removal order: their pods'
    own claims, and a group (workload) claim once no pod of its group (workload) is left."""

    def __init__(self, ds: DeviceState, units: list[tuple[Group, list[int]]],
                 statement: Statement | None = None) -> None:
        self.ds = ds
        self.statement = statement if statement is not None else Statement(None, ds)
        left: dict[int, int] = {}
        wl_left: dict[int, int] = {}
        self.freed: list[np.ndarray] = []
        self.shares: list[list[tuple[int, tuple[tuple[str, int], ...]]]] = []
        for g, pods in units:
            if id(g) not in left:
                left[id(g)] = g.placed
            wl = g.workload
            home = wl.home  # whose workload claims its pods share (a PodGroup object's owner)
            if home.position not in wl_left:
                wl_left[home.position] = sum(1 for o in home.groups if o.placed)
            ids: list[int] = []
            shares: list[tuple[int, tuple[tuple[str, int], ...]]] = []
            take = functools.partial(_take, ids, shares)

            keys = usable_keys(ds, wl)
            if keys:
                info = cl.info(ds, g)
                for p in pods:
                    for use in info.shape_uses.get(g.spec.pod_shapes[p], ()):
                        if use.sharing == POD:
                            a = ds.claims.get(cl.key(g, p, use))
                            if a is not None:
                                take(a)
                left[id(g)] -= len(pods)
                if left[id(g)] == 0:
                    for use in info.group_uses:
                        a = ds.claims.get(cl.key(g, -1, use))
                        if a is not None:
                            take(a)
                    wl_left[home.position] -= 1
                    if wl_left[home.position] == 0:
                        for key in sorted(k for k in keys if k[0] == WORKLOAD):
                            take(ds.claims[key])
            else:
                left[id(g)] -= len(pods)
                if left[id(g)] == 0:
                    wl_left[home.position] -= 1
            self.freed.append(np.array(ids, dtype=np.int64))
            self.shares.append(shares)
        self.applied = 0

    def set_prefix(self, units: int) -> None:
        statement = self.statement
        for i in range(self.applied, units):
            if len(self.freed[i]):
                statement.hold_all(self.freed[i], False)
            for d, amounts in self.shares[i]:
                statement.share(d, amounts, -1)
        for i in range(units, self.applied):
            if len(self.freed[i]):
                statement.hold_all(self.freed[i], True)
            for d, amounts in self.shares[i]:
                statement.share(d, amounts, 1)
        self.applied = units



class Reprieve:
    """The reprieve's device check (sharing.md *Preemption*), the one every preemption uses.

    Runs with the removed units off and the preemptor's allocations in place. Putting a unit
    back takes back its pods' own claims and, for a pod group (workload) with no pod placed at
    that moment, the group's (workload's) claims: a group or workload claim lives while its
    group (workload) has a pod placed (model.md *Devices*), whichever pod that is. The unit
    fits when none of them holds an exclusive device given to the preemptor and every capacity
    of every shared device stays within its value with the units kept before it."""

    def __init__(self, ds: DeviceState, removed: Iterable[tuple[Group, list[int]]],
                 preemptor: list[Allocation]) -> None:
        self.ds = ds
        self.held = {d for a in preemptor for i, d in enumerate(a.device_ids) if a.share(i) is None}
        self.placed: dict[int, int] = {}  # per group (id): pods placed now
        self.wl_placed: dict[int, int] = {}  # per workload (position): pods placed now
        for g, pods in removed:
            wl = g.workload
            if id(g) not in self.placed:
                self.placed[id(g)] = g.placed
            home = wl.home
            if home.position not in self.wl_placed:
                self.wl_placed[home.position] = sum(o.placed for o in home.groups)
            self.placed[id(g)] -= len(pods)
            self.wl_placed[home.position] -= len(pods)
        self.pending: dict[int, dict[str, int]] = {}  # what the units kept so far consume again

    def _taken_back(self, members: list[tuple[Group, list[int]]]) -> list[Allocation]:
        ds = self.ds
        out: list[Allocation] = []
        workloads: set[int] = set()
        for g, pods in members:
            wl = g.workload
            keys = usable_keys(ds, wl)
            if not keys:
                continue
            info = cl.info(ds, g)
            for p in pods:
                for use in info.shape_uses.get(g.spec.pod_shapes[p], ()):
                    if use.sharing == POD and (a := ds.claims.get(cl.key(g, p, use))) is not None:
                        out.append(a)
            if self.placed[id(g)] == 0:
                out.extend(a for use in info.group_uses if (a := ds.claims.get(cl.key(g, -1, use))) is not None)
            if self.wl_placed[wl.home.position] == 0 and wl.home.position not in workloads:
                workloads.add(wl.home.position)
                out.extend(ds.claims[k] for k in sorted(k for k in keys if k[0] == WORKLOAD))
        return out

    def fits(self, members: list[tuple[Group, list[int]]]) -> bool:
        """Would putting these pods back keep the preemptor's devices? If so, count them as back."""
        want: dict[int, dict[str, int]] = {}
        for a in self._taken_back(members):
            for i, d in enumerate(a.device_ids):
                share = a.share(i)
                if share is None:
                    if d in self.held:
                        return False  # it would take back a device the preemptor was given
                    continue
                more = want.setdefault(d, {})
                for name, v in share[2]:
                    more[name] = more.get(name, 0) + v
        devs, used = self.ds.devices, self.ds.used
        for d, more in want.items():
            caps = devs[d].caps
            now, back = used.get(d, {}), self.pending.get(d, {})
            if any(now.get(n, 0) + back.get(n, 0) + v > (caps[n].value if n in caps else 0) for n, v in more.items()):
                return False
        for d, more in want.items():
            back = self.pending.setdefault(d, {})
            for name, v in more.items():
                back[name] = back.get(name, 0) + v
        for g, pods in members:
            self.placed[id(g)] += len(pods)
            self.wl_placed[g.workload.home.position] += len(pods)
        return True


def _take(ids: list[int], shares: list[tuple[int, tuple[tuple[str, int], ...]]], a: Allocation) -> None:
    for i, d in enumerate(a.device_ids):
        share = a.share(i)
        if share is None:
            ids.append(d)
        else:
            shares.append((d, share[2]))


def held_devices(allocations: list[Allocation]) -> set[int]:
    """The exclusive devices given to the preemptor (shares are checked by capacity)."""
    return {d for a in allocations for i, d in enumerate(a.device_ids) if a.share(i) is None}


def unit_conflicts(ds: DeviceState, held: set[int], g: Group, pods: list[int]) -> bool:
    """Would putting these pods back take back any device in `held` (the preemptor's)?
    Counts their own claims and their group's and workload's claims."""
    keys = usable_keys(ds, g.workload)
    if not keys or not held:
        return False
    pods_set = set(pods)
    for key in keys:
        if key[0] == POD and (key[2] != g.index or key[3] not in pods_set):
            continue
        if key[0] == GROUP and key[2] != g.index:
            continue
        if any(d in held for d in ds.claims[key].device_ids):
            return True
    return False


def claims_released(ds: DeviceState, nodes: NodeTable, g: Group, pods: list[int]) -> list[dict[str, Any]]:
    """The claims that releasing these placed pods of g frees (model.md *Devices*): their own
    claims; the group's claims when no pod of it stays placed; the workload's when no pod of
    it stays placed; and a shared claim holding a device that only a removed node reached,
    once none of its consumers stays placed."""
    wl = g.workload
    keys = usable_keys(ds, wl)
    if not keys:
        return []
    released = {p for p in pods if g.node_of[p] >= 0}
    remaining = g.placed - len(released)
    wl_empty = remaining == 0 and all(o.placed == 0 for o in wl.home.groups if o is not g)
    info = cl.info(ds, g)
    out: list[ClaimKey] = []
    for p in sorted(released):
        for use in info.shape_uses.get(g.spec.pod_shapes[p], ()):
            if use.sharing == POD:
                key = cl.key(g, p, use)
                if key in ds.claims:
                    out.append(key)
    for use in info.group_uses:
        key = cl.key(g, -1, use)
        if key in ds.claims and (remaining == 0 or _orphaned(ds, nodes, key, g, released)):
            out.append(key)
    for key in sorted(k for k in keys if k[0] == WORKLOAD):
        if wl_empty or _orphaned(ds, nodes, key, g, released):
            out.append(key)
    return [cl.descriptor(g, k) for k in out]


def _orphaned(ds: DeviceState, nodes: NodeTable, key: ClaimKey, g: Group, released: set[int]) -> bool:
    """A shared claim with a device gone with its node, and no consumer left placed."""
    alloc = ds.claims[key]
    if all(ds.usable(nodes, d) for d in alloc.device_ids):
        return False
    wl = g.workload
    groups = [wl.groups[key[2]]] if key[0] == GROUP else wl.home.groups
    for o in groups:
        info = cl.info(ds, o)
        for p, node in enumerate(o.node_of):
            if node < 0 or (o is g and p in released):
                continue
            if any(u.name == key[-1] and u.sharing == key[0]
                   for u in info.shape_uses.get(o.spec.pod_shapes[p], ())):
                return False
    return True


def losses(ds: DeviceState, by_position: Mapping[int, Workload], input_event: ev.Event) -> list[Loss]:
    """After a slice change: the placed pods whose claims lost devices, by group."""
    if input_event.type not in (ev.RESOURCE_SLICE_UPSERTED, ev.RESOURCE_SLICE_REMOVED):
        return []
    if ds.lost is None or ds.lost[0] != input_event.position or not ds.lost[1]:
        return []
    by_group: dict[tuple[int, int], tuple[Group, set[int], list[dict[str, Any]]]] = {}

    def add(g: Group, pods: Iterable[int], key: ClaimKey) -> None:
        pods = list(pods)
        if not pods:
            return
        slot = by_group.setdefault((g.workload.position, g.index), (g, set(), []))
        slot[1].update(pods)
        desc = cl.descriptor(g, key)
        if desc not in slot[2]:
            slot[2].append(desc)

    for alloc in ds.lost[1]:
        key = alloc.claim
        wl = by_position[key[1]]
        if key[0] == POD:
            g = wl.groups[key[2]]
            if g.node_of[key[3]] >= 0:
                add(g, [key[3]], key)
            continue
        groups = [wl.groups[key[2]]] if key[0] == GROUP else wl.groups
        for g in groups:
            info = cl.info(ds, g)
            add(g, (p for p, node in enumerate(g.node_of) if node >= 0 and any(
                u.name == key[-1] and u.sharing == key[0]
                for u in info.shape_uses.get(g.spec.pod_shapes[p], ()))), key)
    return [Loss(g, sorted(pods), descs) for _, (g, pods, descs) in sorted(by_group.items())]
