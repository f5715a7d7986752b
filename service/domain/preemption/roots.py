"""Preemption for a pending root (composite.md *Preemption*): the evaluator's simulation is the
tree routine.

k is the number of pods the routine places for the root with every candidate removed, the root
satisfied; the first sufficient prefix is the first where it is satisfied and places k. The
bound: each pod group of the subtree places at most what fits, per shape, on the rows it may
use (`bounds.UniformCount`), whatever the routine does before it; the routine is run again only
after a unit that touched the rows it reads (where the subtree's pods may go, and every node
carrying a topology key of the subtree, whose sums the domain scores read) or, with devices,
after any unit.
"""
from __future__ import annotations

import numpy as np

from service.domain import dra
from service.domain.model.workload import subtree_cpgs, subtree_groups
from service.domain.placement import routine as pl
from service.domain.preemption import evaluator as ev
from service.domain.preemption.bounds import UniformCount
from service.domain.preemption.candidates import Candidates
from service.domain.preemption.victims import Plan, Refusal, Unit, close
from service.domain.state.cluster import ClusterState, Composite
from service.domain.trees.routine import Outcome, Routine


def plan_root(state: ClusterState, root: Composite) -> Plan | Refusal:
    """A pending root's preemption plan, or the reason there is none."""
    return ev.evaluate(state, Candidates(state, root.workload.spec.priority), _Root(state, root))


class _Root:
    def __init__(self, state: ClusterState, root: Composite) -> None:
        self.state = state
        self.wl = root.workload
        self.ci = root.spec.index
        self.devices = any(dra.group_needs_devices(g) for g in self.wl.groups) and bool(state.dra.claims)
        self.routine: Routine | None = None
        self.out: Outcome | None = None

    def _run(self) -> tuple[bool, int]:
        routine = Routine(self.state, self.wl, False)
        out = routine.place(self.ci, None)
        routine.rollback()
        return out.satisfied, out.pods

    def everything(self) -> tuple[bool, int]:
        return self._run()

    def first_sufficient(self, k: int, cand: Candidates, removal: ev.Removal) -> int:
        state, wl = self.state, self.wl
        counters: list[UniformCount] = []
        relevant = np.zeros(state.nodes.count, dtype=bool)
        keys: set[str] = set()
        for gi in subtree_groups(wl, self.ci):
            g = wl.groups[gi]
            if g.spec.topology_key is not None:
                keys.add(g.spec.topology_key)
            shapes: dict[int, int] = {}
            for p in g.unplaced():
                shapes[g.spec.pod_shapes[p]] = shapes.get(g.spec.pod_shapes[p], 0) + 1
            for shape, n in shapes.items():
                counters.append(UniformCount(state, g, shape, n))
                relevant |= pl.base_mask(state, g, shape)
        keys.update(key for cj in subtree_cpgs(wl, self.ci) if (key := wl.spec.cpgs[cj].topology_key) is not None)
        for key in sorted(keys):
            relevant |= state.nodes.domains(key)[0][: state.nodes.count] >= 0

        def count_at(lo: int) -> int:
            removal.set_prefix(lo)
            ok, placed = self._run()
            return placed if ok else -1

        return ev.walk(cand, removal, k, lambda: cand.touching(relevant) | self.devices, count_at,
                       lambda: sum(c() for c in counters))

    def keep(self, k: int) -> tuple[ev.Placed, list[dra.Allocation]] | None:
        wl = self.wl
        self.routine = routine = Routine(self.state, wl, True)
        self.out = routine.place(self.ci, None)
        claims = [a for _, res in routine.placed for a in res.claims]
        return [(wl.groups[gi], res.placements) for gi, res in routine.placed], claims

    def undo(self) -> None:
        assert self.routine is not None
        self.routine.rollback_keep()

    def plan(self, victims: list[Unit], reprieved: list[Unit]) -> Plan:
        return Plan(placement=self.routine, victims=close(victims), reprieved=reprieved, outcome=self.out)
