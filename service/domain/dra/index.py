"""The per-matcher device index (rebuilt lazily when slices, classes or nodes change).

Per matcher (device class + request selectors): the matching devices in (slice name, device
name) order, split into node-local devices (with their node row, for a bincount of free devices
per node) and shared slices (allNodes / nodeSelector, counted once and spread over their node
mask); per node row, the candidate list a claim on that node draws from.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from service.domain.dra.cel import evaluate
from service.domain.dra.claims import Request
from service.domain.dra.inventory import ALL, NODE, Selector
from service.domain.nodes.table import NodeTable

if TYPE_CHECKING:
    from service.domain.dra.devices import DeviceState

MatcherKey = tuple[str, tuple[str, ...]]  # (device class, request selectors)


class Matcher:
    """The devices matching one (class, request selectors), alive, in (slice, device) order."""

    def __init__(self, nodes: NodeTable, ds: DeviceState, order: list[int], exprs: tuple[str, ...]) -> None:
        devs = ds.devices
        ids = [d for d in order if all(evaluate(e, devs[d].ctx_key) for e in exprs)]
        local_ids: list[int] = []
        local_rows: list[int] = []
        self.by_row: dict[int, list[int]] = {}
        shared: dict[str, list[int]] = {}
        for d in ids:
            dev = devs[d]
            if dev.kind == NODE:
                row = nodes.index.get(dev.node or "")
                if row is not None:
                    local_ids.append(d)
                    local_rows.append(row)
                    self.by_row.setdefault(row, []).append(d)
            else:
                shared.setdefault(dev.slice, []).append(d)
        self.local_ids = np.array(local_ids, dtype=np.int64)
        self.local_rows = np.array(local_rows, dtype=np.int64)
        self.shared: list[tuple[np.ndarray, int, Selector]] = [
            (np.array(v, dtype=np.int64), devs[v[0]].kind, devs[v[0]].selector) for _, v in sorted(shared.items())]
        self.rank = ds.rank_of
        self._rows: dict[int, tuple[int, ...]] = {}
        self._total: np.ndarray | None = None

    def candidates(self, nodes: NodeTable, row: int) -> tuple[int, ...]:
        hit = self._rows.get(row)
        if hit is None:
            lst = list(self.by_row.get(row, ()))
            if self.shared:
                labels = nodes.labels[row]
                added = False
                for ids, kind, sel in self.shared:
                    if kind == ALL or all(labels.get(k) == v for k, v in sel):
                        lst.extend(int(d) for d in ids)
                        added = True
                if added:
                    lst.sort(key=self.rank.__getitem__)
            hit = tuple(lst)
            self._rows[row] = hit
        return hit

    def counts(self, nodes: NodeTable, busy: np.ndarray | None) -> np.ndarray:
        """Matching devices each node row reaches (free ones only, given `busy`)."""
        n = nodes.count
        if busy is None and self._total is not None and len(self._total) == n:
            return self._total
        out = np.zeros(n, dtype=np.int64)
        if len(self.local_ids):
            rows = self.local_rows if busy is None else self.local_rows[~busy[self.local_ids]]
            out += np.bincount(rows, minlength=n)[:n]
        for ids, kind, sel in self.shared:
            k = len(ids) if busy is None else int(np.count_nonzero(~busy[ids]))
            if k:
                out += k * _reach_mask(nodes, kind, sel)
        if busy is None:
            self._total = out
        return out


def _reach_mask(nodes: NodeTable, kind: int, sel: Selector) -> np.ndarray:
    n = nodes.count
    if kind == ALL:
        return nodes.alive[:n].astype(np.int64)
    return nodes.selector_mask(sel)[:n].astype(np.int64)


class Index:
    def __init__(self, ds: DeviceState) -> None:
        self.order = sorted((d.id for d in ds.devices if d.alive),
                            key=lambda i: (ds.devices[i].slice, ds.devices[i].ident[2]))
        ds.rank_of = {d: r for r, d in enumerate(self.order)}
        self.matchers: dict[MatcherKey, Matcher | None] = {}

    def matcher(self, nodes: NodeTable, ds: DeviceState, req: Request) -> Matcher | None:
        key = (req.device_class, req.selectors)
        if key not in self.matchers:
            cls = ds.classes.get(req.device_class)
            self.matchers[key] = None if cls is None else Matcher(nodes, ds, self.order, cls + req.selectors)
        return self.matchers[key]
