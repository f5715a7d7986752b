"""The placement routine of model.md *Placing a group*.

`attempt(...)` answers "where would these pods of this group go, now?" without
changing the state for good: it places pods on a trial basis (so each pod sees
those placed before it) and undoes them before returning. The same routine serves
the scheduling pass, the tree routine (tree_routine.py, on a kept trial and rows the
tree allows) and the preemption simulation (which first removes victims).

The concerns around it live apart, each written once: the node and domain scores and
the domain choice in scores.py, candidate domains and per-shape capacity in domains.py,
the gang rule in gang.py, explanations in explain.py (re-exported here: `explanation`,
`explain_pod`, `base_mask`, `uniform_count`, `uniform_domain_terms` keep their old names).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from service.domain import dra
from service.domain.model.specs import PodShape
from service.domain.nodes import affinity as af
from service.domain.nodes.statement import Statement
from service.domain.placement import domains as dm
from service.domain.placement import explain_topology, fragmentation, scoring
from service.domain.placement import scores as sc
from service.domain.placement.domains import base_mask, uniform_count, uniform_domain_terms
from service.domain.placement.explain import explain_pod, explanation
from service.domain.state.cluster import ClusterState, Group

__all__ = ["Attempt", "Trial", "attempt", "place_in", "base_mask", "explain_pod", "explanation",
           "uniform_count", "uniform_domain_terms"]


@dataclass
class Attempt:
    """The outcome of placing (some of) a group's pods."""
    placements: list[tuple[int, int]] = field(default_factory=list)  # (pod, node row)
    claims: list[dra.Allocation] = field(default_factory=list)
    domain: str | None = None
    placeable: int = 0
    need: int = 1
    failure: dict[str, Any] | None = None  # per-node reasons of the first pod that did not fit

    @property
    def ok(self) -> bool:
        return self.placeable >= self.need and self.placeable > 0


class Trial:
    """Pods placed on a trial basis: their usage and device allocations, made through one
    statement (nodes/statement.py) and undone by `rollback` / `rollback_to`."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.statement = Statement(state.nodes, state.dra)
        self.ledger = dra.Ledger(state.dra, state.nodes, self.statement)

    def add(self, node: int, vec: np.ndarray) -> None:
        self.statement.use(node, vec)

    def rollback(self) -> None:
        self.rollback_to((0, 0))

    def mark(self) -> tuple[int, int]:
        """Where the trial stands now (the statement's mark, the allocations made): `rollback_to`
        it undoes only what came after."""
        return self.statement.mark(), len(self.ledger.new_allocations())

    def rollback_to(self, mark: tuple[int, int]) -> None:
        self.statement.discard(mark[0])
        self.ledger.forget(mark[1])


def _requested_cols(state: ClusterState, g: Group, shape: int) -> np.ndarray:
    cols = [state.nodes.resources[r] for r, _ in g.workload.spec.shapes[shape].requests]
    return np.array(cols, dtype=np.int64)



def _row_fits(state: ClusterState, row: int, vec: np.ndarray) -> bool:
    nodes = state.nodes
    return bool(np.all(nodes.alloc[row] - nodes.used[row] >= vec))


# -- the routine --------------------------------------------------------------------------
def place_in(state: ClusterState, g: Group, pods: list[int], allowed: np.ndarray | None,
             trial: Trial, explain: bool) -> tuple[list[tuple[int, int]], dict[str, Any] | None]:
    """Place pods one by one, in order, each on its best feasible row (trial usage).

    Returns the placements and, when `explain`, the per-node reasons of the first pod
    that did not fit. A pod that does not fit is skipped; a later pod of another shape
    may still fit. Consecutive pods of one shape keep going to the last row chosen
    while it still fits: its score only grew and nothing else changed, so it stays best.
    """
    placements: list[tuple[int, int]] = []
    failure: dict[str, Any] | None = None
    wl = g.workload
    i = 0
    while i < len(pods):
        shape = g.spec.pod_shapes[pods[i]]
        run_end = i
        while run_end < len(pods) and g.spec.pod_shapes[pods[run_end]] == shape:
            run_end += 1
        vec = state.shape_vector(wl, shape)
        mask = base_mask(state, g, shape)
        if allowed is not None:
            mask = mask & allowed
        cols = _requested_cols(state, g, shape)
        rows, scores = _fitting_rows(state, np.flatnonzero(mask), cols, vec)
        devices = dra.pod_needs_devices(g, pods[i])
        run = pods[i:run_end]
        failed: int | None = None
        strategy = scoring.strategy_of(state)  # the one seam: the strategy in force, by name
        place_run = PLACE_RUN[strategy.type]
        for tier_rows, tier_scores in _tiers(state, wl.spec.shapes[shape], rows, scores):
            failed = place_run(state, g, run, Candidates(tier_rows, tier_scores, cols, vec, devices), trial,
                               placements, strategy)
            if failed is None:
                break
            run = run[run.index(failed):]  # the pods after it were not tried: on to the next tier
        if failed is not None and explain and failure is None:
            failure = explain_pod(state, g, failed, allowed, trial)
        i = run_end
    return placements, failure


def _tiers(state: ClusterState, shape: PodShape, rows: np.ndarray,
           scores: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The feasible rows split by model.md *Placing a group* step 2's first two keys (preferred
    weights, then untolerated PreferNoSchedule taints: one exact integer, affinity.order_key),
    best first; the score orders each tier. Pods of one shape fill a tier before the next: a row
    only fills up, so a tier that cannot take a pod never takes a later one of the run. Without
    preferred terms or PreferNoSchedule taints, one tier: the score alone, as before."""
    order = af.order_key(state.nodes, shape)
    if order is None or not len(rows):
        return [(rows, scores)]
    keys = order[rows]
    levels = np.unique(keys)
    if len(levels) == 1:
        return [(rows, scores)]
    return [(rows[keys == level], scores[keys == level]) for level in levels[::-1]]


def _fitting_rows(state: ClusterState, rows: np.ndarray, cols: np.ndarray,
                  vec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows with room for one pod of `vec`, and their float scores: the sum over the
    requested columns of (used + request) / allocatable (for screening; exact ties are
    settled with Fractions). Column by column in one fixed order, so that identical rows
    get identical floats; allocatables (and their inverses) come from a per-column cache,
    and when every row is wanted nothing is gathered at all."""
    if not len(rows):
        return rows, np.zeros(0)
    nodes = state.nodes
    everything = len(rows) == nodes.count  # rows is then arange(count)
    used = nodes.used[: nodes.count] if everything else np.take(nodes.used, rows, axis=0)
    ok = np.ones(len(rows), dtype=bool)
    for c in np.flatnonzero(vec):
        a = nodes.alloc_column(int(c))[0]
        ok &= (a if everything else a[rows]) - used[:, c] >= vec[c]
    scores = np.zeros(len(rows))
    for c in cols:
        inv = nodes.alloc_column(c)[1]
        scores += (used[:, c] + vec[c]) * (inv if everything else inv[rows])
    return rows[ok], scores[ok]


# -- the strategies: one way to place a run of pods of one shape per strategy name --------------
@dataclass(frozen=True)
class Candidates:
    """The feasible rows of a run's tier with their MostAllocated float scores (a screen only), the
    requested columns, the shape's vector, and whether its pods have device claims."""
    rows: np.ndarray
    scores: np.ndarray
    cols: np.ndarray
    vec: np.ndarray
    devices: bool


PlaceRun = Callable[[ClusterState, Group, list[int], Candidates, Trial, list[tuple[int, int]], scoring.Scheduler],
                    int | None]


def _most_allocated(state: ClusterState, g: Group, run: list[int], c: Candidates, trial: Trial,
                    placements: list[tuple[int, int]], _: scoring.Scheduler) -> int | None:
    """model.md's node score, highest first (the default)."""
    if c.devices:
        return _place_run_devices(state, g, run, c.rows, c.scores, c.cols, c.vec, trial, placements)
    return _place_run(state, run, c.rows, c.scores, c.cols, c.vec, trial, placements)


def _least_allocated(state: ClusterState, g: Group, run: list[int], c: Candidates, trial: Trial,
                     placements: list[tuple[int, int]], _: scoring.Scheduler) -> int | None:
    """LeastAllocated (audit.md, *What-if*): each pod on the row whose MostAllocated score is
    lowest, exactly (the highest (allocatable − used − request) / allocatable), then the smaller
    name; a pod with device claims on the first row in that order where they can be allocated.
    A row's score only grows as it fills: only the chosen row is scored again."""
    nodes = state.nodes
    rows, scores, cols, vec = c.rows, c.scores.copy(), c.cols, c.vec
    nz = np.flatnonzero(vec)
    for pod in run:
        if not len(rows):
            return pod
        if c.devices:
            order = sc.exact_order(state, rows, cols, vec, lowest_first=True).tolist()
            at = next((i for i in order if trial.ledger.try_pod(g, pod, int(rows[i]))), -1)
        else:
            at = _lowest(state, rows, scores, cols, vec)
        if at < 0:
            return pod
        row = int(rows[at])
        trial.add(row, vec)
        placements.append((pod, row))
        if bool(np.all(nodes.alloc[row, nz] - nodes.used[row, nz] >= vec[nz])):
            score = 0.0
            for col in cols:  # as _fitting_rows sums them: identical rows keep identical floats
                score += (nodes.used[row, col] + vec[col]) * nodes.alloc_column(col)[1][row]
            scores[at] = score
        else:
            rows, scores = np.delete(rows, at), np.delete(scores, at)
    return None


def _lowest(state: ClusterState, rows: np.ndarray, scores: np.ndarray, cols: np.ndarray, vec: np.ndarray) -> int:
    """The index of the row of lowest exact score, then smallest name (O(rows), no sorting)."""
    low = float(scores.min())
    near = np.flatnonzero(scores <= low + sc.EPS * max(1.0, abs(low)))
    if len(near) == 1:
        return int(near[0])
    return int(near[sc.exact_order(state, rows[near], cols, vec, lowest_first=True)[0]])


def _fragmentation_aware(state: ClusterState, g: Group, run: list[int], c: Candidates, trial: Trial,
                         placements: list[tuple[int, int]], sched: scoring.Scheduler) -> int | None:
    return fragmentation.place_run(state, g, run, c.rows, c.vec, trial, placements, sched)


PLACE_RUN: dict[str, PlaceRun] = {
    scoring.MOST_ALLOCATED: _most_allocated,
    scoring.LEAST_ALLOCATED: _least_allocated,
    scoring.FRAGMENTATION_AWARE: _fragmentation_aware,
}


def _place_run(state: ClusterState, run: list[int], rows: np.ndarray, scores: np.ndarray, cols: np.ndarray,
               vec: np.ndarray, trial: Trial, placements: list[tuple[int, int]]) -> int | None:
    """Place identical pods that need no devices; returns the first pod that fits nowhere.

    Only the rows chosen here change during the run, and a chosen row keeps every pod it
    can take before the next row is chosen (its score only grows). So the rows are
    ranked once, by float score then node name, and walked in that order; a band of
    near-equal floats is put in exact order once (`_exact_order`).
    """
    nodes = state.nodes
    if len(run) <= 4:
        return _place_few(state, run, rows, scores, cols, vec, trial, placements)
    rank = nodes.rank()
    order = np.lexsort((rank[rows], -scores))
    rows, scores = rows[order], scores[order]  # scores stay aligned with rows
    neg = -scores  # ascending, never reordered: counts the rows above a threshold
    nz = np.flatnonzero(vec)
    p = -1  # position in `rows` of the row in use; rows[:p] are used up
    room = 0  # further pods it takes
    settled = 0  # rows[p:settled] are in exact order, and the rows after them score lower
    for pod in run:
        if room <= 0:
            p += 1
            if p >= len(rows):
                return pod
            if p + 1 < len(rows) and p + 1 >= settled:
                # the band: rows within float noise of the best remaining float score; the
                # used-up rows all score above it, so they are the first p counted by neg
                top = scores[p:max(settled, p + 1)].max()
                q = int(np.searchsorted(neg, -(sc.band_floor(top)), side="right"))
                if q > settled and q - p > 1:
                    perm = sc.exact_order(state, rows[p:q], cols, vec)
                    rows[p:q], scores[p:q] = rows[p:q][perm], scores[p:q][perm]
                settled = max(settled, q)
            chosen = int(rows[p])
            free = nodes.alloc[chosen, nz] - nodes.used[chosen, nz]
            room = int((free // vec[nz]).min())  # >= 1: the rows were filtered by fit
        room -= 1
        trial.add(int(rows[p]), vec)
        placements.append((pod, int(rows[p])))
    return None


def _place_few(state: ClusterState, run: list[int], rows: np.ndarray, scores: np.ndarray, cols: np.ndarray,
               vec: np.ndarray, trial: Trial, placements: list[tuple[int, int]]) -> int | None:
    """_place_run for a few pods: pick each new row in O(rows) instead of ranking them all
    (ranking thousands of equal, empty nodes costs more than the whole rest)."""
    nodes = state.nodes
    nz = np.flatnonzero(vec)
    last, room = -1, 0
    for pod in run:
        if room <= 0:
            if last >= 0:  # full: drop it; nothing else changed
                keep = rows != last
                rows, scores = rows[keep], scores[keep]
            if not len(rows):
                return pod
            last = sc.pick(state, rows, scores, cols, vec)
            free = nodes.alloc[last, nz] - nodes.used[last, nz]
            room = int((free // vec[nz]).min())
        room -= 1
        trial.add(last, vec)
        placements.append((pod, last))
    return None


def _place_run_devices(state: ClusterState, g: Group, run: list[int], rows: np.ndarray, scores: np.ndarray,
                       cols: np.ndarray, vec: np.ndarray, trial: Trial,
                       placements: list[tuple[int, int]]) -> int | None:
    """Place identical pods with device claims: each row is also checked against the devices.

    As _place_run: only the rows chosen here change, so the rows are ranked once and
    walked; a row whose devices cannot serve the pod is dropped for the rest of the run
    (its devices only get fewer), and when a shared claim gets allocated the rows that
    cannot reach its devices are dropped too."""
    ledger = trial.ledger
    shared_seen = ledger.shared_made
    if len(rows):
        keep = ledger.viable(g, run[0], rows)  # enough free devices, shared claims in reach
        rows, scores = rows[keep], scores[keep]
    order = np.lexsort((state.nodes.rank()[rows], -scores))
    rows, scores = rows[order], scores[order]
    p = 0  # rows[:p] are used up or dropped
    settled = 0  # rows[p:settled] are in exact order, and the rows after them score lower
    last = -1
    for pod in run:
        if last >= 0 and _row_fits(state, last, vec) and ledger.try_pod(g, pod, last):
            chosen = last
        else:
            if last >= 0:
                p += 1  # drop the filled row: only it changed
            chosen = -1
            while p < len(rows):
                if p + 1 < len(rows) and p + 1 >= settled:
                    top = scores[p:max(settled, p + 1)].max()
                    tol = sc.band_floor(top)
                    below = np.flatnonzero(scores[p + 1:] < tol)
                    q = p + 1 + int(below[0]) if len(below) else len(rows)
                    if q > settled and q - p > 1:
                        perm = sc.exact_order(state, rows[p:q], cols, vec)
                        rows[p:q], scores[p:q] = rows[p:q][perm], scores[p:q][perm]
                    settled = max(settled, q)
                cand = int(rows[p])
                if _row_fits(state, cand, vec) and ledger.try_pod(g, pod, cand):
                    chosen = cand
                    break
                p += 1
                if ledger.shared_made != shared_seen:  # a shared claim now pins the reach
                    keep = ledger.viable(g, pod, rows[p:])
                    rows = np.concatenate([rows[:p], rows[p:][keep]])
                    scores = np.concatenate([scores[:p], scores[p:][keep]])
                    settled = p  # the order past p is the float order again, unsettled
                    shared_seen = ledger.shared_made
        if chosen < 0:
            return pod
        trial.add(chosen, vec)
        placements.append((pod, chosen))
        last = chosen  # its score only grew: no rescoring needed while it fits
    return None


# -- the routine's entry point -------------------------------------------------------------
def attempt(state: ClusterState, g: Group, pods: list[int], need: int, *,
            restrict: np.ndarray | None = None, explain: bool = True,
            keep_trial: Trial | None = None) -> Attempt:
    """Where these pods would go now: the gang rule (at least `need`), topology, devices.

    `restrict` limits the rows considered (the rows a tree allows; the preemption search
    simulates only the domains that can be feasible). With `keep_trial`, the chosen
    placement's usage stays applied on that trial (the caller rolls it back); otherwise
    nothing is left changed.
    """
    key = g.spec.topology_key
    if key is None:
        return _attempt_on(state, g, pods, need, restrict, explain, keep_trial)
    layout = state.nodes.layout(key)
    candidates = dm.candidates(layout, restrict, g.domain)
    fast = dm.uniform_domains(state, g, pods, need, layout, candidates, restrict)
    if fast is not None:
        chosen, k = fast
        if chosen is None:
            widest = dm.argmax_first(k, candidates)  # the domain that could hold the most
            if not explain:
                return Attempt(need=need, placeable=int(k[widest]))
            return Attempt(need=need, placeable=int(k[widest]), domain=layout.values[widest],
                           failure=explain_topology.uniform_failure(state, g, pods[0], layout.ids, candidates,
                                                                    restrict))
        candidates = [chosen]
    return _attempt_domains(state, g, pods, need, layout, candidates, restrict, explain, keep_trial)


def _attempt_on(state: ClusterState, g: Group, pods: list[int], need: int, allowed: np.ndarray | None,
                explain: bool, keep_trial: Trial | None, domain: str | None = None) -> Attempt:
    """The pods placed on the rows `allowed` (None: every row), kept on `keep_trial` when the
    gang rule holds (a kept trial may hold other groups' pods: a tree), otherwise undone."""
    trial = keep_trial or Trial(state)
    mark = trial.mark()
    placements, failure = place_in(state, g, pods, allowed, trial, explain)
    result = Attempt(placements=placements, placeable=len(placements), need=need, failure=failure,
                     claims=trial.ledger.new_allocations()[mark[1]:], domain=domain)
    if keep_trial is None or not result.ok:
        trial.rollback_to(mark)
    return result


def _attempt_domains(state: ClusterState, g: Group, pods: list[int], need: int, layout: Any,
                     candidates: list[int], restrict: np.ndarray | None, explain: bool,
                     keep_trial: Trial | None) -> Attempt:
    """model.md step 5 by simulation: the group placed inside each candidate domain from the same
    start; the choice among the feasible ones (scores.DomainChoice) is kept on `keep_trial`."""
    ids, values = layout.ids, layout.values
    choice = sc.DomainChoice()
    best: Attempt | None = None
    fallback: Attempt | None = None  # the domain that placed most, for the explanation
    tried: list[tuple[np.ndarray, dict[str, Any]]] = []  # (allowed, failure) of each failed domain
    trial = keep_trial or Trial(state)  # on a kept trial each domain sees what the try placed before
    for d in candidates:                 # (a tree's earlier groups: their devices, shared claims included)
        in_domain = ids == d
        allowed = in_domain if restrict is None else in_domain & restrict
        mark = trial.mark()
        res = _attempt_on(state, g, pods, need, allowed, explain, trial, values[d])
        if res.ok:
            # one candidate needs no score (a pinned domain, or the uniform path's choice)
            score = _domain_score(state, g, in_domain, res.placements) if len(candidates) > 1 else Fraction(0)
            if choice.offer(d, score):
                best = res
        else:
            if res.failure is not None:
                tried.append((allowed, res.failure))
            if fallback is None or res.placeable > fallback.placeable:
                fallback = res
        trial.rollback_to(mark)
    if best is None:
        result = fallback or Attempt(need=need)
        if explain:
            first = result.failure
            result.failure = explain_topology.every_domain_failed(state, g, first["pod"] if first else pods[0],
                                                                  tried, first)
        result.placements = []
        return result
    if keep_trial is not None:  # re-apply the winner on the caller's trial
        d = values.index(best.domain)
        again = _attempt_on(state, g, pods, need, (ids == d) if restrict is None else (ids == d) & restrict,
                            False, keep_trial, best.domain)
        best.placements, best.claims = again.placements, again.claims
    return best


def _domain_score(state: ClusterState, g: Group, in_domain: np.ndarray,
                  placements: list[tuple[int, int]]) -> Fraction:
    """The domain score of this group's placement in the domain (scores.domain_score) over the
    resources its placed pods request. The trial's usage is applied: their requests are in the
    usage already (counting them again was issue 21's nested-placement bug: the shortcut of
    uniform groups, which scores from usage before the placement, chose otherwise)."""
    shapes = g.workload.spec.shapes
    requested: dict[str, int] = {}
    for shape in dict.fromkeys(g.spec.pod_shapes[pod] for pod, _ in placements):
        for r, _ in shapes[shape].requests:
            requested.setdefault(r, 0)
    return sc.domain_score(state, in_domain, requested)
