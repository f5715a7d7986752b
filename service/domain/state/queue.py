"""The pending queue's skip index: a sweep costs O(classes), not O(pending groups).

Pending groups that would be placed identically from an empty start share a
*class* (same pod shapes, gang rule, topology key, priority, policy). A class
keeps an upper bound on how many pods the placement routine could place for it
(`ub`) and, with every lower-priority pod removed (`ub_pre`). Within a pass room
only shrinks, except where an input frees it; those node rows are marked *dirty*
and each bound grows by what the dirty rows could now hold. A class whose bounds
are below its minCount is skipped without a try: it would fail, and a failed try
records nothing (model.md *The queue*), so decisions are unchanged.

Everything here is a cache: it never changes a decision, only avoids work.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sortedcontainers import SortedList

from service.domain.nodes import filters

if TYPE_CHECKING:
    from service.domain.state.cluster import ClusterState, Group, QueueKey


@dataclass
class ClassInfo:
    ub: int | None = None  # None: unknown, must try
    ub_pre: int | None = None


TREES = ("trees", None)  # the lane of every tree root without device claims (composite.md *The queue*)


def bucket_key(g: Group) -> Any:
    if g.class_key is not None and g.placed == 0 and not g.needs_explanation:
        return g.class_key
    if getattr(g, "tree_lane", False):
        return TREES
    return ("solo", g.key)


def read_label_keys(g: Any) -> frozenset[str]:
    """The node label keys a queued entry's placement reads: topology keys, nodeSelector and node
    affinity (required and preferred). A tree root reads those of its whole workload."""
    wl = g.workload
    groups = wl.groups if getattr(g, "tree_lane", None) is not None else [g]
    keys: set[str] = {c.topology_key for c in wl.spec.cpgs if c.topology_key is not None} \
        if groups is wl.groups else set()
    for grp in groups:
        if grp.spec.topology_key is not None:
            keys.add(grp.spec.topology_key)
        for s in set(grp.spec.pod_shapes):
            shape = wl.spec.shapes[s]
            keys.update(k for k, _ in shape.node_selector)
            terms = [*shape.required, *(term for _, term in shape.preferred)]
            keys.update(req[0] for term in terms for req in term[0])
    return frozenset(keys)


class QueueIndex:
    def __init__(self) -> None:
        self.buckets: dict[Any, SortedList] = {}
        self.member_of: dict[QueueKey, Any] = {}  # group queue key -> bucket key
        self.classes: dict[Any, ClassInfo] = {}
        self.dirty: set[int] = set()  # node rows that gained room since the last full sweep
        self.read_keys: dict[str, int] | None = {}  # label key -> queued entries reading it (None: unknown)
        self.entry_keys: dict[QueueKey, frozenset[str]] = {}
        self.node_changes = 0  # node upserts that may change a placement (tree memos: tree_decide.py)
        self.trees_quiet: Any = None  # the tree memo at which every root of the TREES lane last failed
        # roots proven unable to fit by capacity (tree_routine.Routine.proved) since rows last gained
        # room: room only shrinks until then, so they stay unable to fit
        self.proofs: set[QueueKey] = set()

    def update(self, g: Group, pending: bool) -> None:
        key = g.key
        old = self.member_of.get(key)
        new = bucket_key(g) if pending else None
        if old == new:
            return
        if self.read_keys is not None:
            self._count_keys(g, key, new is not None)
        if old is not None:
            self.proofs.discard(key)
            bucket = self.buckets[old]
            bucket.discard(key)
            if not bucket:
                del self.buckets[old]
            del self.member_of[key]
        if new is not None:
            self.buckets.setdefault(new, SortedList()).add(key)
            self.member_of[key] = new

    def _count_keys(self, g: Group, key: QueueKey, queued: bool) -> None:
        assert self.read_keys is not None
        had = self.entry_keys.pop(key, None)
        for k in had or ():
            self.read_keys[k] -= 1
            if not self.read_keys[k]:
                del self.read_keys[k]
        if queued:
            keys = self.entry_keys[key] = read_label_keys(g)
            for k in keys:
                self.read_keys[k] = self.read_keys.get(k, 0) + 1

    def gained_room(self) -> None:
        """Rows may hold more than before: every capacity proof is void."""
        self.proofs.clear()

    def lane_proved(self) -> bool:
        """Every root of the lane of trees is proven unable to fit (an empty lane too)."""
        return len(self.proofs) == len(self.buckets.get(TREES, ()))

    def label_read(self, keys: set[str]) -> bool:
        """Whether a queued entry may read any of these label keys (unknown: yes)."""
        return self.read_keys is None or any(k in self.read_keys for k in keys)

    def heads(self) -> list[tuple[QueueKey, Any]]:
        return [(bucket[0], bkey) for bkey, bucket in self.buckets.items()]

    def next_after(self, bkey: Any, key: QueueKey) -> QueueKey | None:
        bucket = self.buckets.get(bkey)
        if not bucket:
            return None
        i = bucket.bisect_right(key)
        return bucket[i] if i < len(bucket) else None

    def info(self, class_key: Any) -> ClassInfo:
        info = self.classes.get(class_key)
        if info is None:
            info = self.classes[class_key] = ClassInfo()
        return info

    def __getstate__(self) -> dict[str, Any]:
        # bounds are a cache; a restored state starts without them (always safe)
        return {"buckets": self.buckets, "member_of": self.member_of, "classes": {}, "dirty": set(),
                "read_keys": None, "entry_keys": {}, "node_changes": self.node_changes, "trees_quiet": None,
                "proofs": set()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update({"read_keys": None, "entry_keys": {}, "node_changes": 0, "trees_quiet": None,
                              "proofs": set()})
        self.__dict__.update(state)


# -- bounds -----------------------------------------------------------------------------------
def single_shape(g: Group) -> bool:
    runs = g.class_key[0] if g.class_key is not None else ()
    return len(runs) == 1


def fit_counts(state: ClusterState, g: Group, rows: np.ndarray, extra: np.ndarray | None = None) -> np.ndarray:
    """How many pods of g's (single) shape each row could hold now (`extra`: usage to ignore)."""
    nodes = state.nodes
    shape = g.spec.pod_shapes[0]
    vec = state.shape_vector(g.workload, shape)
    cols = np.flatnonzero(vec)
    free = nodes.alloc[rows][:, cols] - nodes.used[rows][:, cols]
    if extra is not None:
        free = free + extra[:, cols]
    fit = np.min(free // vec[cols], axis=1) if len(cols) else np.full(len(rows), g.total)
    # a row holds at most the group's pods: without the cap an unlimited resource (`pods` where
    # nodes do not declare it, 2**62 free) would overflow the sums of these counts
    np.clip(fit, 0, g.total, out=fit)
    ok = filters.static_mask(nodes, g.workload.spec.shapes[shape])[rows]  # what placement may use
    return np.where(ok, fit, 0)


def lower_usage(state: ClusterState, rows: np.ndarray, priority: int) -> np.ndarray:
    """Usage per row by pods of priority strictly below `priority`."""
    out = np.zeros((len(rows), len(state.nodes.resource_names)), dtype=np.int64)
    for i, row in enumerate(rows):
        if row >= len(state.node_pods):
            continue
        for key in state.node_pods[row]:
            og, pod = state.pod_ref(key)
            if og.workload.spec.priority < priority:
                out[i] += state.shape_vector(og.workload, og.spec.pod_shapes[pod])
    return out


def _gain(state: ClusterState, g: Group, rows: np.ndarray, pre: bool) -> Any:
    """What the dirty rows could hold for g's shape: a pod count, or per touched domain."""
    extra = lower_usage(state, rows, g.workload.spec.priority) if pre else None
    key = g.spec.topology_key
    if key is None:
        return int(fit_counts(state, g, rows, extra).sum())
    ids, _ = state.nodes.domains(key)
    ids = ids[: state.nodes.count]
    caps = []
    for d in np.unique(ids[rows]):
        if d < 0:
            continue
        members = np.flatnonzero(ids == d)
        extra_d = lower_usage(state, members, g.workload.spec.priority) if pre else None
        caps.append(int(fit_counts(state, g, members, extra_d).sum()))
    return max(caps, default=0)


def grown_bound(state: ClusterState, g: Group, bound: int, rows: np.ndarray, pre: bool,
                memo: dict[Any, Any] | None = None) -> int:
    """`bound` plus what the dirty rows could add for g's class (memo: shared within a sweep)."""
    if len(rows) == 0:
        return bound
    shape = g.workload.spec.shapes[g.spec.pod_shapes[0]]
    key = (shape.requests, shape.node_selector, shape.tolerations, shape.required, g.spec.topology_key,
           g.workload.spec.priority if pre else None)
    if memo is None or key not in memo:
        gain: int = _gain(state, g, rows, pre)
        if memo is not None:
            memo[key] = gain
    else:
        gain = memo[key]
    if g.spec.topology_key is None:
        return min(bound + gain, g.total)
    # a domain touched by a dirty row may now hold up to its full capacity
    return max(bound, min(gain, g.total))
