"""Scores of model.md *Placing a group*, written once: the node score (step 2, MostAllocated) and
the domain score (step 5, also taken by composite.md's tree routine over a subtree's pods).

Both are compared exactly (Fractions, or integers over a common denominator), never as floats:
floats only screen, and a band of near-equal floats is settled exactly. Ties go to the smaller
node name (its rank) and to the smaller label value (the caller offers domains in that order).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from fractions import Fraction

import numpy as np

from service.domain.nodes.table import exact_sum
from service.domain.state.cluster import ClusterState

EPS = 1e-9  # relative float noise: scores within it are settled exactly


def band_floor(top: float) -> float:
    """The lowest float score still within noise of `top`."""
    return top - EPS * max(1.0, abs(top))


# -- the node score -------------------------------------------------------------------------
def node_score_exact(num_row: np.ndarray, alloc_row: np.ndarray) -> Fraction:
    return sum((Fraction(int(u), int(a)) for u, a in zip(num_row, alloc_row) if a > 0), Fraction(0))


def pick(state: ClusterState, rows: np.ndarray, scores: np.ndarray, cols: np.ndarray, vec: np.ndarray) -> int:
    """The best row: highest exact score, then smallest node name (O(rows), no sorting)."""
    top = scores.max()
    band = rows[scores >= band_floor(top)]
    if len(band) == 1:
        return int(band[0])
    nodes = state.nodes
    used = np.take(nodes.used, band, axis=0)[:, cols]
    alloc = np.take(nodes.alloc, band, axis=0)[:, cols]
    if (used == used[0]).all() and (alloc == alloc[0]).all():
        # the common tie, equal rows (empty nodes, say): the smallest name, without the sort
        # exact_order would do over thousands of rows
        return int(band[np.argmin(nodes.rank()[band])])
    return int(band[exact_order(state, band, cols, vec)[0]])


def exact_order(state: ClusterState, band: np.ndarray, cols: np.ndarray, vec: np.ndarray, *,
                lowest_first: bool = False) -> np.ndarray:
    """The permutation of a band of near-equal float scores that puts it best first:
    exact score (highest first; `lowest_first`: LeastAllocated's order), then node name.

    Identical rows need none (they are in name order already: equal floats, then
    name). On equal allocatable the exact scores are integers over the least common
    multiple of the allocatables; otherwise Fractions.
    """
    nodes = state.nodes
    used = np.take(nodes.used, band, axis=0)[:, cols] + vec[cols]
    alloc = np.take(nodes.alloc, band, axis=0)[:, cols]
    rank = nodes.rank()[band]
    if (used == used[0]).all() and (alloc == alloc[0]).all():
        return np.argsort(rank, kind="stable")
    if (alloc == alloc[0]).all():
        a = [int(x) for x in alloc[0]]
        positive = [x for x in a if x > 0]
        lcm = math.lcm(*positive) if positive else 1
        if lcm * len(a) < 2**62 and (used <= alloc).all():
            weights = np.array([lcm // x if x > 0 else 0 for x in a], dtype=np.int64)
            exact = used @ weights  # the score times lcm, exactly
            return np.lexsort((rank, exact if lowest_first else -exact))
    sign = 1 if lowest_first else -1
    exact_f = [node_score_exact(u, al) for u, al in zip(used, alloc)]
    return np.array(sorted(range(len(band)), key=lambda i: (sign * exact_f[i], rank[i])), dtype=np.int64)


# -- the domain score -----------------------------------------------------------------------
def domain_score_of(numerators: Iterable[int], denominators: Iterable[int]) -> Fraction:
    """model.md step 5, exactly: the mean over the requested resources of (used + requested) /
    allocatable, each summed over the domain; one numerator and one denominator per resource (a
    resource no node of the domain declares, denominator 0, adds nothing but still counts)."""
    terms = list(zip(numerators, denominators))
    if not terms:
        return Fraction(0)
    return sum((Fraction(int(n), int(a)) for n, a in terms if a > 0), Fraction(0)) / len(terms)


def domain_score(state: ClusterState, rows: np.ndarray, added: Mapping[str, int]) -> Fraction:
    """The domain score of the domain made of `rows` (a mask) for the resources named in `added`:
    usage now plus `added[r]`, over the declared allocatable of those rows."""
    if not added:
        return Fraction(0)
    nodes = state.nodes
    members = np.flatnonzero(rows)
    nums, dens = [], []
    for r, add in added.items():
        col = nodes.resources[r]
        dens.append(exact_sum(nodes.alloc[members, col][nodes.declared[members, col]]))  # pods may be unlimited
        nums.append(exact_sum(nodes.used[members, col]) + add)
    return domain_score_of(nums, dens)


class DomainChoice:
    """The domain choice (model.md step 5, composite.md *The tree routine* step 3), written once:
    among the feasible candidates the highest domain score wins; ties go to the smaller label value.
    Offer candidates in ascending order of value: an equal score never displaces an earlier one."""

    __slots__ = ("best", "score")

    def __init__(self) -> None:
        self.best: int | None = None
        self.score: Fraction | None = None

    def offer(self, d: int, score: Fraction) -> bool:
        """Offer feasible candidate d with its score; True when it is now the choice."""
        if self.score is None or score > self.score:
            self.best, self.score = d, score
            return True
        return False
