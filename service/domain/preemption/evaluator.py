"""The preemption evaluator: model.md's three steps of *Preemption*, written once.

1. the candidate units, least important first (candidates.py);
2. simulate with every candidate removed; if that does not give the preemptor what it needs,
   nothing is evicted (`PreemptionWouldNotHelp`); otherwise find the fewest units, least
   important first, whose removal lets the simulation place as many pods (`walk`), and take
   that placement;
3. reprieve the removed units most important first (`reprieve`): a unit is kept when every
   preemptor pod still fits on the node it was given (in the resources its pods request) and
   `dra.Reprieve` says its devices fit (no exclusive device of the preemptor taken back, every
   shared capacity within its value); `victims.close` then applies the closing rules.

A preemptor plugs in as a `Simulation`: the placement routine for a pod group (flat.py), the
tree routine for a pending root (roots.py). Each brings its bound, an upper bound of what it
places that only grows with the prefix removed, which lets `walk` skip the prefixes it rules
out; every preemption is bounded, with or without trees among its candidates.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from service.domain import dra
from service.domain.nodes.statement import Statement
from service.domain.preemption.candidates import Candidates
from service.domain.preemption.victims import NO_VICTIMS, WOULD_NOT_HELP, Plan, Refusal, Unit
from service.domain.state.cluster import ClusterState, Group

Placed = list[tuple[Group, list[tuple[int, int]]]]  # per preemptor group, its (pod, node row) placements


class Simulation(Protocol):
    """A preemptor's side of the evaluator."""

    devices: bool  # whether its pods use device claims (and the cluster has some): removal frees them

    def everything(self) -> tuple[bool, int]:
        """With every candidate removed: does it get what it needs, and how many pods it places (k)."""
        ...

    def first_sufficient(self, k: int, cand: Candidates, removal: Removal) -> int:
        """The fewest units whose removal lets it place k pods (by `walk`)."""
        ...

    def keep(self, k: int) -> tuple[Placed, list[dra.Allocation]] | None:
        """Place it (explained) on the table as it stands and keep that on a trial: its placements
        and new device allocations; None if it places fewer than k."""
        ...

    def undo(self) -> None:
        """Take the kept placement off the table."""
        ...

    def plan(self, victims: list[Unit], reprieved: list[Unit]) -> Plan:
        ...


def evaluate(state: ClusterState, cand: Candidates, sim: Simulation) -> Plan | Refusal:
    """model.md *Preemption* steps 1-3 for one preemptor."""
    if not cand.count:
        return Refusal(NO_VICTIMS, 0)
    removal = Removal(state, cand, sim.devices)
    try:
        removal.set_prefix(cand.count)
        ok, k = sim.everything()
        if not ok:
            return Refusal(WOULD_NOT_HELP, k)
        lo = sim.first_sufficient(k, cand, removal)
        removal.set_prefix(lo)
        kept = sim.keep(k)
        if kept is None:  # pragma: no cover - guarded by the search
            return Refusal(WOULD_NOT_HELP, k)
        victims, reprieved = reprieve(state, cand, lo, kept[0], kept[1], sim.devices)
        sim.undo()
    finally:
        removal.set_prefix(0)
    return sim.plan(victims, reprieved)


def walk(cand: Candidates, removal: Removal, k: int, touches: Callable[[], np.ndarray], count_at: Callable[[int], int],
         bound: Callable[[], int] | None = None, exact: bool = False) -> int:
    """The smallest prefix of units (least important first) whose removal lets the simulation
    place k pods: model.md's "remove one unit at a time until it places k".

    A binary search finds the first prefix `bound` allows (an upper bound of the count, growing
    with the prefix); when the bound is the count (`exact`) that prefix is the answer. From there
    the prefixes are walked one by one, and the simulation (`count_at`, which removes the prefix
    itself and may answer any count below k when it can tell it falls short) runs only after a
    unit that touches what it reads (`touches()`: per unit, computed once the walk starts)."""
    lo, hi = 1, cand.count
    if bound is not None:
        while lo < hi:
            mid = (lo + hi) // 2
            removal.set_prefix(mid)
            if bound() >= k:
                hi = mid
            else:
                lo = mid + 1
        if exact:
            return lo
    first = lo
    touched = touches() if lo < cand.count else np.zeros(0, dtype=bool)
    while lo < cand.count:
        if (lo == first or touched[lo - 1]) and count_at(lo) >= k:
            return lo
        lo += 1
    return cand.count  # every unit removed: it places k, as it did at first


# -- removal --------------------------------------------------------------------------------
class Removal:
    """The candidates' usage taken off the node table in removal order, prefix by prefix (and,
    with `devices`, the device claims they free: dra.Release, over each unit's groups), through
    one statement (nodes/statement.py): each step is the difference from the last prefix."""

    def __init__(self, state: ClusterState, cand: Candidates, devices: bool) -> None:
        self.state = state
        self.statement = Statement(state.nodes, state.dra)
        self.release: dra.Release | None = None
        self.entry_ends: list[int] = []
        if devices:
            members: list[tuple[Group, list[int]]] = []
            for unit in cand.units():
                members.extend(unit.members)
                self.entry_ends.append(len(members))
            self.release = dra.Release(state.dra, members, self.statement)
        self.flat, self.vals, self.ends = cand.flat, cand.vals, cand.ends
        self.float_exact = bool(len(cand.vals) == 0 or
                                float(np.abs(cand.vals).max()) * len(cand.vals) < 2.0 ** 52)
        self.applied = 0  # entries currently removed

    def set_prefix(self, units: int) -> None:
        target = int(self.ends[units - 1]) if units else 0
        if target > self.applied:
            self.statement.entries(self.flat[self.applied:target], self.vals[self.applied:target], -1,
                                   self.float_exact)
        elif target < self.applied:
            self.statement.entries(self.flat[target:self.applied], self.vals[target:self.applied], 1,
                                   self.float_exact)
        self.applied = target
        if self.release is not None:
            self.release.set_prefix(self.entry_ends[units - 1] if units else 0)
        if units == 0:  # back where it started: what the statement records nets out
            self.statement.forget()


# -- the reprieve -----------------------------------------------------------------------------
def reprieve(state: ClusterState, cand: Candidates, removed: int, placed: Placed, claims: list[dra.Allocation],
             devices: bool) -> tuple[list[Unit], list[Unit]]:
    """Put the first `removed` units back, most important first; keep those the preemptor survives.

    Runs with the removed units off the table and the preemptor's placement applied; the table
    is left as it is. Only the usage of the preemptor's nodes, in the columns its placed pods
    request, is ever checked, so that is all that is followed (a small local copy): a unit with
    no pod on those nodes fits there, and putting a unit back changes only its own pods' nodes.
    The devices are `dra.Reprieve`'s (with `devices`)."""
    nodes = state.nodes
    width = len(nodes.resource_names)
    pre_rows = sorted({node for _, placements in placed for _, node in placements})
    cols = _columns(state, placed)
    on_pre = np.zeros(nodes.count, dtype=bool)
    on_pre[pre_rows] = True
    touch = cand.touching(on_pre, removed).tolist()
    # usage entries of the removed units on the preemptor's nodes, in its columns
    end = int(cand.ends[removed - 1]) if removed else 0
    local_row = np.full(nodes.count, -1, dtype=np.int64)
    local_row[pre_rows] = np.arange(len(pre_rows))
    local_col = np.full(width, -1, dtype=np.int64)
    local_col[cols] = np.arange(len(cols))
    rows = cand.rows[:end]
    lr, lc = local_row[rows], local_col[cand.flat[:end] - rows * width]
    sel = np.flatnonzero((lr >= 0) & (lc >= 0))  # `pods` is one of the columns: every pod there
    owner = np.searchsorted(cand.ends[:removed], sel, side="right")
    entries: dict[int, list[tuple[int, int, int]]] = {}
    for u, r, c, v in zip(owner.tolist(), lr[sel].tolist(), lc[sel].tolist(), cand.vals[:end][sel].tolist()):
        entries.setdefault(u, []).append((r, c, v))
    used = nodes.used[pre_rows][:, cols].tolist()
    alloc = nodes.alloc[pre_rows][:, cols].tolist()
    units = cand.units(removed)
    check = dra.Reprieve(state.dra, (m for unit in units for m in unit.members), claims) if devices else None
    victims: list[Unit] = []
    kept: list[Unit] = []
    for u in range(removed - 1, -1, -1):  # most important first: the removal order reversed
        unit = units[u]
        mine = entries.get(u, []) if touch[u] else []
        for r, c, v in mine:
            used[r][c] += v
        fits = all(x <= a for r in {r for r, _, _ in mine} for x, a in zip(used[r], alloc[r]))
        if fits and check is not None and not check.fits(unit.members):
            fits = False  # it would take back the preemptor's devices (sharing.md, *Preemption*)
        if not fits:
            for r, c, v in mine:
                used[r][c] -= v
        (kept if fits else victims).append(unit)
    return victims, kept


def _columns(state: ClusterState, placed: Placed) -> np.ndarray:
    """The resources the preemptor's placed pods request (`pods` among them)."""
    vecs = [state.shape_vector(g.workload, g.spec.pod_shapes[p]) for g, placements in placed for p, _ in placements]
    if not vecs:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.any(np.vstack(vecs), axis=0))

