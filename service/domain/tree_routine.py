"""The tree routine of composite.md: `place(X, R)` over composite pod groups (CPGs).

Children are placed in order (a CPG's `podGroups`, then its `compositePodGroups`), each
seeing what the ones before it placed, greedily: no backtracking between siblings. A pod
group is placed by the placement routine of model.md (placement.attempt) with its feasible
nodes restricted to R. A CPG with a topology key simulates each candidate domain from the
same starting state and keeps the one with the highest domain score over every pod its
subtree placed there (ties to the smaller value). Everything under a CPG that ends up not
satisfied is undone.

All of it runs on one placement.Trial (usage and device allocations on a trial basis);
`Routine` keeps, next to the trial, what was placed per pod group and which domain was
chosen per CPG, so that undoing to a mark undoes both. Nothing here changes the state for
good: the caller (tree_decide.py) records the outcome as events, which evolve folds.

The rules it applies are written elsewhere, once: the gang and quorum rules (gang.py), the
domain candidates (domains.py), the domain score and choice (scores.py), the explanations
(explain.py). The tree's shape (expansion of `compositePodGroups`) is composite_shape.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from service.domain import domains as dm
from service.domain import gang
from service.domain import placement as pl
from service.domain import scores as sc
from service.domain.explain import COMPOSITE, GROUP, cpg_explanation, explanation, worth_explaining
from service.domain.state import ClusterState, Workload


@dataclass
class Outcome:
    """What place(X, R) did: whether X is satisfied, how many pods its subtree placed, and
    (when explaining) its explanation; `tried`: how many children were satisfied (CPG)."""
    satisfied: bool
    pods: int
    explanation: dict[str, Any] | None = None
    satisfied_children: int = 0
    tried_pods: int = 0  # pods placed before an undo (ranks the candidates an explanation names)


@dataclass
class Routine:
    """One run of the tree routine for one workload, on one trial."""
    state: ClusterState
    wl: Workload
    explain: bool
    trial: pl.Trial = field(init=False)
    placed: list[tuple[int, pl.Attempt]] = field(default_factory=list)  # (group index, its placement)
    domains: dict[int, str] = field(default_factory=dict)  # CPG index -> the domain chosen for it

    def __post_init__(self) -> None:
        self.trial = pl.Trial(self.state)

    # -- marks: undo everything after a point --------------------------------------------------
    def mark(self) -> tuple[tuple[int, int], int, dict[int, str]]:
        return self.trial.mark(), len(self.placed), dict(self.domains)

    def undo_to(self, mark: tuple[tuple[int, int], int, dict[int, str]]) -> None:
        self.trial.rollback_to(mark[0])
        del self.placed[mark[1]:]
        self.domains = dict(mark[2])

    def rollback(self) -> None:
        self.rollback_keep()
        self.placed.clear()
        self.domains.clear()

    def rollback_keep(self) -> None:
        """Take the placement off the state but keep its record (`placed`, `domains`): the
        caller turns it into an event, which evolve folds."""
        self.trial.rollback()

    # -- the routine ---------------------------------------------------------------------------
    def place_group(self, gi: int, allowed: np.ndarray | None) -> Outcome:
        """Step 1: a pod group, by the placement routine, restricted to `allowed`."""
        g = self.wl.groups[gi]
        pods = g.unplaced()
        need = gang.need(g.spec) if g.scheduled else g.deficit
        if not pods:
            return Outcome(g.scheduled, 0)
        res = pl.attempt(self.state, g, pods, need, restrict=allowed, explain=self.explain, keep_trial=self.trial)
        ok = res.ok
        if ok:
            self.placed.append((gi, res))
        if self.explain and res.placeable < len(pods):
            why = explanation(res.failure, res.placeable, g.spec.min_count, len(self.state.nodes.live_indices()))
            return Outcome(ok, res.placeable if ok else 0, why, tried_pods=res.placeable)
        return Outcome(ok, res.placeable if ok else 0, None, tried_pods=res.placeable)

    def place(self, ci: int, allowed: np.ndarray | None) -> Outcome:
        """place(X, R) for CPG X on the rows `allowed` (None: every row)."""
        spec = self.wl.spec.cpgs[ci]
        key = spec.topology_key
        if key is None:
            return self._children(ci, allowed, None)
        layout = self.state.nodes.layout(key)
        ids = layout.ids
        inside = ids >= 0 if allowed is None else (ids >= 0) & allowed
        start = self.mark()
        choice = sc.DomainChoice()
        shown: tuple[tuple[int, int, int], Outcome] | None = None  # the explained candidate
        for d in dm.candidates(layout, allowed, None):
            rows = inside & (ids == d)
            out = self._children(ci, rows, layout.values[d])
            if out.satisfied:
                choice.offer(d, self._domain_score(start[1], rows))
            rank = (-out.satisfied_children, -out.tried_pods, d)
            if shown is None or rank < shown[0]:
                shown = (rank, out)
            self.undo_to(start)
        if choice.best is None:
            if shown is not None:
                return Outcome(False, 0, shown[1].explanation, shown[1].satisfied_children)
            return Outcome(False, 0, self._explain(ci, [], 0, {"key": key, "value": None}))
        d = choice.best
        out = self._children(ci, inside & (ids == d), layout.values[d])  # the winner again: deterministic
        self.domains[ci] = layout.values[d]
        return out

    def _children(self, ci: int, allowed: np.ndarray | None, value: str | None) -> Outcome:
        """Step 2: every child in order; undo all of it when fewer than minGroupCount are satisfied."""
        spec = self.wl.spec.cpgs[ci]
        start = self.mark()
        results: list[tuple[str, str, Outcome]] = []
        for gi in spec.child_groups:
            results.append((self.wl.spec.groups[gi].name, GROUP, self.place_group(gi, allowed)))
        for cj in spec.child_cpgs:  # X is not satisfied, so nothing under it is placed yet
            results.append((self.wl.spec.cpgs[cj].name, COMPOSITE, self.place(cj, allowed)))
        n = sum(1 for _, _, out in results if out.satisfied)
        pods = sum(out.pods for _, _, out in results)
        ok = gang.quorum(spec, n)
        domain = None if spec.topology_key is None else {"key": spec.topology_key, "value": value}
        explanation = self._explain(ci, results, n, domain) if self.explain else None
        if not ok:
            self.undo_to(start)
            return Outcome(False, 0, explanation, n, pods)
        return Outcome(True, pods, explanation, n, pods)

    def _explain(self, ci: int, results: list[tuple[str, str, Outcome]], n: int,
                 domain: dict[str, Any] | None) -> dict[str, Any]:
        return cpg_explanation(self.wl.spec.cpgs[ci],
                               [(name, kind, out.satisfied,
                                 out.explanation if worth_explaining(out.satisfied, out.explanation) else None)
                                for name, kind, out in results], n, domain)

    def _domain_score(self, since: int, rows: np.ndarray) -> Fraction:
        """The domain score (scores.domain_score) over every pod placed since `since`: the
        resources they request, their usage already on the trial."""
        requested: set[str] = set()
        shapes = self.wl.spec.shapes
        for gi, res in self.placed[since:]:
            pod_shapes = self.wl.groups[gi].spec.pod_shapes
            for shape in {pod_shapes[p] for p, _ in res.placements}:
                requested.update(r for r, _ in shapes[shape].requests)
        return sc.domain_score(self.state, rows, dict.fromkeys(sorted(requested), 0))
