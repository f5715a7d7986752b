"""Bounds for the preemption search (evaluator.walk): what the placement routine can place at
most, from the usage table alone, growing with the prefix of units removed."""
from __future__ import annotations

import numpy as np

from service.domain.placement import routine as pl
from service.domain.state.cluster import ClusterState, Group


class UniformCount:
    """What `placement.place_in` places of `count` pods of one shape that need no devices,
    on the rows of its node-selector mask, computed from the usage table.

    `place_in` fills every row it can use before it gives up: a row is used while every
    column's free amount covers the request (`_row_fits`), so the pods it places are the
    smaller of `count` and the sum over usable rows of how many fit there. With `domains`
    (a domain id per row, -1 without the label) it counts per domain instead.
    """

    def __init__(self, state: ClusterState, g: Group, shape: int, count: int,
                 domains: np.ndarray | None = None) -> None:
        self.state = state
        self.count = count
        self.vec = state.shape_vector(g.workload, shape)
        mask = pl.base_mask(state, g, shape)
        if domains is not None:
            mask = mask & (domains >= 0)
        self.rows = np.flatnonzero(mask)
        self.cols = np.flatnonzero(self.vec)  # never empty: every pod uses one `pods`
        self.alloc = state.nodes.alloc[self.rows]
        self.domains = None if domains is None else domains[self.rows]

    def _fits(self) -> tuple[np.ndarray, np.ndarray]:
        """Per row: whether it is usable, and how many pods fit there (of the usable rows)."""
        free = self.alloc - self.state.nodes.used[self.rows]
        usable = np.all(free >= self.vec, axis=1)
        free = free[usable]
        return usable, np.minimum(np.min(free[:, self.cols] // self.vec[self.cols], axis=1), self.count)

    def __call__(self) -> int:
        if not len(self.rows):
            return 0
        return min(self.count, int(self._fits()[1].sum()))

    def by_domain(self, n: int) -> np.ndarray:
        """Per domain (of n): what the routine would place inside it."""
        if not len(self.rows):
            return np.zeros(n)
        usable, fit = self._fits()
        assert self.domains is not None
        return np.minimum(np.bincount(self.domains[usable], weights=fit, minlength=n), self.count)
