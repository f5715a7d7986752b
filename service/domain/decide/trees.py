"""Decisions for trees (composite.md): a pending root tried whole, leftovers, loss.

`try_root` is what the scheduling pass does with a root's queue entry: a root not satisfied
is placed whole by the tree routine (tree_routine.py) or not at all; a satisfied root has its
leftovers tried in the order of the tree routine, inside the domains pinned for their
ancestors, and they never preempt. `lose` applies model.md's node loss to a tree's pod
groups and then releases, bottom up, every CPG left unsatisfied with pods placed (a CPG with
`disruptionMode: All` goes whole when any pod of it goes).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from service.domain import dra
from service.domain.model import events as ev
from service.domain.model import gang
from service.domain.model.specs import NEVER
from service.domain.model.workload import Composite, Group, Workload, cpg_satisfied, subtree_cpgs, subtree_groups
from service.domain.placement import routine as pl
from service.domain.placement.domains import pinned_rows
from service.domain.placement.explain import explanation
from service.domain.preemption import flat as pre
from service.domain.preemption import victims as vu
from service.domain.state.cluster import ClusterState
from service.domain.trees.routine import Outcome, Routine

Emit = Callable[[str, dict[str, Any]], None]
NOT_ALLOWED = pre.NOT_ALLOWED


def roots_of(wl: Workload) -> list[Composite]:
    return [wl.composites[ci] for ci in wl.spec.roots]


def try_root(state: ClusterState, root: Composite, emit: Emit) -> str:
    """Try one root's queue entry: 'placed', 'evicted' (it preempted) or 'failed'."""
    wl = root.workload
    ci = root.spec.index
    memo = _memo(state, wl)
    if not root.needs_explanation and (_proven(state, root) or (memo is not None and root.memo == memo)):
        return "failed"  # it would fail again, recording nothing: nothing changed, or room only shrank
    root.memo = None
    if holds(wl, ci):
        if _leftovers(state, wl, ci, emit):
            return "placed"
        root.memo = memo
        return "failed"
    routine, out = _run(state, wl, ci, None, root.needs_explanation)
    if out.satisfied:
        emit(ev.COMPOSITE_POD_GROUP_SCHEDULED, _scheduled_data(state, wl, ci, routine, out))
        return "placed"
    outcome = _preempt(state, root, emit)  # only a pending root preempts (composite.md *Preemption*)
    if outcome is None:
        return "evicted"
    root.memo = memo
    if routine.proved and state.index.member_of.get(root.key) is not None:
        state.index.proofs.add(root.key)
    if root.needs_explanation:
        explanation = out.explanation
        assert explanation is not None
        explanation["preemption"] = outcome
        emit(ev.COMPOSITE_POD_GROUP_UNSCHEDULABLE, {**root.ref, "explanation": explanation})
    return "failed"


def holds(wl: Workload, ci: int) -> bool:
    """CPG ci is satisfied, or a report left it unsatisfied with pods of its subtree running: either
    way what its subtree lacks is leftover, tried inside its pinned domains and never preempting
    (composite.md *The queue*; lifecycle.md *Trees*)."""
    return cpg_satisfied(wl, ci) or any(wl.groups[gi].placed for gi in subtree_groups(wl, ci))


def _preempt(state: ClusterState, root: Composite, emit: Emit) -> str | None:
    """Preempt for a pending root that the tree routine cannot place: None when it did (victims
    evicted and the root placed, in one decision), else the outcome its explanation names."""
    wl = root.workload
    priority = wl.spec.priority
    if wl.spec.preemption_policy == NEVER:
        return NOT_ALLOWED
    if not state.running or state.running.keys()[0][0] >= priority:
        return pre.NO_VICTIMS
    plan = pre.plan_root(state, root)
    if isinstance(plan, pre.Refusal):
        return plan.reason
    ci = root.spec.index
    data = _scheduled_data(state, wl, ci, plan.placement, plan.outcome)  # before the victims go
    preemptor = {**root.ref, "priority": priority}
    victims = vu.emit_victims(state, plan.victims, preemptor, emit)
    data["preemption"] = {"victims": victims, "reprieved": vu.reprieved_entries(plan.reprieved)}
    emit(ev.COMPOSITE_POD_GROUP_SCHEDULED, data)
    return None


def _proven(state: ClusterState, root: Composite) -> bool:
    """Proven unable to fit by capacity alone since rows last gained room (queue.QueueIndex.proofs)."""
    return root.key in state.index.proofs


def _memo(state: ClusterState, wl: Workload) -> tuple[int, int, int, int] | None:
    """What the tree routine reads, in brief: the journal of placement changes, the live nodes, and
    the node upserts that may change a placement (queue.QueueIndex.node_changes; an upsert of labels
    nothing queued reads is none). While it is unchanged, a tree that failed fails again (the routine is
    a function of that state), so it is not tried: an input that changes nothing (deleting a pending
    workload, relabelling a node with a label nobody reads) costs no tree routine. Trees with device
    claims are always tried (devices change without a move)."""
    if any(dra.group_needs_devices(g) for g in wl.groups):
        return None
    return memo_now(state)


def memo_now(state: ClusterState) -> tuple[int, int, int, int]:
    nodes = state.nodes
    return (state.moves_dropped + len(state.moves), nodes.count, int(nodes.alive[: nodes.count].sum()),
            state.index.node_changes)


def _run(state: ClusterState, wl: Workload, ci: int, allowed: Any, explain: bool) -> tuple[Routine, Outcome]:
    """The tree routine on CPG ci; its placement is left off the state (`routine.placed`).
    A try that was not explained and leaves something unplaced is run again, explained: its
    event records why (the routine is deterministic, so it decides the same)."""
    routine = Routine(state, wl, explain)
    out = routine.place(ci, allowed)
    routine.rollback_keep()
    if out.satisfied and not explain and _leaves_something(wl, ci, routine):
        return _run(state, wl, ci, allowed, True)
    return routine, out


def _after(wl: Workload, routine: Routine) -> dict[int, int]:
    """Placed pods per group once the routine's placement is recorded."""
    placed = {gi: g.placed for gi, g in enumerate(wl.groups)}
    for gi, res in routine.placed:
        placed[gi] += len(res.placements)
    return placed


def _satisfied_after(wl: Workload, ci: int, placed: dict[int, int]) -> bool:
    return gang.cpg_satisfied(wl.spec, ci, lambda gi: placed[gi] + wl.groups[gi].succeeded)


def _leaves_something(wl: Workload, ci: int, routine: Routine) -> bool:
    placed = _after(wl, routine)
    return any(placed[gi] + wl.groups[gi].finished < len(wl.spec.groups[gi].pod_names)
               for gi in subtree_groups(wl, ci)) or \
        not all(_satisfied_after(wl, cj, placed) for cj in subtree_cpgs(wl, ci))


def _domain(key: str | None, value: str | None) -> dict[str, Any] | None:
    return None if key is None else {"key": key, "value": value}


def group_data(state: ClusterState, g: Group, result: pl.Attempt, explain: bool) -> dict[str, Any]:
    """A pod group's placement, as PodGroupScheduled / PodsScheduled carry it, with `parent`."""
    names = state.nodes.names
    placed_after = g.placed + len(result.placements)
    data: dict[str, Any] = {
        **g.ref, "parent": g.workload.spec.cpgs[g.spec.parent].name if g.spec.parent is not None else None,
        "pods": [{"pod": g.spec.pod_names[p], "node": names[n]} for p, n in result.placements],
        "claims": dra.describe_allocations(state.dra, g, result.claims),
        "placedPods": placed_after, "minCount": g.spec.min_count, "explanation": None,
        "domain": _domain(g.spec.topology_key, result.domain or g.domain),
    }
    if explain and placed_after + g.finished < g.total:
        data["explanation"] = explanation(result.failure, g, placed_after, len(state.nodes.live_indices()))
    return data


def _scheduled_data(state: ClusterState, wl: Workload, ci: int, routine: Routine, out: Outcome) -> dict[str, Any]:
    """CompositePodGroupScheduled: every placement of this decision, every CPG of the subtree."""
    placed = _after(wl, routine)
    groups = []
    for gi, res in routine.placed:
        data = group_data(state, wl.groups[gi], res, False)
        del data["namespace"], data["workload"], data["explanation"]
        groups.append(data)
    composites = []
    for cj in subtree_cpgs(wl, ci):
        c = wl.composites[cj]
        composites.append({"compositePodGroup": c.spec.name,
                           "parent": None if c.spec.parent is None else wl.spec.cpgs[c.spec.parent].name,
                           "satisfied": _satisfied_after(wl, cj, placed),
                           "domain": _domain(c.spec.topology_key, routine.domains.get(cj, c.domain))})
    return {**wl.composites[ci].ref, "groups": groups, "composites": composites,
            "explanation": out.explanation if _leaves_something(wl, ci, routine) else None, "preemption": None}


def _leftovers(state: ClusterState, wl: Workload, ci: int, emit: Emit) -> bool:
    """What the subtree of a CPG that holds (`holds`) still lacks, in the order of the tree routine, inside the
    pinned domains. A leftover that fails records nothing. True when anything was placed."""
    spec = wl.spec.cpgs[ci]
    allowed = pinned_rows(state, wl, ci)
    any_placed = False
    for gi in spec.child_groups:
        g = wl.groups[gi]
        if not g.pending:
            continue
        unplaced = g.unplaced()
        if g.scheduled:  # leftover pods, placed as they fit (model.md)
            res = pl.attempt(state, g, unplaced, 1, restrict=allowed, explain=False)
            if res.placeable:
                if res.placeable < len(unplaced):
                    res = pl.attempt(state, g, unplaced, 1, restrict=allowed, explain=True)
                emit(ev.PODS_SCHEDULED, group_data(state, g, res, True))
                any_placed = True
            continue
        need = g.deficit
        res = pl.attempt(state, g, unplaced, need, restrict=allowed, explain=False)
        if res.ok:
            if res.placeable < len(unplaced):
                res = pl.attempt(state, g, unplaced, need, restrict=allowed, explain=True)
            emit(ev.POD_GROUP_SCHEDULED, group_data(state, g, res, True))
            any_placed = True
    for cj in spec.child_cpgs:
        if holds(wl, cj):
            any_placed |= _leftovers(state, wl, cj, emit)
            continue
        routine, out = _run(state, wl, cj, allowed, False)
        if out.satisfied:
            emit(ev.COMPOSITE_POD_GROUP_SCHEDULED, _scheduled_data(state, wl, cj, routine, out))
            any_placed = True
    return any_placed


# -- loss and eviction ---------------------------------------------------------------------------
def lose(state: ClusterState, wl: Workload, lost: dict[int, list[int]], node: str | None, reason: str,
         emit: Emit, lost_claims: dict[int, list[dict[str, Any]]] | None = None) -> None:
    """Release lost pods of a tree and what goes with them (composite.md *Loss and eviction*):
    one PodsLost per pod group, in pre-order."""
    groups = wl.groups
    release: dict[int, set[int]] = {}
    remaining = {gi: {p for p, n in enumerate(g.node_of) if n >= 0} for gi, g in enumerate(groups)}
    for gi, pods in lost.items():
        pods = [p for p in pods if groups[gi].node_of[p] >= 0]
        if not pods:
            continue
        release[gi] = set(pods)
        remaining[gi] -= set(pods)
        g = groups[gi]
        if g.spec.disruption_all or (g.spec.gang and len(remaining[gi]) + g.succeeded < g.spec.min_count):
            release[gi] |= remaining[gi]
            remaining[gi] = set()
    if not release:
        return
    touched = set(release)
    whole_from: dict[int, str] = {}
    counts = {gi: len(r) for gi, r in remaining.items()}
    for ci in range(len(wl.spec.cpgs) - 1, -1, -1):  # children come after their parents: bottom up
        cpg = wl.spec.cpgs[ci]
        members = subtree_groups(wl, ci)
        if not any(counts[gi] for gi in members):
            continue
        hit = cpg.disruption_all and any(gi in touched for gi in members)
        if hit or not _satisfied_after(wl, ci, counts):
            for gi in members:
                if remaining[gi]:
                    release.setdefault(gi, set()).update(remaining[gi])
                    remaining[gi] = set()
                    counts[gi] = 0
                whole_from[gi] = cpg.name
            touched.update(members)
    names = state.nodes.names
    for gi in sorted(release):
        g = groups[gi]
        pods = sorted(p for p in release[gi] if g.node_of[p] >= 0)
        if not pods:
            continue
        whole = gi in whole_from or len(pods) == g.placed
        emit(ev.PODS_LOST, {**g.ref, "node": node, "reason": reason,
                            "pods": [{"pod": g.spec.pod_names[p], "node": names[g.node_of[p]]} for p in pods],
                            "wholeGroup": bool(whole),
                            "claimsReleased": [*((lost_claims or {}).get(gi) or ()),
                                               *dra.claims_released(state.dra, state.nodes, g, pods)],
                            "compositePodGroup": whole_from.get(gi)})
