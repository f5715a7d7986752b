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

from service.domain.model import gang
from service.domain.model.workload import subtree_groups
from service.domain.placement import domains as dm
from service.domain.placement import routine as pl
from service.domain.placement import scores as sc
from service.domain.placement.explain import COMPOSITE, GROUP, cpg_explanation, explanation, worth_explaining
from service.domain.state.cluster import ClusterState, Workload


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
    counts: bool = field(init=False)
    proved: bool = False  # the root's every candidate domain lacks room for its pods (capacity alone)
    placed: list[tuple[int, pl.Attempt]] = field(default_factory=list)  # (group index, its placement)
    domains: dict[int, str] = field(default_factory=dict)  # CPG index -> the domain chosen for it

    def __post_init__(self) -> None:
        self.trial = pl.Trial(self.state)
        # an explained run needs every candidate's counts (the candidate its explanation names);
        # an unexplained one only whether X is satisfied, so a CPG stops once its quorum is out of reach
        self.counts = self.explain

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
            why = explanation(res.failure, g, g.placed + res.placeable, len(self.state.nodes.live_indices()))
            return Outcome(ok, res.placeable if ok else 0, why, tried_pods=res.placeable)
        return Outcome(ok, res.placeable if ok else 0, None, tried_pods=res.placeable)

    def place(self, ci: int, allowed: np.ndarray | None) -> Outcome:
        """place(X, R) for CPG X on the rows `allowed` (None: every row).

        Candidates are compared unexplained (explaining changes no placement), then the winner, or
        when none is feasible the candidate an explanation names, is run again explained. When X is
        rigid (`_rigid`: satisfied only with every pod of its subtree placed), each feasible
        candidate's domain score is known before simulating it (usage now plus every pod's requests):
        candidates are simulated best score first, and the first feasible one is the choice."""
        spec = self.wl.spec.cpgs[ci]
        key = spec.topology_key
        if key is None:
            return self._children(ci, allowed, None)
        layout = self.state.nodes.layout(key)
        ids = layout.ids
        inside = ids >= 0 if allowed is None else (ids >= 0) & allowed
        candidates = dm.candidates(layout, allowed, None)
        explain, self.explain = self.explain, False
        try:
            best, shown = self._choose(ci, layout, inside, candidates)
        finally:
            self.explain = explain
        if best is None:
            if shown is None:
                return Outcome(False, 0, self._explain(ci, [], 0, {"key": key, "value": None}))
            d, out = shown
            if explain:  # the named candidate again, explained, and undone
                start = self.mark()
                out = self._children(ci, inside & (ids == d), layout.values[d])
                self.undo_to(start)
            return Outcome(False, 0, out.explanation, out.satisfied_children)
        out = self._children(ci, inside & (ids == best), layout.values[best])  # the winner again: deterministic
        self.domains[ci] = layout.values[best]
        return out

    def _choose(self, ci: int, layout: Any, inside: np.ndarray,
                candidates: list[int]) -> tuple[int | None, tuple[int, Outcome] | None]:
        """The chosen candidate (or None) and, when there is none, the one an explanation names: the
        most children satisfied, then the most pods placed, then the smaller value."""
        ids = layout.ids
        start = self.mark()
        plan = self._rigid_plan(ci, layout, inside, candidates)
        known, out_of_reach = plan if plan is not None else (None, set())
        if known is not None and self.wl.spec.cpgs[ci].parent is None and len(out_of_reach) == len(candidates):
            self.proved = True  # fewer rows' worth of room than pods, per shape, in every domain
        order = candidates if known is None else sorted(candidates, key=lambda d: (-known[d], d))
        choice = sc.DomainChoice()
        shown: tuple[tuple[int, int, int], int, Outcome] | None = None
        for d in [*(d for d in order if d not in out_of_reach),
                  *(sorted(out_of_reach) if self.counts else ())]:  # explaining ranks them all
            if d in out_of_reach and choice.best is not None:
                break
            rows = inside & (ids == d)
            out = self._children(ci, rows, layout.values[d])
            if out.satisfied:
                if known is not None:  # best score first: the first feasible one wins
                    self.undo_to(start)
                    return d, None
                choice.offer(d, self._domain_score(start[1], rows))
            rank = (-out.satisfied_children, -out.tried_pods, d)
            if shown is None or rank < shown[0]:
                shown = (rank, d, out)
            self.undo_to(start)
        if choice.best is not None:
            return choice.best, None
        return None, (None if shown is None else (shown[1], shown[2]))

    def _rigid(self, ci: int) -> bool:
        """X is satisfied only with every pod of its subtree placed: every CPG needs all its children
        and every pod group all its pods, none placed or finished yet."""
        spec = self.wl.spec.cpgs[ci]
        if spec.children and gang.quorum(spec, spec.children - 1):  # it does without one of them
            return False
        for gi in spec.child_groups:
            g = self.wl.groups[gi]
            if g.placed or g.finished or gang.need(g.spec) != g.total:  # finished pods are never placed
                return False
        return all(self._rigid(cj) for cj in spec.child_cpgs)

    def _rigid_plan(self, ci: int, layout: Any, inside: np.ndarray,
                    candidates: list[int]) -> tuple[dict[int, Fraction], set[int]] | None:
        """For a rigid X: the domain score each candidate has if it is feasible (scores.domain_score
        over the usage now plus the requests of every pod of the subtree), and the candidates that
        per-shape capacity proves infeasible (fewer rows' worth of room for a pod shape than the
        subtree has pods of it: domains.DomainFits, an upper bound that ignores the other shapes,
        the allowed rows and devices). None when X is not rigid."""
        if len(candidates) <= 1 or not self._rigid(ci):
            return None
        state, wl = self.state, self.wl
        demand: dict[int, tuple[Any, int]] = {}  # pod shape -> (a group with it, pods of it)
        added: dict[str, int] = {}
        for gi in subtree_groups(wl, ci):
            g = wl.groups[gi]
            for shape in g.spec.pod_shapes:
                demand[shape] = (demand.get(shape, (g, 0))[0], demand.get(shape, (g, 0))[1] + 1)
                for r, q in wl.spec.shapes[shape].requests:
                    added[r] = added.get(r, 0) + q
        out_of_reach: set[int] = set()
        usums = None
        for shape, (g, n) in demand.items():
            vec = state.shape_vector(wl, shape)
            fits = dm.domain_fits(state, g, shape, layout, vec, np.flatnonzero(vec))
            usums = fits.usums
            out_of_reach.update(d for d in candidates if fits.ksum[d] < n)
        key = wl.spec.cpgs[ci].topology_key
        assert key is not None
        return self._known_scores(key, layout, inside, candidates, added, usums), out_of_reach

    def _known_scores(self, key: str, layout: Any, inside: np.ndarray, candidates: list[int],
                      added: dict[str, int], usums: np.ndarray | None) -> dict[int, Fraction]:
        """scores.domain_score of each candidate with `added`; from the per-domain sums when the
        candidate lies wholly inside the allowed rows (nested keys), else over its rows."""
        nodes = self.state.nodes
        order, starts = layout.order, layout.starts
        sizes = np.diff(np.append(starts, len(order)))
        whole = np.add.reduceat(inside[order].astype(np.int64), starts) == sizes if len(order) else sizes
        cols = [(nodes.resources[r], add, nodes.domain_alloc_sums(key, nodes.resources[r]))
                for r, add in added.items()] if usums is not None else []
        known: dict[int, Fraction] = {}
        for d in candidates:
            if usums is not None and whole[d]:
                known[d] = sc.domain_score_of([int(usums[d, c]) + add for c, add, _ in cols],
                                              [int(a[d]) for _, _, a in cols])
            else:
                known[d] = sc.domain_score(self.state, inside & (layout.ids == d), added)
        return known

    def _children(self, ci: int, allowed: np.ndarray | None, value: str | None) -> Outcome:
        """Step 2: every child in order; undo all of it when fewer than minGroupCount are satisfied."""
        spec = self.wl.spec.cpgs[ci]
        start = self.mark()
        results: list[tuple[str, str, Outcome]] = []
        left = spec.children
        for gi in spec.child_groups:
            results.append((self.wl.spec.groups[gi].name, GROUP, self.place_group(gi, allowed)))
            left -= 1
            if not self.counts and not self._reachable(spec, results, left):
                break
        for cj in (spec.child_cpgs if self.counts or self._reachable(spec, results, left) else ()):
            results.append((self.wl.spec.cpgs[cj].name, COMPOSITE, self.place(cj, allowed)))
            left -= 1  # (X is not satisfied, so nothing under it is placed yet)
            if not self.counts and not self._reachable(spec, results, left):
                break
        n = sum(1 for _, _, out in results if out.satisfied)
        pods = sum(out.pods for _, _, out in results)
        ok = gang.quorum(spec, n)
        domain = None if spec.topology_key is None else {"key": spec.topology_key, "value": value}
        explanation = self._explain(ci, results, n, domain) if self.explain else None
        if not ok:
            self.undo_to(start)
            return Outcome(False, 0, explanation, n, pods)
        return Outcome(True, pods, explanation, n, pods)

    @staticmethod
    def _reachable(spec: Any, results: list[tuple[str, str, Outcome]], left: int) -> bool:
        """Whether X can still be satisfied with `left` children to try."""
        return gang.quorum(spec, sum(1 for _, _, out in results if out.satisfied) + left)

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
