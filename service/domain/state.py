"""The cluster aggregate's state: inventory, workloads, placements, the queue.

State is mutated in place by `evolve` only (copying a 5,000-node cluster per
input would cost more than deciding it); `decide` works on a throwaway copy when
purity is needed (dry runs, tests). Everything here is deterministic: dicts are
insertion-ordered and every iteration that reaches an event is sorted.
"""
from __future__ import annotations

import json
from array import array
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sortedcontainers import SortedDict

from service.domain.devices import DeviceState
from service.domain.model import GroupSpec, PriorityClass, WorkloadSpec, workload_from_submission
from service.domain.nodes import NodeTable
from service.domain.queue import QueueIndex

QueueKey = tuple[int, int, int]  # (-priority, submission position, group index)
JOURNAL_MAX = 4096  # moves kept in ClusterState.moves; beyond, the older half is dropped


@dataclass(eq=False)
class Group:
    workload: Workload
    index: int
    spec: GroupSpec
    node_of: list[int]  # node row per pod, -1 when not placed
    placed_at: list[tuple[int, int] | None]  # (decision position, pod index in that decision)
    placed: int = 0
    domain: str | None = None  # topology value chosen while any pod is placed
    explanation: dict[str, Any] | None = None
    needs_explanation: bool = True  # no failed try recorded since it became pending
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)
    ever_scheduled: bool = False
    class_key: tuple | None = None  # groups with equal keys place identically (pass skipping)
    _pod_index: dict[str, int] | None = None

    def pod_index(self, name: str) -> int:
        if self._pod_index is None:
            self._pod_index = {n: i for i, n in enumerate(self.spec.pod_names)}
        return self._pod_index[name]

    @property
    def key(self) -> QueueKey:
        return (-self.workload.spec.priority, self.workload.position, self.index)

    @property
    def running_key(self) -> tuple[int, int, int]:
        return (self.workload.spec.priority, self.workload.position, self.index)

    @property
    def total(self) -> int:
        return len(self.spec.pod_names)

    @property
    def scheduled(self) -> bool:
        return self.placed >= self.spec.min_count if self.spec.gang else self.placed >= 1

    @property
    def pending(self) -> bool:
        return self.placed < self.total

    @property
    def ref(self) -> dict[str, str]:
        return {"namespace": self.workload.spec.namespace, "workload": self.workload.spec.name,
                "podGroup": self.spec.name}


@dataclass(eq=False)
class Workload:
    spec: WorkloadSpec
    body: dict[str, Any]  # as submitted
    position: int  # of its WorkloadSubmitted event
    groups: list[Group] = field(default_factory=list)
    deleted_at: int | None = None
    events: list[int] = field(default_factory=list)  # positions of events about it (history)

    @property
    def key(self) -> tuple[str, str]:
        return (self.spec.namespace, self.spec.name)

    # A finished workload keeps only what its view and history need: a cluster that has seen
    # hundreds of thousands of workloads stays small in memory and in snapshots. Its spec and
    # groups are rebuilt on first access.
    def compact(self) -> None:
        extras = [{"conditions": g.conditions, "explanation": g.explanation,
                   "needsExplanation": g.needs_explanation, "everScheduled": g.ever_scheduled}
                  for g in self.groups]
        self.__dict__["_finished"] = (self.body, extras, self.spec.namespace, self.spec.name,
                                      self.spec.priority, self.spec.preemption_policy)
        self.events = array("q", self.events)
        for name in ("spec", "groups", "body"):
            self.__dict__.pop(name, None)

    def __getattr__(self, name: str) -> Any:
        finished = self.__dict__.get("_finished")
        if finished is None or name not in ("spec", "groups", "body"):
            raise AttributeError(name)
        body, extras, namespace, wl_name, priority, policy = finished
        if isinstance(body, str):  # restored from a snapshot, or replayed (replay.py)
            body = json.loads(body)
        if isinstance(extras, str):  # restored from a snapshot
            extras = json.loads(extras)
        spec = workload_from_submission({"namespace": namespace, "name": wl_name, "priority": priority,
                                         "preemptionPolicy": policy, "spec": body})
        self.__dict__.update(spec=spec, body=body)
        groups = []
        for i, (gs, extra) in enumerate(zip(spec.groups, extras)):
            g = Group(workload=self, index=i, spec=gs, node_of=[-1] * len(gs.pod_names),
                      placed_at=[None] * len(gs.pod_names), explanation=extra["explanation"],
                      needs_explanation=extra["needsExplanation"], conditions=extra["conditions"],
                      ever_scheduled=extra["everScheduled"])
            groups.append(g)
        self.__dict__["groups"] = groups
        return self.__dict__[name]

    def __getstate__(self) -> dict[str, Any]:
        finished = self.__dict__.get("_finished")
        if finished is not None:
            # one string per finished workload: small and fast to load
            body, extras = finished[0], finished[1]
            if not isinstance(body, str):
                body = json.dumps(body, separators=(",", ":"))
            if not isinstance(extras, str):
                extras = json.dumps(extras, separators=(",", ":"))
            out = {k: v for k, v in self.__dict__.items() if k not in ("spec", "groups", "body")}
            out["_finished"] = (body, extras, *finished[2:])
            return out
        return self.__dict__

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


class ClusterState:
    finished_before = 0
    moves_dropped = 0  # states pickled before the journal of moves: none dropped

    def __init__(self, cluster: str = "") -> None:
        self.cluster = cluster
        self.position = 0
        self.nodes = NodeTable()
        self.node_pods: list[set[tuple[int, int, int]]] = []  # per node row: {(workload pos, group idx, pod idx)}
        self.priority_classes: dict[str, PriorityClass] = {}
        self.device_classes: dict[str, dict[str, Any]] = {}
        self.resource_slices: dict[str, dict[str, Any]] = {}
        self.dra = DeviceState()  # devices, claims and their indexes (devices.py)
        self.workloads: dict[tuple[str, str], Workload] = {}
        self.by_position: dict[int, Workload] = {}
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

    # -- lookups ------------------------------------------------------------------------
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
        self._moved(g)
        if g.placed == 0:
            self.running[g.running_key] = g
        g.placed += len(placements)
        prio = wl.spec.priority
        self.placed_by_priority[prio] = self.placed_by_priority.get(prio, 0) + len(placements)

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
        dirty = self.index.dirty
        for pod in pods:
            node = node_of[pod]
            node_pods[node].discard((wpos, gi, pod))
            dirty.add(node)
            node_of[pod] = -1
            placed_at[pod] = None
            key = (node, shapes[pod])
            per_node[key] = per_node.get(key, 0) + 1
        self._add_usage(wl, per_node, -1)
        self._moved(g)
        g.placed -= len(pods)
        prio = wl.spec.priority
        left = self.placed_by_priority[prio] - len(pods)
        if left:
            self.placed_by_priority[prio] = left
        else:
            del self.placed_by_priority[prio]
        if g.placed == 0:
            g.domain = None
            del self.running[g.running_key]

    def _moved(self, g: Group) -> None:
        self._journal(g.running_key)

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
        """Keep the queue holding exactly the live groups with unplaced pods."""
        pending = g.pending and g.workload.deleted_at is None
        if pending:
            self.queue[g.key] = g
        else:
            self.queue.pop(g.key, None)
        self.index.update(g, pending)

    def pod_ref(self, key: tuple[int, int, int]) -> tuple[Group, int]:
        wl_pos, gi, pod = key
        return self.by_position[wl_pos].groups[gi], pod
