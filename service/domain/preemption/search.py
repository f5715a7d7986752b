"""Preemption over units of any shape: trees as preemptors and as victims (composite.md
*Preemption*), on model.md's three steps.

preemption.py decides flat preemptors among flat victims with an optimised search; wherever
a tree is involved (a pending root preempting, or a tree's units among a flat preemptor's
candidates) the plan is made here, unit by unit, as the rules read:
1. the candidate units (victims.py), least important first;
2. simulate with every candidate removed (the placement routine for a pod group, the tree
   routine for a root); if that does not place what the preemptor needs, nothing is evicted;
   otherwise remove units one at a time until it places as many pods, and take that placement;
3. reprieve the removed units most important first: a unit is kept when every preemptor pod
   still fits on the node (and devices) it was given; then `victims.close` applies the gang
   surplus rule and takes whole every CPG the victims would leave unsatisfied.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from service.domain import dra
from service.domain.placement import routine as pl
from service.domain.preemption.victims import NO_VICTIMS, WOULD_NOT_HELP, Plan, Refusal, Unit, close
from service.domain.state.cluster import ClusterState, Composite, Group
from service.domain.trees.routine import Outcome, Routine


class Removal:
    """Units' usage taken off the node table in removal order, prefix by prefix (and, with
    `devices`, the device claims they would free)."""

    def __init__(self, state: ClusterState, units: list[Unit], devices: bool) -> None:
        self.state = state
        rows: list[int] = []
        vecs: list[np.ndarray] = []
        self.ends: list[int] = []  # per unit: its pods end here
        entries: list[tuple[Group, list[int]]] = []
        self.entry_ends: list[int] = []  # per unit: its (group, pods) entries end here
        for u in units:
            for g, pods in u.members:
                entries.append((g, pods))
                for p in pods:
                    rows.append(g.node_of[p])
                    vecs.append(state.shape_vector(g.workload, g.spec.pod_shapes[p]))
            self.ends.append(len(rows))
            self.entry_ends.append(len(entries))
        width = len(state.nodes.resource_names)
        self.rows = np.array(rows, dtype=np.int64)
        self.vecs = np.vstack(vecs) if vecs else np.zeros((0, width), dtype=np.int64)
        self.release = dra.Release(state.dra, entries) if devices else None
        self.applied = 0  # pods currently removed

    def set_prefix(self, units: int) -> None:
        target = self.ends[units - 1] if units else 0
        nodes = self.state.nodes
        if target > self.applied:
            np.subtract.at(nodes.used, self.rows[self.applied:target], self.vecs[self.applied:target])
            nodes.note_touched(self.rows[self.applied:target].tolist())
        elif target < self.applied:
            np.add.at(nodes.used, self.rows[target:self.applied], self.vecs[target:self.applied])
            nodes.note_touched(self.rows[target:self.applied].tolist())
        self.applied = target
        if self.release is not None:
            self.release.set_prefix(self.entry_ends[units - 1] if units else 0)


def _first_sufficient(removal: Removal, count: int, run: Callable[[], tuple[bool, int]]) -> int | Refusal:
    """The fewest units (least important first) whose removal lets `run` do what it does with
    every one removed: model.md's "remove one unit at a time until it places k"."""
    removal.set_prefix(count)
    ok, k = run()
    if not ok:
        return Refusal(WOULD_NOT_HELP, k)
    for lo in range(1, count):
        removal.set_prefix(lo)
        ok, placed = run()
        if ok and placed >= k:
            return lo
    return count


def _reprieve(state: ClusterState, placed: Iterable[tuple[Group, list[tuple[int, int]]]], claims: list[dra.Allocation],
              removed: list[Unit], devices: bool) -> tuple[list[Unit], list[Unit]]:
    """Put the removed units back, most important first; keep each with which every preemptor
    pod still fits on its node (in the resources the preemptor requests) and keeps its devices
    (`dra.Reprieve`, with `devices`). Runs with the removed units off the table and the
    preemptor's placement on it; leaves the table as it found it."""
    nodes = state.nodes
    pre_nodes: set[int] = set()
    vecs = []
    for g, placements in placed:
        for pod, node in placements:
            pre_nodes.add(node)
            vecs.append(state.shape_vector(g.workload, g.spec.pod_shapes[pod]))
    cols = np.flatnonzero(np.any(np.vstack(vecs), axis=0)) if vecs else np.zeros(0, dtype=np.int64)
    check = dra.Reprieve(state.dra, (m for u in removed for m in u.members), claims) if devices else None
    victims: list[Unit] = []
    kept: list[Unit] = []
    for unit in sorted(removed, key=lambda u: u.importance):
        pods = [(g.node_of[p], state.shape_vector(g.workload, g.spec.pod_shapes[p])) for g, ps in unit.members for p in ps]
        for r, v in pods:
            nodes.used[r] += v
        rows = {r for r, _ in pods}
        nodes.note_touched(rows)
        fits = all(np.all(nodes.used[r, cols] <= nodes.alloc[r, cols]) for r in pre_nodes & rows)
        if fits and check is not None and not check.fits(unit.members):
            fits = False  # it would take back the preemptor's devices (sharing.md, *Preemption*)
        if fits:
            kept.append(unit)
        else:
            for r, v in pods:
                nodes.used[r] -= v
            victims.append(unit)
    for unit in kept:  # the table as on entry: the kept units off again
        for g, ps in unit.members:
            for p in ps:
                nodes.used[g.node_of[p]] -= state.shape_vector(g.workload, g.spec.pod_shapes[p])
            nodes.note_touched(g.node_of[p] for p in ps)
    return victims, kept


def plan_group(state: ClusterState, g: Group, pods: list[int], need: int, units: list[Unit]) -> Plan | Refusal:
    """A pod group's preemption among these units (any shape, least important first)."""
    if not units:
        return Refusal(NO_VICTIMS, 0)
    devices = dra.group_needs_devices(g) and bool(state.dra.claims)
    removal = Removal(state, units, devices)

    def run() -> tuple[bool, int]:
        res = pl.attempt(state, g, pods, need, explain=False)
        return res.ok, res.placeable

    try:
        lo = _first_sufficient(removal, len(units), run)
        if isinstance(lo, Refusal):
            return lo
        removal.set_prefix(lo)
        trial = pl.Trial(state)
        chosen = pl.attempt(state, g, pods, need, explain=True, keep_trial=trial)
        victims, reprieved = _reprieve(state, [(g, chosen.placements)], chosen.claims, units[:lo], devices)
        trial.rollback()
    finally:
        removal.set_prefix(0)
    return Plan(placement=chosen, victims=close(victims), reprieved=reprieved)


def plan_root(state: ClusterState, root: Composite, units: list[Unit]) -> Plan | Refusal:
    """A pending root's preemption (composite.md): the simulation is the tree routine; k is the
    pods it places for the root with every candidate removed, the root satisfied."""
    if not units:
        return Refusal(NO_VICTIMS, 0)
    wl = root.workload
    ci = root.spec.index
    devices = any(dra.group_needs_devices(g) for g in wl.groups) and bool(state.dra.claims)
    removal = Removal(state, units, devices)

    def run() -> tuple[bool, int]:
        routine = Routine(state, wl, False)
        out = routine.place(ci, None)
        routine.rollback()
        return out.satisfied, out.pods

    try:
        lo = _first_sufficient(removal, len(units), run)
        if isinstance(lo, Refusal):
            return lo
        removal.set_prefix(lo)
        routine = Routine(state, wl, True)
        out: Outcome = routine.place(ci, None)
        claims = [a for _, res in routine.placed for a in res.claims]
        victims, reprieved = _reprieve(state, [(wl.groups[gi], res.placements) for gi, res in routine.placed],
                                       claims, units[:lo], devices)
        routine.rollback_keep()
    finally:
        removal.set_prefix(0)
    return Plan(placement=routine, victims=close(victims), reprieved=reprieved, outcome=out)
