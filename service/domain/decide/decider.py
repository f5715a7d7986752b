"""The decider: decide(state, input) -> decisions (accept, command -> input, is in commands.py).

`handle` folds the input and each decision into `state` as it goes (each try of
the pass must see the decisions before it) and returns the decisions; `decide`
is the pure form, run on a copy. Nothing here reads a clock, randomness or the
environment: the same inputs give the same decisions, byte for byte.
"""
from __future__ import annotations

import copy
import heapq
from collections.abc import Callable
from typing import Any

import numpy as np

from service.domain import dra
from service.domain.decide import trees as tr
from service.domain.decide.commands import Rejection as Rejection  # re-exported: decider.accept still works
from service.domain.decide.commands import accept as accept
from service.domain.decide.commands import rejection_event as rejection_event
from service.domain.fold import resize
from service.domain.fold.evolve import evolve
from service.domain.model import events as ev
from service.domain.model.rules import RULES
from service.domain.model.specs import NEVER, NO_EXECUTE
from service.domain.nodes import affinity as af
from service.domain.placement import routine as pl
from service.domain.preemption import flat as pre
from service.domain.preemption import victims as vu
from service.domain.state.cluster import ClusterState, Composite, Group
from service.domain.state.queue import TREES, grown_bound, single_shape


# -- decide: input event -> decisions --------------------------------------------------------
def decide(state: ClusterState, input_event: ev.Event) -> list[ev.Event]:
    """The pure form: the decisions this input causes; `state` is left untouched."""
    return handle(copy.deepcopy(state), input_event)


def handle(state: ClusterState, input_event: ev.Event) -> list[ev.Event]:
    """Fold the input into `state`, run the scheduling pass, fold and return its decisions."""
    if input_event.position != state.position + 1:
        raise ValueError(f"input at {input_event.position} does not follow {state.position}")
    out: list[ev.Event] = []

    def emit(kind: str, data: dict[str, Any]) -> None:
        data["rules"] = RULES  # every decision names the rules that made it (audit.md)
        event = ev.Event(state.position + 1, kind, data)
        evolve(state, event)
        out.append(event)

    state.deciding = input_event.position  # the target from history counts what came before it
    try:
        _decide(state, input_event, emit)
    finally:
        del state.deciding
    return out


def _decide(state: ClusterState, input_event: ev.Event, emit: Callable[[str, dict[str, Any]], None]) -> None:
    lost_node = None
    if input_event.type == ev.NODE_REMOVED:
        lost_node = state.nodes.index[input_event.data["name"]]
    evolve(state, input_event)
    if input_event.type == ev.COMMAND_REJECTED:
        return
    if lost_node is not None:
        _node_lost(state, lost_node, input_event.data["name"], emit)
    if input_event.type == ev.NODE_UPSERTED and input_event.data.get("taints"):
        _no_execute(state, input_event.data["name"], emit)
    for loss in dra.losses(state.dra, state.by_position, input_event):
        _pods_lost(state, loss.group, loss.pods, None, "DevicesRemoved", emit, loss.claims)
    if input_event.type == ev.WORKLOAD_SUBMITTED:
        wl = state.workloads[(input_event.data["namespace"], input_event.data["name"])]
        if wl.composites:  # a tree: its roots are its queue entries
            _pass(state, emit, only=[r for r in tr.roots_of(wl) if r.key in state.queue])  # type: ignore[misc]
        else:
            _pass(state, emit, only=[g for g in wl.groups if g.pending])
    elif input_event.type == ev.POD_GROUP_CREATED:  # adds no room: it is tried alone (lifecycle.md)
        pg = state.podgroups[(input_event.data["namespace"], input_event.data["name"])]
        _pass(state, emit, only=[g for g in pg.groups if g.pending])
    elif input_event.type == ev.WORKLOAD_SCALED and not resize.frees_room(input_event.data):
        # brings pods, adds no room: tries what it changed, as a submission does (lifecycle.md)
        wl = state.workloads[(input_event.data["namespace"], input_event.data["workload"])]
        _pass(state, emit, only=resize.touched(wl, input_event.data))  # type: ignore[arg-type]
    elif input_event.type in (ev.PRIORITY_CLASS_UPSERTED, ev.DEVICE_CLASS_REMOVED):
        pass  # adds no room: nothing pending can newly fit
    else:
        _pass(state, emit, only=None)


Emit = Callable[[str, dict[str, Any]], None]


def _node_lost(state: ClusterState, row: int, name: str, emit: Emit, reason: str = "NodeRemoved",
               lost: Callable[[Group, int], bool] | None = None) -> None:
    """Release the pods on a node (`lost`: only those it says), as model.md *Node loss* says."""
    by_group: dict[tuple[int, int], list[int]] = {}
    for wl_pos, gi, pod in state.node_pods[row]:
        if lost is None or lost(state.by_position[wl_pos].groups[gi], pod):
            by_group.setdefault((wl_pos, gi), []).append(pod)
    trees: set[int] = set()  # a tree's losses on this node are released together
    for (wl_pos, gi), pods in sorted(by_group.items()):
        g = state.by_position[wl_pos].groups[gi]
        if g.spec.parent is not None:
            if wl_pos not in trees:
                trees.add(wl_pos)
                lost_pods = {j: sorted(p) for (w, j), p in sorted(by_group.items()) if w == wl_pos}
                tr.lose(state, g.workload, lost_pods, name, reason, emit)
            continue
        _pods_lost(state, g, sorted(pods), name, reason, emit)


def _no_execute(state: ClusterState, name: str, emit: Emit) -> None:
    """A node replaced with a NoExecute taint releases the placed pods that do not tolerate it, as
    node loss does (model.md *Nodes*), reason TaintedNoExecute."""
    row = state.nodes.index[name]
    spec = state.nodes.specs[row]
    if spec is None or row >= len(state.node_pods) or all(t[2] != NO_EXECUTE for t in spec.taints):
        return
    taints = spec.taints

    def untolerated(g: Group, pod: int) -> bool:
        return not af.tolerates_no_execute(g.workload.spec.shapes[g.spec.pod_shapes[pod]].tolerations, taints)

    _node_lost(state, row, name, emit, "TaintedNoExecute", untolerated)


def _pods_lost(state: ClusterState, g: Group, pods: list[int], node: str | None, reason: str,
               emit: Emit, lost_claims: list[dict[str, Any]] | None = None) -> None:
    if g.spec.parent is not None:  # a tree's pod group: what goes with it is the tree's rule
        tr.lose(state, g.workload, {g.index: pods}, node, reason, emit, {g.index: lost_claims or []})
        return
    remaining = g.placed - len(pods)  # Running pods left; Succeeded ones count for the gang too
    whole = g.spec.disruption_all or (g.spec.gang and remaining + g.succeeded < g.spec.min_count)
    if whole:
        pods = [i for i, n in enumerate(g.node_of) if n >= 0]
    names = state.nodes.names
    emit(ev.PODS_LOST, {**g.ref, "node": node, "reason": reason,
                        "pods": [{"pod": g.spec.pod_names[p], "node": names[g.node_of[p]]} for p in pods],
                        "wholeGroup": bool(whole or len(pods) == g.placed),
                        "claimsReleased": [*(lost_claims or ()), *dra.claims_released(state.dra, state.nodes, g, pods)]})


def _pass(state: ClusterState, emit: Emit, only: list[Group] | None) -> None:
    """Sweep pending groups in queue order; an eviction restarts from the head."""
    if only is not None:
        if not _sweep_groups(state, emit, sorted(only, key=lambda x: x.key)):
            return
    while _sweep_queue(state, emit):
        pass
    state.index.dirty.clear()  # every class was bounded or tried against the dirty rows
    state.dra.take_freed()


def _sweep_groups(state: ClusterState, emit: Emit, groups: list[Group]) -> bool:
    """Try these groups in order; True when an eviction asks for a sweep from the head."""
    for g in groups:
        if g.pending and g.workload.deleted_at is None:
            if _try(state, g, emit) == "evicted":
                return True
    return False


def _sweep_queue(state: ClusterState, emit: Emit) -> bool:
    """One sweep over the whole queue, bucket by bucket in queue order (queue.py)."""
    index = state.index
    freed = state.dra.take_freed()
    if freed:  # devices freed: the rows that reach them may hold more pods of a claiming class
        index.gained_room()
        index.dirty.update(np.flatnonzero(state.dra.reach_any(state.nodes, freed)).tolist())
    heap = index.heads()
    heapq.heapify(heap)
    dirty = np.fromiter(sorted(index.dirty), dtype=np.int64, count=len(index.dirty))
    memo: dict[Any, Any] = {}  # dirty-row gains per shape, shared by the classes of this sweep
    start = tr.memo_now(state)
    # every root of the lane failed at this very state, or each is proven unable to fit
    quiet = index.trees_quiet == start or index.lane_proved()
    while heap:
        key, bkey = heapq.heappop(heap)
        g = state.queue.get(key)
        if g is None or index.member_of.get(key) != bkey:
            nxt = index.next_after(bkey, key)
            if nxt is not None:
                heapq.heappush(heap, (nxt, bkey))
            continue
        if quiet and bkey == TREES:
            continue  # each would fail again, recording nothing: the lane costs O(1)
        is_class = len(bkey) != 2  # ("solo", key) and TREES buckets are not classes
        if is_class and _bounded_out(state, g, dirty, memo):
            continue  # the whole class would fail: drop the bucket for this sweep
        outcome = _try(state, g, emit)
        if outcome == "evicted":
            index.trees_quiet = None
            return True
        if is_class and outcome != "placed":
            continue  # identical groups behind it fail too; room only shrinks in a sweep
        nxt = index.next_after(bkey, key)
        if nxt is not None:
            heapq.heappush(heap, (nxt, bkey))
    # nothing moved during the sweep: every root of the lane failed (or was skipped) at `start`
    index.trees_quiet = start if tr.memo_now(state) == start else None
    return False


def _can_preempt(state: ClusterState, g: Group) -> bool:
    if g.workload.spec.preemption_policy == NEVER or not state.running:
        return False
    return bool(state.running.keys()[0][0] < g.workload.spec.priority)


def _bounded_out(state: ClusterState, g: Group, dirty: np.ndarray, memo: dict[Any, Any]) -> bool:
    """True when the class's bounds prove its head cannot be placed now (queue.py)."""
    if not single_shape(g):
        return False
    info = state.index.info(g.class_key)
    if info.ub is None:
        return False
    need = g.deficit
    info.ub = grown_bound(state, g, info.ub, dirty, False, memo)
    if info.ub >= need:
        return False
    if not _can_preempt(state, g):
        return True
    if info.ub_pre is None:
        return False
    info.ub_pre = grown_bound(state, g, info.ub_pre, dirty, True, memo)
    return info.ub_pre < need


def _learn(state: ClusterState, g: Group, plain: pl.Attempt, refusal: pre.Refusal | None) -> None:
    """Record a class's failed try as bounds for later sweeps."""
    if g.class_key is None or g.placed != 0:
        return
    info = state.index.info(g.class_key)
    info.ub = plain.placeable
    info.ub_pre = None if refusal is None else max(refusal.placeable, plain.placeable)


def _try(state: ClusterState, g: Group, emit: Emit) -> str:
    """Try one pending group: 'placed', 'evicted' (a preemption happened) or 'failed'."""
    if isinstance(g, Composite):  # a tree's root (composite.md *The queue*)
        return tr.try_root(state, g, emit)
    spec = g.spec
    unplaced = g.unplaced()
    may_preempt = g.workload.spec.preemption_policy != NEVER
    if g.scheduled:
        # leftover pods: one by one; a gang's leftovers never preempt, a basic pod may
        result = _attempt(state, g, unplaced, 1)
        if result.placeable:
            return _placed(state, g, result, emit, ev.PODS_SCHEDULED, may_preempt)
        if spec.gang or not may_preempt:
            _explain_failure(state, g, result, None, emit)
            return "failed"
        return _preempt_one(state, g, unplaced[0], emit, result)

    need = g.deficit  # minCount - (Running + Succeeded); minCount for a gang that never ran
    result = _attempt(state, g, unplaced, need)
    if result.ok:
        return _placed(state, g, result, emit, ev.POD_GROUP_SCHEDULED, may_preempt)
    if not may_preempt:
        _learn(state, g, result, None)
        _explain_failure(state, g, result, pre.NOT_ALLOWED, emit)
        return "failed"
    if not spec.gang:
        return _preempt_one(state, g, unplaced[0], emit, result)
    plan = pre.plan(state, g, unplaced, need)
    if isinstance(plan, pre.Refusal):
        _learn(state, g, result, plan)
        _explain_failure(state, g, result, plan.reason, emit)
        return "failed"
    _emit_preemption(state, g, plan, emit, ev.POD_GROUP_SCHEDULED)
    return "evicted"


def _placed(state: ClusterState, g: Group, result: pl.Attempt, emit: Emit, kind: str, may_preempt: bool) -> str:
    """Record a placement; then the first pod it left of a basic group may preempt for itself
    (model.md *The queue*: each unplaced pod of a basic group is placed on its own and may preempt)."""
    data = _placement_data(state, g, result)
    emit(kind, data)
    if g.spec.gang or not may_preempt or not g.pending:
        return "placed"
    outcome = _preempt_one(state, g, g.unplaced()[0], emit, result, data)
    # pods were placed either way: an identical group behind this one may still place some (the
    # sweep drops a class's bucket only after a try that placed nothing)
    return "evicted" if outcome == "evicted" else "placed"


def _attempt(state: ClusterState, g: Group, pods: list[int], need: int) -> pl.Attempt:
    """pl.attempt, with the per-node reasons computed only when they will be recorded: on
    a group's first failed try, or when a placement leaves pods unplaced. A retry that
    fails records nothing (model.md *Explanations*), so it need not explain itself."""
    if g.needs_explanation:
        return pl.attempt(state, g, pods, need, explain=True)
    result = pl.attempt(state, g, pods, need, explain=False)
    if result.ok and result.placeable < len(pods):
        result = pl.attempt(state, g, pods, need, explain=True)  # rare: the same try, explained
    return result


def _preempt_one(state: ClusterState, g: Group, pod: int, emit: Emit, failed: pl.Attempt,
                 placed: dict[str, Any] | None = None) -> str:
    """A pod of a basic group preempts for itself alone. `failed`: the try that left it unplaced;
    `placed`: the placement that try recorded, if any (its explanation is this pod's)."""
    plan = pre.plan(state, g, [pod], 1)
    if isinstance(plan, pre.Refusal):
        if g.placed == 0:
            _learn(state, g, failed, plan)
        if placed is not None and placed["explanation"] is not None:
            # Tried within the decision just recorded, whose explanation (the group's, the same
            # object) is of this pod: it gains the outcome, as it would have in one event.
            placed["explanation"]["preemption"] = plan.reason
        else:
            _explain_failure(state, g, failed, plan.reason, emit)
        return "failed"
    kind = ev.PODS_SCHEDULED if g.scheduled else ev.POD_GROUP_SCHEDULED
    _emit_preemption(state, g, plan, emit, kind, failed)
    return "evicted"


def _explain_failure(state: ClusterState, g: Group, result: pl.Attempt, preemption: str | None,
                     emit: Emit) -> None:
    if not g.needs_explanation:
        return  # later failed tries record nothing
    explanation = pl.explanation(result.failure, g, g.counted + result.placeable, len(state.nodes.live_indices()))
    explanation["preemption"] = preemption
    emit(ev.POD_GROUP_UNSCHEDULABLE, {**g.ref, "explanation": explanation})


def _placement_data(state: ClusterState, g: Group, result: pl.Attempt,
                    rest: pl.Attempt | None = None) -> dict[str, Any]:
    """A placement's event data; the explanation, of the pods it leaves, is `result`'s failure
    or, where it has none (a basic pod placed by preemption), that of `rest`: the try that
    failed for those pods."""
    names = state.nodes.names
    placed_after = g.placed + len(result.placements)
    data: dict[str, Any] = {
        **g.ref,
        "pods": [{"pod": g.spec.pod_names[p], "node": names[n]} for p, n in result.placements],
        "claims": dra.describe_allocations(state.dra, g, result.claims),
        "placedPods": placed_after, "minCount": g.spec.min_count,
        "explanation": None,
    }
    if g.spec.topology_key is not None:
        data["domain"] = {"key": g.spec.topology_key, "value": result.domain}
    if placed_after + g.finished < g.total:
        failure = result.failure if result.failure is not None or rest is None else rest.failure
        data["explanation"] = pl.explanation(failure, g, placed_after + g.succeeded, len(state.nodes.live_indices()))
    return data


def _emit_preemption(state: ClusterState, g: Group, plan: pre.Plan, emit: Emit, kind: str,
                     failed: pl.Attempt | None = None) -> None:
    data = _placement_data(state, g, plan.placement, failed)  # computed before the victims go
    preemptor = {**g.ref, "priority": g.workload.spec.priority}
    victims = vu.emit_victims(state, plan.victims, preemptor, emit)
    data["preemption"] = {"victims": victims, "reprieved": vu.reprieved_entries(plan.reprieved)}
    emit(kind, data)
