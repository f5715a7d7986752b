"""Reference preemption: the straightforward implementation of model.md *Preemption*.

One Python object per unit, units removed one at a time with a placement attempt after
each (the whole routine, domain choice included), every removed unit put back in the
reprieve. The service's module is optimised; tests compare its decisions with
these, which must be identical. Not used by the service.
"""
from __future__ import annotations

import numpy as np

from service.domain import dra
from service.domain.placement import routine as pl
from service.domain.preemption import victims as vu
from service.domain.preemption.flat import NO_VICTIMS, NOT_ALLOWED, WOULD_NOT_HELP, Plan, Refusal, Unit, victim_why
from service.domain.state.cluster import ClusterState, Group

# the types and reasons are the service's own: only the algorithm is the reference's
__all__ = ["NOT_ALLOWED", "NO_VICTIMS", "WOULD_NOT_HELP", "Plan", "Refusal", "Unit", "candidate_units", "plan", "victim_why"]


def candidate_units(state: ClusterState, priority: int) -> list[Unit]:
    units: list[Unit] = []
    running = state.running
    end = running.bisect_left((priority,))
    for key in running.keys()[:end]:
        g: Group = running[key]
        placed = [i for i, n in enumerate(g.node_of) if n >= 0]
        if g.spec.disruption_all or (g.spec.gang and g.placed <= g.spec.min_count):
            units.append(Unit.of(g, placed, True))
        else:
            units.extend(Unit.of(g, [p], False) for p in placed)
    return units


class _Removal:
    """Units' usage taken off the node table in removal order, prefix by prefix
    (and, with `devices`, the device claims they would free)."""

    def __init__(self, state: ClusterState, units: list[Unit], devices: bool = False) -> None:
        self.state = state
        self.release = dra.Release(state.dra, [(u.group, u.pods) for u in units]) if devices else None
        rows: list[int] = []
        vecs: list[np.ndarray] = []
        self.ends: list[int] = []
        for u in units:
            g = u.group
            for p in u.pods:
                rows.append(g.node_of[p])
                vecs.append(state.shape_vector(g.workload, g.spec.pod_shapes[p]))
            self.ends.append(len(rows))
        width = len(state.nodes.resource_names)
        self.rows = np.array(rows, dtype=np.int64)
        self.vecs = np.vstack(vecs) if vecs else np.zeros((0, width), dtype=np.int64)
        self.applied = 0  # pods currently removed

    def set_prefix(self, units: int) -> None:
        target = self.ends[units - 1] if units else 0
        used = self.state.nodes.used
        if target > self.applied:
            np.subtract.at(used, self.rows[self.applied:target], self.vecs[self.applied:target])
        elif target < self.applied:
            np.add.at(used, self.rows[target:self.applied], self.vecs[target:self.applied])
        self.applied = target
        self.state.nodes.usage_changed()  # the table's contract: writers of `used` say so
        if self.release is not None:
            self.release.set_prefix(units)


def plan(state: ClusterState, g: Group, pods: list[int], need: int) -> Plan | Refusal:
    """A preemption plan for these pods of g, or the reason there is none."""
    priority = g.workload.spec.priority
    units = candidate_units(state, priority)
    if not units:
        return Refusal(NO_VICTIMS, 0)
    # least important first
    units.sort(key=lambda u: u.importance, reverse=True)
    devices = dra.group_needs_devices(g) and bool(state.dra.claims)
    removal = _Removal(state, units, devices)
    try:
        removal.set_prefix(len(units))
        everything = pl.attempt(state, g, pods, need, explain=False)
        if not everything.ok:
            return Refusal(WOULD_NOT_HELP, everything.placeable)
        k = everything.placeable
        # remove units one at a time, least important first, until the routine places k pods
        lo = 1
        while lo < len(units):
            removal.set_prefix(lo)
            if pl.attempt(state, g, pods, need, explain=False).placeable >= k:
                break
            lo += 1
        removal.set_prefix(lo)
        trial = pl.Trial(state)
        chosen = pl.attempt(state, g, pods, need, explain=True, keep_trial=trial)
        if chosen.placeable < k:  # pragma: no cover - guarded by the search
            trial.rollback()
            return Refusal(WOULD_NOT_HELP, everything.placeable)
        removed = units[:lo]
        victims_units, reprieved = _reprieve(state, chosen, removed, pods, g)
        trial.rollback()
    finally:
        removal.set_prefix(0)
    return Plan(placement=chosen, victims=_victims(victims_units), reprieved=reprieved)


def _reprieve(state: ClusterState, chosen: pl.Attempt, removed: list[Unit], pods: list[int],
              g: Group) -> tuple[list[Unit], list[Unit]]:
    """Put removed units back, most important first; keep those the preemptor survives.

    Runs with the removed units off the table and the preemptor's placement applied.
    """
    nodes = state.nodes
    pre_nodes = {node for _, node in chosen.placements}
    cols = np.flatnonzero(np.any(np.vstack(
        [state.shape_vector(g.workload, g.spec.pod_shapes[p]) for p in pods]), axis=0))
    held = dra.held_devices(chosen.claims) if chosen.claims else None
    victims: list[Unit] = []
    kept: list[Unit] = []
    for unit in sorted(removed, key=lambda u: u.importance):
        ug = unit.group
        rows = [ug.node_of[p] for p in unit.pods]
        vecs = [state.shape_vector(ug.workload, ug.spec.pod_shapes[p]) for p in unit.pods]
        for r, v in zip(rows, vecs):
            nodes.used[r] += v
        nodes.usage_changed()
        touched = pre_nodes.intersection(rows)
        fits = all(np.all(nodes.used[r, cols] <= nodes.alloc[r, cols]) for r in touched)
        if fits and held and dra.unit_conflicts(state.dra, held, ug, unit.pods):
            fits = False  # putting it back would take back devices the preemptor was given
        if fits:
            kept.append(unit)
        else:
            for r, v in zip(rows, vecs):
                nodes.used[r] -= v
            nodes.usage_changed()
            victims.append(unit)
    # leave the table as it was on entry: kept units are removed again
    for unit in kept:
        ug = unit.group
        for p in unit.pods:
            nodes.used[ug.node_of[p]] -= state.shape_vector(ug.workload, ug.spec.pod_shapes[p])
    nodes.usage_changed()
    return victims, kept


def _victims(units: list[Unit]) -> list[vu.Victim]:
    """Victim pods by group, applying the gang surplus rule."""
    by_group: dict[int, tuple[Group, list[int], bool]] = {}
    order: list[Group] = []
    for u in units:
        g = u.group
        if id(g) not in by_group:
            by_group[id(g)] = (g, [], u.whole)
            order.append(g)
        by_group[id(g)][1].extend(u.pods)
    out = []
    for g in sorted(order, key=lambda x: x.key):
        _, pods, whole = by_group[id(g)]
        escalated = not whole and g.spec.gang and len(pods) > g.placed - g.spec.min_count
        if escalated:
            pods = [i for i, n in enumerate(g.node_of) if n >= 0]
        pods = sorted(set(pods))
        if whole:
            kind = vu.DISRUPTION_ALL if g.spec.disruption_all else vu.GANG_AT_MIN
        elif escalated:
            kind = vu.SURPLUS_EXCEEDED
        else:
            kind = vu.GANG_SURPLUS if g.spec.gang else vu.BASIC_PODS
        out.append(vu.Victim(g, pods, whole or escalated or len(pods) == g.placed, kind))
    return out
