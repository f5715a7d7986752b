"""The device state (`ClusterState.dra`): devices, live claims, and which devices are busy.

- devices, one per identity (driver, pool, device name), with a stable integer id;
- the live claims (`claims`: claim key -> Allocation) and, per device, whether it is busy
  (`busy`, a numpy bool array by device id). `busy` is also where trial allocations
  (`Ledger`) and the preemption simulation (`Release`) mark and unmark devices; both undo
  what they did, last in first out, like the node table's trial usage.

Methods that need the nodes take the node table, never the cluster state.
"""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from service.domain.dra import search
from service.domain.dra.claims import Allocation, ClaimKey, GroupInfo, Template
from service.domain.dra.index import Index
from service.domain.dra.inventory import ALL, NODE, SELECTOR, Device, Ident, Slice
from service.domain.nodes import NodeTable


class DeviceState:
    def __init__(self) -> None:
        self.classes: dict[str, tuple[str, ...]] = {}  # class -> its selector expressions
        self.slices: dict[str, Slice] = {}
        self.devices: list[Device] = []  # by id
        self.ident_id: dict[Ident, int] = {}
        self.publishers: dict[Ident, list[str]] = {}
        self.busy = np.zeros(0, dtype=bool)
        self.claims: dict[ClaimKey, Allocation] = {}
        self.owner: dict[int, ClaimKey] = {}
        self.by_workload: dict[int, set[ClaimKey]] = {}
        self.version = 0
        self.rank_of: dict[int, int] = {}
        self._index: tuple[int, int, Index] | None = None
        self.infos: dict[tuple[int, int], GroupInfo] = {}  # claims.info, per (workload position, group)
        self.lost: tuple[int, list[Allocation]] | None = None  # claims the last slice change lost
        self.freed: set[int] = set()  # devices freed since the last take_freed

    # -- lookups ----------------------------------------------------------------------
    def index(self, nodes: NodeTable) -> Index:
        cached = self._index
        if cached is None or cached[0] != self.version or cached[1] != nodes.version:
            cached = (self.version, nodes.version, Index(self))
            self._index = cached
        return cached[2]

    def device_id(self, ident: Ident) -> int:
        did = self.ident_id.get(ident)
        if did is None:
            did = len(self.devices)
            self.ident_id[ident] = did
            self.devices.append(Device(did, ident))
            if did >= len(self.busy):
                self.busy = np.concatenate([self.busy, np.zeros(max(64, len(self.busy)), dtype=bool)])
        return did

    def reaches(self, nodes: NodeTable, did: int, row: int) -> bool:
        dev = self.devices[did]
        if not dev.alive:
            return False
        if dev.kind == NODE:
            return nodes.index.get(dev.node or "") == row
        if dev.kind == ALL:
            return True
        labels = nodes.labels[row]
        return all(labels.get(k) == v for k, v in dev.selector)

    def reach_mask(self, nodes: NodeTable, ids: Iterable[int]) -> np.ndarray:
        """Rows that reach every one of these devices."""
        n = nodes.count
        mask = np.ones(n, dtype=bool)
        for did in ids:
            dev = self.devices[did]
            if not dev.alive:
                return np.zeros(n, dtype=bool)
            if dev.kind == NODE:
                row = nodes.index.get(dev.node or "")
                one = np.zeros(n, dtype=bool)
                if row is not None:
                    one[row] = True
                mask &= one
            elif dev.kind == SELECTOR:
                mask &= nodes.selector_mask(dev.selector)[:n]
        return mask

    def reach_any(self, nodes: NodeTable, ids: Iterable[int]) -> np.ndarray:
        """Rows that reach at least one of these devices."""
        n = nodes.count
        mask = np.zeros(n, dtype=bool)
        for did in ids:
            dev = self.devices[did]
            if not dev.alive:
                continue
            if dev.kind == NODE:
                row = nodes.index.get(dev.node or "")
                if row is not None:
                    mask[row] = True
            elif dev.kind == ALL:
                return np.ones(n, dtype=bool)
            else:
                mask |= nodes.selector_mask(dev.selector)[:n]
        return mask

    def take_freed(self) -> set[int]:
        """Devices freed since the last call (the queue's bounds grow where they are reached)."""
        freed, self.freed = self.freed, set()
        return freed

    def usable(self, nodes: NodeTable, did: int) -> bool:
        """False for a device reachable only through a node that is gone."""
        dev = self.devices[did]
        if not dev.alive:
            return False
        if dev.kind != NODE:
            return True
        row = nodes.index.get(dev.node or "")
        return row is not None and bool(nodes.alive[row])

    # -- live claims ----------------------------------------------------------------------
    def add_claim(self, alloc: Allocation) -> None:
        old = self.claims.get(alloc.claim)
        if old is not None:
            self.drop_claim(old.claim)
        self.claims[alloc.claim] = alloc
        self.by_workload.setdefault(alloc.claim[1], set()).add(alloc.claim)
        for d in alloc.device_ids:
            self.owner[d] = alloc.claim
            self.busy[d] = True

    def drop_claim(self, key: ClaimKey) -> Allocation | None:
        alloc = self.claims.pop(key, None)
        if alloc is None:
            return None
        keys = self.by_workload.get(key[1])
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self.by_workload[key[1]]
        freed = self.freed
        for d in alloc.device_ids:
            if self.owner.get(d) == key:
                del self.owner[d]
                self.busy[d] = False
                freed.add(d)
        return alloc

    # -- allocation -----------------------------------------------------------------------
    def allocate(self, nodes: NodeTable, t: Template, row: int) -> tuple[int, ...] | None:
        """The devices the claim gets on this node, or None: model.md's deterministic rule."""
        if t.error is not None or not t.requests:
            return None if t.error is not None else ()
        index = self.index(nodes)
        busy = self.busy
        full: list[tuple[int, ...]] = []
        free: list[list[int]] = []
        for req in t.requests:
            m = index.matcher(nodes, self, req)
            if m is None:
                return None
            cands = m.candidates(nodes, row)
            if req.all:
                if not cands or any(busy[d] for d in cands):
                    return None
                full.append(cands)
                free.append(list(cands))
            else:
                f = [d for d in cands if not busy[d]]
                if len(f) < req.count:
                    return None
                full.append(cands)
                free.append(f)
        return search.choose(t, full, free, self.devices)
