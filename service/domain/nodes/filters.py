"""The node filters of model.md *Placing a group* step 1: one ordered table, as kube-scheduler's
filter plugins are.

`FILTERS` lists the filters in the order the spec checks them. Each row (`Filter`) is one concern:

- `name`: the row's identity (`schedulable`, `taints`, `nodeAffinity`, ...);
- `mask(pod) -> bool array over node rows [0, nodes.count)`: True where the node passes. It is
  vectorised over every row of the node table (dead rows too; callers intersect with what they
  look at) and must not be written to: it may be a cached array or a view of one;
- `explain(pod, rows) -> [(reason, fails)]`: for explanations, the reasons this filter gives on
  `rows` (the nodes every earlier row passed), each with a bool array over `rows`, True where the
  node fails for that reason. When None, the row has one reason, `reason`, and fails where `mask`
  is False. A row whose reason depends on the node (the first untolerated taint, the missing
  resource) returns several pairs; a node may be counted under several reasons of one row (kube-
  scheduler's NodeResourcesFit reports every insufficient resource);
- `static`: the row depends only on the node and the pod's shape (not on usage, the topology domain
  or the devices). Placement ANDs the static rows into `base_mask`, once per pod shape and call;
  the other rows are applied by the placement routine where it already has what they need: the
  topology row by the domain walk (`allowed`), the resources row together with scoring
  (`placement._fitting_rows`), the devices row by trial allocation per node (`dra.Ledger.try_pod`).
  Their `mask` here is what explanations count; for devices it fails every node a pod that needs
  devices reached (explanations are only asked for a pod that fit nowhere, and `dra.explain_pod`
  then says which claim failed where).

Explanations (`explain`) walk the rows in order over the live nodes: a node is counted under the
first row that rejects it, later rows see only the nodes earlier rows passed (model.md
*Explanations*: "the first failing filter in the order of *Placing a group* gives a node's reason").

Adding a filter is a local change: a reason constant, a mask function over `Pod` (and an explain
function if its reason depends on the node), and a row in `FILTERS` at its place in the spec's
order; a static row is in `base_mask` (and so in placement and preemption) at once.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from service.domain.model import reasons as rs
from service.domain.model.specs import PodShape
from service.domain.nodes import affinity as af
from service.domain.nodes.table import NodeTable

# reasons, as kube-scheduler's filter plugins say them: the words of the codes in reasons.py (the
# counts are keyed by them; explanations record the codes, reasons.node_reasons)
UNSCHEDULABLE = rs.NODE_WORDS[rs.NODE_UNSCHEDULABLE]
TAINTED = "node(s) had untolerated taint"  # + " {<key>: <value>}" of the node's first one (affinity.taint_reason)
AFFINITY = rs.NODE_WORDS[rs.NODE_AFFINITY]
TOPOLOGY = rs.NODE_WORDS[rs.TOPOLOGY]
TOO_MANY_PODS = rs.NODE_WORDS[rs.TOO_MANY_PODS]
DEVICES = rs.NODE_WORDS[rs.DEVICES]


def insufficient(resource: str) -> str:
    return rs.node_words({"reason": rs.INSUFFICIENT, "resource": resource})


class Pod:
    """What the filters look at: one pod (its shape) against the node table."""
    __slots__ = ("nodes", "shape", "vec", "allowed", "needs_devices")

    def __init__(self, nodes: NodeTable, shape: PodShape, vec: np.ndarray | None = None,
                 allowed: np.ndarray | None = None, needs_devices: bool = False) -> None:
        self.nodes = nodes
        self.shape = shape
        self.vec = vec  # the request vector in the table's columns (the resources row)
        self.allowed = allowed  # rows of the group's topology domain; None: any row
        self.needs_devices = needs_devices


Mask = Callable[[Pod], np.ndarray]
Explain = Callable[[Pod, np.ndarray], list[tuple[str, np.ndarray]]]


@dataclass(frozen=True)
class Filter:
    name: str
    reason: str  # the reason when `explain` is None
    mask: Mask
    explain: Explain | None = None
    static: bool = False


# -- the rows ------------------------------------------------------------------------------------
def _schedulable(pod: Pod) -> np.ndarray:
    nodes = pod.nodes
    return nodes.schedulable[: nodes.count]


def _taints(pod: Pod) -> np.ndarray:
    return af.taint_mask(pod.nodes, pod.shape.tolerations)


def _explain_taints(pod: Pod, rows: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """Each node under its first untolerated NoSchedule/NoExecute taint, in the order of its taints."""
    return af.taint_failures(pod.nodes, pod.shape.tolerations, rows)


def _node_affinity(pod: Pod) -> np.ndarray:
    """kube-scheduler's NodeAffinity: the nodeSelector and the required node affinity, together."""
    return af.selector_affinity_mask(pod.nodes, pod.shape)


def _topology(pod: Pod) -> np.ndarray:
    n = pod.nodes.count
    return np.ones(n, dtype=bool) if pod.allowed is None else pod.allowed[:n]


def _resources(pod: Pod) -> np.ndarray:
    nodes, vec = pod.nodes, pod.vec
    n = nodes.count
    ok = np.ones(n, dtype=bool)
    if vec is not None:
        for col in np.flatnonzero(vec):
            ok &= nodes.alloc[:n, col] - nodes.used[:n, col] >= vec[col]
    return ok


def _explain_resources(pod: Pod, rows: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """Every resource a node is short of (`Too many pods` for the implicit `pods`)."""
    nodes, vec = pod.nodes, pod.vec
    if vec is None:
        return []
    out = []
    for col in np.flatnonzero(vec):
        ok = nodes.alloc[rows, col] - nodes.used[rows, col] >= vec[col]
        out.append((TOO_MANY_PODS if col == 0 else insufficient(nodes.resource_names[col]), ~ok))
    return out


def _devices(pod: Pod) -> np.ndarray:
    return np.full(pod.nodes.count, not pod.needs_devices)


SCHEDULABLE_ROW = Filter("schedulable", UNSCHEDULABLE, _schedulable, static=True)
TAINTS_ROW = Filter("taints", TAINTED, _taints, _explain_taints, static=True)
AFFINITY_ROW = Filter("nodeAffinity", AFFINITY, _node_affinity, static=True)
TOPOLOGY_ROW = Filter("topology", TOPOLOGY, _topology)
RESOURCES_ROW = Filter("resources", TOO_MANY_PODS, _resources, _explain_resources)
DEVICES_ROW = Filter("devices", DEVICES, _devices)

FILTERS: tuple[Filter, ...] = (SCHEDULABLE_ROW, TAINTS_ROW, AFFINITY_ROW, TOPOLOGY_ROW, RESOURCES_ROW, DEVICES_ROW)
STATIC: tuple[Filter, ...] = tuple(f for f in FILTERS if f.static)


# -- the two uses -------------------------------------------------------------------------------
def static_mask(nodes: NodeTable, shape: PodShape) -> np.ndarray:
    """Rows a pod of this shape may use at all: every static row passes. Static rows read only the
    node table and the shape's selector, tolerations and required affinity (a row reading more of
    the shape must join the key), so the result is cached per key until the next node change
    (which drops `nodes.masks`); it is read-only."""
    key = ("static", shape.node_selector, shape.tolerations, shape.required)  # what the static rows read
    hit = nodes.cached_mask(key)
    if hit is not None:
        return hit
    pod = Pod(nodes, shape)
    masks = [f.mask(pod) for f in STATIC]
    out = masks[0] & masks[1] if len(masks) > 1 else masks[0].copy()
    for m in masks[2:]:
        out &= m
    out.flags.writeable = False
    return nodes.keep_mask(key, out)


def explain(pod: Pod, rows: np.ndarray | None = None) -> tuple[dict[str, int], dict[str, np.ndarray]]:
    """Walk the rows over the live nodes (or these rows of them): (nodes per reason, the rows each
    filter saw, by name). A node's reason is its own, so counts over disjoint rows add up."""
    if rows is None:
        rows = pod.nodes.live_indices()
    counts: dict[str, int] = {}
    seen: dict[str, np.ndarray] = {}
    for f in FILTERS:
        seen[f.name] = rows
        if f.explain is None:
            ok = f.mask(pod)[rows]
            k = int(len(rows) - np.count_nonzero(ok))
            if k:
                counts[f.reason] = counts.get(f.reason, 0) + k
        else:
            ok = np.ones(len(rows), dtype=bool)
            for reason, fails in f.explain(pod, rows):
                k = int(np.count_nonzero(fails))
                if k:
                    counts[reason] = counts.get(reason, 0) + k
                ok &= ~fails
        rows = rows[ok]
    return counts, seen
