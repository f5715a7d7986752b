"""The node table: capacity held as numpy arrays, one row per node ever seen.

Rows are never reused for another name, so a node index stays valid in events'
consequences and in caches; a removed node's row is marked dead. Free capacity is
`alloc - used`, which may go negative when a node shrinks below what runs on it.
Masks (schedulable, selector match, topology domain) are cached and dropped when
labels or the node set change, which is rare next to placements.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from service.domain.model.quantity import PODS
from service.domain.model.specs import NodeSpec, Taint

# A node that does not declare `pods` never runs out of them.
UNLIMITED = np.int64(2**62)
TOUCHED_MAX = 100_000  # NodeTable.touched entries kept before the caches that follow them start over
MASKS_MAX = 1024  # masks kept in NodeTable.masks (distinct pod shapes between node changes) before they start over


_INT64_SUMS = 2**63  # a sum of n values below m stays exact in int64 while n * m stays below it


def exact_reduceat(a: np.ndarray, starts: np.ndarray, bound: int | None = None) -> np.ndarray:
    """`np.add.reduceat(a, starts, axis=0)`, exactly: in int64 while no sum can reach 2^63 (`bound`:
    the largest magnitude any summed value may take, by default a's own), else in Python integers
    (an object array: a quantity may be up to 2^62, model.md *Quantities*, so two wrap int64)."""
    top = bound if bound is not None else (int(np.abs(a).max()) if a.size else 0)
    if top * max(len(a), 1) < _INT64_SUMS:
        return np.add.reduceat(a, starts, axis=0)
    return np.add.reduceat(a.astype(object), starts, axis=0)


def exact_sum(a: np.ndarray) -> int:
    """The sum of an int64 array as an exact integer."""
    if a.size and int(np.abs(a).max()) * a.size >= _INT64_SUMS:
        return sum(a.tolist())
    return int(a.sum())


class DomainLayout:
    """Rows of one topology key in domain order (a cache of NodeTable, dropped on any change)."""

    def __init__(self, ids: np.ndarray, values: list[str], order: np.ndarray, starts: np.ndarray) -> None:
        self.ids = ids  # domain id per row, -1 without the label or dead
        self.values = values  # sorted label values; domain d is values[d]
        self.order = order  # live labelled rows, grouped by domain (every domain has one at least)
        self.starts = starts  # where each domain's rows begin in `order`
        self.alloc_sums: dict[int, np.ndarray] = {}
        self.domain_of = ids[order]  # the domain of each position in `order`
        self.position_of = np.full(len(ids), -1, dtype=np.int64)  # row -> position in `order` (-1: none)
        self.position_of[order] = np.arange(len(order))
        self.fits: dict[Any, Any] = {}  # placement._DomainFits per pod shape
        self._alloc_cols: dict[int, np.ndarray] = {}

    def alloc_column(self, alloc: np.ndarray, col: int) -> np.ndarray:
        """Allocatable of one resource for the rows in `order` (cached: it changes only with
        an upsert, which drops the layout)."""
        hit = self._alloc_cols.get(col)
        if hit is None:
            hit = self._alloc_cols[col] = alloc[self.order, col].copy()
        return hit

    def alloc_max(self, alloc: np.ndarray, col: int) -> int:
        column = self.alloc_column(alloc, col)
        return int(column.max()) if len(column) else 0


class NodeTable:
    def __init__(self) -> None:
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.specs: list[NodeSpec | None] = []
        self.labels: list[dict[str, str]] = []
        self.resources: dict[str, int] = {PODS: 0}
        self.resource_names: list[str] = [PODS]
        self._cap = 0
        self.alloc = np.zeros((0, 1), dtype=np.int64)  # effective allocatable (pods: UNLIMITED if undeclared)
        self.declared = np.zeros((0, 1), dtype=bool)
        self.used = np.zeros((0, 1), dtype=np.int64)
        self.alive = np.zeros(0, dtype=bool)
        self.schedulable = np.zeros(0, dtype=bool)  # alive and not cordoned
        self.version = 0  # bumps when labels / node set / cordons change (mask caches)
        # taints: each row's tuple of taints is interned (one id per distinct tuple, 0 = none), so
        # that a toleration check runs once per distinct tuple, not per node (affinity.py)
        self.taint_sets: list[tuple[Taint, ...]] = [()]
        self._taint_set_index: dict[tuple[Taint, ...], int] = {(): 0}
        self.taint_ids = np.zeros(0, dtype=np.int64)
        self.masks: dict[Any, Any] = {}  # affinity.py's masks, dropped with the other caches
        self._selector_cache: dict[tuple[tuple[str, str], ...], np.ndarray] = {}
        # per topology key its domains, and under "<key>\0layout" its DomainLayout
        self._domain_cache: dict[str, tuple[np.ndarray, list[str]] | DomainLayout] = {}
        self._rank: np.ndarray | None = None
        # Usage changes, for caches that follow `used` row by row (placement._DomainFits): every
        # writer of `used` appends the rows it changed to `touched`, or calls usage_changed()
        # when it changed too many to list (the caches then start over).
        self.touched: list[int] = []
        self.usage_epoch = 0

    # -- snapshots: caches are left out, specs travel as plain tuples (pickled ~10x faster)
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["specs"] = [None if sp is None else (sp.name, sp.labels, sp.allocatable, sp.unschedulable, sp.taints)
                          for sp in self.specs]
        state["_selector_cache"], state["_domain_cache"], state["_rank"] = {}, {}, None
        state["masks"] = {}
        state["_col_cache"] = {}
        state["touched"] = []
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state["specs"] = [None if sp is None else NodeSpec(*sp) for sp in state["specs"]]
        state.setdefault("touched", [])  # snapshots taken before it existed
        state.setdefault("usage_epoch", 0)
        if "taint_ids" not in state:  # snapshots taken before taints: no node has any
            state.update(taint_sets=[()], _taint_set_index={(): 0}, masks={},
                         taint_ids=np.zeros(len(state["alive"]), dtype=np.int64))
        self.__dict__.update(state)

    # -- growth ---------------------------------------------------------------------
    @property
    def count(self) -> int:
        return len(self.names)

    def column(self, resource: str) -> int:
        """The column of a resource, adding one (declared nowhere) on first sight."""
        col = self.resources.get(resource)
        if col is None:
            col = len(self.resource_names)
            self.resources[resource] = col
            self.resource_names.append(resource)
            pad = ((0, 0), (0, 1))
            self.alloc = np.pad(self.alloc, pad)
            self.declared = np.pad(self.declared, pad)
            self.used = np.pad(self.used, pad)
            self.usage_changed()
        return col

    def _grow(self) -> None:
        new_cap = max(16, self._cap * 2)
        extra = new_cap - self._cap
        self.alloc = np.vstack([self.alloc, np.zeros((extra, self.alloc.shape[1]), dtype=np.int64)])
        self.declared = np.vstack([self.declared, np.zeros((extra, self.declared.shape[1]), dtype=bool)])
        self.used = np.vstack([self.used, np.zeros((extra, self.used.shape[1]), dtype=np.int64)])
        self.usage_changed()
        self.alive = np.concatenate([self.alive, np.zeros(extra, dtype=bool)])
        self.schedulable = np.concatenate([self.schedulable, np.zeros(extra, dtype=bool)])
        self.taint_ids = np.concatenate([self.taint_ids, np.zeros(extra, dtype=np.int64)])
        self._cap = new_cap

    # -- changes (called from evolve only) ---------------------------------------------
    def upsert(self, spec: NodeSpec) -> int:
        idx = self.index.get(spec.name)
        for resource, _ in spec.allocatable:
            self.column(resource)
        if idx is None:
            if self.count == self._cap:
                self._grow()
            idx = self.count
            self.index[spec.name] = idx
            self.names.append(spec.name)
            self.specs.append(spec)
            self.labels.append(dict(spec.labels))
            self._rank = None
        else:
            self.specs[idx] = spec
            self.labels[idx] = dict(spec.labels)
        self.alloc[idx, :] = 0
        self.declared[idx, :] = False
        self.alloc[idx, 0] = UNLIMITED
        for resource, amount in spec.allocatable:
            col = self.resources[resource]
            self.alloc[idx, col] = amount
            self.declared[idx, col] = True
        self.alive[idx] = True
        self.schedulable[idx] = not spec.unschedulable
        taint_id = self._taint_set_index.get(spec.taints)
        if taint_id is None:
            taint_id = self._taint_set_index[spec.taints] = len(self.taint_sets)
            self.taint_sets.append(spec.taints)
        self.taint_ids[idx] = taint_id
        self._invalidate()
        return idx

    def remove(self, name: str) -> int:
        idx = self.index[name]
        self.alive[idx] = False
        self.schedulable[idx] = False
        self.specs[idx] = None
        self._rank = None
        self._invalidate()
        return idx

    def cached_mask(self, key: Any) -> np.ndarray | None:
        """A mask of `masks` (affinity.py, filters.py) if it still covers every row."""
        hit: np.ndarray | None = self.masks.get(key)
        return hit if hit is not None and len(hit) == self.count else None

    def keep_mask(self, key: Any, mask: np.ndarray) -> np.ndarray:
        """Cache a mask until the next node change; a table that has seen many pod shapes since
        then starts over (each mask is one entry per row)."""
        if len(self.masks) >= MASKS_MAX:
            self.masks.clear()
        self.masks[key] = mask
        return mask

    def note_touched(self, rows: Iterable[int]) -> None:
        """Rows whose usage changed (see `touched`); a list nobody followed for long starts over."""
        touched = self.touched
        touched.extend(rows)
        if len(touched) > TOUCHED_MAX:
            self.usage_changed()

    def usage_changed(self) -> None:
        """`used` changed in ways not listed in `touched` (or was replaced): caches start over."""
        self.usage_epoch += 1
        self.touched = []

    def _invalidate(self) -> None:
        self.version += 1
        self._selector_cache.clear()
        self._domain_cache.clear()
        self.masks.clear()
        self.__dict__["_col_cache"] = {}

    # -- queries ----------------------------------------------------------------------
    def live_indices(self) -> np.ndarray:
        return np.flatnonzero(self.alive[: self.count])

    def rank(self) -> np.ndarray:
        """Rank of each row's name among all names: the node-name tie-break."""
        if self._rank is None:
            order = sorted(range(self.count), key=self.names.__getitem__)
            rank = np.empty(self.count, dtype=np.int64)
            rank[order] = np.arange(self.count)
            self._rank = rank
        return self._rank

    def selector_mask(self, selector: tuple[tuple[str, str], ...]) -> np.ndarray:
        """Rows (alive or not) whose labels match every selector entry."""
        mask = self._selector_cache.get(selector)
        if mask is None:
            n = self.count
            if not selector:
                mask = np.ones(n, dtype=bool)
            else:
                mask = np.fromiter(
                    (all(lab.get(k) == v for k, v in selector) for lab in self.labels), dtype=bool, count=n)
            self._selector_cache[selector] = mask
        return mask

    def domains(self, key: str) -> tuple[np.ndarray, list[str]]:
        """(domain id per row or -1 without the label, sorted label values)."""
        cached = self._domain_cache.get(key)
        if cached is None:
            values = sorted({lab[key] for i, lab in enumerate(self.labels) if key in lab and self.alive[i]})
            pos: dict[str | None, int] = {v: i for i, v in enumerate(values)}
            ids = np.fromiter((pos.get(lab.get(key, None), -1) if self.alive[i] else -1
                               for i, lab in enumerate(self.labels)), dtype=np.int64, count=self.count)
            cached = (ids, values)
            self._domain_cache[key] = cached
        assert isinstance(cached, tuple)  # a topology key holds no NUL: never a layout's slot
        return cached

    def layout(self, key: str) -> DomainLayout:
        """Live rows carrying `key`, grouped by domain: per-domain sums become one reduceat."""
        cache_key = f"{key}\0layout"
        hit = self._domain_cache.get(cache_key)
        if not isinstance(hit, DomainLayout):
            ids, values = self.domains(key)
            ids = ids[: self.count]
            live = np.flatnonzero(ids >= 0)
            order = live[np.argsort(ids[live], kind="stable")]  # by domain, then by row
            starts = np.searchsorted(ids[order], np.arange(len(values)))
            hit = DomainLayout(ids, values, order, starts)
            self._domain_cache[cache_key] = hit
        return hit

    def alloc_column(self, col: int) -> tuple[np.ndarray, np.ndarray]:
        """(allocatable of one resource per row, contiguous; 1/allocatable where positive, else 0):
        what scoring divides by, cached until the next upsert (the only change of allocatable)."""
        cache: dict[int, tuple[np.ndarray, np.ndarray]] = self.__dict__.setdefault("_col_cache", {})
        hit = cache.get(col)
        if hit is None or len(hit[0]) != self.count:
            a = np.ascontiguousarray(self.alloc[: self.count, col])
            inv = np.zeros(len(a))
            np.divide(1.0, a, out=inv, where=a > 0)
            hit = cache[col] = (a, inv)
        return hit

    def domain_alloc_sums(self, key: str, col: int) -> np.ndarray:
        """Declared allocatable of one resource summed per domain of `key` (exact integers)."""
        layout = self.layout(key)
        sums = layout.alloc_sums.get(col)
        if sums is None:
            declared = np.where(self.declared[layout.order, col], self.alloc[layout.order, col], 0)
            sums = exact_reduceat(declared, layout.starts) if len(layout.order) else np.zeros(0, np.int64)
            layout.alloc_sums[col] = sums
        return sums

    def request_vector(self, requests: Iterable[tuple[str, int]]) -> np.ndarray:
        requests = list(requests)
        cols = [self.column(resource) for resource, _ in requests]  # may add columns
        vec = np.zeros(len(self.resource_names), dtype=np.int64)
        vec[0] = 1  # every pod uses one `pods` where the node declares it
        for col, (_, amount) in zip(cols, requests):
            vec[col] = amount
        return vec
