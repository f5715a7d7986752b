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
good: the caller records the outcome as events, which evolve folds.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from service.domain import placement as pl
from service.domain.state import ClusterState, Workload

GROUP = "PodGroup"
COMPOSITE = "CompositePodGroup"


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
        need = (g.spec.min_count if g.spec.gang else 1) if g.scheduled else g.deficit
        if not pods:
            return Outcome(g.scheduled, 0)
        res = pl.attempt(self.state, g, pods, need, restrict=allowed, explain=self.explain, keep_trial=self.trial)
        ok = res.ok
        if ok:
            self.placed.append((gi, res))
        explanation = None
        if self.explain and res.placeable < len(pods):
            explanation = pl.explanation(res.failure, res.placeable, g.spec.min_count,
                                         len(self.state.nodes.live_indices()))
        return Outcome(ok, res.placeable if ok else 0, explanation, tried_pods=res.placeable)

    def place(self, ci: int, allowed: np.ndarray | None) -> Outcome:
        """place(X, R) for CPG X on the rows `allowed` (None: every row)."""
        spec = self.wl.spec.cpgs[ci]
        key = spec.topology_key
        if key is None:
            return self._children(ci, allowed, None)
        layout = self.state.nodes.layout(key)
        ids = layout.ids
        inside = ids >= 0 if allowed is None else (ids >= 0) & allowed
        candidates = [int(d) for d in np.unique(ids[inside])]
        start = self.mark()
        best: tuple[Fraction, int] | None = None
        shown: tuple[tuple[int, int, int], Outcome] | None = None  # the explained candidate
        for d in candidates:
            rows = inside & (ids == d)
            out = self._children(ci, rows, layout.values[d])
            if out.satisfied:
                score = self._domain_score(start[1], rows)
                if best is None or score > best[0]:  # ties keep the smaller value (earlier d)
                    best = (score, d)
            rank = (-out.satisfied_children, -out.tried_pods, d)
            if shown is None or rank < shown[0]:
                shown = (rank, out)
            self.undo_to(start)
        if best is None:
            if shown is not None:
                return Outcome(False, 0, shown[1].explanation, shown[1].satisfied_children)
            return Outcome(False, 0, self._explain(ci, [], 0, {"key": key, "value": None}))
        d = best[1]
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
        ok = n >= spec.min_group_count
        domain = None if spec.topology_key is None else {"key": spec.topology_key, "value": value}
        explanation = self._explain(ci, results, n, domain) if self.explain else None
        if not ok:
            self.undo_to(start)
            return Outcome(False, 0, explanation, n, pods)
        return Outcome(True, pods, explanation, n, pods)

    def _explain(self, ci: int, results: list[tuple[str, str, Outcome]], n: int,
                 domain: dict[str, Any] | None) -> dict[str, Any]:
        spec = self.wl.spec.cpgs[ci]
        total = spec.children
        return {
            "message": f'composite pod group "{spec.name}": {n}/{total} children can be scheduled, '
                       f"minGroupCount {spec.min_group_count}",
            "minGroupCount": spec.min_group_count, "satisfiableChildren": n,
            "children": [{"name": name, "kind": kind, "satisfied": out.satisfied,
                          "explanation": out.explanation if _worth_explaining(out) else None}
                         for name, kind, out in results],
            "domain": domain, "preemption": None,
        }

    def _domain_score(self, since: int, rows: np.ndarray) -> Fraction:
        """model.md step 5 over every pod placed since `since`: the mean over the resources they
        request of (used, their pods included) / allocatable, each summed over the domain's rows."""
        nodes = self.state.nodes
        requested: set[str] = set()
        shapes = self.wl.spec.shapes
        for gi, res in self.placed[since:]:
            pod_shapes = self.wl.groups[gi].spec.pod_shapes
            for shape in {pod_shapes[p] for p, _ in res.placements}:
                requested.update(r for r, _ in shapes[shape].requests)
        if not requested:
            return Fraction(0)
        members = np.flatnonzero(rows)
        total = Fraction(0)
        for r in sorted(requested):
            col = nodes.resources[r]
            alloc = int(nodes.alloc[members, col][nodes.declared[members, col]].sum())
            if alloc > 0:
                total += Fraction(int(nodes.used[members, col].sum()), alloc)
        return total / len(requested)


def _worth_explaining(out: Outcome) -> bool:
    """A child's explanation is kept when it left something unsatisfied or unplaced."""
    x = out.explanation
    if x is None or not out.satisfied or "children" not in x:
        return x is not None
    return x["satisfiableChildren"] < len(x["children"]) or any(c["explanation"] for c in x["children"])


def pinned_rows(state: ClusterState, wl: Workload, ci: int | None) -> np.ndarray | None:
    """The rows inside the domains pinned for CPG ci and its ancestors (None: no pin)."""
    allowed: np.ndarray | None = None
    while ci is not None:
        c = wl.composites[ci]
        key = c.spec.topology_key
        if key is not None and c.domain is not None:
            layout = state.nodes.layout(key)
            d = layout.values.index(c.domain) if c.domain in layout.values else -2
            rows = layout.ids == d
            allowed = rows if allowed is None else allowed & rows
        ci = c.spec.parent
    return allowed
