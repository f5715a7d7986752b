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

from service.domain.dra import capacity, search, sharing
from service.domain.dra.claims import Allocation, ClaimKey, GroupInfo, Request, Template
from service.domain.dra.index import Index
from service.domain.dra.inventory import ALL, NODE, SELECTOR, Device, Ident, Slice
from service.domain.nodes.table import NodeTable


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
        # consumable capacity (sharing.md): per device, what its shares consume (live and on
        # trial), how many shares hold it, and the claims of its live shares
        self.used: dict[int, dict[str, int]] = {}
        self.nshares: dict[int, int] = {}
        self.sharers: dict[int, set[ClaimKey]] = {}
        self.cap_used: dict[str, np.ndarray] = {}  # the same sums, per capacity name, by device id
        self.share_count = np.zeros(0, dtype=np.int64)  # nshares by device id
        self.cluster = ""  # the cluster's name (shareIDs)
        self._shareable: tuple[int, bool] | None = None

    def __getstate__(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if k != "fa_measure"}  # a cache (fragmentation.py)

    def __setstate__(self, saved: dict[str, object]) -> None:
        """Snapshots taken before consumable capacity lack its fields (no share was possible)."""
        self.__dict__.update(saved)
        for name in ("used", "nshares", "sharers", "cap_used"):
            self.__dict__.setdefault(name, {})
        self.__dict__.setdefault("share_count", np.zeros(len(self.busy), dtype=np.int64))
        self.__dict__.setdefault("cluster", "")
        self.__dict__.setdefault("_shareable", None)

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
            self._grow()
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

    def _grow(self) -> None:
        n = len(self.busy)
        if len(self.share_count) < n:
            self.share_count = np.concatenate([self.share_count, np.zeros(n - len(self.share_count), np.int64)])
        for name, arr in list(self.cap_used.items()):
            if len(arr) < n:
                self.cap_used[name] = np.concatenate([arr, np.zeros(n - len(arr), dtype=np.int64)])

    def any_shareable(self) -> bool:
        cached = self._shareable
        if cached is None or cached[0] != self.version:
            cached = (self.version, any(d.alive and d.shareable for d in self.devices) or bool(self.nshares))
            self._shareable = cached
        return cached[1]

    # -- shares -------------------------------------------------------------------------
    def add_share(self, d: int, amounts: tuple[tuple[str, int], ...], sign: int) -> None:
        """Count (sign 1) or uncount (-1) one share's consumption on device d."""
        used = self.used.setdefault(d, {})
        self._grow()
        cap_used = self.cap_used
        for name, v in amounts:
            used[name] = used.get(name, 0) + sign * v
            arr = cap_used.get(name)
            if arr is None:
                arr = cap_used[name] = np.zeros(len(self.busy), dtype=np.int64)
            arr[d] += sign * v
        self.share_count[d] += sign
        n = self.nshares.get(d, 0) + sign
        if n:
            self.nshares[d] = n
        else:
            self.nshares.pop(d, None)
            self.used.pop(d, None)

    def can_share(self, d: int, req: Request, extra: dict[int, dict[str, int]] | None = None,
                  taken: set[int] | None = None) -> tuple[tuple[str, int], ...] | None:
        """What one allocation of req would consume on shareable device d, or None when d
        cannot take it now (`extra`: consumption already chosen in this allocation)."""
        dev = self.devices[d]
        if self.busy[d] or not dev.shareable:
            return None
        amounts = capacity.consumption(dev.caps, req.capacity)
        if amounts is None:
            return None
        used = self.used.get(d)
        more = extra.get(d) if extra else None
        for name, v in amounts:
            total = v + (used.get(name, 0) if used else 0) + (more.get(name, 0) if more else 0)
            if total > dev.caps[name].value:
                return None
        return amounts

    def can_take_exclusive(self, d: int, req: Request) -> bool:
        dev = self.devices[d]
        if self.busy[d] or dev.shareable or d in self.nshares:
            return False
        return not req.capacity or capacity.exclusive_fits(dev.caps, req.capacity)

    # -- live claims ----------------------------------------------------------------------
    def add_claim(self, alloc: Allocation) -> None:
        old = self.claims.get(alloc.claim)
        if old is not None:
            self.drop_claim(old.claim)
        self.claims[alloc.claim] = alloc
        self.by_workload.setdefault(alloc.claim[1], set()).add(alloc.claim)
        for i, d in enumerate(alloc.device_ids):
            share = alloc.share(i)
            if share is None:
                self.owner[d] = alloc.claim
                self.busy[d] = True
            else:
                self.add_share(d, share[2], 1)
                self.sharers.setdefault(d, set()).add(alloc.claim)

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
        for i, d in enumerate(alloc.device_ids):
            share = alloc.share(i)
            if share is not None:
                holders = self.sharers.get(d)
                if holders is not None and key in holders:
                    holders.discard(key)
                    if not holders:
                        del self.sharers[d]
                    self.add_share(d, share[2], -1)
                    freed.add(d)
            elif self.owner.get(d) == key:
                del self.owner[d]
                self.busy[d] = False
                freed.add(d)
        return alloc

    # -- allocation -----------------------------------------------------------------------
    def allocate(self, nodes: NodeTable, t: Template, row: int,
                 chooser: sharing.Chooser | None = None) -> sharing.Chosen | None:
        """The devices the claim gets on this node (with the shares on shareable devices), or
        None: model.md's deterministic rule, sharing.md's with consumable capacity."""
        if t.error is not None or not t.requests:
            return None if t.error is not None else ((), None)
        if t.sharing_aware or chooser is not None or self.any_shareable():
            return sharing.allocate(self, nodes, t, row, chooser)
        ids = self._allocate_exclusive(nodes, t, row)
        return None if ids is None else (ids, None)

    def _allocate_exclusive(self, nodes: NodeTable, t: Template, row: int) -> tuple[int, ...] | None:
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
