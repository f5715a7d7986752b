"""Preemption for a pod group (model.md *Preemption*): the evaluator's simulation is the
placement routine.

Cost (none of it changes a decision; tests/domain/test_preemption_properties.py compares the
decisions with tests/domain/reference_preemption.py, the straightforward implementation):
- the candidate units come in one array form (candidates.py), lower trees' units merged in;
- removing a prefix of them is one `bincount` over their usage entries (evaluator.Removal);
- the first sufficient prefix is found by a binary search on an upper bound of what the
  placement routine would place, computed by arithmetic (`bounds.UniformCount` per run of
  pods of one shape, per domain with topology), which only grows with the prefix; for pods of
  one shape that need no devices and no domain choice the bound is exact, otherwise the
  prefixes from there are walked one by one, running the routine only after a unit that could
  change its answer;
- the reprieve follows only the preemptor's nodes, in a small local copy (evaluator.reprieve).
"""
from __future__ import annotations

from typing import Any, cast

import numpy as np

from service.domain import dra
from service.domain.model import reasons as rs
from service.domain.placement import routine as pl
from service.domain.preemption import evaluator as ev
from service.domain.preemption.bounds import UniformCount
from service.domain.preemption.candidates import Candidates, candidate_units
from service.domain.preemption.roots import plan_root
from service.domain.preemption.victims import (
    NO_VICTIMS,
    NOT_ALLOWED,
    WOULD_NOT_HELP,
    Plan,
    Refusal,
    Unit,
    Victim,
    close,
)
from service.domain.state.cluster import ClusterState, Group

# the shared seam (victims.py): units, plans and reasons; re-exported here
__all__ = ["NOT_ALLOWED", "NO_VICTIMS", "WOULD_NOT_HELP", "Plan", "Refusal", "Unit", "Victim", "candidate_units",
           "plan", "plan_root", "victim_why"]


def plan(state: ClusterState, g: Group, pods: list[int], need: int) -> Plan | Refusal:
    """A preemption plan for these pods of g, or the reason there is none."""
    return ev.evaluate(state, Candidates(state, g.workload.spec.priority), _Group(state, g, pods, need))


class _Group:
    """The evaluator's simulation for a pod group: the placement routine of model.md."""

    def __init__(self, state: ClusterState, g: Group, pods: list[int], need: int) -> None:
        self.state, self.g, self.pods, self.need = state, g, pods, need
        self.devices = dra.group_needs_devices(g) and bool(state.dra.claims)
        shapes = {g.spec.pod_shapes[p] for p in pods}
        self.shape = next(iter(shapes))
        self.plain = len(shapes) == 1 and not any(dra.pod_needs_devices(g, p) for p in pods)
        self.trial: pl.Trial | None = None
        self.chosen: pl.Attempt | None = None

    def everything(self) -> tuple[bool, int]:
        state, g, pods, need = self.state, self.g, self.pods, self.need
        if g.spec.topology_key is None and self.plain:  # the routine's count is arithmetic
            placeable = UniformCount(state, g, self.shape, len(pods))()
            return pl.Attempt(need=need, placeable=placeable).ok, placeable
        res = pl.attempt(state, g, pods, need, explain=False)
        return res.ok, res.placeable

    def first_sufficient(self, k: int, cand: Candidates, removal: ev.Removal) -> int:
        return _first_sufficient(self.state, self.g, self.pods, self.need, k, cand, removal, self.plain,
                                 self.devices)

    def keep(self, k: int) -> tuple[ev.Placed, list[dra.Allocation]] | None:
        self.trial = pl.Trial(self.state)
        self.chosen = pl.attempt(self.state, self.g, self.pods, self.need, explain=True, keep_trial=self.trial)
        if self.chosen.placeable < k:  # pragma: no cover - guarded by the search
            self.trial.rollback()
            return None
        return [(self.g, self.chosen.placements)], self.chosen.claims

    def undo(self) -> None:
        assert self.trial is not None
        self.trial.rollback()

    def plan(self, victims: list[Unit], reprieved: list[Unit]) -> Plan:
        return Plan(placement=self.chosen, victims=close(victims), reprieved=reprieved)


def _first_sufficient(state: ClusterState, g: Group, pods: list[int], need: int, k: int,
                      cand: Candidates, removal: ev.Removal, plain: bool, devices: bool) -> int:
    """The evaluator's walk (evaluator.walk) with the placement routine's bound and count.

    The routine's count need not grow with the prefix (pods of several shapes, devices, the
    domain chosen by score); an upper bound that does grow with it: each run of pods of one
    shape places at most what fits on the rows it may use (`bounds.UniformCount`; with
    topology, inside one domain). For pods of one shape that need no devices and no domain
    choice the bound is the count. The routine is run again only where the last unit removed
    touched the rows it reads; for pods of one shape with a topology, per-domain sums tell
    when it must still fall short (`_still_short`) without running it.
    """
    key = g.spec.topology_key
    domains, n_domains = _domains(state, g)
    runs = _runs(g, pods)
    counters = [UniformCount(state, g, shape, n, domains) for shape, n in runs]

    def domain_bounds() -> np.ndarray:
        return cast(np.ndarray, sum(c.by_domain(n_domains) for c in counters))

    def bound() -> int:
        return sum(c() for c in counters) if domains is None else int(domain_bounds().max())

    def touches() -> np.ndarray:
        # rows whose usage the routine reads: where the pods may go and, with topology, every
        # node of a domain (the domain score sums them); with devices, any unit may free some
        relevant = np.zeros(state.nodes.count, dtype=bool)
        for shape, _ in runs:
            relevant |= pl.base_mask(state, g, shape)
        if domains is not None:
            relevant |= domains >= 0
        return cand.touching(relevant) | devices

    last: dict[str, Any] = {"uniform": False, "chosen": None, "base": []}  # the last answer

    def count_at(lo: int) -> int:
        if last["uniform"] and domains is not None:  # it came from per-domain sums (one shape, topology)
            touched = np.unique(domains[cand.rows[int(cand.starts[lo - 1]):int(cand.ends[lo - 1])]])
            mine = [int(d) for d in touched if d >= 0]
            counts, numerators = pl.uniform_domain_terms(state, g, pods)
            before = {d: (int(counts[d]), numerators(d)) for d in mine}
            removal.set_prefix(lo)
            if _still_short(state, g, pods, k, last["chosen"], last["base"], before):
                return -1
        else:
            removal.set_prefix(lo)
        fast = pl.uniform_count(state, g, pods, need) if plain else None
        last["uniform"] = fast is not None
        if fast is None:
            return _routine_count(state, g, pods, need, k, domains, n_domains, domain_bounds)
        placed, last["chosen"] = fast  # the domain it chose (it held fewer than k), and its numerators
        if last["chosen"] is not None:
            last["base"] = pl.uniform_domain_terms(state, g, pods)[1](last["chosen"])
        return placed

    return ev.walk(cand, removal, k, touches, count_at, bound, exact=plain and (key is None or n_domains == 1))


def _domains(state: ClusterState, g: Group) -> tuple[np.ndarray | None, int]:
    """The preemptor's topology domain per node row (-1: none), and how many there are."""
    key = g.spec.topology_key
    if key is None:
        return None, 0
    ids, values = state.nodes.domains(key)
    domains, n_domains = ids[: state.nodes.count], len(values)
    if g.domain is not None:  # later pods stay in the domain chosen first
        domains = np.where(domains == (values.index(g.domain) if g.domain in values else -2), 0, -1)
        n_domains = 1
    return domains, n_domains


def _runs(g: Group, pods: list[int]) -> list[tuple[int, int]]:
    """(shape, pods) per run of consecutive pods of one shape."""
    runs: list[tuple[int, int]] = []
    for p in pods:
        shape = g.spec.pod_shapes[p]
        if runs and runs[-1][0] == shape:
            runs[-1] = (shape, runs[-1][1] + 1)
        else:
            runs.append((shape, 1))
    return runs


def _routine_count(state: ClusterState, g: Group, pods: list[int], need: int, k: int,
                   domains: np.ndarray | None, n_domains: int, domain_bounds: Any) -> int:
    """What the routine places, or some count below k when it cannot place k. With a topology,
    only the domains whose bound reaches `need` are simulated: the others cannot be feasible, so
    the routine never chooses them (and when none is feasible it places fewer than k anyway)."""
    if domains is None or n_domains <= 1:
        return pl.attempt(state, g, pods, need, explain=False).placeable
    per_domain = domain_bounds()
    if per_domain.max() < k:
        return 0
    maybe = np.flatnonzero(per_domain >= need)
    if len(maybe) == n_domains:
        return pl.attempt(state, g, pods, need, explain=False).placeable
    keep = np.zeros(n_domains + 1, dtype=bool)  # the last entry: rows without the label
    keep[maybe] = True
    return pl.attempt(state, g, pods, need, restrict=keep[domains], explain=False).placeable


def _still_short(state: ClusterState, g: Group, pods: list[int], k: int, chosen: int | None, base: list[int],
                 before: dict[int, tuple[int, list[int]]]) -> bool:
    """After one more unit is removed, is it certain that the routine still chooses a domain
    holding fewer than k pods? For pods of one shape and a topology, where the last full answer
    chose `chosen` (which held fewer than k; `base`: its score numerators then), or no domain.
    `before`: the (count, numerators) of the domains the unit was in, before its removal.

    Kept true from that answer on: every domain that can hold k ranks below `chosen` as it
    ranked then. Only the unit's domains changed. One that can hold k now could before (else it
    may rank anywhere: ask the routine), and its score did not rise (no numerator rose; the
    denominators are fixed), so it still ranks below. `chosen` stays feasible (counts only grow
    with removals) and, if its score has not fallen, still outranks them all: whatever the
    routine chooses holds fewer than k. With no domain chosen, none could hold k.
    """
    counts, numerators = pl.uniform_domain_terms(state, g, pods)
    for d, (count, nums) in before.items():
        if int(counts[d]) >= k and (count < k or any(now > then for now, then in zip(numerators(d), nums))):
            return False
    if chosen is not None and chosen in before:
        return all(now >= then for now, then in zip(numerators(chosen), base))
    return True


def victim_why(g: Group, pods: list[int], whole_unit: bool, escalated: bool) -> str:
    """The code of the victim unit these pods of `g` are (model.md *Preemption* step 1; words in
    reasons.VICTIM_WORDS). Whether the whole group went is `wholeGroup`, not this."""
    spec = g.spec
    if whole_unit:
        return rs.DISRUPTION_MODE_ALL if spec.disruption_all else rs.GANG_AT_MIN_COUNT
    if escalated:
        return rs.SURPLUS_EXCEEDED
    return rs.GANG_SURPLUS if spec.gang else rs.BASIC_PODS
