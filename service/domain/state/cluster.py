"""The cluster aggregate's state: inventory, workloads, placements, the queue.

State is mutated in place by `evolve` only (copying a 5,000-node cluster per
input would cost more than deciding it); `decide` works on a throwaway copy when
purity is needed (dry runs, tests). Everything here is deterministic: dicts are
insertion-ordered and every iteration that reaches an event is sorted.
"""
from __future__ import annotations

from collections.abc import Iterable
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
from sortedcontainers import SortedDict

from service.domain.dra import DeviceState
from service.domain.model.specs import PriorityClass
from service.domain.model.workload import SUCCEEDED_POD, Composite, Group, QueueKey, Workload, root_pending
from service.domain.nodes.table import NodeTable
from service.domain.state.queue import QueueIndex

if TYPE_CHECKING:
    from service.domain.placement.scoring import Scheduler

__all__ = ["JOURNAL_MAX", "ClusterState", "Composite", "Group", "QueueKey", "Workload"]

JOURNAL_MAX = 4096  # moves kept in ClusterState.moves; beyond, the older half is dropped


class ClusterState:
    # the scheduler configuration in force (scoring.py; None: never configured, MostAllocated)
    scheduler: Scheduler | None = None
    scheduler_body: dict[str, Any] | None = None
    scheduler_position: int | None = None
    deciding: int | None = None  # the position of the input being decided, while `handle` runs
    finished_before = 0
    finishing: set[int] = frozenset()  # type: ignore[assignment]  # states pickled before pod phases: none
    # PodGroup objects by (namespace, name), live and deleted (lifecycle.md): each a workload of its
    # own whose `owner` is its workload of templates (states pickled before them: none, read-only)
    podgroups: dict[tuple[str, str], Workload] = MappingProxyType({})  # type: ignore[assignment]
    moves_dropped = 0  # states pickled before the journal of moves: none dropped

    def __init__(self, cluster: str = "") -> None:
        self.cluster = cluster
        self.position = 0
        self.nodes = NodeTable()
        self.node_pods: list[set[tuple[int, int, int]]] = []  # per node row: {(workload pos, group idx, pod idx)}
        self.priority_classes: dict[str, PriorityClass] = {}
        self.device_classes: dict[str, dict[str, Any]] = {}
        self.resource_slices: dict[str, dict[str, Any]] = {}
        self.dra = DeviceState()  # devices, claims and their indexes (dra/)
        self.dra.cluster = cluster
        self.workloads: dict[tuple[str, str], Workload] = {}
        self.by_position: dict[int, Workload] = {}  # every workload by position, PodGroup objects too
        self.podgroups = {}
        self.finished_before = 0  # finished workloads left out of a light snapshot (a count only)
        self.queue: SortedDict = SortedDict()  # QueueKey -> Group, every pending group
        self.placed_by_priority: dict[int, int] = {}  # priority -> placed pods (who could be a victim)
        self.index = QueueIndex()  # skip index over the queue (a cache)
        self.running: SortedDict = SortedDict()  # (priority, workload position, group index) -> Group with pods placed
        self._shape_vectors: dict[tuple[int, int], tuple[int, np.ndarray]] = {}
        # running keys of the groups whose placements changed, in order: a bounded journal for
        # caches that follow placements (preemption.py); `moves_dropped` left from its front
        self.moves: list[tuple[int, int, int]] = []
        self.moves_dropped = 0
        # live workloads with finished pods (by position): live though perhaps neither queued nor
        # running (every pod finished), which light snapshots must keep (app/snapshots.py)
        self.finishing = set()

    # -- lookups ------------------------------------------------------------------------
    def incarnation(self, namespace: str, name: str, position: int | None = None) -> Workload | None:
        """The workload of that name: its latest incarnation, or the one submitted at `position`
        (lifecycle.md, *Names used again*); None when there is none."""
        if position is None:
            return self.workloads.get((namespace, name))
        wl = self.by_position.get(position)
        return wl if wl is not None and wl.key == (namespace, name) else None

    def group(self, namespace: str, workload: str, group: str) -> Group:
        wl = self.workloads[(namespace, workload)]
        for g in wl.groups:
            if g.spec.name == group:
                return g
        raise KeyError(group)

    def shape_vector(self, wl: Workload, shape: int) -> np.ndarray:
        """The request vector of a pod shape, in the table's current columns."""
        key = (wl.position, shape)
        ncols = len(self.nodes.resource_names)
        hit = self._shape_vectors.get(key)
        if hit is None or hit[0] != ncols:
            vec = self.nodes.request_vector(wl.spec.shapes[shape].requests)
            ncols = len(self.nodes.resource_names)
            hit = (ncols, vec)
            self._shape_vectors[key] = hit
        return hit[1]

    # -- the primitive changes evolve is made of ----------------------------------------
    def add_workload(self, key: tuple[str, str], wl: Workload) -> None:
        """A submitted workload joins the state (both folds: evolve, and the fast fold's record of
        a workload submitted and deleted within what it folds)."""
        before = self.workloads.get(key)  # a deleted one's name: a new incarnation (lifecycle.md)
        wl.previous = before.position if before is not None else None  # the earlier one stays in by_position
        self.workloads[key] = wl
        self.by_position[wl.position] = wl

    def counted_placed(self, running_key: tuple[int, int, int], priority: int, count: int) -> None:
        """The bookkeeping of `count` pods of one group placed by one decision: the journal of
        moves and the placed pods by priority (place_pods; the fast fold, which places none)."""
        self._journal(running_key)
        by_prio = self.placed_by_priority
        by_prio[priority] = by_prio.get(priority, 0) + count

    def counted_released(self, running_key: tuple[int, int, int], priority: int, count: int,
                         rows: Iterable[int]) -> None:
        """The bookkeeping of `count` placed pods of one group released from these node rows: room
        gained there (the rows marked dirty for the queue's index; `rows` is not read when every row
        is dirty already), the journal of moves, the placed pods by priority."""
        index = self.index
        index.gained_room()
        if len(index.dirty) < self.nodes.count:
            index.dirty.update(rows)
        self._journal(running_key)
        by_prio = self.placed_by_priority
        left = by_prio[priority] - count
        if left:
            by_prio[priority] = left
        else:
            del by_prio[priority]

    def _ensure_node_rows(self) -> None:
        while len(self.node_pods) < self.nodes.count:
            self.node_pods.append(set())

    def place_pods(self, g: Group, placements: list[tuple[int, int]], position: int) -> None:
        """Place (pod, node row) pairs of one decision; usage is added in one numpy call."""
        if not placements:
            return
        self._ensure_node_rows()
        wl = g.workload
        wpos, gi = wl.position, g.index
        shapes = g.spec.pod_shapes
        node_of, placed_at = g.node_of, g.placed_at
        per_node: dict[tuple[int, int], int] = {}  # (node row, shape) -> pods
        node_pods = self.node_pods
        for i, (pod, node) in enumerate(placements):
            node_pods[node].add((wpos, gi, pod))
            node_of[pod] = node
            placed_at[pod] = (position, i)
            key = (node, shapes[pod])
            per_node[key] = per_node.get(key, 0) + 1
        self._add_usage(wl, per_node, 1)
        if g.placed == 0:
            self.running[g.running_key] = g
        g.placed += len(placements)
        self.counted_placed(g.running_key, wl.spec.priority, len(placements))

    def release_pods(self, g: Group, pods: list[int]) -> None:
        """Release placed pods of one group; usage is taken off in one numpy call."""
        pods = [p for p in pods if g.node_of[p] >= 0]
        if not pods:
            return
        wl = g.workload
        wpos, gi = wl.position, g.index
        shapes = g.spec.pod_shapes
        node_of, placed_at = g.node_of, g.placed_at
        per_node: dict[tuple[int, int], int] = {}  # (node row, shape) -> pods
        node_pods = self.node_pods
        for pod in pods:
            node = node_of[pod]
            node_pods[node].discard((wpos, gi, pod))
            node_of[pod] = -1
            placed_at[pod] = None
            key = (node, shapes[pod])
            per_node[key] = per_node.get(key, 0) + 1
        self._add_usage(wl, per_node, -1)
        g.placed -= len(pods)
        self.counted_released(g.running_key, wl.spec.priority, len(pods), (node for node, _ in per_node))
        if g.placed == 0:
            g.domain = None
            del self.running[g.running_key]

    def keep_live(self, wl: Workload) -> None:
        """A live workload perhaps neither queued nor running (finished pods, or a workload of templates):
        light snapshots keep it (`finishing`)."""
        if "finishing" not in self.__dict__:
            self.finishing = set()
        self.finishing.add(wl.position)

    def finish_pods(self, g: Group, pods: list[int], code: int) -> None:
        """Running pods reported finished (lifecycle.md): they leave their nodes and keep their
        phase (`code`: SUCCEEDED_POD or FAILED_POD) for good."""
        if "finishing" not in self.__dict__:
            self.finishing = set()
        self.finishing.add(g.workload.position)
        self.release_pods(g, pods)
        for pod in pods:
            g.node_of[pod] = code
        if code == SUCCEEDED_POD:
            g.succeeded += len(pods)
        else:
            g.failed += len(pods)
        g.class_key = None  # no longer placed as a fresh group of its class would be

    def _journal(self, running_key: tuple[int, int, int]) -> None:
        moves = self.__dict__.get("moves")
        if moves is None:  # a state pickled before the journal existed
            moves = self.moves = []
        moves.append(running_key)
        if len(moves) > JOURNAL_MAX:
            del moves[:JOURNAL_MAX // 2]
            self.moves_dropped += JOURNAL_MAX // 2

    def _add_usage(self, wl: Workload, per_node: dict[tuple[int, int], int], sign: int) -> None:
        """used[node] += sign * pods * shape vector, for each (node, shape): a gang lands on a
        few nodes, so a few row updates beat one np.add.at over a stacked matrix per pod."""
        vectors = {shape: self.shape_vector(wl, shape) for shape in {s for _, s in per_node}}
        used = self.nodes.used  # after shape_vector: it may have added columns
        for (node, shape), n in per_node.items():
            used[node] += vectors[shape] * (sign * n)
        self.nodes.note_touched(node for node, _ in per_node)

    def place_pod(self, g: Group, pod: int, node: int, at: tuple[int, int]) -> None:
        self.place_pods(g, [(pod, node)], at[0])
        g.placed_at[pod] = at

    def release_pod(self, g: Group, pod: int) -> None:
        self.release_pods(g, [pod])

    def sync_queue(self, g: Group) -> None:
        """Keep the queue holding exactly the live groups with unplaced pods (and the roots of
        trees that are unsatisfied or lack pods: composite.md *The queue*)."""
        if g.spec.parent is not None:
            wl = g.workload
            self.sync_root(wl.composites[wl.spec.roots[wl.spec.cpgs[g.spec.parent].root]])
            return
        pending = g.pending and g.workload.deleted_at is None
        if pending:
            self.queue[g.key] = g
        else:
            self.queue.pop(g.key, None)
        self.index.update(g, pending)

    def sync_root(self, root: Composite) -> None:
        wl = root.workload
        pending = wl.deleted_at is None and root_pending(wl, root.spec.index)
        if pending:
            self.queue[root.key] = root
        else:
            self.queue.pop(root.key, None)
        self.index.update(root, pending)  # type: ignore[arg-type]  # a solo bucket, as a Group's

    def add_podgroup(self, pg: Workload, name: str) -> None:
        if "podgroups" not in self.__dict__:
            self.podgroups = {}
        self.podgroups[(pg.spec.namespace, name)] = pg
        self.by_position[pg.position] = pg

    def pod_ref(self, key: tuple[int, int, int]) -> tuple[Group, int]:
        wl_pos, gi, pod = key
        return self.by_position[wl_pos].groups[gi], pod

