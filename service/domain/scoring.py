"""The scoring strategy seam (audit.md, *What-if*; sharing.md, *The scheduler configuration*).

`ClusterState.scoring` names the strategy the node score of model.md *Placing a group* step 2
uses: `MostAllocated` (the default, placement.py's walk) or `LeastAllocated`, placed here: each pod
goes to the feasible row whose mean over the requested resources of (allocatable − used − request)
/ allocatable is highest, compared exactly, then the smallest node name. That is the row with the
lowest MostAllocated score; a row's score falls as it fills, so every pod chooses again (MostAllocated
keeps filling the row it chose). The domain score of step 5 is MostAllocated's for every strategy
in this release.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

from service.domain.scores import band_floor, node_score_exact
from service.domain.state import ClusterState

MOST_ALLOCATED = "MostAllocated"
LEAST_ALLOCATED = "LeastAllocated"
STRATEGIES = (MOST_ALLOCATED, LEAST_ALLOCATED)


class _Trial(Protocol):
    def add(self, node: int, vec: np.ndarray) -> None: ...


def _fitting(state: ClusterState, rows: np.ndarray, cols: np.ndarray, vec: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """The rows with room for a pod of `vec` now, and their MostAllocated float scores."""
    nodes = state.nodes
    used = np.take(nodes.used, rows, axis=0)
    alloc = np.take(nodes.alloc, rows, axis=0)
    ok = np.all(alloc - used >= vec, axis=1)
    scores = np.zeros(len(rows))
    for c in cols:
        a = alloc[:, c]
        scores += np.where(a > 0, (used[:, c] + vec[c]) / np.where(a > 0, a, 1), 0.0)
    return rows[ok], scores[ok]


def _pick_least(state: ClusterState, rows: np.ndarray, scores: np.ndarray, cols: np.ndarray,
                vec: np.ndarray) -> int:
    low = scores.min()
    band = rows[scores <= 2 * low - band_floor(low)]  # within float noise of the lowest
    if len(band) == 1:
        return int(band[0])
    nodes = state.nodes
    used = np.take(nodes.used, band, axis=0)[:, cols] + vec[cols]
    alloc = np.take(nodes.alloc, band, axis=0)[:, cols]
    rank = nodes.rank()[band]
    if (used == used[0]).all() and (alloc == alloc[0]).all():
        return int(band[np.argmin(rank)])
    exact = [node_score_exact(ur, ar) for ur, ar in zip(used, alloc)]
    return int(band[min(range(len(band)), key=lambda i: (exact[i], rank[i]))])


def place_least_allocated(state: ClusterState, run: list[int], rows: np.ndarray, cols: np.ndarray,
                          vec: np.ndarray, trial: _Trial, placements: list[tuple[int, int]]) -> int | None:
    """Place identical pods without devices, LeastAllocated; returns the first pod that fits nowhere."""
    for pod in run:
        fit, scores = _fitting(state, rows, cols, vec)
        if not len(fit):
            return pod
        best = _pick_least(state, fit, scores, cols, vec)
        trial.add(best, vec)
        placements.append((pod, best))
    return None
